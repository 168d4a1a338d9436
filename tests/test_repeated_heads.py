"""Copilot CLI's usual request: the same head again and again, a body of one chunk.

The CLI repeats its request head byte for byte (PROTOCOL.md §2), so the reader
remembers the parse of a head by its bytes. That is only correct if a remembered head
gives exactly what a fresh parse gives, never shares what a handler may change, and
never skips what depends on the reader (the body limit). This file pins that down, and
the rest of the usual request's way:

* `http11.RequestParser`: repeated heads however split and pipelined, fresh fields
  sharing only the read-only index, the body limit on every request;
* `transport`: the usual request answered inside `data_received` with no task, over a
  real Unix socket; pipelining, byte-by-byte input, a bad chunk size after a repeat, a
  repeat while an answer still waits;
* `http11.encode_chunk`, `sse.encode_message`;
* `jsonrpc.dumps` of responses (every kind of id, unusual shapes),
  `jsonrpc.parse_message` against a plain classifier, `jsonrpc.loads` against
  json's semantics;
* the MCP server end to end: many `get_selection` calls with byte-identical heads, and
  `open_diff` still streaming its head before the user decides.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import json
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ide_protocol.wire import http11, jsonrpc, sse
from ide_protocol.common import tools
from ide_protocol.server.answers import PendingReply, Reply
from ide_protocol.wire.http11 import Data, EndOfMessage, ParseError, Request, RequestParser
from ide_protocol.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR, JsonRpcError
from ide_protocol.common.tools import Selection
from ide_wire import Conn, cli_for, make_server, run, tool_json, until
from splitting import feed_all_ways, normalise
from test_waiting_answers import CLI_FIELDS, CLI_HEAD, _old_loads, one_chunk, only, post, serve

# ==================================================================== helpers

FIRST_BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
FIRST = CLI_HEAD + one_chunk(FIRST_BODY)
REPEAT_BODY = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_selection"}}'
REPEAT = CLI_HEAD + one_chunk(REPEAT_BODY)


async def released(listener: Any) -> None:
    await until(lambda: not listener.connections, what="connections released")
    await listener.close()


async def reply_to(conn: Conn, data: bytes) -> Any:
    conn.send_raw(data, expect="POST")
    return await conn.read_reply()


def echo(tag: str, req: Request, body: bytes, seen: List[Any]) -> Reply:
    """The answer every test application gives: `tag:body` as one chunk, and a record
    of the call (was it inside data_received, with no task?)."""
    seen.append((tag, req.target, body, asyncio.current_task() is None))
    return Reply(200, (("Content-Type", "text/plain"),), tag.encode() + b":" + body, chunked=True)


# ============================================================ repeated heads


def test_repeated_heads_give_what_fresh_parsers_give_however_split() -> None:
    expected = [Request("POST", "/mcp", CLI_FIELDS), Data(FIRST_BODY), EndOfMessage(),
                Request("POST", "/mcp", CLI_FIELDS), Data(REPEAT_BODY), EndOfMessage()]
    assert feed_all_ways(RequestParser, FIRST + REPEAT) == expected
    parser = RequestParser()
    for _ in range(3):  # one whole request per read, as the CLI sends them
        events = parser.feed(REPEAT)
        assert normalise(events) == expected[3:] and type(events[1].data) is bytes
        assert events[0].keep_alive and parser.idle and parser.buffered == 0
    # The boundaries of the size line: 16 hex digits, upper-case hex; pipelined repeats,
    # empty lines before a head.
    for size_line, body in ((b"%016x" % 5, b"12345"), (b"1A", b"z" * 26), (b"aB", b"y" * 0xAB)):
        data = CLI_HEAD + size_line + b"\r\n" + body + b"\r\n0\r\n\r\n"
        assert feed_all_ways(RequestParser, FIRST + data)[4] == Data(body)
    assert len(feed_all_ways(RequestParser, FIRST + b"\r\n" + REPEAT + REPEAT)) == 9
    # A head that differs in any byte is parsed as itself.
    for other in (CLI_HEAD.replace(b"/mcp", b"/mcq"), CLI_HEAD.replace(b"Nonce abc", b"Nonce abd"),
                  CLI_HEAD.replace(b"Host:", b"host:"), CLI_HEAD[:-2] + b"X-More: 1\r\n\r\n",
                  CLI_HEAD.replace(b"\r\n", b"\n")):
        events = feed_all_ways(RequestParser, FIRST + other + one_chunk(b"{}"))
        assert events[3] == normalise(RequestParser().feed(other + one_chunk(b"{}")))[0]


def test_a_repeated_head_gives_fresh_fields_sharing_only_the_read_only_index() -> None:
    parser = RequestParser()
    first = parser.feed(FIRST)[0]
    shared = first.headers.index()
    second = parser.feed(REPEAT)[0]
    third = parser.feed(REPEAT)[0]
    assert second is not third and second is not first
    assert second.headers is not third.headers and second.headers.raw is not third.headers.raw
    assert second.headers.index() is shared and third.headers.index() is shared
    # A handler changes its request's fields: the next request is not affected.
    second.headers.raw.append(("X-Added", "1"))
    second.headers.raw[0] = ("Authorization", "Nonce changed")
    third.headers.set("Host", "elsewhere")
    fourth = parser.feed(REPEAT)[0]
    assert fourth.headers.raw == CLI_FIELDS and type(fourth.headers.raw) is list
    assert fourth.headers.get("authorization") == "Nonce abc" and fourth.headers.get("host") == "localhost"
    assert shared["authorization"] == ["Nonce abc"] and "x-added" not in shared
    assert third.headers.get("host") == "elsewhere"  # (its own index, rebuilt)


def test_a_repeated_head_is_held_to_each_readers_body_limit() -> None:
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n"
    assert RequestParser().feed(head + b"123456")[1:] == [Data(b"123456"), EndOfMessage()]
    for limit in (5, 0):  # the same head bytes, parsed before under a larger limit
        events = feed_all_ways(functools.partial(RequestParser, max_body=limit), head + b"123456")
        assert events == [ParseError(413, "body larger than %d bytes" % limit)]
    chunked = feed_all_ways(functools.partial(RequestParser, max_body=5), CLI_HEAD + one_chunk(b"123456"))
    assert chunked[1:] == [ParseError(413, "body larger than 5 bytes")]


def test_a_refused_head_is_refused_every_time() -> None:
    bad = b"POST /mcp HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n"
    for _ in range(3):
        assert feed_all_ways(RequestParser, bad) == [ParseError(400, "more than one Host header")]


# ================================================================= transport


def test_a_repeated_request_is_answered_inside_data_received(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, connection: int) -> Reply:
        return echo("now", req, body, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        reply = await reply_to(conn, post("/a", b"first", chunked=True))
        assert (reply.status, reply.body) == (200, b"now:first")
        server_conn = only(listener)
        for i in range(5):
            reply = await reply_to(conn, post("/a", b"repeat %d" % i, chunked=True))
            assert (reply.status, reply.body, reply.complete) == (200, b"now:repeat %d" % i, True)
            assert reply.headers.get("connection") == "keep-alive"
        assert all(no_task for *_, no_task in seen) and listener.busy == 0
        assert server_conn.requests == 6 and server_conn.http.idle
        assert not server_conn.http.needs_deadline  # nothing partial: no request timer
        conn.close()
        await released(listener)
    run(main())


def test_pipelined_repeats_are_answered_in_order(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, connection: int) -> Reply:
        return echo("p", req, body, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        assert (await reply_to(conn, post("/a", b"0", chunked=True))).body == b"p:0"
        conn.send_raw(post("/a", b"1", chunked=True) + post("/a", b"2", chunked=True))
        for expected in (b"p:1", b"p:2"):
            conn.parser.expect("POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.body, reply.complete) == (200, expected, True)
        assert [s[2] for s in seen] == [b"0", b"1", b"2"]
        # Then one alone again, and three at once.
        assert (await reply_to(conn, post("/a", b"3", chunked=True))).body == b"p:3"
        conn.send_raw(b"".join(post("/a", b"%d" % i, chunked=True) for i in (4, 5, 6)))
        for i in (4, 5, 6):
            conn.parser.expect("POST")
            assert (await conn.read_reply()).body == b"p:%d" % i
        assert only(listener).requests == 7
        conn.close()
        await released(listener)
    run(main())


def test_bad_chunk_framing_after_a_repeat_is_refused(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, connection: int) -> Reply:
        return echo("x", req, body, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        first = post("/a", b"{}", chunked=True)
        head = first[:first.index(b"\r\n\r\n") + 4]
        # A size that is not hex; a bare LF after the size; a size one too large, which
        # would swallow the CR after the data.
        for framing, words in ((b"0x2\r\n{}\r\n0\r\n\r\n", b"chunk-size"), (b"2\n{}\r\n0\r\n\r\n", b"CRLF"),
                               (b"3\r\n{}\r\n0\r\n\r\n", b"CRLF")):
            conn = await Conn.open(listener.socket_path)
            assert (await reply_to(conn, first)).status == 200
            reply = await reply_to(conn, head + framing)
            assert reply.status == 400 and reply.headers.get("connection") == "close"
            assert words in reply.body, reply.body
            assert await conn.wait_closed()
        assert [s[2] for s in seen] == [b"{}"] * 3  # the app never saw the bad ones
        await released(listener)
    run(main())


def test_a_request_sent_byte_by_byte_after_a_repeat(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, connection: int) -> Reply:
        return echo("b", req, body, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        for body in (b"one", b"two"):
            assert (await reply_to(conn, post("/a", body, chunked=True))).body == b"b:" + body
        data = post("/a", b"three", chunked=True)
        conn.parser.expect("POST")
        for i in range(len(data)):
            conn.writer.write(data[i:i + 1])
            await conn.writer.drain()
            await asyncio.sleep(0.001)
        reply = await conn.read_reply()
        assert (reply.status, reply.body, reply.complete) == (200, b"b:three", True)
        assert (await reply_to(conn, post("/a", b"four", chunked=True))).body == b"b:four"
        assert [s[2] for s in seen] == [b"one", b"two", b"three", b"four"]
        conn.close()
        await released(listener)
    run(main())


def test_a_repeat_waits_behind_an_answer_that_waits(tmp_path: Any) -> None:
    gate: List[asyncio.Event] = []  # (made inside the loop: Python 3.8 binds an Event to a loop)
    order: List[bytes] = []

    def app(req: Request, body: bytes, connection: int) -> Any:
        order.append(body)
        if body == b"wait":
            async def finish() -> Reply:
                await gate[0].wait()
                return Reply(200, (), b"waited")
            return PendingReply(finish)
        return Reply(200, (), b"now")

    async def main() -> None:
        gate.append(asyncio.Event())
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        assert (await reply_to(conn, post("/a", b"first", chunked=True))).body == b"now"
        conn.send_raw(post("/a", b"wait", chunked=True), expect="POST")
        await until(lambda: order == [b"first", b"wait"], what="wait read")
        conn.send_raw(post("/a", b"next", chunked=True), expect="POST")  # a whole repeat, alone
        await until(lambda: only(listener).http.waiting or len(order) > 2, what="next read")
        assert order == [b"first", b"wait"]  # queued, not answered ahead of the waiting one
        gate[0].set()
        assert (await conn.read_reply()).body == b"waited"
        assert (await conn.read_reply()).body == b"now"
        assert order == [b"first", b"wait", b"next"]
        conn.close()
        await released(listener)
    run(main())


def test_a_post_saying_connection_close_is_answered_then_nothing_more_is_read(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, connection: int) -> Reply:
        return echo("got", req, body, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(post("/a", b"first", chunked=True) + post("/b", b"last", chunked=True, close=True)
                      + post("/c", b"never", chunked=True))
        for expected, connection in ((b"got:first", "keep-alive"), (b"got:last", "close")):
            conn.parser.expect("POST")
            reply = await conn.read_reply()
            assert (reply.body, reply.headers.get("connection")) == (expected, connection)
        assert await conn.wait_closed()
        assert [s[2] for s in seen] == [b"first", b"last"]
        await released(listener)
    run(main())


# ========================================================= small encoders


def test_encode_chunk() -> None:
    assert http11.encode_chunk(b"") == b""
    for data in (b"x", b"{}", b"\r\n", b"a" * 15, b"b" * 16, b"c" * 4096, "\u00e9".encode()):
        assert http11.encode_chunk(data) == b"%x\r\n" % len(data) + data + b"\r\n"
    encoded = b"".join(http11.encode_chunk(piece) for piece in (b"ab", b"", b"c" * 300)) + http11.LAST_CHUNK
    events = RequestParser().feed(CLI_HEAD + encoded)
    assert normalise(events)[1:] == [Data(b"ab" + b"c" * 300), EndOfMessage()]


@pytest.mark.parametrize("text", ['{"jsonrpc":"2.0","id":1,"result":{}}', "", "caf\u00e9 \u65e5\u672c \U0001F600",
                                  "\u2028", "x" * 5000], ids=["json", "empty", "non-ascii", "line-separator", "long"])
def test_sse_encode_message(text: str) -> None:
    raw = text.encode("utf-8")
    expected = b"event: message\ndata: " + raw + b"\n\n"
    assert sse.encode_message(raw) == expected
    assert sse.encode_message(text) == expected
    if text:
        assert sse.encode_event(text, event="message") == expected  # (the one event format)
        assert sse.SSEDecoder().feed(expected) == [sse.SSEEvent("message", text)]


# ============================================================ jsonrpc.dumps

RESULT = {"content": [{"type": "text", "text": "caf\u00e9 \"q\" \\ \u2028 \U0001F600"}], "isError": False,
          "n": [1, 2.5, None]}
USUAL_IDS = [0, 1, -1, 7, 2 ** 31, -(2 ** 63), 2 ** 70, -(2 ** 70), "", "abc", "caf\u00e9", 'q"uo\\te', "\n\t\x01",
             "\u2028\u2029", "\U0001F600", "</script>"]


def _plain_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


@pytest.mark.parametrize("msg_id", USUAL_IDS, ids=[repr(i) for i in USUAL_IDS])
def test_dumps_of_a_response_is_plain_json_for_every_id(msg_id: Any) -> None:
    response = jsonrpc.result_response(msg_id, RESULT)
    assert jsonrpc.dumps(response) == _plain_json(response)
    assert json.loads(jsonrpc.dumps(response)) == {"jsonrpc": "2.0", "id": msg_id, "result": RESULT}


UNUSUAL_RESPONSES: List[Dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": True, "result": RESULT},
    {"result": RESULT, "id": False, "jsonrpc": "2.0"},
    {"jsonrpc": "2.0", "id": 1.5, "result": RESULT},
    {"id": 2.0, "jsonrpc": "2.0", "result": RESULT},
    {"jsonrpc": "2.0", "id": None, "result": RESULT},
    {"jsonrpc": "2.0", "id": [1], "result": RESULT},
    {"jsonrpc": "2.0", "id": {"a": 1}, "result": RESULT},
    {"jsonrpc": "2.0", "x": 1, "result": RESULT},  # no id, a third member
    {"result": RESULT, "jsonrpc": "2.0", "error": None},
    {"jsonrpc": "1.0", "id": 1, "result": RESULT},
    {"result": RESULT, "jsonrpc": 2.0, "id": 1},
    {"jsonrpc": None, "id": "a", "result": RESULT},
    {"jsonrpc": "2.0", "id": 1, "result": RESULT, "extra": 1},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}},
]


@pytest.mark.parametrize("obj", UNUSUAL_RESPONSES, ids=[str(i) for i in range(len(UNUSUAL_RESPONSES))])
def test_dumps_of_unusual_responses_is_plain_json(obj: Dict[str, Any]) -> None:
    assert jsonrpc.dumps(obj) == _plain_json(obj)  # the same bytes, members in the dict's order
    assert json.loads(jsonrpc.dumps(obj)) == json.loads(_plain_json(obj))


def test_dumps_of_responses_utf8_cannot_carry_is_all_ascii() -> None:
    for obj in ({"jsonrpc": "2.0", "id": "\ud800", "result": RESULT},
                {"result": RESULT, "id": "a\udfff", "jsonrpc": "2.0"},
                {"jsonrpc": "2.0", "id": 1, "result": {"t": "\ud800 \u00e9"}}):
        out = jsonrpc.dumps(obj)
        assert out.isascii() and json.loads(out) == obj
        assert out == json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def _old_parse_message(obj: Any) -> Tuple[Any, ...]:
    """`jsonrpc.parse_message` and `_valid_id` as of 62c06d9 (before the one-test path
    for the usual request), returning what `summary` returns."""
    def valid_id(value: Any) -> bool:
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))

    def invalid(msg_id: Any, message: str) -> Tuple[Any, ...]:
        return ("Invalid", _typed(msg_id), None, None, (INVALID_REQUEST, message))

    if not isinstance(obj, dict):
        return invalid(None, "Invalid Request: expected a JSON object")
    raw_id = obj.get("id")
    has_id = "id" in obj and raw_id is not None
    msg_id = raw_id if type(raw_id) is int or type(raw_id) is str or valid_id(raw_id) else None
    null_id_request = "id" in obj and raw_id is None
    if obj.get("jsonrpc") != "2.0":
        return invalid(msg_id, 'Invalid Request: "jsonrpc" must be "2.0"')
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            return invalid(msg_id, "Invalid Request: method must be a string")
        params = obj.get("params")
        if "params" in obj and not isinstance(params, (dict, list)):
            return invalid(msg_id, "Invalid Request: params must be an object or array")
        if null_id_request:
            return invalid(None, "Invalid Request: id must not be null")
        if has_id:
            if msg_id is None:
                return invalid(None, "Invalid Request: id must be a string or an integer")
            return ("Request", _typed(msg_id), method, _typed(params), None)
        return ("Notification", None, method, _typed(params), None)
    if "result" in obj or "error" in obj:
        if "result" in obj and "error" in obj:
            return invalid(msg_id, "Invalid Response: both result and error")
        if "error" in obj:
            error = obj["error"]
            if not (isinstance(error, dict) and isinstance(error.get("code"), int)
                    and isinstance(error.get("message"), str)):
                return invalid(msg_id, "Invalid Response: malformed error object")
            if has_id and msg_id is None:
                return invalid(None, "Invalid Response: bad id")
            err = JsonRpcError.from_dict(error)
            return ("ErrorResponse", _typed(msg_id), None, None, (err.code, err.message))
        if msg_id is None:
            return invalid(None, "Invalid Response: missing id")
        return ("Response", _typed(msg_id), None, _typed(obj["result"]), None)
    return invalid(msg_id, "Invalid Request: no method, result or error")


def _typed(value: Any) -> Any:
    """A value with its type, so that 1, 1.0 and True differ."""
    return (type(value).__name__, repr(value))


def summary(msg: jsonrpc.Message) -> Tuple[Any, ...]:
    kind = type(msg).__name__
    error = getattr(msg, "error", None)
    if kind == "Request":
        return (kind, _typed(msg.id), msg.method, _typed(msg.params), None)  # type: ignore[attr-defined]
    if kind == "Notification":
        return (kind, None, msg.method, _typed(msg.params), None)  # type: ignore[attr-defined]
    if kind == "Response":
        return (kind, _typed(msg.id), None, _typed(msg.result), None)  # type: ignore[attr-defined]
    return (kind, _typed(msg.id), None, None, (error.code, error.message))  # type: ignore[attr-defined, union-attr]


_ABSENT = object()
IDS = [_ABSENT, 1, 0, -5, 2 ** 70, "a", "", True, False, 1.5, 1.0, None, [1], {"a": 1}]
METHODS = [_ABSENT, "tools/call", "", 5, None, ["m"], True]
PARAMS = [_ABSENT, {}, {"a": 1}, [], [1], None, "s", 3, True, 1.5]
VERSIONS = [_ABSENT, "2.0", "1.0", 2.0, None, "2.0 "]
EXTRAS: List[Dict[str, Any]] = [{}, {"result": 1}, {"result": None}, {"error": {"code": 1, "message": "x"}},
                                {"error": {"code": "1", "message": "x"}}, {"result": 1, "error": None}]


def _messages() -> List[Any]:
    out: List[Any] = [[], [{"jsonrpc": "2.0", "id": 1, "method": "m"}], "x", 1, None, True, 1.5]
    for msg_id, method, params, version, extra in itertools.product(IDS, METHODS, PARAMS, VERSIONS, EXTRAS):
        obj: Dict[str, Any] = {}
        for key, value in (("jsonrpc", version), ("id", msg_id), ("method", method), ("params", params)):
            if value is not _ABSENT:
                obj[key] = value
        obj.update(extra)
        out.append(obj)
    return out


def test_parse_message_classifies_as_before() -> None:
    messages = _messages()
    assert len(messages) > 10000
    kinds = set()
    for obj in messages:
        msg = jsonrpc.parse_message(obj)
        assert summary(msg) == _old_parse_message(obj), obj
        assert msg.raw is obj
        if type(msg) is jsonrpc.Request:
            assert msg.id is obj["id"] and msg.method is obj["method"]  # type: ignore[attr-defined]
            assert msg.params is obj.get("params")  # type: ignore[attr-defined]
        kinds.add(type(msg).__name__)
    assert kinds == {"Request", "Notification", "Response", "ErrorResponse", "Invalid"}


def test_parse_message_of_dict_subclasses_and_str_and_int_subclasses() -> None:
    class MyDict(dict):  # type: ignore[type-arg]
        pass

    class MyStr(str):
        pass

    class MyInt(int):
        pass

    for obj in (MyDict(jsonrpc="2.0", id=1, method="m", params={}),
                {"jsonrpc": "2.0", "id": MyInt(3), "method": "m"},
                {"jsonrpc": "2.0", "id": MyStr("x"), "method": MyStr("m")},
                {"jsonrpc": MyStr("2.0"), "id": 1, "method": "m"},
                {"jsonrpc": "2.0", "id": 1, "method": "m", "params": MyDict(a=1)}):
        assert summary(jsonrpc.parse_message(obj)) == _old_parse_message(obj), obj


# ============================================================== jsonrpc.loads

DEEP_LISTS = "[" * 100000 + "]" * 100000
LOADS_EXTRA_INPUTS: List[Any] = [
    "\ufeff{}", "\ufeff[]", "\ufeff", "\ufeff 1", b"\xef\xbb\xbf{}", b"\xef\xbb\xbf[1]", bytearray(b"\xef\xbb\xbf{}"),
    " [1]", "\n\t[1, 2]", "\r\n[]\r\n", " 1", "1 ", "1\n", " 1 ", "1 2", "-0", "-0.0", "1.5e3", "1E+2", "0e0",
    "-", "--1", "01", "1.", ".5", "+1", "12345678901234567890123456789", "1e999", "[1e999]", "-1e999", "NaN",
    "-Infinity", "[NaN]", '{"\ud800":1}', '{"\\ud800":"\\udfff"}', '"\\ud800"', '"' + "x" * 1000000 + '"',
    '"' + "\u00e9" * 100000 + '"', DEEP_LISTS, "[" * 100000, '"\x7f"', '"\x1f"', "true", "truex", "nul", "[]]",
    '"a" "b"', "[1,]", "{}  \n", b" {}", b"\xed\xa0\x80", b'"\xed\xa0\x80"', memoryview(b" [1] "),
    bytearray(b"\xff"), "\u00a0{}", "\u3000[]", "{}\u00a0",
]


@pytest.mark.parametrize("data", LOADS_EXTRA_INPUTS, ids=[str(i) for i in range(len(LOADS_EXTRA_INPUTS))])
def test_loads_behaves_as_json_does(data: Any) -> None:
    expected = _old_loads(data)
    try:
        got: Tuple[str, Any] = ("ok", jsonrpc.loads(data))
    except JsonRpcError as exc:
        assert exc.code == PARSE_ERROR
        got = ("error", exc.message)
    assert got == expected
    assert repr(got[1]) == repr(expected[1])  # (-0.0 is not 0.0, 1500.0 is not 1500)
    if data is DEEP_LISTS:
        assert got[0] == "error" and "recursion" in got[1]


# ================================================ the MCP server end to end


def _plain_answer(msg_id: Any, tool_result: Any) -> bytes:
    """The SSE data of a get_selection answer as plainly encoded (no cached rendering)."""
    return _plain_json(jsonrpc.result_response(msg_id, tools.text_result(tool_result)))


def test_mcp_many_get_selection_calls_with_identical_heads(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=0) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            path = str(tmp_path / "ws" / "m\u00e9.py")
            expected: Any = None
            last: Optional[Selection] = None
            for i in range(40):
                if i % 4 == 1:
                    last = Selection(path, "line %d \u00e9\U0001F600" % i, (i, 0), (i, 5 + i % 3))
                    server.set_selection(last)
                    expected = last.tool_result()
                elif i % 10 == 9 and last is not None:
                    server.set_selection(None)  # no active editor: the last one, not current
                    expected = last.tool_result(current=False)
                msg_id: Any = i if i % 3 else "id-%d \u00e9\"" % i
                reply = await cli.post(jsonrpc.request(msg_id, "tools/call", {"name": "get_selection"}), conn=conn)
                assert reply.status == 200 and reply.complete and reply.content_type == "text/event-stream"
                assert reply.headers.get("mcp-session-id") == cli.session_id
                assert len(reply.events) == 1 and reply.events[0].event == "message"
                assert reply.events[0].data.encode("utf-8") == _plain_answer(msg_id, expected), i
                assert reply.message["id"] == msg_id and tool_json(reply.message["result"]) == expected
            assert server.stats()["connection_tasks"] == 0  # every one answered inside data_received
            cli.close()
    run(main())


def test_mcp_open_diff_head_comes_before_the_decision(tmp_path: Any) -> None:
    shown: List[str] = []

    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: shown.append(d.tab_name)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            assert tool_json(await cli.call_tool("get_selection", conn=conn)) is None
            diff = jsonrpc.request(41, "tools/call", {"name": "open_diff", "arguments": {
                "original_file_path": str(tmp_path / "f.txt"), "new_file_contents": "new\n", "tab_name": "tab"}})
            conn.send_raw(cli.encode("POST", diff), expect="POST")
            head = await asyncio.wait_for(conn.open_stream(), 5)  # nobody has decided yet
            assert head.status == 200 and head.headers.get("content-type") == "text/event-stream"
            assert head.headers.get("transfer-encoding") == "chunked"
            assert head.headers.get("mcp-session-id") == cli.session_id
            await until(lambda: shown == ["tab"], what="diff shown")
            assert [d.tab_name for d in server.pending_diffs()] == ["tab"]
            assert server.resolve_diff("tab", accept=True)
            event = await conn.next_sse()
            assert event is not None
            answer = json.loads(event.data)
            assert answer["id"] == 41 and tool_json(answer["result"])["result"] == "SAVED"
            assert await conn.next_sse() is None  # the end of that response
            # The connection goes on: the next usual request is answered at once.
            assert tool_json(await cli.call_tool("get_selection", conn=conn)) is None
            await until(lambda: server.stats()["connection_tasks"] == 0, what="handler task ended")
            cli.close()
    run(main())
