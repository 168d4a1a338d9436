"""What a test needs of the operating system, as skip markers that say why.

The suite runs on Windows too (`make test-windows`, docs/WINDOWS.md), where the server
listens on a named pipe. A test that needs what Windows does not have is marked with
one of these, so that the run lists every such skip with its reason (`-rs`), and a
test without a marker is expected to pass there.
"""
from __future__ import annotations

import os
import signal
import socket
import sys

import pytest

WINDOWS = sys.platform == "win32"

#: The test opens a raw Unix socket (AF_UNIX) itself, or serves one.
unix_sockets = pytest.mark.skipif(
    WINDOWS or not hasattr(socket, "AF_UNIX"),
    reason="needs Unix sockets (AF_UNIX), which Python lacks on Windows; the server listens on a named pipe there")

#: The test sends or handles POSIX signals (SIGUSR1, SIGTERM to a process group, ...).
posix_signals = pytest.mark.skipif(
    WINDOWS or not hasattr(signal, "SIGUSR1"),
    reason="needs POSIX signals; Windows has no SIGUSR1/SIGHUP and os.kill there terminates")

#: The test checks POSIX file modes or owners (0600 locks, 0700 directories, uids).
posix_permissions = pytest.mark.skipif(
    WINDOWS, reason="POSIX file modes and owners; Windows has ACLs, which Python's chmod does not set")

#: The test makes a FIFO (os.mkfifo).
posix_fifos = pytest.mark.skipif(
    WINDOWS or not hasattr(os, "mkfifo"), reason="makes a FIFO (os.mkfifo), which Windows does not have")

#: The test needs a symlink that os.path.realpath follows.
symlinks_followed = pytest.mark.skipif(
    WINDOWS, reason="needs a symlink that realpath follows: Windows lets only an administrator or developer "
                    "mode make one, and Wine 8's realpath does not follow it")

#: The test makes the server's start fail through `socket_dir`, the Unix socket's folder.
socket_folder = pytest.mark.skipif(
    WINDOWS, reason="fails a start through socket_dir, the Unix socket's folder; on Windows the server "
                    "listens on a named pipe, which has no folder (socket_dir is not used)")

#: The test counts the connections of peers that connect, write and are gone at once.
vanishing_peers_counted = pytest.mark.skipif(
    WINDOWS, reason="over a named pipe asyncio's server may never accept a peer that is gone at once "
                    "(seen under Wine: one in four), so the connections this test counts do not come")

#: The test is about socket files: their folder's shape and mode, their unlinking.
socket_files = pytest.mark.skipif(
    WINDOWS, reason="about socket files (a private mcp-* folder, its mode, a dead socket left on disk to remove); "
                    "a named pipe has no file or folder and is gone with its last server handle")

#: The test needs a running process of another user.
other_users = pytest.mark.skipif(
    WINDOWS, reason="needs a process of another user (pid 1, or a child that drops to uid 65534 by setuid); "
                    "Windows has no setuid and Wine runs every process as the one user")

#: The test starts a process in another PID namespace.
pid_namespaces = pytest.mark.skipif(
    WINDOWS, reason="starts a process in another PID namespace (Linux's unshare); Windows has none")

#: The test regenerates docs/WIRE.md, a session recorded with POSIX paths.
wire_doc_on_posix = pytest.mark.skipif(
    WINDOWS, reason="regenerates docs/WIRE.md, whose recorded session has POSIX paths and a Unix socket")


def wire_path(path: str) -> str:
    """An editor's absolute path as `filePath` carries it on this system: PROTOCOL.md §6
    gives the drive letter in lower case on Windows (written here apart from the
    library's rule, so that a test comparing with it checks that rule)."""
    if WINDOWS and path[1:2] == ":":
        return path[0].lower() + path[1:]
    return path


def skip_on_windows(reason: str) -> None:
    """Skip the running test on Windows, with `reason` (for a parameter of a test)."""
    if WINDOWS:
        pytest.skip(reason)
