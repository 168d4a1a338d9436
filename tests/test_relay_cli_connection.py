"""The relay's CLI half, one connection, in process: a real socket on the CLI's side, a
real link (two `Link`s over a socket pair) to a stand-in for the IDE's half that reads
the requests the relay forwards and answers as a test tells it. What the CLI's peer
does to the relay (pipelining, vanishing, sending after `Connection: close`) and what the
IDE does to it (interim answers, an answer that never comes) is seen from both ends."""
from __future__ import annotations

import asyncio
import socket
from typing import Any, Awaitable, Callable, List, Optional

import pytest

from ide_protocol.relay.http_relay import serve_cli_connection
from ide_protocol.relay.link import Link, Stream
from ide_protocol.relay.pathmap import PathMap
from ide_protocol.relay.rewrite import Rewriter
from ide_protocol.wire import http11

from platforms import unix_sockets

pytestmark = unix_sockets
LIMIT = 30  # a guard against hangs only
NONCE = "relay-nonce"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def request(close: bool = False) -> bytes:
    return (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Nonce %s\r\n%s"
            b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            % (NONCE.encode(), b"Connection: close\r\n" if close else b""))


class Ide:
    """The IDE's end of the link: each stream the relay opens, its requests read (as the
    relay re-framed them) and answered by `answer(ide, stream, n)` for the n-th one."""

    def __init__(self, answer: Callable[["Ide", Stream, int], Awaitable[None]]) -> None:
        self.answer = answer
        self.requests: List[http11.Request] = []
        self.ended = asyncio.Event()  # the relay ended the stream (its CLI connection is over)

    async def on_open(self, stream: Stream) -> None:
        parser = http11.RequestParser()
        while True:
            data = await stream.read()
            if not data:
                self.ended.set()
                return
            for event in parser.feed(data):
                if isinstance(event, http11.Request):
                    self.requests.append(event)
                    await self.answer(self, stream, len(self.requests))


async def relay(ide: Ide, request_timeout: float = LIMIT) -> Any:
    """The relay's CLI half serving one connection, its far end the `ide`; returns the
    CLI's reader and writer, and the relay's task."""
    a, b = socket.socketpair()
    near = Link(*await asyncio.open_connection(sock=a))
    far = Link(*await asyncio.open_connection(sock=b), on_open=ide.on_open)
    runners = [asyncio.ensure_future(near.run()), asyncio.ensure_future(far.run())]
    cli_end, relay_end = socket.socketpair(socket.AF_UNIX)
    reader, writer = await asyncio.open_unix_connection(sock=relay_end)
    task = asyncio.ensure_future(serve_cli_connection(reader, writer, near.open_stream(), Rewriter(PathMap([])),
                                                      NONCE, request_timeout=request_timeout))
    cli = await asyncio.open_unix_connection(sock=cli_end)
    return cli, task, runners


async def never(ide: Ide, stream: Stream, n: int) -> None:
    """An IDE whose answer never comes (a person never decides an open_diff)."""


async def until(predicate: Callable[[], Any], what: str) -> None:
    for _ in range(LIMIT * 20):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


@pytest.mark.parametrize("pipelined", [1, 9, 40])
def test_a_cli_peer_that_goes_while_the_ides_answer_never_comes_ends_the_ides_stream(pipelined: int) -> None:
    """The peer sends its requests (one, or pipelined past the cap of what may wait) and
    goes while the IDE holds the first: the relay sees it go and ends the stream, so the
    IDE's server sees its connection close (an open_diff answered client_disconnected).
    Pipelined past the cap, the relay stopped reading and never saw the peer go: the
    stream, and the IDE's request, were held until the IDE answered."""
    async def scenario() -> None:
        ide = Ide(never)
        (reader, writer), task, runners = await relay(ide)
        writer.write(request() * pipelined)
        await until(lambda: ide.requests, "the first request at the IDE")
        writer.close()
        await asyncio.wait_for(ide.ended.wait(), LIMIT)
        await asyncio.wait_for(task, LIMIT)
        assert len(ide.requests) == 1  # (the others waited their turn, which never came)
        for runner in runners:
            runner.cancel()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))


async def read_answers(reader: asyncio.StreamReader, methods: List[str]) -> List[Any]:
    """The events of what the relay wrote to the CLI, until it closed the connection or
    went quiet (a second: the guard of a test whose relay keeps the connection open)."""
    parser = http11.ResponseParser()
    for method in methods:
        parser.expect(method)
    events: List[Any] = []
    while True:
        try:
            data = await asyncio.wait_for(reader.read(65536), 1.0)
        except asyncio.TimeoutError:
            return events + ["open"]
        events += parser.feed(data) if data else parser.feed_eof()
        if not data:
            return events


def statuses(events: List[Any]) -> List[Any]:
    return [e.status if isinstance(e, http11.Response) else e for e in events
            if isinstance(e, (http11.Response, str, http11.ConnectionClosed))]


def test_interim_answers_of_the_ide_are_not_passed_on_and_the_real_one_is() -> None:
    async def answer(ide: Ide, stream: Stream, n: int) -> None:
        await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        await stream.send(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\nContent-Type: text/event-stream\r\n\r\n" + OK)

    async def scenario() -> None:
        (reader, writer), task, runners = await relay(Ide(answer))
        writer.write(request() * 2)
        assert statuses(await read_answers(reader, ["POST", "POST"])) == [200, 200, "open"]
        writer.close()
        await asyncio.wait_for(task, LIMIT)
        for runner in runners:
            runner.cancel()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))


def test_what_the_cli_sends_after_connection_close_is_not_forwarded() -> None:
    async def answer(ide: Ide, stream: Stream, n: int) -> None:
        await stream.send(OK)

    async def scenario() -> None:
        ide = Ide(answer)
        (reader, writer), task, runners = await relay(ide)
        writer.write(request(close=True) + request() + b"and then anything at all")
        events = await read_answers(reader, ["POST"])
        assert statuses(events) == [200, http11.ConnectionClosed()]
        assert not events[0].keep_alive
        await asyncio.wait_for(task, LIMIT)
        assert len(ide.requests) == 1 and not ide.requests[0].keep_alive
        for runner in runners:
            runner.cancel()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))


def test_each_request_has_a_deadline_of_its_own() -> None:
    """A peer that pipelines steadily sends the rest of one request with the start of the
    next, so some request is always partly here: each must arrive in whole within the
    deadline from its own first byte. The relay kept the first one's deadline over all
    of them (408 half a second in), where it had given each its own before."""
    async def answer(ide: Ide, stream: Stream, n: int) -> None:
        await stream.send(OK)

    async def scenario() -> None:
        ide = Ide(answer)
        (reader, writer), task, runners = await relay(ide, request_timeout=0.5)
        count, one = 12, request()
        half = len(one) // 2
        stream = one * count
        writer.write(stream[:half])
        for i in range(count):  # the rest of request i with the first half of request i+1
            await asyncio.sleep(0.1)
            writer.write(stream[len(one) * i + half:len(one) * (i + 1) + half])
        events = await read_answers(reader, ["POST"] * count)
        assert statuses(events) == [200] * count + ["open"]
        writer.close()
        await asyncio.wait_for(task, LIMIT)
        for runner in runners:
            runner.cancel()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))
