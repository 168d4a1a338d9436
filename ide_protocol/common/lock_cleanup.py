"""Stale-lock cleanup: remove only what is provably a dead server of ours.

PROTOCOL.md §1 asks a server to remove, on start, the stale locks this implementation
wrote. "Its pid is not alive" alone does not prove a lock stale: a server started in
another PID namespace with the same home (a container, a dev container) has a pid that
looks dead from here while it serves, and a lock planted in the directory can name any
socket. So a lock is stale only when all of these hold:

* it is valid and carries our writer marker (other IDEs' locks are never touched), and
  on POSIX the file belongs to our user;
* its pid is not running here, by the CLI's own test (`lock_rules.pid_running`); but
  for a Windows named pipe the pid is not asked: Windows reuses pids at once (a server
  restarted after a hard kill often gets its predecessor's pid), while a pipe exists
  exactly as long as a server holds it, so a pipe that is not there is proof enough,
  for any lock but those this process wrote itself (`written_here`);
* its socket refuses a connection or is missing. A socket that accepts is a live
  server, whatever its pid says; a probe that times out proves nothing and keeps the
  lock too.

With the lock gone, its socket is removed only when it sits where this project creates
sockets: `<dir>/mcp.sock` in a private `mcp-*` directory (a real directory, not a
symlink, ours, mode 0700), the socket file ours too, and it refuses a connection once
more right before the unlink. The directory is then removed if empty. Nothing else is
deleted: not another program's socket, not a file that is not a socket.
"""
from __future__ import annotations

import os
import stat
from typing import Callable, Iterable, List, Tuple

from . import lock_rules

#: The file name of the socket inside its private directory (server.transport).
SOCKET_NAME = "mcp.sock"
SOCKET_DIR_PREFIX = "mcp-"


def socket_refuses(path: str, timeout: float = 1.0) -> bool:
    """Whether `path` provably has no server: the connection is refused, or nothing
    (or no socket) is there. False when it accepts, and when the probe cannot tell
    (a timeout, a full backlog, no permission)."""
    return lock_rules.probe_socket(path, timeout) == lock_rules.REFUSED


def _owned(st: os.stat_result) -> bool:
    getuid = getattr(os, "getuid", None)
    return getuid is None or st.st_uid == getuid()


def _private_socket_dir(directory: str) -> bool:
    """A directory of the shape `server.sockets.bind_unix` makes: `mcp-*`, real, ours, mode 0700."""
    if not os.path.basename(directory).startswith(SOCKET_DIR_PREFIX):
        return False
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _owned(st) and stat.S_IMODE(st.st_mode) == 0o700


def remove_socket_leftovers(socket_path: str) -> bool:
    """Remove a dead server's socket and its private directory, when both are of the
    shape this project creates (see the module doc); True when the socket went."""
    if lock_rules.is_pipe_path(socket_path) or not os.path.isabs(socket_path):
        return False
    if os.path.basename(socket_path) != SOCKET_NAME:
        return False
    parent = os.path.dirname(socket_path)
    if not _private_socket_dir(parent):
        return False
    try:
        st = os.lstat(socket_path)
    except OSError:
        st = None
    removed = False
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode) or not _owned(st) or not socket_refuses(socket_path):
            return False
        try:
            os.unlink(socket_path)
            removed = True
        except OSError:
            return False
    try:
        os.rmdir(parent)  # only when empty
    except OSError:
        pass
    return removed


def remove_stale_locks(lock_paths: Iterable[str], writer: Tuple[str, str],
                       written_here: Callable[[str], bool] = lambda path: False) -> List[str]:
    """Remove the stale locks among `lock_paths` that carry the writer marker `writer`
    (key, value), see the module doc; return their paths. (`lockfile` names the lock
    files, the marker and `written_here`, the locks this process wrote: this module
    knows nothing of how locks are written.)"""
    removed = []
    key, value = writer
    for path in lock_paths:
        # One read: a lock of ours read while it is rewritten in place (a folder change,
        # PROTOCOL.md §1) is no JSON yet, so it is skipped, never taken for another's.
        raw, problems = lock_rules.read_lock(path, attempts=1)
        if problems or raw is None or raw.get(key) != value:
            continue
        try:
            if not _owned(os.lstat(path)):
                continue
        except OSError:
            continue
        # (Valid by the schema: `pid` a number, `socketPath` a string.)
        pipe_decides = lock_rules.is_pipe_path(raw["socketPath"]) and not written_here(path)
        if lock_rules.pid_running(raw["pid"])[0] and not pipe_decides:
            continue
        socket_path = raw["socketPath"]
        if not socket_refuses(socket_path):
            continue  # it accepts (another PID namespace?) or cannot be told: keep it
        try:
            os.unlink(path)
        except OSError:
            continue  # another process cleaned it up first, or we may not
        removed.append(path)
        remove_socket_leftovers(socket_path)
    return removed
