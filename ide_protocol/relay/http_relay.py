"""One relayed HTTP connection, each half's share of it.

The CLI's half (`serve_cli_connection`) is where messages are rewritten: it reads the
CLI's requests with `http11.RequestParser`, checks the relay's own nonce (constant
time), drops it, maps the paths of each JSON-RPC body toward the IDE and sends the
request, re-framed with `Content-Length`, on the stream; it reads the IDE's answers
from the stream with `http11.ResponseParser`, maps a JSON body or each SSE event
(PROTOCOL.md §2) toward the CLI and writes them re-framed. The IDE's half
(`serve_ide_connection`) only adds the IDE's nonce, which never leaves its machine, to
each request head and passes the IDE's bytes back unchanged.

A peer on the relay's socket is held to the IDE server's own deadlines (the
hostile-peer rule: deadlines, not per-read timeouts): a request must arrive in whole
within `request_timeout` of its first byte (else 408 and the connection ends), and an
answer written to the CLI must be taken within as long (else the connection is cut).
An idle keep-alive connection has no deadline, as on the IDE server.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..client.connection import open_socket
from ..server.answers import Reply
from ..server.mcp import refuse_misdirected, refuse_unauthenticated
from ..server.transport import REQUEST_TIMEOUT
from ..wire import http11, jsonrpc, sse
from .link import Stream, drained
from .rewrite import Rewriter

READ_SIZE = 64 * 1024
_HOP_FIELDS = ("authorization", "content-length", "transfer-encoding", "connection")


def _rewrite_body(body: bytes, rewrite: Callable[[Any], Any]) -> Optional[bytes]:
    """The JSON-RPC body (one message or a batch) rewritten, or None when unchanged or
    not JSON (passed as it is: the IDE judges it)."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(message, list):
        new: Any = [rewrite(item) for item in message]
        changed = any(a is not b for a, b in zip(new, message))
    else:
        new = rewrite(message)
        changed = new is not message
    if not changed:
        return None
    try:
        return jsonrpc.dumps(new)  # (the one encoder: a lone surrogate, valid as an escape, stays one)
    except ValueError:  # NaN or an infinity, which JSON has not: passed as it came, the peer judges it
        return None


def _fields(headers: http11.Headers, extra: Mapping[str, str] = {}) -> List[Tuple[str, str]]:
    pairs = [(name, value) for name, value in headers if name.lower() not in _HOP_FIELDS]
    return pairs + list(extra.items())


# ------------------------------------------------------------------ the CLI's half


async def serve_cli_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: Stream,
                               rewriter: Rewriter, nonce: str, request_timeout: float = REQUEST_TIMEOUT) -> None:
    """Relay one connection of the CLI over `stream` until either end closes it."""
    methods: "asyncio.Queue[str]" = asyncio.Queue()
    await _both_ways(_requests_to_ide(reader, writer, stream, rewriter, nonce.encode("utf-8"), methods,
                                      request_timeout),
                     _answers_to_cli(stream, writer, rewriter, methods, request_timeout))
    stream.close()
    writer.close()


