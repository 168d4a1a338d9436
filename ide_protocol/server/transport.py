"""The asyncio glue of one accepted connection: bytes between the socket and
`http11.ServerConnection`, answers between that and the application.

Every HTTP rule of a connection is the sans-IO `ServerConnection`'s (order, the
pipelining cap, refusals by the head, 408, keep-alive or close); the application's
interface is `answers` (`app(request, body, connection_number)` gives a `Reply`, a
`Stream` or a `PendingReply`). What is left here is what needs a loop: reading and
writing the socket, flow control, the request deadline's timer, and the one task that
writes an answer which cannot be written at once.

`HttpConnection` is an `asyncio.BufferedProtocol`: the loop reads the socket into a
buffer the connection keeps, and the bytes go to the `ServerConnection` at once. Then
whatever can be answered is answered, right there in `data_received`: a `Reply` is
written at once (most requests: no task, no loop pass); the head of a `Stream` at once
and its body by the connection's one task; a `PendingReply` by that task once it is
ready. When that task ends, the requests waiting behind it are answered the same way.

The socket stays watched meanwhile, so that a peer that vanishes in the middle of a long
answer (a blocking `open_diff`) is noticed at once and the task cancelled.

The listening socket and the set of connections are `listener.Listener`'s; it hands
each connection two callbacks, `on_open` and `on_gone`, and reads nothing else of it.
Windows named pipes are served by `common.winpipe` with the same protocol class.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, Callable, Coroutine, Optional, Union

from ..wire import http11
from ..wire.http11.server import CLOSED, IDLE, Incoming, ServerConnection
from .answers import App, Judge, PendingReply, Reply, Stream
from .limits import REQUEST_TIMEOUT

log = logging.getLogger(__name__)

__all__ = ["HttpConnection", "MAX_WRITE_BUFFER", "READ_BUFFER"]

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


def _start_task(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
    if sys.version_info >= (3, 12):
        # Eager (Python 3.12+): the coroutine's first step runs now, inside
        # data_received, and a task that never has to suspend is born done.
        return asyncio.Task(coro, loop=loop, eager_start=True)
    return loop.create_task(coro)


class HttpConnection(asyncio.BufferedProtocol):
    """One accepted connection: its `ServerConnection` (`http`), the socket's transport,
    and at most one task writing an answer (see the module's doc).

    A peer that goes away (EOF, a lost connection) cancels that task: the method an
    answer waits for is cancelled with it (a blocking `open_diff` then resolves
    `client_disconnected`, PROTOCOL.md §4), and the answer is closed.

    `on_open(conn)` is called when the transport is made (the owner may close it at
    once: a connection limit); `on_gone(conn)` once the transport is gone *and* the task
    has ended, after which the connection holds nothing.
    """

    def __init__(self, app: App, number: int, max_body: Optional[int] = None,
                 request_timeout: float = REQUEST_TIMEOUT, *, judge: Optional[Judge] = None,
                 on_open: Optional[Callable[["HttpConnection"], None]] = None,
                 on_gone: Optional[Callable[["HttpConnection"], None]] = None) -> None:
        self.app = app
        self.number = number
        self.requests = 0
        #: Every HTTP decision about this connection (its `state` says where it is).
        self.http = (ServerConnection(judge) if max_body is None  # (the wire layer's default)
                     else ServerConnection(judge, max_body=max_body))
        self.transport: Any = None
        self._on_open = on_open
        self._on_gone = on_gone
        self._loop = asyncio.get_event_loop()
        self._request_timeout = request_timeout
        self._timer: Optional[asyncio.TimerHandle] = None  # the request deadline, while one runs
        self._timer_for = 0  # (of the request after `http.received` of them)
        # The deadline of what the peer is owed and does not take (`_owed_passed`).
        self._owed: Optional[asyncio.TimerHandle] = None
        # The task writing a `Stream`'s body or a `PendingReply`, and that answer (closed
        # by the task, or when the task was cancelled before it could run).
        self._task: "Optional[asyncio.Task[None]]" = None
        self._open_answer: Optional[Union[Stream, PendingReply]] = None
        # Flow control of the transport: reading paused (the pipelining cap), writing
        # paused (the peer reads slowly: what waits is answered no faster).
        self._reading_paused = False
        self._writing_paused = False
        self.last_active = self._loop.time()  # for the idle timeout and the connection limit
        self._read_buffer = memoryview(bytearray(READ_BUFFER))  # what the socket is read into

    @property
    def closed(self) -> bool:
        return self.http.state is CLOSED

    @property
    def idle(self) -> bool:
        """Between requests: nothing received in part, nothing being answered."""
        return self.http.state is IDLE

    @property
    def busy(self) -> bool:
        """Whether a task is writing an answer (the owner waits for it when stopping)."""
        return self._task is not None

    async def finished(self) -> None:
        """Wait until the task writing an answer, if any, has ended (cancelling this
        wait leaves that task alone)."""
        task = self._task
        if task is not None:
            await asyncio.wait({task})

    # ------------------------------------------------------- asyncio.BufferedProtocol

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self._on_open is not None:
            self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        # The bytes read are copied out at once (the parser may keep them; the buffer
        # is read into again), then handled as any bytes received.
        self.data_received(bytes(self._read_buffer[:nbytes]))

    def data_received(self, data: bytes) -> None:
        self.http.receive_data(data)
        self.last_active = self._loop.time()
        self._answer_waiting()

    def eof_received(self) -> Optional[bool]:
        # The peer closed its side (the CLI never half-closes: it has gone). The
        # `ServerConnection` says whether a half-sent request is still answered.
        self.http.receive_eof()
        self._answer_waiting()
        self.close()
        return None

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self._shut()
        if self._owed is not None:
            self._owed.cancel()
            self._owed = None
        self.transport = None
        self._release()

    def pause_writing(self) -> None:
        # The transport's buffer passed its high-water mark: waiting requests wait on.
        self._writing_paused = True
        self._owe()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._owed is not None and not self.closed:
            self._owed.cancel()
            self._owed = None
        self._answer_waiting()

    def _deadline_passed(self) -> None:
        self._timer = None
        self.http.deadline_passed()
        self._answer_waiting()

    def _owe(self) -> None:
        """Deadlines on the way out as on the way in: a peer that does not take what was
        written (writing paused, or bytes left unsent when the connection closed) while
        more is owed to it (requests wait behind it) or nothing else will come (the
        connection is closed) is dropped after the request deadline, so that it holds
        neither a connection nor what was written for it. (A stream with nothing behind
        it is bounded by MAX_WRITE_BUFFER instead: a CLI stopped for a while keeps its
        pushes.)"""
        if self._owed is None:
            self._owed = self._loop.call_later(self._request_timeout, self._owed_passed)

    def _owed_passed(self) -> None:
        self._owed = None
        if self.closed or self.http.waiting:
            log.warning("connection %d: peer did not take its answers within %g s; dropping it",
                        self.number, self._request_timeout)
            self.abort()
        elif self._writing_paused:
            self._owe()  # (a stream, nothing behind it: looked at again later)

    # ------------------------------------------------------------------- answering

    def _answer_waiting(self) -> None:
        """Answer what waits, in order, for as long as each answer is written at once;
        an answer that has to wait is left to the task (which calls this again when it
        ends). Nothing is answered while the peer is slow to read."""
        http = self.http
        while self._task is None and not self._writing_paused:
            item = http.next_item()
            if item is None:
                break
            if isinstance(item, Incoming):
                self._answer(item)
            elif not self.write_nowait(item.data):  # a refusal or an error, answered by `http`
                break
        if http.state is CLOSED:
            self.close()
            return
        # What `http` says now (bytes read, a request taken, held bytes read with it):
        # the deadline runs while a request is partly here; reading pauses while
        # `http` holds what it will.
        if http.needs_deadline:
            if self._timer is None or self._timer_for != http.received:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = self._loop.call_later(self._request_timeout, self._deadline_passed)
                self._timer_for = http.received
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if http.wants_data:
            if self._reading_paused and self.transport is not None:
                self._reading_paused = False
                self.transport.resume_reading()
        elif not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _answer(self, item: Incoming) -> None:
        """Give one request to the application and write what can be written now."""
        self.requests += 1
        try:
            answer = self.app(item.request, item.body, self.number)
        except Exception:
            log.error("request handler failed", exc_info=True)
            answer = _INTERNAL_ERROR
        if isinstance(answer, Reply):
            self._write_reply(answer)
        elif isinstance(answer, Stream):
            try:
                head = self.http.send_head(answer.status, answer.headers, close_after=answer.close_after)
            except ValueError:
                answer.close()
                self._refuse_encoding()
                return
            if self.write_nowait(head):
                self._start(answer, self._write_stream(answer))
            else:
                answer.close()
        elif isinstance(answer, PendingReply):
            self._start(answer, self._write_when_ready(answer))
        else:
            log.error("request handler returned %r, not an answer", answer)
            self._write_reply(_INTERNAL_ERROR)

    def _write_reply(self, reply: Reply) -> None:
        try:
            data = self.http.send_reply(reply)
        except ValueError:
            self._refuse_encoding()
            return
        self.write_nowait(data)

    def _refuse_encoding(self) -> None:
        """An answer the wire layer refuses to encode (a header value with a line
        break, a body on a 204) is an application bug: logged, answered 500, closed."""
        log.error("cannot encode the answer", exc_info=True)
        self.write_nowait(self.http.send_internal_error())

    def _start(self, answer: Union[Stream, PendingReply], coro: Coroutine[Any, Any, None]) -> None:
        self._open_answer = answer
        task = _start_task(self._loop, coro)
        if task.done():  # (an eager task that finished at once: nothing to wait for)
            self._open_answer = None
            self._check_failed(task)
            return
        self._task = task
        task.add_done_callback(self._task_done)

    async def _write_stream(self, answer: Stream) -> None:
        """Write a `Stream`'s body as its chunks come, then its end."""
        http = self.http
        try:
            async for chunk in answer.chunks:
                if chunk and not self.write_nowait(http.send_chunk(chunk)):
                    return
            self.write_nowait(http.send_end())
        except asyncio.CancelledError:
            raise
        except Exception:
            # The head is out: the answer cannot be completed, only cut off.
            log.error("stream of connection %d failed", self.number, exc_info=True)
            self.abort()
        finally:
            answer.close()

    async def _write_when_ready(self, answer: PendingReply) -> None:
        """Await a `PendingReply`'s `Reply` and write it."""
        try:
            try:
                reply = await answer.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.error("request handler failed", exc_info=True)
                reply = _INTERNAL_ERROR
            if not isinstance(reply, Reply):
                log.error("pending answer gave %r, not a Reply", reply)
                reply = _INTERNAL_ERROR
            self._write_reply(reply)
        finally:
            answer.close()

    def _task_done(self, task: "asyncio.Task[None]") -> None:
        """The task ended (or was cancelled, perhaps before its first step, when its
        coroutine never ran: its answer is closed here then). What waited behind it is
        answered now; a connection whose transport is gone is let go."""
        if self._task is task:
            self._task = None
        answer, self._open_answer = self._open_answer, None
        if answer is not None:
            answer.close()
        self._check_failed(task)
        self.last_active = self._loop.time()
        if self.transport is None:
            self._release()
        else:
            self._answer_waiting()

    def _check_failed(self, task: "asyncio.Task[None]") -> None:
        """A task that ended by an exception (a bug, the application's or ours, in
        writing its answer: a `Reply` the writer cannot encode but by a TypeError, an
        answer's `close()` that raised) is logged here, where its end is seen, and the
        connection closed: its answer cannot be completed, and nothing may wait behind it
        for ever."""
        if not task.cancelled() and task.exception() is not None:
            log.error("connection %d failed", self.number, exc_info=task.exception())
            self.close()

    # ---------------------------------------------------------------------- writing

    def write_nowait(self, data: bytes) -> bool:
        """Write without waiting; False once the peer is gone (or dropped for not
        reading: past MAX_WRITE_BUFFER unsent bytes)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
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

    # ---------------------------------------------------------------------- closing

    def _shut(self) -> None:
        """The connection is over for us: nothing more is read or answered, the
        deadline stops, the task is cancelled (nobody can receive its answer; a blocking
        open_diff resolves as disconnected)."""
        self.http.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def close(self) -> None:
        """Cancel the task and close after what is already written has been sent (if
        the peer takes it in time: `_owe`)."""
        self._shut()
        transport = self.transport
        if transport is not None:
            transport.close()
            if transport.get_write_buffer_size():
                self._owe()

    def abort(self) -> None:
        """Cancel the task and drop the connection now, unsent bytes included."""
        self._shut()
        if self.transport is not None:
            self.transport.abort()

    def _release(self) -> None:
        if self._task is None and self._on_gone is not None:
            on_gone, self._on_gone = self._on_gone, None
            on_gone(self)
