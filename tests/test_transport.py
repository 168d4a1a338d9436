"""`transport` on its own: a `Listener` serving toy applications over a Unix socket.

The application interface (`answers`): `app(request, body, connection) -> Reply |
Stream | PendingReply`. What the connection promises whatever the application: a
`Reply` written at once, inside `data_received` (no task); a `Stream`'s head at once
and its chunks as they come; a `PendingReply` once ready; answers in request order
(pipelining, with reading paused and resumed past MAX_PENDING); a 500 for a failing
application or one that returns something else; the `Connection` field settled from
the request and the answer; no body for HEAD; every `close()` called exactly once,
also when the peer goes first (then the awaiting is cancelled); the request timer
armed only while a request is partly received; the write-buffer limit; and a `close`
that leaves no connection or task behind.

Whether a handler task starts at once (eager tasks, Python 3.12+) or one loop pass
later (before 3.12) changes when an answer that waits begins: the `starts_later`
fixture runs those tests as shipped and with the task started one pass later.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any, AsyncIterator, List

import pytest

from ide_protocol.wire import http11
from ide_protocol.server import transport
from ide_protocol.server.listener import Listener
from ide_protocol.server.answers import PendingReply, Reply, Stream
import ide_wire
import platforms
from ide_wire import Conn, run, until

EAGER_TASKS = sys.version_info >= (3, 12)


@pytest.fixture(params=["shipped", "one-pass-later"])
def starts_later(request: Any, monkeypatch: Any) -> bool:
    """True when a handler task starts one loop pass after the request was read."""
    if request.param == "one-pass-later":
        monkeypatch.setattr(transport, "_start_task", lambda loop, coro: loop.create_task(coro))
        return True
    return not EAGER_TASKS


def request(target: str, body: bytes = b"", close: bool = False, chunked: bool = False, method: str = "POST") -> bytes:
    headers = "Host: x\r\n"
    headers += "Transfer-Encoding: chunked\r\n" if chunked else "Content-Length: %d\r\n" % len(body)
    if close:
        headers += "Connection: close\r\n"
    data = ("%s %s HTTP/1.1\r\n%s\r\n" % (method, target, headers)).encode()
    if chunked:
        return data + (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
    return data + body


async def serve(tmp_path: Any, app: Any, **kw: Any) -> Listener:
    listener = Listener(app, max_body=1 << 20, **kw)
    await ide_wire.listen(listener, str(tmp_path))
    return listener


def handler_tasks() -> List["asyncio.Task[Any]"]:
    """The connections' handler tasks running now, as asyncio lists them: the tasks
    whose coroutine is the transport's."""
    def code(task: "asyncio.Task[Any]") -> Any:
        return getattr(task.get_coro(), "cr_code", None)
    return [t for t in asyncio.all_tasks() if getattr(code(t), "co_filename", None) == transport.__file__]


class Heads:
    """A judge that accepts every request and records its target: that the server has
    read a request (its head) is then seen from outside, before its answer."""

    def __init__(self) -> None:
        self.seen: List[str] = []

    def __call__(self, req: http11.Request) -> None:
        self.seen.append(req.target)


def only(listener: Listener) -> transport.HttpConnection:
    conn, = listener.connections
    return conn


async def released(listener: Listener) -> None:
    await until(lambda: not listener.connections, what="connections released")
    await listener.close()


def send_and_vanish(path: str, data: bytes) -> None:
    """A peer that sends a request and is gone before the answer."""
    ide_wire.send_and_vanish(path, data)


