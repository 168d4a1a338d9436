"""The benchmark's own small HTTP client, speaking as Copilot CLI does: the CLI's headers
in its order, POST bodies chunked (PROTOCOL.md §2), blocking keep-alive connections.
The push, diff and start-up groups use it; the throughput group drives every server
with the Node.js load client instead (load.py)."""
from __future__ import annotations

import json
import socket
import uuid
from typing import Any, Dict, Optional, Tuple

# What the CLI sends (tests/captures/copilot-cli-1.0.102-ide-session.log), in its order.
CLI_SESSION = "dd2a8913-a676-4133-b217-36b97d0ac572"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}}}


def encode_chunked(body: bytes, chunk_size: int = 0) -> bytes:
    if not chunk_size or chunk_size >= len(body):
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + chunk_size]), body[i:i + chunk_size])
             for i in range(0, len(body), chunk_size)]
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def cli_request(method: str, auth: Optional[str], body: Optional[bytes] = None, session: Optional[str] = None,
                extra: Tuple[Tuple[str, str], ...] = (), chunk_size: int = 0, accept: Optional[str] = None,
                client_session: str = CLI_SESSION) -> bytes:
    """A request with the CLI's header order; POST bodies always chunked (PROTOCOL.md §2)."""
    lines = ["%s /mcp HTTP/1.1" % method, "X-Copilot-Session-Id: " + client_session, "X-Copilot-PID: 32748",
             "X-Copilot-Parent-PID: 32746"]
    if auth:
        lines.append("Authorization: " + auth)
    lines.append("accept: " + (accept or ("text/event-stream" if method == "GET"
                                          else "application/json, text/event-stream")))
    if body is not None:
        lines.append("content-type: application/json")
    if session:
        lines.append("mcp-session-id: " + session)
    lines.extend("%s: %s" % kv for kv in extra)
    lines += ["Host: localhost", "Connection: keep-alive"]
    if body is not None:
        lines.append("Transfer-Encoding: chunked")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (encode_chunked(body, chunk_size) if body is not None else b"")


def response_end(buf: bytes, start: int = 0) -> int:
    """End offset of the complete HTTP response starting at `start`, or -1. Minimal on
    purpose (the load generator must be cheap): Content-Length or chunked framing."""
    he = buf.find(b"\r\n\r\n", start)
    if he < 0:
        return -1
    body = he + 4
    head = bytes(buf[start:he]).lower()
    i = head.find(b"\r\ncontent-length:")
    if i >= 0:
        j = head.find(b"\r\n", i + 2)
        n = int(head[i + 17:j if j >= 0 else len(head)])
        return body + n if len(buf) >= body + n else -1
    if b"chunked" not in head:
        return -1  # read-until-close bodies are not used here
    pos = body
    size_line_end = buf.find
    while True:
        nl = size_line_end(b"\r\n", pos)
        if nl < 0:
            return -1
        size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
        if size == 0:
            return nl + 4 if len(buf) >= nl + 4 else -1  # no trailers from any server here
        pos = nl + 2 + size + 2
        if pos > len(buf):
            return -1


def split_response(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    """Status, lower-cased headers and decoded body of one complete response."""
    he = raw.find(b"\r\n\r\n")
    lines = raw[:he].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = raw[he + 4:]
    if "chunked" in headers.get("transfer-encoding", ""):
        out, pos = [], 0
        while True:
            nl = body.find(b"\r\n", pos)
            size = int(body[pos:nl].split(b";")[0], 16)
            if size == 0:
                break
            out.append(body[nl + 2:nl + 2 + size])
            pos = nl + 2 + size + 2
        body = b"".join(out)
    return status, headers, body


def sse_json(body: bytes) -> Any:
    """The JSON of the (last) data line of an SSE body, or the body itself as JSON."""
    text = body.decode("utf-8")
    datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    datas = [d for d in datas if d]
    return json.loads(datas[-1] if datas else text)


class BlockingConn:
    """A keep-alive client connection with a blocking socket (lowest-overhead client)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = bytearray()

    def roundtrip(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        buf = self.buf
        recv = self.sock.recv
        while True:
            end = response_end(buf) if buf else -1
            if end >= 0:
                raw = bytes(buf[:end])
                del buf[:end]
                return raw
            data = recv(262144)
            if not data:
                raise ConnectionError("server closed the connection")
            buf += data

    def close(self) -> None:
        self.sock.close()



def handshake(path: str, auth: Optional[str], sdk: bool = False) -> Tuple[str, Tuple[Tuple[str, str], ...]]:
    """initialize + notifications/initialized as the CLI does; returns the session id and
    the extra headers later requests need (the SDK wants its protocol version header)."""
    conn = BlockingConn(path)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "copilot-cli", "version": "1.0.102"}}}
        # Each CLI process has its own session UUID (our server reuses it as the MCP id).
        raw = conn.roundtrip(cli_request("POST", auth, json.dumps(init, separators=(",", ":")).encode(),
                                         client_session=str(uuid.uuid4())))
        status, headers, body = split_response(raw)
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError("initialize failed: %d %r" % (status, raw[:300]))
        sid = headers["mcp-session-id"]
        result = sse_json(body)["result"]
        extra: Tuple[Tuple[str, str], ...] = ()
        if sdk:
            extra = (("mcp-protocol-version", result["protocolVersion"]),)
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        raw = conn.roundtrip(cli_request("POST", auth, note, session=sid, extra=extra))
        status = split_response(raw)[0]
        if status not in (200, 202):
            raise RuntimeError("notifications/initialized failed: %r" % raw[:300])
        return sid, extra
    finally:
        conn.close()
