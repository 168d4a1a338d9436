"""The Windows transport: a named-pipe server `\\\\.\\pipe\\mcp-<uuid>.sock` (PROTOCOL.md §1).

Windows only, and the one place with Windows-only code (the pipe server, the client's
pipe connection, the pid liveness check; kernel32 itself is loaded by `win32`), so that everything else stays testable on
POSIX. Copilot CLI (Node.js) connects to the pipe named in the
lock's `socketPath` exactly as it connects to a Unix socket elsewhere, and speaks the
same HTTP/1.1 over it.

How: asyncio's Proactor loop (the default on Windows since Python 3.8) serves named
pipes with `loop.start_serving_pipe(protocol_factory, address)`. The factory is
`transport.Listener`'s, the same one its Unix socket server uses: each accepted pipe
gets an `HttpConnection` protocol, which does not know which transport it runs on.

Nothing Windows-specific is imported at module level: the module imports, and its
plumbing is tested, on Linux too (tests/test_winpipe.py serves a Unix socket through a
loop whose `start_serving_pipe` is faked). Under a Windows CPython (`make
test-windows`, docs/WINDOWS.md) the suite runs over real named pipes on the Proactor
loop. **Not tested**: the pipe's default security descriptor (Windows grants read
access to Everyone on a default-DACL pipe; the nonce still guards every request), and
the real CLI's Node.js client on a pipe (see docs/WINDOWS.md).
"""
from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, Callable, List, Optional, Tuple

from . import win32

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


#: Windows error codes met below.
ERROR_ACCESS_DENIED = 5
ERROR_INVALID_PARAMETER = 87
ERROR_PIPE_BUSY = 231


def probe_pipe(path: str) -> Tuple[Optional[bool], str]:
    """Whether a server holds the named pipe `path`: ``(True, "")``, ``(False, why)``
    when provably nobody does, ``(None, why)`` when it cannot be told.

    A named pipe exists exactly as long as a server holds one of its instances open:
    no such pipe is proof that nobody serves it (PROTOCOL.md §1). ``os.stat`` opens
    the pipe as a client would and closes it at once, the CLI's empty probe connection.
    Every instance busy means a server is there (the CLI's libuv waits for a free
    one); any other error (access denied by the pipe's DACL...) cannot tell. Off
    Windows nothing can tell (a lock folder shared with Windows, as from WSL, holds
    the locks of Windows IDEs): so such a lock is never taken for stale there."""
    if os.name != "nt":
        return None, "a Windows named pipe: only Windows can tell whether it is served"
    try:
        os.stat(path)
    except FileNotFoundError:
        return False, "no such named pipe"
    except OSError as exc:
        if getattr(exc, "winerror", None) == ERROR_PIPE_BUSY:
            return True, ""
        return None, exc.strerror or str(exc)
    except ValueError as exc:  # a NUL byte: no pipe can have that name
        return False, str(exc)
    return True, ""


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs, as the CLI's ``process.kill(pid, 0)`` sees it on
    Windows (PROTOCOL.md §1).

    ``os.kill`` must not be used on Windows: there it *terminates* the process. Node's
    ``kill`` is libuv's ``uv_kill``: pid 0 means the calling process itself (always
    running); any other pid is opened with ``OpenProcess(PROCESS_TERMINATE |
    PROCESS_QUERY_INFORMATION | SYNCHRONIZE)``, and every failure (no such process, a
    negative pid, access denied) is an error, so "not running" for the CLI; an open
    process runs while its exit code is ``STILL_ACTIVE`` and its handle is not
    signalled. A failure of ctypes itself answers "alive", the safe side for stale
    cleanup (which probes the pipe as well).
    """
    if pid == 0:
        return True
    try:
        import ctypes
        from ctypes import wintypes

        kernel32 = win32.kernel32()
        process_terminate, process_query_information, synchronize = 0x0001, 0x0400, 0x00100000
        still_active = 259
        wait_timeout = 0x102
    except Exception:
        return True
    # A negative pid becomes a DWORD no process has, as in libuv's C call.
    handle = kernel32.OpenProcess(process_terminate | process_query_information | synchronize, False,
                                  pid & 0xFFFFFFFF)
    if not handle:
        return False
    try:
        code = wintypes.DWORD()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)) or code.value != still_active:
            return False
        return bool(kernel32.WaitForSingleObject(handle, 0) == wait_timeout)
    finally:
        kernel32.CloseHandle(handle)
