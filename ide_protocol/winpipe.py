"""The Windows transport: a named-pipe server `\\\\.\\pipe\\mcp-<uuid>.sock` (PROTOCOL.md §1).

Windows only, and the one place with Windows-only transport code, so that everything
else stays testable on POSIX. Copilot CLI (Node.js) connects to the pipe named in the
lock's `socketPath` exactly as it connects to a Unix socket elsewhere, and speaks the
same HTTP/1.1 over it.

How: asyncio's Proactor loop (the default on Windows since Python 3.8) serves named
pipes with `loop.start_serving_pipe(protocol_factory, address)`. The factory is
`transport.Listener`'s, the same one its Unix socket server uses: each accepted pipe
gets an `HttpConnection` protocol, which does not know which transport it runs on.

Nothing Windows-specific is imported at module level: the module imports, and its
plumbing is tested, on Linux (tests/test_winpipe.py serves a Unix socket through a
loop whose `start_serving_pipe` is faked). **Not tested**: a real named pipe, the
Proactor loop, the pipe's default security descriptor (Windows grants read access to
Everyone on a default-DACL pipe; the nonce still guards every request), and message-
mode reads by the CLI's Node.js client. See docs/EMBEDDING.md, "Not tested on Windows".
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable, List, Optional, Tuple

PIPE_PREFIX = "\\\\.\\pipe\\"


def pipe_name(name: Optional[str] = None) -> str:
    """`\\\\.\\pipe\\mcp-<uuid4>.sock` (PROTOCOL.md §1); a bare name gets the prefix."""
    if name is None:
        name = "mcp-%s.sock" % uuid.uuid4()
    if not name.lower().startswith(PIPE_PREFIX.lower()):
        name = PIPE_PREFIX + name
    return name


class PipeServer:
    """What `transport.Listener` expects of a server: `close()` and `wait_closed()`.

    asyncio's `PipeServer` objects have `close()` only; closing cancels the pending
    accept, and connections already accepted are closed by the Listener itself."""

    def __init__(self, servers: List[Any], address: str) -> None:
        self._servers = list(servers)
        self.address = address

    def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    async def wait_closed(self) -> None:
        await asyncio.sleep(0)  # nothing to await: close() is synchronous for pipes

    @property
    def is_serving(self) -> bool:
        return bool(self._servers)


async def start_pipe_server(protocol_factory: Callable[[], asyncio.BaseProtocol],
                            name: Optional[str] = None) -> Tuple[PipeServer, str]:
    """Serve a new named pipe, one `protocol_factory()` per accepted client; returns
    the server and the pipe's path (the lock's `socketPath`)."""
    loop = asyncio.get_event_loop()
    start_serving_pipe = getattr(loop, "start_serving_pipe", None)
    if start_serving_pipe is None:
        raise RuntimeError("named pipes need asyncio's Proactor event loop (the default on Windows); "
                           "this loop is a %s" % type(loop).__name__)
    address = pipe_name(name)
    servers = await start_serving_pipe(protocol_factory, address)
    if not isinstance(servers, (list, tuple)):
        servers = [servers]
    return PipeServer(list(servers), address), address
