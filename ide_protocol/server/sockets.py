"""The Unix socket file of a server (PROTOCOL.md §1): a fresh 0700 directory, the socket
in it with mode 0600, the path within the length the OS allows; and a bounded wait for
a closed asyncio server (a Windows named pipe's). Shared by the IDE server's
`listener`, the relay and the tracer."""
from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any, Optional, Tuple

__all__ = ["SUN_PATH_MAX", "bind_unix", "check_sun_path", "remove_socket_dir", "wait_server_closed"]

# `tempfile` and `shutil` are imported where a socket is made or removed, not with this
# module: an editor imports the server on its own thread, and the start (with them)
# may run on the server's thread (`ThreadedIdeServer.start(wait=False)`).


async def wait_server_closed(server: Any, timeout: float = 5.0) -> None:
    """Wait, bounded, for a closed asyncio server to finish (3.12+ waits for its
    connections too: the caller must have dropped them first)."""
    try:
        await asyncio.wait_for(server.wait_closed(), timeout)
    except (asyncio.TimeoutError, Exception):
        pass


SUN_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107


def check_sun_path(path: str) -> None:
    """Unix socket paths are limited (107 bytes on Linux, 103 on macOS; PROTOCOL.md §1)."""
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ValueError("socket path %r is %d bytes, longer than the %d the OS allows for a Unix "
                         "socket; choose a shorter socket directory" % (path, size, SUN_PATH_MAX))


#: Connections the kernel holds for us before we accept them. asyncio's default (100)
#: is soon reached when many clients connect at once, and a Unix socket's client then
#: fails at once (EAGAIN; Node's and asyncio's clients report it as an error) instead
#: of waiting its turn. The kernel caps it (Linux: net.core.somaxconn).
LISTEN_BACKLOG = 4096


def bind_unix(directory: Optional[str] = None) -> Tuple[socket.socket, str, str]:
    """A listening, non-blocking Unix socket on `<fresh 0700 dir>/mcp.sock`, socket mode
    0600 (PROTOCOL.md §1); returns (socket, socket directory, socket path). The
    directory is removed again if binding fails."""
    if sys.platform == "win32":  # (Windows serves a named pipe: `common.winpipe`)
        raise OSError("Unix sockets are not served on Windows")
    import tempfile
    parent = directory if directory is not None else tempfile.gettempdir()
    if directory is None and len(os.fsencode(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))) > SUN_PATH_MAX:
        parent = "/tmp"  # e.g. a long $TMPDIR on macOS
    check_sun_path(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))
    sock_dir = tempfile.mkdtemp(prefix="mcp-", dir=parent)  # mkdtemp creates it 0700
    path = os.path.join(sock_dir, "mcp.sock")
    sock = None
    try:
        check_sun_path(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        if sock is not None:
            sock.close()
        remove_socket_dir(sock_dir)
        raise
    return sock, sock_dir, path


def remove_socket_dir(sock_dir: str) -> None:
    """Remove a directory `bind_unix` made, with what is in it (the socket)."""
    import shutil
    shutil.rmtree(sock_dir, ignore_errors=True)
