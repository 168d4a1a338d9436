"""One relayed HTTP connection, each half's share of it.

The CLI's half (`serve_cli_connection`) is where messages are rewritten: it is a server
connection (`http11.ServerConnection`, as on the IDE server: the relay's own nonce
checked in constant time, requests in order, 408, keep-alive or close) whose answers
come from the IDE. It maps the paths of each JSON-RPC body toward the IDE and sends the
request, re-framed with `Content-Length` and without the nonce, on the stream; it reads
the IDE's answers from the stream with `http11.ResponseParser`, maps a JSON body or
each SSE event (PROTOCOL.md §2) toward the CLI and writes them re-framed. The IDE's half
(`serve_ide_connection`) only adds the IDE's nonce, which never leaves its machine, to
each request head and passes the IDE's bytes back unchanged.

A peer on the relay's socket is held to the IDE server's own deadlines (the
hostile-peer rule: deadlines, not per-read timeouts): a request must arrive in whole
within `request_timeout` of its first byte (else 408 and the connection ends), and an
answer written to the CLI must be taken within as long (else the connection is cut).
An idle keep-alive connection has no deadline, as on the IDE server.

When the link ends under a request that was sent and not yet answered (the link died,
the relay was stopped, the IDE went), the CLI's half answers it itself, saying why
(`_owed_answer`): a JSON-RPC error for a request with an id, else 502; a push stream is
ended. The CLI's `open_diff` would otherwise wait for ever.

What each half keeps: the CLI's half a request whole (its paths are rewritten in the
parsed JSON), within its `ServerConnection`'s bounds; the IDE's half a request's body
whole too (within its parser's body limit), so that the IDE gets it at once.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..client.connection import open_socket
from ..server.answers import Reply
from ..server.mcp import refuse_misdirected, refuse_unauthenticated
from ..server.limits import REQUEST_TIMEOUT
from ..wire import http11, json_text, jsonrpc, sse
from .link import Stream, drained
from .rewrite import Rewriter

READ_SIZE = 64 * 1024
#: The largest answer of the IDE kept whole (to map its paths) before it is passed on:
#: the IDE server's own request limit (a GET stream's events pass as they come).
MAX_KEPT_BODY = http11.DEFAULT_MAX_BODY
_HOP_FIELDS = ("authorization", "content-length", "transfer-encoding", "connection")
#: JSON-RPC's code for an implementation-defined server error: the relay's own answer.
RELAY_ERROR = -32000
#: How long an answer the relay owes, once the link ended, may take to be written.
OWED_ANSWER_WAIT = 1.0
_NO_ID = object()  # a request without a JSON-RPC id (a notification, a batch, not JSON)


def _rewrite_body(body: bytes, rewrite: Callable[[Any], Any]) -> Optional[bytes]:
    """The JSON-RPC body (one message or a batch) rewritten, or None when unchanged or
    not JSON (passed as it is: the IDE judges it)."""
    return _rewrite_message(body, rewrite)[0]


def _rewrite_message(body: bytes, rewrite: Callable[[Any], Any]) -> Tuple[Optional[bytes], Any]:
    """`_rewrite_body`, and the message's JSON-RPC id (`_NO_ID`: none), from one parse."""
    try:
        message = json_text.loads(body)
    except json_text.JsonTextError:
        return None, _NO_ID
    request_id = message.get("id", _NO_ID) if isinstance(message, dict) else _NO_ID
    return _rewritten(message, rewrite), request_id


def _rewritten(message: Any, rewrite: Callable[[Any], Any]) -> Optional[bytes]:
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
    relay = _CliConnection(reader, writer, stream, rewriter, nonce.encode("utf-8"), request_timeout)
    await _both_ways(relay.requests_to_ide(), relay.answers_to_cli())
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