async def chunks_of(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        await asyncio.sleep(0)
        yield piece


def text(status: int, body: bytes, *extra: Any) -> Reply:
    return Reply(status, (("Content-Type", "text/plain"),) + extra, body)


# ------------------------------------------------------------------------ replies


def test_a_reply_is_written_inside_data_received_and_the_connection_field_settled(tmp_path: Any) -> None:
    where: List[Any] = []

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        where.append((req.target, connection, asyncio.current_task()))
        if req.target == "/chunked":
            return Reply(200, [("Content-Type", "text/plain")], b"one chunk", chunked=True)
        if req.target == "/empty-chunked":
            return Reply(200, (), b"", chunked=True)
        if req.target == "/asks-close":
            return Reply(200, (("Content-Type", "text/plain"),), b"bye", close_after=True)
        return text(201, b"now:" + body)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        cases = [("/a", 201, b"now:x", None), ("/chunked", 200, b"one chunk", "chunked"),
                 ("/empty-chunked", 200, b"", "chunked")]
        for target, status, body, coding in cases:
            conn.send_raw(request(target, b"x"), expect="POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.body, reply.complete) == (status, body, True), target
            assert reply.headers.get("transfer-encoding") == coding
            assert reply.headers.get_all("connection") == ["keep-alive"]
        number = only(listener).number
        assert where == [(t, number, None) for t, *_ in cases]  # no task for any of them
        assert handler_tasks() == [] and only(listener).requests == 3
        # HEAD: the head only (Content-Length of the body it would have), then in step.
        for target in ("/a", "/chunked"):
            conn.send_raw(request(target, method="HEAD"), expect="HEAD")
            reply = await conn.read_reply()
            assert reply.status in (200, 201) and reply.body == b"" and reply.complete
        conn.send_raw(request("/a", b"y"), expect="POST")
        assert (await conn.read_reply()).body == b"now:y"
        # An answer saying `close_after=True`: the writer says `Connection: close`, then the connection closes.
        conn.send_raw(request("/asks-close"), expect="POST")
        reply = await conn.read_reply()
        assert reply.body == b"bye" and reply.headers.get_all("connection") == ["close"]
        assert await conn.wait_closed()
        # A request saying `Connection: close`: the answer says close too.
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/a", b"z", close=True), expect="POST")
        reply = await conn.read_reply()
        assert reply.body == b"now:z" and reply.headers.get_all("connection") == ["close"]
        assert await conn.wait_closed()
        await released(listener)
    run(main())


def test_failing_applications_and_wrong_answers_become_500(tmp_path: Any) -> None:
    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        if req.target == "/raise":
            raise ValueError("boom")
        if req.target == "/none":
            return None
        if req.target == "/bad-field":
            return text(200, b"x", ("X-Bad", "line\r\nbreak"))
        if req.target == "/body-on-204":
            return Reply(204, (), b"not allowed")
        if req.target == "/pending-raises":
            async def fail() -> Reply:
                raise KeyError("k")
            return PendingReply(fail)
        if req.target == "/pending-gives-none":
            async def nothing() -> Any:
                return None
            return PendingReply(nothing)
        return text(200, b"ok")

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        for target in ("/raise", "/none", "/pending-raises", "/pending-gives-none"):
            conn.send_raw(request(target), expect="POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.body, reply.complete) == (500, b"Internal Server Error", True), target
            assert reply.headers.get("connection") == "keep-alive"
        conn.send_raw(request("/ok"), expect="POST")
        assert (await conn.read_reply()).body == b"ok"
        conn.close()
        # An answer the wire layer cannot encode: 500, and the connection closes.
        for target in ("/bad-field", "/body-on-204"):
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request(target), expect="POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.headers.get("connection")) == (500, "close"), target
            assert await conn.wait_closed()
        await released(listener)
    run(main())



def test_an_answer_that_fails_in_its_task_drops_the_connection_and_is_logged(tmp_path: Any, caplog: Any,
                                                                              starts_later: bool) -> None:
    """An answer whose writing fails in the connection's task by a bug (a `Reply` whose
    body is text, which the writer cannot join to bytes): the connection is dropped and
    the failure logged with its number. (It was left answering with no task, its peer
    waiting for ever, the connection never idle nor let go, and the failure only
    "Task exception was never retrieved", when collected.)"""
    async def wrong() -> Any:
        await asyncio.sleep(0)
        return Reply(200, (), "text, not bytes")

    async def chunks() -> AsyncIterator[Any]:
        yield b"one"

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        if req.target == "/stream-closes-badly":
            def close() -> None:
                raise RuntimeError("close failed")
            return Stream(200, (("Content-Type", "text/event-stream"),), chunks(), close)
        return PendingReply(wrong)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        for target in ("/pending-wrong-reply", "/stream-closes-badly"):
            caplog.clear()
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request(target), expect="POST")
            assert await asyncio.wait_for(conn.wait_closed(), 10), target
            await until(lambda: not listener.connections, what="the connection let go")
            assert any(r.getMessage() == "connection %d failed" % (listener.accepted,) and r.exc_info
                       for r in caplog.records), target
            conn.close()
        await released(listener)
    run(main())

def test_pipelined_requests_are_answered_in_order(tmp_path: Any) -> None:
    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        n = int(req.target[1:])
        if n % 3 == 0:
            return text(200, b"%d:%s" % (n, body))

        async def later() -> Reply:
            await asyncio.sleep(0.001 * (n % 3))  # later requests may finish their work first
            return text(200, b"%d:%s" % (n, body))
        return PendingReply(later)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        count = 3 * http11.MAX_PENDING + 1  # past the limit: reading pauses and resumes
        conn.send_raw(b"".join(request("/%d" % i, b"b%d" % i, chunked=i % 2 == 0) for i in range(count)))
        for i in range(count):
            conn.parser.expect("POST")
            reply = await conn.read_reply()
            assert reply.status == 200 and reply.body == b"%d:b%d" % (i, i)
        assert only(listener).requests == count
        await until(lambda: handler_tasks() == [], what="handler task ended")
        conn.send_raw(request("/%d" % (3 * count), b"again"), expect="POST")  # reading resumed
        assert (await conn.read_reply()).body == b"%d:again" % (3 * count)
        conn.close()
        await released(listener)
    run(main())


def test_a_reply_never_overtakes_an_answer_that_waits(tmp_path: Any, starts_later: bool) -> None:
    calls: List[str] = []

    async def main() -> None:
        release = asyncio.Event()

        def app(req: http11.Request, body: bytes, connection: int) -> Any:
            calls.append(req.target)
            if req.target == "/wait":
                async def waited() -> Reply:
                    await release.wait()
                    return text(200, b"waited")
                return PendingReply(waited)
            return text(200, req.target.encode())

        heads = Heads()
        listener = await serve(tmp_path, app, judge=heads)
        conn = await Conn.open(listener.socket_path)
        # Pipelined in one write: the two quick ones wait behind the pending one.
        conn.send_raw(request("/wait") + request("/now1") + request("/now2"))
        await until(lambda: heads.seen == ["/wait", "/now1", "/now2"], what="requests read")
        conn.send_raw(request("/now3"))  # one more in a later read, alone
        await until(lambda: len(heads.seen) == 4, what="third request read")
        assert calls == ["/wait"]  # read, but none of the quick ones was answered ahead of it
        release.set()
        for expected in (b"waited", b"/now1", b"/now2", b"/now3"):
            conn.parser.expect("POST")
            assert (await conn.read_reply()).body == expected
        assert calls == ["/wait", "/now1", "/now2", "/now3"]
        await until(lambda: handler_tasks() == [], what="handler task ended")
        conn.send_raw(request("/now4"), expect="POST")  # answered at once again
        assert (await conn.read_reply()).body == b"/now4"
        conn.close()
        await released(listener)
    run(main())


# ------------------------------------------------------------------------ streams


def test_a_stream_head_goes_at_once_its_chunks_as_they_come(tmp_path: Any) -> None:
    closed: List[str] = []

    async def main() -> None:
        gate = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield b"first"
            await gate.wait()
            yield b""  # (an empty piece is skipped: it would end the body)
            yield b"second"

        def app(req: http11.Request, data: bytes, connection: int) -> Any:
            if req.target == "/fails":
                async def failing() -> AsyncIterator[bytes]:
                    yield b"half"
                    raise ValueError("boom")
                return Stream(200, (), failing(), lambda: closed.append("fails"))
            return Stream(200, [("Content-Type", "text/event-stream")], body(), lambda: closed.append(req.target))

        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/s"), expect="POST")
        head = await conn.read_head()
        assert head.status == 200 and head.headers.get("transfer-encoding") == "chunked"
        assert head.headers.get("connection") == "keep-alive"
        assert await conn.next_event() == http11.Data(b"first")  # (while the rest waits)
        assert closed == [] and len(handler_tasks()) == 1  # the handler task writes the rest
        gate.set()
        assert await conn.next_event() == http11.Data(b"second")
        assert await conn.next_event() == http11.EndOfMessage()
        await until(lambda: closed == ["/s"], what="stream closed")
        # HEAD: the head only; the stream is closed without being read.
        conn.send_raw(request("/h", method="HEAD"), expect="HEAD")
        reply = await conn.read_reply()
        assert reply.body == b"" and reply.complete and closed == ["/s", "/h"]
        # A stream whose chunks fail after its head went: the connection is cut off.
        conn.send_raw(request("/fails"), expect="POST")
        reply = await conn.read_reply()
        assert not reply.complete
        # (On Windows the Proactor loop's abort may drop the chunk still queued.)
        assert reply.body == b"half" or (platforms.WINDOWS and reply.body == b"")
        assert await conn.wait_closed() and closed == ["/s", "/h", "fails"]
        await released(listener)
    run(main())


def test_a_vanished_peer_cancels_what_its_answer_waits_for(tmp_path: Any) -> None:
    cancelled: List[str] = []
    closed: List[str] = []

    async def main() -> None:
        entered = asyncio.Event()

        async def sleep_forever(target: str) -> None:
            entered.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(target)
                raise

        async def stream_body(target: str) -> AsyncIterator[bytes]:
            yield b"open"
            await sleep_forever(target)

        async def pending(target: str) -> Reply:
            await sleep_forever(target)
            return text(200, b"never")

        def app(req: http11.Request, body: bytes, connection: int) -> Any:
            target = req.target
            if target.startswith("/stream"):
                return Stream(200, (), stream_body(target), lambda: closed.append(target))
            return PendingReply(lambda: pending(target), lambda: closed.append(target))

        listener = await serve(tmp_path, app)
        for target in ("/pending-abort", "/pending-eof", "/stream-abort", "/stream-eof"):
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request(target), expect="POST")
            await asyncio.wait_for(entered.wait(), 5)
            entered.clear()
            if target.endswith("abort") or not conn.writer.can_write_eof():  # (a named pipe has no half-close)
                conn.abort()
            else:
                conn.writer.write_eof()  # a half-close is a peer gone too
            await until(lambda: cancelled[-1:] == [target] and closed[-1:] == [target], what="cancelled, closed")
            await until(lambda: not listener.connections and handler_tasks() == [], what="connection released")
            conn.close()
        assert cancelled == closed
        await listener.close()
    run(main())


@pytest.mark.parametrize("pipelined", [http11.MAX_PENDING + 1, 4 * http11.MAX_PENDING])
def test_a_peer_that_pipelines_past_the_cap_and_vanishes_is_seen_to_go(tmp_path: Any, pipelined: int) -> None:
    """A peer that pipelines more requests than may wait, behind an answer that waits
    (an open_diff), then goes: the server sees it go and cancels that answer. Reading
    paused at the cap, so the peer's end was not seen until the answer came by itself
    (never, for a person who never decides): the connection and the answer were held."""
    closed: List[str] = []

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        return PendingReply(lambda: asyncio.sleep(3600), lambda: closed.append(req.target))

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(b"".join(request("/%d" % i) for i in range(pipelined)))
        await until(lambda: listener.busy == 1 and only(listener).http.waiting, what="the first answer waits")
        conn.abort()
        await until(lambda: closed == ["/0"], what="the waiting answer cancelled")
        await until(lambda: not listener.connections and handler_tasks() == [], what="connection released")
        await listener.close()
    run(main())


@platforms.vanishing_peers_counted
def test_an_answer_is_closed_unrun_when_its_connection_drops_first(tmp_path: Any, starts_later: bool) -> None:
    log: List[str] = []

    async def never() -> Reply:
        log.append("ran")
        await asyncio.sleep(3600)
        return text(200, b"")

    async def nothing() -> AsyncIterator[bytes]:
        log.append("ran")
        await asyncio.sleep(3600)
        yield b""

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        if req.target == "/stream":
            return Stream(200, (), nothing(), lambda: log.append("closed"))
        return PendingReply(never, lambda: log.append("closed"))

    class Transport:
        """Enough of an asyncio transport for the connection to write to."""
        written = b""

        def write(self, data: bytes) -> None:
            self.written += data

        def close(self) -> None:
            pass

        abort = close

        def is_closing(self) -> bool:
            return False

        def get_write_buffer_size(self) -> int:
            return 0

    async def main() -> None:
        for target in ("/pending", "/stream"):
            # The request arrives and the peer is gone in the same loop pass.
            del log[:]
            conn = transport.HttpConnection(app, 1, 1 << 20)
            conn.connection_made(Transport())
            conn.data_received(request(target))
            conn.connection_lost(None)
            await until(lambda: handler_tasks() == [] and "closed" in log, what="answer closed")
            await asyncio.sleep(0.01)
            # Closed exactly once; run first (then cancelled) only if its task had
            # started inside data_received.
            assert log == (["closed"] if starts_later else ["ran", "closed"]), (target, log)

        # The same over a socket, with whatever timing the system gives.
        listener = await serve(tmp_path, app)
        for target in ("/pending", "/stream"):
            before = listener.accepted
            del log[:]
            send_and_vanish(listener.socket_path, request(target))
            await until(lambda: listener.accepted == before + 1 and not listener.connections and "closed" in log,
                        what="connection released")
            assert handler_tasks() == [] and log in (["closed"], ["ran", "closed"]), (target, log)
        await listener.close()
    run(main())


def test_a_paused_writer_queues_later_requests_until_drained(tmp_path: Any) -> None:
    big = b"x" * (4 << 20)
    calls: List[str] = []

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        calls.append(req.target)
        return text(200, big if req.target == "/big" else b"small")

    async def main() -> None:
        heads = Heads()
        listener = await serve(tmp_path, app, judge=heads)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/big"), expect="POST")
        # Answered inside data_received: 4 MiB is more than the socket takes, so the
        # transport's buffer is past its high-water mark from then on.
        await until(lambda: calls == ["/big"], what="big answer written")
        server_side = only(listener)
        conn.send_raw(request("/small"), expect="POST")
        await until(lambda: heads.seen == ["/big", "/small"], what="second request read")
        assert calls == ["/big"]  # read, but not answered while the peer does not read
        first = await conn.read_reply()
        assert first.complete and len(first.body) == len(big)
        second = await conn.read_reply()
        assert (second.status, second.body) == (200, b"small") and calls == ["/big", "/small"]
        await until(lambda: handler_tasks() == [], what="handler task ended")
        assert not server_side.closed
        conn.close()
        await listener.close()
    run(main())


@pytest.mark.parametrize("owed", ["answers waiting", "the last answer"])
def test_a_peer_that_does_not_take_what_it_is_owed_is_dropped_after_the_request_deadline(tmp_path: Any,
                                                                                          owed: str) -> None:
    """Deadlines on the way out too: a peer that stops reading holds the server's bytes
    and a connection. With requests waiting their turn behind what it does not take (it
    pipelined), or the last answer of a connection the server closed still unsent, it
    has the request deadline to take it; then the connection is dropped. (Both were held
    for as long as the peer lived: a live connection never idle, counted against the
    connection limit; a closed one kept in the listener with megabytes unsent.)"""
    big = b"x" * (4 << 20)

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        return Reply(200, (("Content-Type", "text/plain"),), big, close_after=req.target == "/last")

    async def main() -> None:
        listener = await serve(tmp_path, app, request_timeout=0.5)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/a") + request("/b") if owed == "answers waiting" else request("/last"))
        await until(lambda: listener.accepted == 1 and not listener.connections, what="the connection dropped")
        conn.close()
        await listener.close()
    run(main())


def test_a_stream_its_peer_does_not_read_is_dropped_past_the_limit(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(transport, "MAX_WRITE_BUFFER", 256 * 1024)
    piece = b"y" * 65536
    closed: List[str] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:
            await asyncio.sleep(0)
            yield piece

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        if req.target == "/small":
            return Stream(200, (), chunks_of(piece, piece), lambda: closed.append("small"))
        return Stream(200, (), endless(), lambda: closed.append("endless"))

    async def main() -> None:
        listener = await serve(tmp_path, app)
        # Under the limit, a slow reader gets everything.
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/small"), expect="POST")
        await until(lambda: closed == ["small"], what="small stream written")
        reply = await conn.read_reply()
        assert reply.complete and reply.body == piece * 2
        conn.close()
        # Past it, a peer that never reads is dropped (its stream closed).
        stuck = await Conn.open(listener.socket_path)
        stuck.send_raw(request("/endless"), expect="POST")
        await until(lambda: closed == ["small", "endless"], what="stuck stream dropped")
        await released(listener)
        stuck.close()
    run(main())


def test_request_timer_only_while_a_request_is_partial(tmp_path: Any) -> None:
    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        return text(200, b"ok")

    async def main() -> None:
        listener = await serve(tmp_path, app, request_timeout=0.2)
        conn = await Conn.open(listener.socket_path)
        await until(lambda: len(listener.connections) == 1, what="connection")
        whole = request("/a", b"body")
        await asyncio.sleep(0.3)  # idle longer than the timeout: no timer, the connection stays
        conn.send_raw(whole[:10])
        conn.send_raw(whole[10:], expect="POST")
        assert (await conn.read_reply()).body == b"ok"
        await asyncio.sleep(0.3)  # complete, then idle again: the timer went with the request
        conn.send_raw(whole, expect="POST")
        assert (await conn.read_reply()).body == b"ok"
        conn.send_raw(whole[:-2], expect="POST")  # partial: the timer runs out
        reply = await conn.read_reply()
        assert reply.status == 408
        assert await conn.wait_closed()
        await released(listener)
    run(main())


def test_each_request_has_a_deadline_of_its_own(tmp_path: Any) -> None:
    """A peer that pipelines steadily sends the rest of one request with the start of the
    next: some request is always partly here. Each must arrive in whole within the
    deadline from its own first byte; the first one's deadline ran on over all of them
    (408, and the connection closed, a deadline after the first request began)."""
    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        return text(200, b"ok")

    async def main() -> None:
        listener = await serve(tmp_path, app, request_timeout=0.5)
        conn = await Conn.open(listener.socket_path)
        one = request("/a", b"body")
        count, half = 12, len(request("/a", b"body")) // 2
        stream = one * count
        conn.send_raw(stream[:half])
        for i in range(count):  # the rest of request i with the first half of request i+1
            await asyncio.sleep(0.1)
            conn.send_raw(stream[len(one) * i + half:len(one) * (i + 1) + half], expect="POST")
        for _ in range(count):
            assert (await conn.read_reply()).status == 200
        conn.close()
        await released(listener)
    run(main())


def test_a_parse_error_is_answered_after_the_answers_ahead_of_it(tmp_path: Any) -> None:
    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        async def later() -> Reply:
            await asyncio.sleep(0.01)
            return text(200, b"first")
        return PendingReply(later)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/a") + b"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n")
        conn.parser.expect("POST")
        assert (await conn.read_reply()).body == b"first"
        conn.parser.expect("POST")
        reply = await conn.read_reply()
        assert reply.status == 400 and b"CRLF" in reply.body and reply.headers.get("connection") == "close"
        assert await conn.wait_closed()
        await released(listener)
    run(main())


def test_close_ends_connections_and_tasks(tmp_path: Any) -> None:
    gone: List[str] = []
    closed: List[str] = []

    async def forever(target: str) -> AsyncIterator[bytes]:
        try:
            yield b"open"
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            gone.append(target)
            raise

    def app(req: http11.Request, body: bytes, connection: int) -> Any:
        return Stream(200, (), forever(req.target), lambda: closed.append(req.target))

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conns = []
        for i in range(3):
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request("/%d" % i))
            conns.append(conn)
        await until(lambda: len(handler_tasks()) == 3 and len(listener.connections) == 3, what="three handlers running")
        await asyncio.wait_for(listener.close(), 10)
        assert sorted(gone) == ["/0", "/1", "/2"] and sorted(closed) == ["/0", "/1", "/2"]
        assert listener.connections == set() and handler_tasks() == []
        for conn in conns:
            conn.close()
    run(main())


def test_the_connection_field_is_decided_by_the_wire_rules_and_spelled_by_the_writer() -> None:
    keep = http11.Request("GET", "/")
    close = http11.Request("GET", "/", [("Connection", "close")])
    old = http11.Request("GET", "/", http_version="1.0")
    assert http11.keeps_alive_after(keep.keep_alive, False) is True
    assert http11.keeps_alive_after(keep.keep_alive, True) is False  # the answer asks to close
    assert http11.keeps_alive_after(close.keep_alive, False) is False
    assert http11.keeps_alive_after(old.keep_alive, False) is False
    fields = (("Content-Type", "text/plain"),)
    assert http11.write_response(200, fields, b"x", keep_alive=True).endswith(
        b"Content-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx")
    assert b"\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" in http11.write_response_head(
        200, fields, keep_alive=False)
    with pytest.raises(ValueError):  # given keep_alive, the field is the writer's alone
        http11.write_response(200, [("Connection", "keep-alive")], b"", keep_alive=False)
