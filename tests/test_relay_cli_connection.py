"""The relay's CLI half, one connection, in process: a real socket on the CLI's side, a
real link (two `Link`s over a socket pair) to a stand-in for the IDE's half that reads
the requests the relay forwards and answers as a test tells it. What the CLI's peer
does to the relay (pipelining, vanishing) and what the IDE does to it (interim answers,
answers nobody asked for, an answer that never comes) is seen from both ends."""
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


async def relay(ide: Ide) -> Any:
    """The relay's CLI half serving one connection, its far end the `ide`; returns the
    CLI's reader and writer, and the relay's task."""
    a, b = socket.socketpair()
    near = Link(*await asyncio.open_connection(sock=a))
    far = Link(*await asyncio.open_connection(sock=b), on_open=ide.on_open)
    runners = [asyncio.ensure_future(near.run()), asyncio.ensure_future(far.run())]
    cli_end, relay_end = socket.socketpair(socket.AF_UNIX)
    reader, writer = await asyncio.open_unix_connection(sock=relay_end)
    task = asyncio.ensure_future(serve_cli_connection(reader, writer, near.open_stream(), Rewriter(PathMap([])),
                                                      NONCE, request_timeout=LIMIT))
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
