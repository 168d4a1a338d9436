"""The link on asyncio: two Links joined by a real socket pair; a stream whose reader
is stuck holds back only itself."""
from __future__ import annotations

import asyncio
import socket
from typing import Any, List, Optional

from ide_protocol.relay import frames
from ide_protocol.relay.link import Link, Stream

LIMIT = 30


async def joined(on_open: Any, on_lock: Any = None) -> Any:
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    rb, wb = await asyncio.open_connection(sock=b)
    near = Link(ra, wa, on_lock=on_lock)
    far = Link(rb, wb, on_open=on_open)
    return near, far


def test_a_stuck_stream_never_blocks_another_and_its_sender_waits_for_credit() -> None:
    opened: List[Stream] = []

    async def scenario() -> None:
        stuck_sender_done = asyncio.Event()

        async def on_open(stream: Stream) -> None:
            opened.append(stream)
            if len(opened) == 1:
                await asyncio.Event().wait()  # never reads: the stuck consumer
            while True:  # an echo
                data = await stream.read()
                if not data:
                    return
                await stream.send(data)

        near, far = await joined(on_open)
        runners = [asyncio.ensure_future(near.run()), asyncio.ensure_future(far.run())]
        stuck = near.open_stream()
        big = b"x" * (4 * frames.INITIAL_WINDOW)

        async def send_big() -> None:
            await stuck.send(big)
            stuck_sender_done.set()

        sending = asyncio.ensure_future(send_big())
        lively = near.open_stream()
        for i in range(20):
            message = b"ping %d" % i
            await lively.send(message)
            got = b""
            while len(got) < len(message):
                got += await lively.read()
            assert got == message
        assert not stuck_sender_done.is_set()  # still waiting for credit
        assert stuck._window <= 0
        sending.cancel()
        near._writer.close()
        reasons = await asyncio.gather(*runners)
        assert all(isinstance(r, str) for r in reasons)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_lock_news_and_close_cross_the_link() -> None:
    news: List[Optional[dict]] = []

    async def scenario() -> None:
        closed = asyncio.Event()

        async def on_open(stream: Stream) -> None:
            assert await stream.read() == b""
            closed.set()

        near, far = await joined(on_open, news.append)
        runners = [asyncio.ensure_future(near.run()), asyncio.ensure_future(far.run())]
        far.announce({"ideName": "X", "workspaceFolders": ["/w"]})
        far.announce(None)
        stream = near.open_stream()
        stream.close()
        await closed.wait()
        while len(news) < 2:
            await asyncio.sleep(0.01)
        far._writer.close()
        await asyncio.gather(*runners)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))
    assert news == [{"ideName": "X", "workspaceFolders": ["/w"]}, None]
