"""The asyncio glue: a listening socket and the HTTP/1.1 connections over it.

This is the thin layer between the sans-IO parser and writers (`wire.http11`) and the
application (`mcp.McpApp`). The whole interface to the application is in `answers`:

    answer = app(request, body, connection_number)   # Reply | Stream | PendingReply

Each connection is an `asyncio.BufferedProtocol` (`HttpConnection`): the loop reads the
socket into the connection's own buffer, and the bytes arrive in `data_received` and go
through the parser; each complete request is given to the
application, and the answer it returns is written: a `Reply` at once, right there in
`data_received` (most requests: no task, no loop pass); the head of a `Stream` at once
and its body by the connection's one handler task; a `PendingReply` by that task once
it is ready. Requests are answered one at a time and in order, as HTTP/1.1 requires; a
request that arrives while an answer is still being written waits in a queue.

The socket stays watched meanwhile, so that a peer that vanishes in the middle of a long
answer (a blocking `open_diff`) is noticed at once and the handler task cancelled.

Keep-alive (PROTOCOL.md §2): the CLI sends its next request on the connection whose SSE
answer just ended, so a connection keeps reading until the peer closes it, or until a
request closes it (the parser's `Request.keep_alive`) or an answer does (`Reply.close`):
`http11.keeps_alive_after` decides, and the wire writer spells the `Connection` field.
Every framing decision comes from `wire.http11` (the parser's events, its rules, its
writers); this module decides none. The listening socket and the set of
connections are `listener.Listener`'s; Windows named pipes are served by
`common.winpipe` with the same protocol class.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import sys
from typing import TYPE_CHECKING, Any, Deque, Optional, Tuple, Union

from ..wire import http11
from .answers import Answer, App, Judge, PendingReply, Reply, Stream
# (The socket helpers, here too for the tracer: `from ..server.transport import listen_unix`.)
from .sockets import SUN_PATH_MAX, check_sun_path, listen_unix, wait_server_closed  # noqa: F401

if TYPE_CHECKING:
    from .listener import Listener

log = logging.getLogger(__name__)

__all__ = ["App", "HttpConnection", "MAX_PENDING", "MAX_WRITE_BUFFER", "REQUEST_TIMEOUT"]

#: A request that has started arriving must finish within this many seconds (a slow
#: or stuck peer must not hold a connection forever with half a request).
REQUEST_TIMEOUT = 60.0

#: Complete requests that may wait behind the one being answered (a pipelining peer)
#: before the connection stops reading from the socket; reading resumes when half of
#: them have been answered. (While reading is paused, a vanished peer is noticed only
#: once reading resumes; the CLI never pipelines.)
MAX_PENDING = 8

#: Bytes a peer may leave unread in our send buffer (pushes queued on a GET stream it
#: stopped reading) before the connection is dropped rather than growing without bound.
#: Streams are written as their chunks come, whatever the peer reads: this is their limit.
MAX_WRITE_BUFFER = 16 * 1024 * 1024

#: The bytes one read from the socket may bring: the size of each connection's read
#: buffer. (A plain `asyncio.Protocol` would have the loop allocate a fresh 256 KiB
#: object for every read and shrink it to the few hundred bytes of a request; reading
#: into a buffer the connection keeps removes that work. A larger request simply takes
#: more reads.)
READ_BUFFER = 32 * 1024

_INTERNAL_ERROR = Reply(500, (("Content-Type", "text/plain"),), b"Internal Server Error")


if sys.version_info >= (3, 12):
    def _start_task(loop: asyncio.AbstractEventLoop, coro: Any) -> "asyncio.Task[None]":
        # Eager (Python 3.12+): the coroutine's first step runs now, inside
        # data_received, and a task that never has to suspend is born done.
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
else:
    def _start_task(loop: asyncio.AbstractEventLoop, coro: Any) -> "asyncio.Task[None]":
        return loop.create_task(coro)


class _Answering:
    """An answer the handler task is still writing: its request, the answer, and
    whether the connection stays open afterwards (known for a `Stream` once its head
    is written)."""

    __slots__ = ("request", "answer", "keep_open")

    def __init__(self, request: http11.Request, answer: Union[Stream, PendingReply], keep_open: bool) -> None:
        self.request = request
        self.answer = answer
        self.keep_open = keep_open


#: A complete request waiting for its turn (its head, its body, and its judge's refusal
#: or None), or the parse error that ends the input.
_Queued = Union[Tuple[http11.Request, bytes, Optional[Reply]], http11.ParseError]


class HttpConnection(asyncio.BufferedProtocol):
    """One accepted connection: parse requests as bytes arrive, answer them in order.

    Callbacks, not a reader task: `data_received` feeds the sans-IO parser, and a
    complete request with nothing ahead of it is given to the application at once. Its
    answer is written at once when it is a `Reply`; otherwise the connection's one
    handler task writes the rest, then answers the queued requests in order, and ends
    when the queue is empty (the next request that has to wait starts a new one).

    A peer that goes away (EOF, a lost connection) cancels the handler task: the method
    an answer waits for is cancelled with it (a blocking `open_diff` then resolves
    `client_disconnected`, PROTOCOL.md §4), and the answer is closed.

    Owner: the `Listener` that made it (`owner`), which holds it in `connections` from
    `connection_made` until the transport is gone *and* the handler task has finished.
    """

    def __init__(self, app: App, number: int, max_body: Optional[int] = None,
                 request_timeout: float = REQUEST_TIMEOUT, owner: "Optional[Listener]" = None,
                 judge: Optional[Judge] = None) -> None:
        self.app = app
        self.number = number
        self.closed = False
        self.requests = 0
        self.transport: Any = None
        self._owner = owner
        self._loop = asyncio.get_event_loop()
        self._parser = (http11.RequestParser() if max_body is None  # (the wire layer's default)
                        else http11.RequestParser(max_body=max_body))
        self._request_timeout = request_timeout
        # The request being received: its head, and its body so far (the first piece
        # as it came, then one growing buffer rather than a list of pieces).
        self._receiving: Optional[http11.Request] = None
        self._refusal: Optional[Reply] = None  # its judge's refusal, answered in turn (no body follows)
        self._body: Union[bytes, bytearray] = b""
        self._input_done = False       # a parse error, a timeout or `Connection: close`: read no more requests
        self._queue: "Deque[_Queued]" = collections.deque()
        self._task: "Optional[asyncio.Task[None]]" = None  # the handler task, while one runs
        self._answering: Optional[_Answering] = None  # what the handler task has left to write
        self._timer: Optional[asyncio.TimerHandle] = None  # REQUEST_TIMEOUT, while a request is partial
        self._reading_paused = False
        self._writing_paused = False
        self._writable: Optional[asyncio.Event] = None  # made at the first pause_writing
        self._lost = False
        # The judgement of every request by its head alone (`answers.Judge`, e.g.
        # `McpApp.judge_head`), once per request, before its body is read.
        self._judge = judge
        self.last_active = self._loop.time()  # for the idle timeout and the connection limit
        self._read_buffer = memoryview(bytearray(READ_BUFFER))  # what the socket is read into

    # ------------------------------------------------------- asyncio.BufferedProtocol

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self._owner is not None:
            self._owner._adopt(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        # The bytes read are copied out at once (the parser may keep them; the buffer
        # is read into again), then handled as any bytes received.
        self.data_received(bytes(self._read_buffer[:nbytes]))

    def data_received(self, data: bytes) -> None:
        if self._input_done:
            return  # after an error or a `Connection: close` request nothing more is read
        self.last_active = self._loop.time()
        for event in self._parser.feed(data):
            kind = type(event)
            if kind is http11.Data:
                if not self._body:
                    self._body = event.data  # type: ignore[union-attr]
                else:
                    if type(self._body) is bytes:
                        self._body = bytearray(self._body)
                    self._body += event.data  # type: ignore[union-attr, operator]
            elif kind is http11.Request:
                if self._judge is not None:
                    refusal = self._judge(event)  # type: ignore[arg-type]
                    if refusal is not None:
                        # Refused now when the answer closes the connection (no nonce,
                        # an Origin) or a body would follow (`Request.body_follows`):
                        # that body is never read. A bodiless one is answered in turn.
                        if refusal.close or event.body_follows:  # type: ignore[union-attr]
                            self._refuse(event, refusal)  # type: ignore[arg-type]
                            return
                        self._refusal = refusal
                # (The body is empty here: each message's end, a parse error and a
                # refusal empty it, and the parser ends one message before the next.)
                self._receiving = event  # type: ignore[assignment]
            elif kind is http11.EndOfMessage:
                request, self._receiving = self._receiving, None
                refusal, self._refusal = self._refusal, None
                body = self._body if type(self._body) is bytes else bytes(self._body)
                self._body = b""
                if request is not None:
                    self._received(request, body, refusal)
                    if self.closed:
                        return  # its answer closed the connection (the only event that answers)
            elif kind is http11.ParseError:
                self._receiving = self._refusal = None
                self._body = b""
                self._input_done = True
                self._queue.append(event)  # type: ignore[arg-type]
        if self._timer is not None or self._receiving is not None or not self._parser.idle:
            self._watch_partial()
        if len(self._queue) >= MAX_PENDING and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        if self._queue and self._task is None:
            self._start_handler()

    def eof_received(self) -> Optional[bool]:
        # The peer closed its side: it has gone (the CLI never half-closes; it closes a
        # connection it no longer wants, PROTOCOL.md §2), so nobody can receive an
        # answer. A request it left half sent is still answered with its error when
        # nothing else is in progress; then the connection closes.
        errors = [e for e in self._parser.feed_eof() if isinstance(e, http11.ParseError)]
        if errors and not self._input_done and self._task is None and not self._queue:
            self._write_error(errors[0])
        self.close()
        return None

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self._lost = True
        self._shut()
        self._release()

    def pause_writing(self) -> None:
        # The transport's buffer passed its high-water mark: queued requests wait from now on.
        self._writing_paused = True
        if self._writable is None:
            self._writable = asyncio.Event()
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._writable is not None:
            self._writable.set()

    # ------------------------------------------------------------- incoming requests

    def _received(self, request: http11.Request, body: bytes, refusal: Optional[Reply] = None) -> None:
        """A complete request: answered now when nothing is ahead of it, else queued.
        `refusal`: its judge's answer, given instead of the application's."""
        if not request.keep_alive:
            # PROTOCOL.md §2: keep-alive is the rule; a request that says
            # `Connection: close` is the last one read.
            self._input_done = True
        if self._task is not None or self._queue or self._writing_paused:
            self._queue.append((request, body, refusal))
            return
        keep_open = self._answer(request, body) if refusal is None else self._write_reply(request, refusal)
        if keep_open is None:
            self._start_handler()
        elif not keep_open:
            self.close()

    def _refuse(self, request: http11.Request, refusal: Reply) -> None:
        """A request refused by its head (no nonce, an Origin, a wrong path or method):
        answered in turn without reading its body, then the connection closes. Nothing
        more is read from it, so a peer cannot make us buffer what it sends."""
        self._input_done = True
        self._receiving = self._refusal = None
        self._body = b""
        closing = refusal.closing()
        if self._task is None and not self._queue and not self._writing_paused:
            self._write_reply(request, closing)
            self.close()
            return
        self._queue.append((request, b"", closing))  # after what is ahead of it
        if self._task is None:
            self._start_handler()

    @property
    def idle(self) -> bool:
        """Between requests: nothing received in part, nothing being answered."""
        return (not self.closed and self._task is None and not self._queue and self._answering is None
                and self._receiving is None and self._parser.idle)

    def _watch_partial(self) -> None:
        """Arm the REQUEST_TIMEOUT timer while a request is partly received, and only
        then: an idle keep-alive connection waits for its next request without a timer
        (the CLI keeps connections open between prompts, PROTOCOL.md §2)."""
        partial = not self._input_done and (self._receiving is not None or not self._parser.idle)
        if partial:
            if self._timer is None:
                self._timer = self._loop.call_later(self._request_timeout, self._timed_out)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        # A slow or stuck peer must not hold a connection forever with half a request:
        # answer 408 (after whatever is ahead of it) and close.
        self._timer = None
        if self.closed or self._input_done:
            return
        self._input_done = True
        self._queue.append(http11.ParseError(408, "request not completed in time"))
        if self._task is None:
            self._start_handler()

    # ------------------------------------------------------------------- answering

    def _answer(self, request: http11.Request, body: bytes) -> Optional[bool]:
        """Give one request to the application and write what can be written now.
        Returns whether the connection stays open, or None when the rest of the answer
        is left to the handler task (`_answering`)."""
        self.requests += 1
        try:
            answer: Answer = self.app(request, body, self.number)
        except Exception:
            log.error("request handler failed", exc_info=True)
            answer = _INTERNAL_ERROR
        if type(answer) is Reply:
            return self._write_reply(request, answer)  # type: ignore[arg-type]
        if type(answer) is Stream:
            keep_open = http11.keeps_alive_after(request.keep_alive, answer.close_after)  # type: ignore[union-attr]
            try:
                head = http11.write_response_head(answer.status, answer.headers,  # type: ignore[union-attr]
                                                  keep_alive=keep_open)
            except ValueError:
                answer.close()  # type: ignore[union-attr]
                return self._refuse_encoding()
            if not self.write_nowait(head):
                answer.close()  # type: ignore[union-attr]
                return False
            self._answering = _Answering(request, answer, keep_open)  # type: ignore[arg-type]
            return None
        if type(answer) is PendingReply:
            self._answering = _Answering(request, answer, True)  # type: ignore[arg-type]
            return None
        log.error("request handler returned %r, not an answer", answer)
        return self._write_reply(request, _INTERNAL_ERROR)

    def _write_reply(self, request: http11.Request, reply: Reply) -> bool:
        """Write a complete answer; whether the connection stays open after it."""
        keep_open = http11.keeps_alive_after(request.keep_alive, reply.close)
        try:
            if reply.chunked:
                # The head, the body as one chunk (none when empty), the last chunk; the
                # head only for HEAD (`http11.has_body`). One write: one system call.
                data = http11.write_response_head(reply.status, reply.headers, keep_alive=keep_open)
                if http11.has_body(request.method, reply.status):
                    data = b"".join((data, http11.encode_chunk(reply.body), http11.LAST_CHUNK))
            else:
                data = http11.write_response(reply.status, reply.headers, reply.body, request_method=request.method,
                                             keep_alive=keep_open)
        except ValueError:
            return self._refuse_encoding()
        return self.write_nowait(data) and keep_open

    def _refuse_encoding(self) -> bool:
        """An answer the wire layer refuses to encode (a header value with a line
        break, a body on a 204) is an application bug: logged, answered 500, closed."""
        log.error("cannot encode the answer", exc_info=True)
        self.write_nowait(http11.write_response(500, _INTERNAL_ERROR.headers, _INTERNAL_ERROR.body, keep_alive=False))
        return False

    async def _finish(self, answering: _Answering) -> bool:
        """Write the rest of an answer: a `PendingReply`'s reply once it is ready, or a
        `Stream`'s body. Returns whether the connection stays open."""
        request, answer = answering.request, answering.answer
        try:
            if type(answer) is PendingReply:
                try:
                    reply = await answer.run()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.error("request handler failed", exc_info=True)
                    reply = _INTERNAL_ERROR
                if type(reply) is not Reply:
                    log.error("pending answer gave %r, not a Reply", reply)
                    reply = _INTERNAL_ERROR
                return self._write_reply(request, reply)
            assert type(answer) is Stream
            if http11.has_body(request.method, answer.status):
                try:
                    async for chunk in answer.chunks:
                        if chunk and not self.write_nowait(http11.encode_chunk(chunk)):
                            return False
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # The head is out: the answer cannot be completed, only cut off.
                    log.error("stream of connection %d failed", self.number, exc_info=True)
                    self.abort()
                    return False
                if not self.write_nowait(http11.LAST_CHUNK):
                    return False
            return answering.keep_open
        finally:
            if self._answering is answering:
                self._answering = None
            answer.close()

    def _start_handler(self) -> None:
        task = _start_task(self._loop, self._handle())
        if not task.done():  # (an eager task may have answered everything already)
            self._task = task

    async def _handle(self) -> None:
        """The handler task: writes the rest of the answer begun in data_received, if
        any, then answers the queued requests one at a time, in order, and ends. It is
        cancelled when the peer goes away."""
        try:
            keep_open = True
            if self._answering is not None:
                keep_open = await self._finish(self._answering)
            while keep_open and self._queue and not self.closed:
                if self._writing_paused:
                    await self.drained()  # the peer reads slowly: answer it no faster
                    continue
                item = self._queue.popleft()
                if self._reading_paused and len(self._queue) <= MAX_PENDING // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                if isinstance(item, http11.ParseError):
                    self._write_error(item)
                    keep_open = False
                    continue
                request, body, refusal = item
                if refusal is not None:  # refused by its head (its judge)
                    keep_open = self._write_reply(request, refusal)
                    continue
                done = self._answer(request, body)
                if done is None:
                    assert self._answering is not None
                    done = await self._finish(self._answering)
                keep_open = done
            if not keep_open:
                self.close()  # after an error, a `Connection: close` exchange, a lost peer
        except Exception:  # never let a failure end the task with an unread exception
            log.exception("connection %d failed", self.number)
            self.abort()
        finally:
            self._end_task()

    def _end_task(self) -> None:
        """The handler task is finishing (called from it, or from its done callback
        when it was cancelled before its first step): close an answer it never took
        up, and let the owner release us."""
        task = self._task
        if task is not None and (task.done() or task is asyncio.current_task()):
            self._task = None
        self.last_active = self._loop.time()
        answering, self._answering = self._answering, None
        if answering is not None:
            answering.answer.close()
        self._release()

    def _write_error(self, error: http11.ParseError) -> None:
        body = ("%s\n" % error.message).encode("utf-8")
        self.write_nowait(http11.write_response(error.status, [("Content-Type", "text/plain; charset=utf-8")], body,
                                                keep_alive=False))

    # ---------------------------------------------------------------------- writing

    def write_nowait(self, data: bytes) -> bool:
        """Write without waiting; False once the peer is gone."""
        if self.closed:
            return False
        transport = self.transport
        try:
            transport.write(data)
            # (Only a paused transport holds more than its high-water mark.)
            if self._writing_paused and transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                log.warning("connection %d: peer stopped reading; dropping it", self.number)
                self.abort()
                return False
        except (ConnectionError, RuntimeError, OSError):
            self.abort()
            return False
        return True

    async def drained(self) -> bool:
        """Wait while the transport's buffer is above its high-water mark (flow
        control: `pause_writing`/`resume_writing`); False once the peer is gone."""
        if self._writing_paused and self._writable is not None:
            await self._writable.wait()
        return not self.closed

    # ---------------------------------------------------------------------- closing

    def _shut(self) -> None:
        """The connection is over for us: stop the timer, drop queued requests, cancel
        the handler (nobody can receive its answer; a blocking open_diff resolves as
        disconnected) and wake whoever waits to write. Once only."""
        if self.closed:
            return
        self.closed = True
        self._input_done = True
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            # Its finally clause may never run (a task cancelled before its first step
            # never enters its coroutine), so its end is also watched from outside.
            task.add_done_callback(lambda _: self._end_task())
        elif task is None and self._answering is not None:
            self._end_task()  # (an answer left for a task that was never started)
        if self._writable is not None:
            self._writable.set()

    def close(self) -> None:
        """Cancel the handler and close after what is already written has been sent."""
        self._shut()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Cancel the handler and drop the connection now, unsent bytes included."""
        self._shut()
        if self.transport is not None:
            self.transport.abort()

    def _release(self) -> None:
        if self._lost and self._task is None and self._owner is not None:
            self._owner._discard(self)
