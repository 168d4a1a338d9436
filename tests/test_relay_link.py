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


def test_a_silent_other_half_is_declared_dead_and_a_live_idle_one_is_not() -> None:
    """An idle link whose other half answers every PING lives for many timeouts. When
    that half stops answering (its socket left open, as a stopped process leaves its
    pipe), the link is declared dead after about its timeout and its streams end with
    the reason."""
    async def scenario() -> None:
        a, b = socket.socketpair()
        ra, wa = await asyncio.open_connection(sock=a)
        rb, wb = await asyncio.open_connection(sock=b)
        answering = [True]
        pings: List[bytes] = []

        async def other_half() -> None:   # the format by hand: greets, answers while told to
            wb.write(frames.MAGIC)
            parser = frames.LinkParser()
            while True:
                data = await rb.read(65536)
                for event in parser.feed(data):
                    if isinstance(event, frames.Ping) and answering[0]:
                        pings.append(event.payload)
                        wb.write(frames.encode_pong(event.payload))
                if not data:
                    return

        other = asyncio.ensure_future(other_half())
        near = Link(ra, wa, timeout=0.6)
        runner = asyncio.ensure_future(near.run())
        await asyncio.sleep(2.0)
        assert not runner.done() and len(pings) >= 10
        stream = near.open_stream()
        answering[0] = False
        reason = await asyncio.wait_for(runner, 10)
        assert reason == "the link died: nothing from the other half for 0.6 s (it stalled, or the connection was lost)"
        assert stream.closed and stream.end_reason == reason
        assert await stream.read() == b""
        other.cancel()
        b.close()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_an_other_half_that_never_greets_is_given_up() -> None:
    async def scenario() -> str:
        a, b = socket.socketpair()
        ra, wa = await asyncio.open_connection(sock=a)
        try:
            return await Link(ra, wa, timeout=0.3).run()
        finally:
            b.close()

    reason = asyncio.run(asyncio.wait_for(scenario(), LIMIT))
    assert reason.startswith("the link died: ") and reason.endswith("(it never started)")


def test_close_ends_the_link_at_once_even_with_the_other_half_stalled() -> None:
    async def scenario() -> str:
        a, b = socket.socketpair()   # (b: a half that never reads nor writes)
        ra, wa = await asyncio.open_connection(sock=a)
        link = Link(ra, wa)
        runner = asyncio.ensure_future(link.run())
        await asyncio.sleep(0.1)
        link.close("stopped by SIGTERM")
        try:
            return await asyncio.wait_for(runner, 10)
        finally:
            b.close()

    assert asyncio.run(asyncio.wait_for(scenario(), LIMIT)) == "stopped by SIGTERM"


def test_streams_past_max_streams_are_closed_at_once_and_room_comes_back() -> None:
    async def scenario() -> None:
        served: List[Stream] = []

        async def on_open(stream: Stream) -> None:
            served.append(stream)
            while await stream.read():
                pass
            stream.close()

        a, b = socket.socketpair()
        ra, wa = await asyncio.open_connection(sock=a)
        rb, wb = await asyncio.open_connection(sock=b)
        near, far = Link(ra, wa), Link(rb, wb, on_open=on_open, max_streams=2)
        runners = [asyncio.ensure_future(near.run()), asyncio.ensure_future(far.run())]
        first, second, third = near.open_stream(), near.open_stream(), near.open_stream()
        assert await asyncio.wait_for(third.read(), 10) == b""   # refused: closed at once
        assert third.closed and third.end_reason is None and far.refused == 1
        assert not first.closed and not second.closed and len(served) == 2
        first.close()
        await asyncio.wait_for(first.read(), 10)
        while len(far.streams) > 1:
            await asyncio.sleep(0.01)
        fourth = near.open_stream()
        await fourth.send(b"hello")
        while len(served) < 3:
            await asyncio.sleep(0.01)
        assert not fourth.closed and far.refused == 1
        near.close("done")
        await asyncio.gather(*runners)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))
