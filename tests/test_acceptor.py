"""`server.acceptor.Acceptor`, the accept loop of the listener, the relay and the tracer,
over real Unix sockets: a connection accepted as it closes is closed with nothing
printed (asyncio.Server leaves a half-made transport there: CPython gh-109564), the
connections already made outlive it, and a closed acceptor accepts nothing more."""
from __future__ import annotations

import asyncio
import gc
import socket
import sys
from typing import Any, List, Optional

from platforms import unix_sockets

from ide_protocol.server.acceptor import Acceptor, stream_protocols
from ide_protocol.server.sockets import bind_unix, remove_socket_dir

pytestmark = unix_sockets


class Echo(asyncio.Protocol):
    """Sends back what it gets; notes its transport's life in `events`."""

    def __init__(self, events: List[str]) -> None:
        self.events = events

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.events.append("made")

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.events.append("lost")


async def connect(path: str) -> "tuple[asyncio.StreamReader, asyncio.StreamWriter]":
    return await asyncio.wait_for(asyncio.open_unix_connection(path), 10)


def test_a_connection_accepted_as_the_acceptor_closes_is_closed_and_nothing_is_printed(tmp_path: Any) -> None:
    """The protocol factory runs in the window between accept() and a made transport;
    closing there is what a relay stopped by SIGTERM while the CLI connects does. The
    client sees the end of the stream; nothing reaches sys.unraisablehook, even once
    the garbage is collected."""
    unraisable: List[Any] = []
    previous = sys.unraisablehook
    sys.unraisablehook = unraisable.append

    async def main() -> None:
        sock, sock_dir, path = bind_unix(str(tmp_path))
        events: List[str] = []
        closing: List["asyncio.Future[None]"] = []

        def protocol() -> asyncio.Protocol:
            closing.append(asyncio.ensure_future(acceptor.close()))
            return Echo(events)

        acceptor = Acceptor(sock, protocol)
        acceptor.start()
        try:
            reader, writer = await connect(path)
            assert await asyncio.wait_for(reader.read(), 10) == b""   # closed by the acceptor
            writer.close()
            await asyncio.wait_for(closing[0], 10)
            assert acceptor.sock is None and events in ([], ["made", "lost"]), events
        finally:
            await acceptor.close()
            remove_socket_dir(sock_dir)

    try:
        asyncio.run(main())
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert unraisable == [], [(u.exc_type, u.exc_value, u.object) for u in unraisable]


def test_connections_made_outlive_the_acceptor_and_no_new_one_is_accepted(tmp_path: Any) -> None:
    """The transports belong to their protocols: closing the acceptor leaves them
    serving. Its socket is closed: the next client is refused."""
    async def main() -> None:
        sock, sock_dir, path = bind_unix(str(tmp_path))
        events: List[str] = []
        acceptor = Acceptor(sock, lambda: Echo(events))
        acceptor.start()
        try:
            reader, writer = await connect(path)
            writer.write(b"one")
            assert await asyncio.wait_for(reader.readexactly(3), 10) == b"one"
            await acceptor.close()
            writer.write(b"two")
            assert await asyncio.wait_for(reader.readexactly(3), 10) == b"two"
            refused = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                try:
                    refused.connect(path)
                except ConnectionRefusedError:
                    pass
                else:
                    raise AssertionError("a closed acceptor's socket took a connection")
            finally:
                refused.close()
            writer.close()
            await asyncio.sleep(0.1)
            assert events == ["made", "lost"]
        finally:
            await acceptor.close()
            remove_socket_dir(sock_dir)

    asyncio.run(main())


def test_stream_protocols_hands_each_connection_a_reader_and_writer(tmp_path: Any) -> None:
    """What asyncio.start_unix_server would hand its callback, the reader's buffer
    bounded by the given limit (a longer line is refused)."""
    async def main() -> None:
        sock, sock_dir, path = bind_unix(str(tmp_path))

        async def upper(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                writer.write((await reader.readline()).upper())
            except ValueError:
                writer.write(b"too long\n")
            await writer.drain()
            writer.close()

        acceptor = Acceptor(sock, stream_protocols(upper, limit=1234))
        acceptor.start()
        try:
            for line, answer in ((b"hello\n", b"HELLO\n"), (b"x" * 2000 + b"\n", b"too long\n")):
                reader, writer = await connect(path)
                writer.write(line)
                assert await asyncio.wait_for(reader.read(), 10) == answer
                writer.close()
        finally:
            await acceptor.close()
            remove_socket_dir(sock_dir)

    asyncio.run(main())
