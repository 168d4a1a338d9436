"""The Windows transport: a named-pipe server `\\\\.\\pipe\\mcp-<uuid>.sock` (PROTOCOL.md §1).

Windows only, and the one place with Windows-only code (the pipe server, the client's
pipe connection, the pid liveness check), so that everything else stays testable on
POSIX. Copilot CLI (Node.js) connects to the pipe named in the
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


async def open_pipe_connection(path: str, limit: int = 2 ** 20) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The client side: connect to an IDE's named pipe as streams (Proactor loop only)."""
    loop = asyncio.get_event_loop()
    connect = getattr(loop, "create_pipe_connection", None)
    if connect is None:
        raise OSError("named pipes need the Proactor event loop (Windows)")
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await connect(lambda: protocol, path)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def pid_alive(pid: int) -> bool:
    """Windows liveness check through ``OpenProcess``/``GetExitCodeProcess``.

    ``os.kill`` must not be used on Windows: there it *terminates* the process. Any
    failure of ctypes itself answers "alive", the safe side both for stale cleanup
    (keep the lock) and for discovery (the socket check follows).
    """
    try:
        import ctypes
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        kernel32.OpenProcess.restype = wintypes.HANDLE
        kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        kernel32.GetExitCodeProcess.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
        kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
        process_query_limited_information = 0x1000
        error_access_denied = 5
        still_active = 259
        handle = kernel32.OpenProcess(process_query_limited_information, False, pid)
        if not handle:
            # Access denied: it exists but belongs to someone else. Otherwise: gone.
            return ctypes.get_last_error() == error_access_denied  # type: ignore[attr-defined]
        try:
            code = wintypes.DWORD()
            if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
                return True
            return code.value == still_active
        finally:
            kernel32.CloseHandle(handle)
    except Exception:
        return True
