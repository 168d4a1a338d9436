"""The real traffic of Copilot CLI 1.0.102 against VS Code's /ide server, parsed back.

`captures/copilot-cli-1.0.102-ide-session.log` logs every read and write of one session:
a `--- time #conn DIR N bytes` line, then the bytes with `\\r` and `\\n` shown literally
(each `\\n` also ends the log line). We rebuild the exact bytes of each block, check them
against the logged byte count, and parse every connection in order, as one keep-alive
stream, in both directions:

* C>S with `RequestParser`: methods, targets, header names (case and order as sent),
  values, chunked JSON-RPC bodies;
* S>C with `ResponseParser`, then the SSE bodies with `SSEDecoder` and the JSON-RPC
  messages they carry.

The log was sanitised: a 36-character workspace path became `$WORKSPACE`, which the
byte counts and chunk sizes do not know about. We put back a path of the same length.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Tuple

import pytest

from ide_protocol.wire import jsonrpc
from ide_protocol.wire.http11 import (
    ConnectionClosed,
    Data,
    EndOfMessage,
    ParseError,
    Request,
    RequestParser,
    Response,
    ResponseParser,
)
from ide_protocol.wire.sse import SSEDecoder
from ide_protocol.programs.trace import unescape_block
from splitting import feed_all_ways, normalise, run

CAPTURE = os.path.join(os.path.dirname(__file__), "captures", "copilot-cli-1.0.102-ide-session.log")
WORKSPACE = "/tmp/copilot-demo/workspace-abcdefgh"  # the original path had 36 characters
assert len(WORKSPACE) == 36

_BLOCK = re.compile(r"--- (\S+) #(\d+) (C>S|S>C) (\d+) bytes\Z")

Block = Tuple[str, int, str, int, bytes]  # time, connection, direction, logged size, bytes


def load_blocks() -> List[Block]:
    with open(CAPTURE, encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("# raw bytes logged")
    text = text.replace("$WORKSPACE", WORKSPACE)
    blocks: List[Block] = []
    header = None
    body: List[str] = []
    for line in text.split("\n")[1:]:
        m = _BLOCK.match(line)
        if m:
            if header is not None:
                blocks.append(header + (unescape_block(body),))
            header = (m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))
            body = []
        else:
            body.append(line)
    if header is not None:
        blocks.append(header + (unescape_block(body),))
    return blocks


BLOCKS = load_blocks()


def stream(conn: int, direction: str) -> bytes:
    return b"".join(b[4] for b in BLOCKS if b[1] == conn and b[2] == direction)


def pieces(conn: int, direction: str) -> List[bytes]:
    return [b[4] for b in BLOCKS if b[1] == conn and b[2] == direction]


def message_blocks(conn: int, direction: str) -> List[bytes]:
    """The stream cut into whole messages (a response may span several logged writes)."""
    out: List[bytes] = []
    for data in pieces(conn, direction):
        if not out or data.startswith((b"POST ", b"GET ", b"DELETE ", b"HTTP/1.1 ")):
            out.append(data)
        else:
            out[-1] += data
    return out


def junction_cuts(parts: List[bytes], width: int = 4) -> List[int]:
    """Cut points near each boundary between two messages of a stream."""
    cuts = set()
    offset = 0
    total = sum(len(p) for p in parts)
    for part in parts:
        offset += len(part)
        cuts.update(c for c in range(offset - width, offset + width + 1) if 0 < c < total)
    return sorted(cuts)


def all_ways(make, conn: int, direction: str):
    """Every message of the stream split at every byte boundary on its own, then the whole
    keep-alive stream byte by byte and cut around each junction between messages."""
    parts = message_blocks(conn, direction)
    for part in parts:
        feed_all_ways(make, part, bytewise=False)
    return feed_all_ways(make, b"".join(parts), finish="feed_eof", cuts=junction_cuts(parts))


def messages(events) -> List[Tuple[object, bytes, object]]:
    """(Request|Response, body, EndOfMessage) triples from a list of events."""
    out = []
    head = None
    body: List[bytes] = []
    for event in events:
        if isinstance(event, (Request, Response)):
            head, body = event, []
        elif isinstance(event, Data):
            body.append(event.data)
        elif isinstance(event, EndOfMessage):
            out.append((head, b"".join(body), event))
            head = None
    return out


SESSION_1 = "bac93990-bb06-4334-b672-e091393eece3"
SESSION_2 = "8a69a95e-aed8-486c-b416-fd55a71a35d9"

POST_NAMES = ["X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization",
              "accept", "content-type", "Host", "Connection", "Transfer-Encoding"]
POST_NAMES_SESSION = POST_NAMES[:6] + ["mcp-session-id"] + POST_NAMES[6:]
GET_NAMES = ["X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization",
             "accept", "mcp-session-id", "Host", "Connection"]
DELETE_NAMES = ["X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization",
                "mcp-session-id", "Host", "Connection"]

# Per connection, in order: (HTTP method, mcp-session-id or None, JSON-RPC id, JSON-RPC
# method, tool name). Read off the capture by hand.
EXPECTED_REQUESTS: Dict[int, List[tuple]] = {
    3: [
        ("POST", None, 0, "server/discover", None),
        ("POST", None, 1, "initialize", None),
        ("POST", SESSION_1, None, "notifications/initialized", None),
        ("GET", SESSION_1, None, None, None),
        ("POST", SESSION_2, 2, "tools/list", None),
        ("POST", SESSION_2, 3, "tools/call", "update_session_name"),
        ("POST", SESSION_2, 4, "tools/call", "get_selection"),
    ],
    4: [
        ("POST", SESSION_1, 2, "tools/list", None),
        ("DELETE", SESSION_1, None, None, None),
        ("POST", None, 0, "server/discover", None),
        ("POST", None, 1, "initialize", None),
        ("POST", SESSION_2, None, "notifications/initialized", None),
        ("GET", SESSION_2, None, None, None),
    ],
    7: [
        ("POST", SESSION_2, 5, "tools/call", "get_diagnostics"),
        ("POST", SESSION_2, 6, "tools/call", "open_diff"),
        ("POST", SESSION_2, 7, "tools/call", "open_diff"),
        ("POST", SESSION_2, 8, "tools/call", "open_diff"),
        ("DELETE", SESSION_2, None, None, None),
    ],
    8: [
        ("POST", SESSION_2, 9, "tools/call", "close_diff"),
    ],
}

# Per connection, in order: (status, content type, [JSON-RPC messages in the body as
# (id, kind) pairs]).
EXPECTED_RESPONSES: Dict[int, List[tuple]] = {
    3: [
        (404, "application/json", [(0, "error")]),
        (200, "text/event-stream", [(1, "response")]),
        (202, "text/plain", []),
        (200, "text/event-stream", []),  # the GET stream, ended by the DELETE on #4
        (200, "text/event-stream", [(2, "response")]),
        (200, "text/event-stream", [(3, "response")]),
        (200, "text/event-stream", [(4, "response")]),
    ],
    4: [
        (200, "text/event-stream", [(2, "response")]),
        (200, None, []),
        (404, "application/json", [(0, "error")]),
        (200, "text/event-stream", [(1, "response")]),
        (202, "text/plain", []),
        (200, "text/event-stream", [("selection_changed", "notification")]),
    ],
    7: [
        (200, "text/event-stream", [(5, "response")]),
        (200, "text/event-stream", [(6, "response")]),
        (200, "text/event-stream", [(7, "response")]),
        (200, "text/event-stream", [(8, "response")]),
        (200, None, []),
    ],
    8: [
        (200, "text/event-stream", [(9, "response")]),
    ],
}


def test_every_block_rebuilds_to_its_logged_size():
    assert len(BLOCKS) == 63
    for time, conn, direction, size, data in BLOCKS:
        assert len(data) == size, (time, conn, direction)
    assert {b[1] for b in BLOCKS} == set(EXPECTED_REQUESTS)


@pytest.mark.parametrize("conn", sorted(EXPECTED_REQUESTS))
def test_requests_of_each_connection(conn):
    # Whole, byte by byte, and cut in two at every boundary: the same events.
    events = all_ways(RequestParser, conn, "C>S")
    # And as the CLI actually wrote it, block by block.
    assert normalise(run(RequestParser(), pieces(conn, "C>S"), "feed_eof")) == events
    assert not any(isinstance(e, ParseError) for e in events)
    assert isinstance(events[-1], ConnectionClosed)
    got = messages(events)
    expected = EXPECTED_REQUESTS[conn]
    assert len(got) == len(expected)
    for (request, body, end), (method, session, rpc_id, rpc_method, tool) in zip(got, expected):
        assert request.method == method
        assert request.target == "/mcp"
        assert request.http_version == "1.1"
        assert request.keep_alive
        assert list(end.trailers) == []
        names = [name for name, _ in request.headers]
        h = request.headers
        if method == "POST":
            assert names == (POST_NAMES_SESSION if session else POST_NAMES)
            assert h.get("content-type") == "application/json"
            assert h.get("Accept") == "application/json, text/event-stream"
            assert h.get("transfer-encoding") == "chunked"  # always chunked, never Content-Length
            assert "Content-Length" not in h
        elif method == "GET":
            assert names == GET_NAMES
            assert h.get("ACCEPT") == "text/event-stream"
            assert body == b""
        else:
            assert names == DELETE_NAMES
            assert body == b""
        assert h.get("x-copilot-session-id") == "dd2a8913-a676-4133-b217-36b97d0ac572"
        assert h.get("X-COPILOT-PID") == "32748"
        assert h.get("x-copilot-parent-pid") == "32746"
        assert h.get("authorization") == "Nonce 75aaa48d-5711-4fa8-a5b8-3e85e49cde84"
        assert h.get("host") == "localhost"
        assert h.get("connection") == "keep-alive"
        assert h.get("mcp-session-id") == session
        assert h.get("mcp-protocol-version") is None
        if rpc_method is None:
            continue
        msg = jsonrpc.decode_message(body)
        if rpc_id is None:
            assert isinstance(msg, jsonrpc.Notification)
        else:
            assert isinstance(msg, jsonrpc.Request)
            assert msg.id == rpc_id
        assert msg.method == rpc_method
        if tool is not None:
            assert msg.params["name"] == tool
        # The body is exactly compact JSON, as our own encoder writes it.
        assert jsonrpc.dumps(json.loads(body.decode("utf-8"))) == body


def test_open_diff_body_keeps_its_escaped_newlines():
    data = stream(7, "C>S")
    got = messages(RequestParser().feed(data))
    params = json.loads(got[1][1].decode("utf-8"))["params"]
    assert params["arguments"] == {
        "original_file_path": WORKSPACE + "/hello.txt",
        "new_file_contents": "line one\nline two (edited by fake model)\n",
        "tab_name": "[Copilot CLI] - hello.txt (6fd0d0)",
    }


def test_initialize_request_in_full():
    got = messages(RequestParser().feed(stream(3, "C>S")))
    assert json.loads(got[1][1].decode("utf-8")) == {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "copilot-cli", "version": "1.0.102"}},
    }


def _response_parser(conn: int):
    methods = [r[0] for r in EXPECTED_REQUESTS[conn]]

    def make():
        parser = ResponseParser()
        for method in methods:
            parser.expect(method)
        return parser

    return make


@pytest.mark.parametrize("conn", sorted(EXPECTED_RESPONSES))
def test_responses_of_each_connection(conn):
    make = _response_parser(conn)
    events = all_ways(make, conn, "S>C")
    assert normalise(run(make(), pieces(conn, "S>C"), "feed_eof")) == events
    assert not any(isinstance(e, ParseError) for e in events)
    got = messages(events)
    expected = EXPECTED_RESPONSES[conn]
    assert len(got) == len(expected)
    for (response, body, _), (status, content_type, rpc) in zip(got, expected):
        assert response.status == status
        assert response.keep_alive
        assert response.headers.get("Content-Type") == content_type
        if content_type == "text/event-stream":
            assert response.headers.get("transfer-encoding") == "chunked"
            # The SSE body, itself split at every byte boundary.
            sse_events = feed_all_ways(SSEDecoder, body)
            assert all(e.event == "message" and e.id is None for e in sse_events)
            decoded = [jsonrpc.decode_message(e.data) for e in sse_events]
        elif content_type == "application/json":
            assert int(response.headers.get("content-length")) == len(body)
            decoded = [jsonrpc.decode_message(body)]
        else:
            assert body == b""
            decoded = []
        kinds = []
        for msg in decoded:
            if isinstance(msg, jsonrpc.Notification):
                kinds.append((msg.method, msg.kind))
            else:
                kinds.append((msg.id, msg.kind))
        assert kinds == rpc


def test_session_not_found_error_and_tool_results():
    got = messages(ResponseParser().feed(stream(3, "S>C")))
    err = jsonrpc.decode_message(got[0][1])
    assert isinstance(err, jsonrpc.ErrorResponse)
    assert err.error.code == jsonrpc.SESSION_NOT_FOUND == -32001
    assert err.error.message == "Session not found"
    body = got[4][1]  # tools/list on the second session
    (event,) = SSEDecoder().feed(body)
    tools = jsonrpc.decode_message(event.data).result["tools"]
    names = [t["name"] for t in tools]
    assert names[:4] == ["get_vscode_info", "get_selection", "open_diff", "close_diff"]


def test_get_stream_delivers_push_chunk_by_chunk():
    # Connection #4's GET stream: the head, then one chunk per push as it was written;
    # every block must produce its events as soon as it arrives.
    make = _response_parser(4)
    parser = make()
    blocks = pieces(4, "S>C")
    events_per_block = [parser.feed(b) for b in blocks]
    # The block that carries the selection_changed push yields its Data at once.
    push_blocks = [i for i, b in enumerate(blocks) if b"selection_changed" in b]
    assert len(push_blocks) == 1
    data = b"".join(e.data for e in events_per_block[push_blocks[0]] if isinstance(e, Data))
    (event,) = SSEDecoder().feed(data)
    msg = jsonrpc.decode_message(event.data)
    assert isinstance(msg, jsonrpc.Notification) and msg.method == "selection_changed"
    assert msg.params["filePath"] == WORKSPACE + "/hello.txt"
    # The stream is still open (no EndOfMessage) until the server's final 0-chunk.
    assert not any(isinstance(e, EndOfMessage) for e in events_per_block[push_blocks[0]])
    assert isinstance(events_per_block[-1][-1], EndOfMessage)
