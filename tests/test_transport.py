"""`transport` on its own: a `Listener` serving toy applications over a Unix socket.

What the connection protocol promises whatever the application: answers in request
order (pipelining, with reading paused and resumed past MAX_PENDING), a 500 for a
failing handler, the end of a stream its handler forgot, the handler cancelled when
the peer goes, the request timer armed only while a request is partly received, flow
control on writes, and a `close` that leaves no connection or task behind.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List

from ide_protocol.wire import http11
from ide_protocol.server import transport
from ide_wire import Conn, run, until

App = Callable[[http11.Request, bytes, transport.Responder], Awaitable[None]]


def request(target: str, body: bytes = b"", close: bool = False) -> bytes:
    headers = "Host: x\r\nContent-Length: %d\r\n" % len(body)
    if close:
        headers += "Connection: close\r\n"
    return ("POST %s HTTP/1.1\r\n%s\r\n" % (target, headers)).encode() + body


async def serve(tmp_path: Any, app: App, **kw: Any) -> transport.Listener:
    listener = transport.Listener(app, max_body=1 << 20, **kw)
    await listener.start_unix(str(tmp_path))
    return listener


def test_pipelined_requests_are_answered_in_order(tmp_path) -> None:
    async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
        n = int(req.target[1:])
        await asyncio.sleep(0.001 * (n % 3))  # later requests may finish their work first
        await responder.send(200, [], b"%d:%s" % (n, body))

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        count = 3 * transport.MAX_PENDING + 1  # past the limit: reading pauses and resumes
        conn.send_raw(b"".join(request("/%d" % i, b"b%d" % i) for i in range(count)))
        for i in range(count):
            conn.parser.expect("POST")
            reply = await conn.read_reply()
            assert reply.status == 200 and reply.body == b"%d:b%d" % (i, i)
        only, = listener.connections
        assert only.requests == count and not only._reading_paused and only._task is None
        conn.close()
        await until(lambda: not listener.connections, what="connection released")
        await listener.close()
    run(main())


def test_failing_and_unfinished_handlers(tmp_path) -> None:
    async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
        if req.target == "/fail":
            raise ValueError("boom")
        if req.target == "/stream":
            await responder.start(200, [("Content-Type", "text/plain")])
            await responder.chunk(b"part")
            return  # the transport ends the stream
        await responder.send(200, [], b"ok")

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        for target, status, body in (("/fail", 500, b"Internal Server Error"), ("/stream", 200, b"part"),
                                     ("/ok", 200, b"ok")):
            conn.send_raw(request(target), expect="POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.body, reply.complete) == (status, body, True)
        conn.send_raw(request("/ok", close=True), expect="POST")  # PROTOCOL.md §2: then closed
        reply = await conn.read_reply()
        assert reply.headers.get("connection") == "close"
        assert await conn.wait_closed()
        await until(lambda: not listener.connections, what="connection released")
        await listener.close()
    run(main())


def test_a_vanished_peer_cancels_its_handler(tmp_path) -> None:
    cancelled: List[str] = []
    responders: List[transport.Responder] = []

    async def main() -> None:
        entered = asyncio.Event()

        async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
            responders.append(responder)
            if req.target == "/watch":
                await responder.start(200, [])
            entered.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(req.target)
                raise

        listener = await serve(tmp_path, app)
        for vanish in ("abort", "eof"):
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request("/" + vanish))
            await asyncio.wait_for(entered.wait(), 5)
            entered.clear()
            if vanish == "abort":
                conn.abort()
            else:
                conn.writer.write_eof()  # a half-close is a peer gone too
            await until(lambda: cancelled[-1:] == ["/" + vanish], what="handler cancelled")
            await until(lambda: not listener.connections, what="connection released")
            conn.close()
        # Others (a session's stream, PROTOCOL.md §2) learn of it through wait_closed.
        watcher = await Conn.open(listener.socket_path)
        watcher.send_raw(request("/watch"), expect="POST")
        await watcher.read_head()
        assert not responders[-1].closed
        waiting = asyncio.ensure_future(responders[-1].wait_closed())
        watcher.close()
        await asyncio.wait_for(waiting, 5)
        assert responders[-1].closed and cancelled[-1] == "/watch"
        await until(lambda: not listener.connections and not listener._tasks, what="released")
        await listener.close()
    run(main())


def test_request_timer_only_while_a_request_is_partial(tmp_path) -> None:
    async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
        await responder.send(200, [], b"ok")

    async def main() -> None:
        listener = await serve(tmp_path, app, request_timeout=0.3)
        conn = await Conn.open(listener.socket_path)
        await until(lambda: len(listener.connections) == 1, what="connection")
        only, = listener.connections
        assert only._timer is None  # idle: no timer
        whole = request("/a", b"body")
        conn.send_raw(whole[:10])
        await until(lambda: only._timer is not None, what="timer armed")
        conn.send_raw(whole[10:], expect="POST")
        assert (await conn.read_reply()).body == b"ok"
        assert only._timer is None  # complete: disarmed
        await asyncio.sleep(0.5)  # longer than the timeout: an idle connection stays
        conn.send_raw(whole[:-2], expect="POST")
        reply = await conn.read_reply()
        assert reply.status == 408
        assert await conn.wait_closed()
        await until(lambda: not listener.connections, what="connection released")
        await listener.close()
    run(main())


def test_writes_wait_for_a_slow_reader(tmp_path) -> None:
    piece = b"x" * 65536
    results: List[bool] = []

    async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
        await responder.start(200, [])
        for _ in range(64):  # 4 MiB, far past the transport's high-water mark
            results.append(await responder.chunk(piece))
        await responder.end()

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        conn.send_raw(request("/big"), expect="POST")
        await until(lambda: len(listener.connections) == 1 and next(iter(listener.connections))._writing_paused,
                    what="writing paused")
        reply = await conn.read_reply()
        assert reply.complete and len(reply.body) == 64 * len(piece) and all(results)
        conn.close()
        await listener.close()
    run(main())


def test_close_ends_connections_and_tasks(tmp_path) -> None:
    gone: List[str] = []

    async def app(req: http11.Request, body: bytes, responder: transport.Responder) -> None:
        await responder.start(200, [])
        try:
            while True:  # a stream its peer never reads
                if not await responder.chunk(b"y" * 65536):
                    return
        except asyncio.CancelledError:
            gone.append(req.target)
            raise

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conns = []
        for i in range(3):
            conn = await Conn.open(listener.socket_path)
            conn.send_raw(request("/%d" % i))
            conns.append(conn)
        await until(lambda: len(listener._tasks) == 3, what="three handlers running")
        await asyncio.wait_for(listener.close(), 10)
        assert sorted(gone) == ["/0", "/1", "/2"]
        assert listener.connections == set() and listener._tasks == set()
        for conn in conns:
            conn.close()
    run(main())