async def _both_ways(up: Any, down: Any) -> None:
    """Run both directions of a connection; when either ends (a peer closed, a bad
    message, the link gone) the connection is over: the other is cancelled, awaited."""
    tasks = [asyncio.ensure_future(up), asyncio.ensure_future(down)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _requests_to_ide(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: Stream,
                           rewriter: Rewriter, nonce: bytes, methods: "asyncio.Queue[str]",
                           request_timeout: float) -> None:
    parser = http11.RequestParser()
    head: Optional[http11.Request] = None
    body: List[bytes] = []
    loop = asyncio.get_event_loop()
    deadline: Optional[float] = None  # set while a request is partly received
    while True:
        try:
            if deadline is None:
                data = await reader.read(READ_SIZE)
            else:
                data = await asyncio.wait_for(reader.read(READ_SIZE), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            writer.write(http11.write_response(408, [("Content-Type", "text/plain")],
                                               b"request not completed in time", keep_alive=False))
            return  # (the connection's close sends it; the other direction may be in drain())
        except (ConnectionError, OSError):
            data = b""
        if deadline is None and data:
            deadline = loop.time() + request_timeout
        events = parser.feed(data) if data else parser.feed_eof()
        for event in events:
            if isinstance(event, http11.Request):
                # The relay's own nonce, judged as the IDE server judges its own
                # (Origin first, then the nonce: PROTOCOL.md §2); the rest is the IDE's.
                refusal: Optional[Reply] = refuse_unauthenticated(event.headers.index(), nonce)
                if refusal is None and event.body_follows:
                    # A misdirected request is refused from its head, its body never read
                    # (ibid.); one without a body goes on, for the IDE to answer.
                    refusal = refuse_misdirected(event)
                if refusal is not None:
                    writer.write(http11.write_response(refusal.status, refusal.headers, refusal.body,
                                                       keep_alive=False))
                    return
                head, body = event, []
            elif isinstance(event, http11.Data):
                body.append(event.data)
            elif isinstance(event, http11.EndOfMessage) and head is not None:
                raw = b"".join(body)
                new = _rewrite_body(raw, rewriter.to_ide) if raw else None
                request = http11.write_request(head.method, head.target, _fields(head.headers),
                                               new if new is not None else raw if head.body_follows else None,
                                               keep_alive=head.keep_alive)
                methods.put_nowait(head.method)
                head = None
                deadline = None if parser.idle else loop.time() + request_timeout  # (a pipelined next one)
                if not await stream.send(request):
                    return
            elif isinstance(event, http11.ParseError):
                writer.write(http11.write_response(event.status, [("Content-Type", "text/plain")],
                                                   event.message.encode("utf-8"), keep_alive=False))
                return
        if not data:
            return


async def _answers_to_cli(stream: Stream, writer: asyncio.StreamWriter, rewriter: Rewriter,
                          methods: "asyncio.Queue[str]", request_timeout: float) -> None:
    # No limit on a body as such: the GET stream is endless (its events are passed on
    # as they come, each bounded by the SSE decoder); a body kept whole to rewrite it is
    # bounded below.
    parser = http11.ResponseParser()
    head: Optional[http11.Response] = None
    streaming: Optional[sse.SSEDecoder] = None
    body: List[bytes] = []
    kept = 0
    while True:
        data = await stream.read()
        while not methods.empty():
            parser.expect(methods.get_nowait())
        events = parser.feed(data) if data else parser.feed_eof()
        for event in events:
            if isinstance(event, http11.Response):
                head, body, streaming, kept = event, [], None, 0
                fields = _fields(event.headers)
                if "text/event-stream" in (event.headers.get("Content-Type") or ""):
                    streaming = sse.SSEDecoder()
                    writer.write(http11.write_response_head(event.status, fields, event.reason or None,
                                                            keep_alive=event.keep_alive))
            elif isinstance(event, http11.Data) and streaming is not None:
                out = b"".join(_sse_to_cli(item, rewriter) for item in streaming.feed(event.data))
                if out:
                    writer.write(http11.encode_chunk(out))
            elif isinstance(event, http11.Data):
                body.append(event.data)
                kept += len(event.data)
                try:
                    http11.rules.check_body_size(kept, http11.DEFAULT_MAX_BODY)
                except http11.rules.Refusal as exc:
                    writer.write(http11.write_response(502, [("Content-Type", "text/plain")],
                                                       ("the IDE's answer: %s" % exc.message).encode("utf-8"),
                                                       keep_alive=False))
                    return
            elif isinstance(event, http11.EndOfMessage) and head is not None:
                if streaming is not None:
                    writer.write(http11.LAST_CHUNK)
                else:
                    raw = b"".join(body)
                    new = _rewrite_body(raw, rewriter.to_cli) if raw else None
                    writer.write(http11.write_response(head.status, _fields(head.headers),
                                                       new if new is not None else raw, head.reason or None,
                                                       keep_alive=head.keep_alive))
                head = None
            elif isinstance(event, (http11.ParseError, http11.ConnectionClosed)):
                return
        if not await drained(writer, request_timeout) or not data:
            return


def _sse_to_cli(event: sse.SSEEvent, rewriter: Rewriter) -> bytes:
    try:
        return _encode_sse(event, rewriter)
    except ValueError:  # an event name or id the encoder refuses: dropped, as the CLI would
        return b""


def _encode_sse(event: sse.SSEEvent, rewriter: Rewriter) -> bytes:
    new = _rewrite_body(event.data.encode("utf-8"), rewriter.to_cli) if event.data else None
    if new is None:
        return sse.encode_event(data=event.data, event=None if event.event == "message" else event.event,
                                id=event.id)
    return sse.encode_event(data=new.decode("utf-8"), event=None if event.event == "message" else event.event,
                            id=event.id)


# ------------------------------------------------------------------ the IDE's half


async def serve_ide_connection(stream: Stream, socket_path: str, headers: Dict[str, str]) -> None:
    """Connect `stream` to the IDE's socket, adding the IDE's lock `headers` (its nonce)
    to every request; the IDE's bytes go back unchanged."""
    try:
        reader, writer = await open_socket(socket_path, 5.0)  # a Unix socket, or a named pipe on Windows
    except (OSError, asyncio.TimeoutError):
        stream.close()
        return
    try:
        await _both_ways(_stream_to_ide(stream, writer, headers), _ide_to_stream(reader, stream))
    finally:
        writer.close()
        stream.close()


async def _stream_to_ide(stream: Stream, writer: asyncio.StreamWriter, headers: Dict[str, str]) -> None:
    parser = http11.RequestParser()
    head: Optional[http11.Request] = None
    body: List[bytes] = []
    while True:
        data = await stream.read()
        events = parser.feed(data) if data else parser.feed_eof()
        for event in events:
            if isinstance(event, http11.Request):
                head, body = event, []
            elif isinstance(event, http11.Data):
                body.append(event.data)
            elif isinstance(event, http11.EndOfMessage) and head is not None:
                writer.write(http11.write_request(head.method, head.target, _fields(head.headers, headers),
                                                  b"".join(body) if head.body_follows else None,
                                                  keep_alive=head.keep_alive))
                head = None
            elif isinstance(event, (http11.ParseError, http11.ConnectionClosed)):
                return
        if not await drained(writer) or not data:
            return


async def _ide_to_stream(reader: asyncio.StreamReader, stream: Stream) -> None:
    while True:
        try:
            data = await reader.read(READ_SIZE)
        except (ConnectionError, OSError):
            data = b""
        if not data or not await stream.send(data):
            stream.close()
            return