class _CliConnection:
    """One connection of the CLI on the relay's socket: a server connection whose
    answers come from the IDE across the link.

    Every HTTP decision is its `http11.ServerConnection`'s (the relay's own nonce and
    misdirected requests judged by the head, the pipelining cap, 408, keep-alive or
    close), as on the IDE server. Two tasks move the bytes: `requests_to_ide` reads the
    CLI and forwards each request when its turn comes (one at a time, as the answers
    must come back in order), `answers_to_cli` reads the IDE's answers and writes them.
    Whichever ends an answer forwards the next request (`_forward_ready`)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: Stream,
                 rewriter: Rewriter, nonce: bytes, request_timeout: float) -> None:
        self._reader = reader
        self._writer = writer
        self._stream = stream
        self._rewriter = rewriter
        self._nonce = nonce
        self._request_timeout = request_timeout
        self.http = http11.ServerConnection(self._judge)
        self._answers = http11.ResponseParser()
        self._room = asyncio.Event()  # set when a waiting request was taken (the pipelining cap)
        self._owed_id: Any = _NO_ID   # the JSON-RPC id of the request sent and not answered

    def _judge(self, request: http11.Request) -> Optional[Reply]:
        """The relay's own nonce, judged as the IDE server judges its own (Origin first,
        then the nonce: PROTOCOL.md §2); a misdirected request with a body is refused
        from its head too (ibid.); one without a body goes on, for the IDE to answer."""
        refusal = refuse_unauthenticated(request.headers.index(), self._nonce)
        if refusal is None and request.body_follows:
            refusal = refuse_misdirected(request)
        return refusal

    async def _forward_ready(self) -> bool:
        """Forward the requests whose turn it is (or write what the connection answered
        by itself); False once the connection is over."""
        http = self.http
        while True:
            item = http.next_item()
            if item is None:
                break
            self._room.set()
            if isinstance(item, http11.Refused):
                self._writer.write(item.data)  # (the connection's close sends it)
                continue
            head, raw = item.request, item.body
            new, self._owed_id = _rewrite_message(raw, self._rewriter.to_ide) if raw else (None, _NO_ID)
            body = new if new is not None else raw if head.body_follows else None
            del raw, new, item   # (the body goes on the link in frames; nothing here keeps a copy)
            fields = _fields(head.headers) + ([("Content-Length", str(len(body)))] if body is not None else [])
            self._answers.expect(head.method)
            if not await self._stream.send(http11.write_request(head.method, head.target, fields,
                                                                keep_alive=head.keep_alive)):
                return False
            if body and not await self._stream.send(body):
                return False
        return http.state is not http11.State.CLOSED

    async def requests_to_ide(self) -> None:
        http = self.http
        loop = asyncio.get_event_loop()
        deadline: Optional[float] = None  # while a request is partly received
        deadline_for = 0  # (the request after `http.received` of them: each has its own)
        while True:
            # (Decided before each read: a request taken may have read what was held.)
            if not http.needs_deadline:
                deadline = None
            elif deadline is None or deadline_for != http.received:
                deadline, deadline_for = loop.time() + self._request_timeout, http.received
            if not http.wants_data:
                self._room.clear()
                await self._room.wait()
                continue
            try:
                if deadline is None:
                    data = await self._reader.read(READ_SIZE)
                else:
                    data = await asyncio.wait_for(self._reader.read(READ_SIZE), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                http.deadline_passed()
                data = None
            except (ConnectionError, OSError):
                data = b""
            if data:
                http.receive_data(data)
            elif data is not None:
                http.receive_eof()
            if not await self._forward_ready():
                return

    async def answers_to_cli(self) -> None:
        # No limit on a body as such: the GET stream is endless (its events are passed on
        # as they come, each bounded by the SSE decoder); a body kept whole to rewrite it
        # is bounded below.
        http, writer, rewriter = self.http, self._writer, self._rewriter
        head: Optional[http11.Response] = None
        streaming: Optional[sse.SSEDecoder] = None
        body: List[bytes] = []
        kept = 0
        while True:
            data = await self._stream.read()
            for event in self._answers.feed(data) if data else self._answers.feed_eof():
                if isinstance(event, http11.Response):
                    if not http.answering:
                        return  # an answer nobody asked for: the IDE's side is confused
                    head, body, streaming, kept = event, [], None, 0
                    if event.status < 200:
                        continue  # an interim answer (1xx): the real one follows
                    if "text/event-stream" in (event.headers.get("Content-Type") or ""):
                        streaming = sse.SSEDecoder()
                        writer.write(http.send_head(event.status, _fields(event.headers),
                                                    close_after=not event.keep_alive, reason=event.reason or None))
                elif isinstance(event, http11.Data) and streaming is not None:
                    out = b"".join(_sse_to_cli(item, rewriter) for item in streaming.feed(event.data))
                    writer.write(http.send_chunk(out))
                elif isinstance(event, http11.Data):
                    body.append(event.data)
                    kept += len(event.data)
                    if kept > MAX_KEPT_BODY:
                        writer.write(http.send_reply(Reply(
                            502, (("Content-Type", "text/plain"),),
                            b"the IDE's answer: body larger than %d bytes" % MAX_KEPT_BODY, close_after=True)))
                        return
                elif isinstance(event, http11.EndOfMessage) and head is not None:
                    if head.status < 200:
                        pass
                    elif streaming is not None:
                        writer.write(http.send_end())
                    else:
                        raw = b"".join(body)
                        new = _rewrite_body(raw, rewriter.to_cli) if raw else None
                        writer.write(http.send_reply(Reply(head.status, _fields(head.headers),
                                                           new if new is not None else raw,
                                                           close_after=not head.keep_alive, reason=head.reason or None)))
                    head, body = None, []
                    if not await self._forward_ready():
                        return
                elif isinstance(event, (http11.ParseError, http11.ConnectionClosed)):
                    if not data and self._stream.end_reason is not None and http.answering:
                        await self._owed_answer(streaming is not None)
                    return
            if not await drained(writer, self._request_timeout) or not data:
                return

    async def _owed_answer(self, streaming: bool) -> None:
        """The link ended (`end_reason`) with this connection's request sent and not
        answered: the relay answers it itself, saying why, and the connection closes.
        A JSON-RPC request gets a JSON-RPC error with its id (as an SSE event when the
        answer's head went out already); a push stream, or any other request, is ended:
        its chunked body closed, or 502."""
        http, writer = self.http, self._writer
        text = "relay: %s" % self._stream.end_reason
        error = None
        if self._owed_id is not _NO_ID:
            error = jsonrpc.dumps({"jsonrpc": "2.0", "id": self._owed_id,
                                   "error": {"code": RELAY_ERROR, "message": text}})
        if streaming:
            if error is not None:
                writer.write(http.send_chunk(sse.encode_event(data=error.decode("utf-8"))))
            writer.write(http.send_end())
        elif error is not None:
            writer.write(http.send_reply(Reply(200, (("Content-Type", "application/json"),), error,
                                               close_after=True)))
        else:
            writer.write(http.send_reply(Reply(502, (("Content-Type", "text/plain; charset=utf-8"),),
                                               (text + "\n").encode("utf-8"), close_after=True)))
        await drained(writer, OWED_ANSWER_WAIT)


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
    """The CLI half's requests to the IDE, each head given the IDE's `headers`. A body is
    gathered whole before its request is written (in one buffer, written as it is): the
    IDE holds a request to its deadline from its first byte, and a large body may take
    longer than that to cross a slow link; here it is handed over at the IDE's speed."""
    parser = http11.RequestParser()
    head: Optional[http11.Request] = None
    body = bytearray()
    while True:
        data = await stream.read()
        events = parser.feed(data) if data else parser.feed_eof()
        for event in events:
            if isinstance(event, http11.Request):
                head = event
                del body[:]
            elif isinstance(event, http11.Data):
                body += event.data
            elif isinstance(event, http11.EndOfMessage) and head is not None:
                fields = _fields(head.headers, headers)
                if head.body_follows:
                    fields.append(("Content-Length", str(len(body))))
                writer.write(http11.write_request(head.method, head.target, fields, keep_alive=head.keep_alive))
                if body:
                    writer.write(bytes(body))
                head = None
                body = bytearray()
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
