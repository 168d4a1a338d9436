"""Stale-lock cleanup against a hostile environment: planted locks and other PID namespaces.

A server cleans up its own dead servers' locks on start (PROTOCOL.md §1). These tests
plant locks with our writer marker and a dead pid that name sockets which are alive, or
not ours, and start a real `IdeServer` (or a real `serve` in another PID namespace)
next to them: only a lock whose socket refuses goes, only a socket in a private `mcp-*`
directory of ours goes with it, and a socket that accepts is never unlinked.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from typing import Any, Iterator, List, Tuple

import pytest

import ide_wire
import platforms
from ide_protocol.common import lockfile
from ide_wire import Cli, make_server
from test_serve import REPO, WAIT, Serve, assert_gone

@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not lockfile.pid_alive(proc.pid)
    return proc.pid


@pytest.fixture
def short_dirs() -> Iterator[Any]:
    """Short directories under /tmp (sun_path is ~107 bytes), removed afterwards."""
    made: List[str] = []

    def make(prefix: str, mode: int = 0o700) -> str:
        d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        os.chmod(d, mode)
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def listening_socket(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(8)
    return sock


def dead_socket(path: str) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.close()  # the file stays; connections are refused


def accepts(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def plant(lock_dir: str, socket_path: str, pid: int) -> str:
    info = lockfile.LockInfo.new(socket_path, {"Authorization": "Nonce planted"}, ["/planted"], "Planted", pid=pid)
    return lockfile.write_lock(info, lock_dir)


def start_and_stop(tmp_path: Any) -> Tuple[str, str]:
    """A real IdeServer started (its start cleans stale locks) and stopped."""
    async def main() -> Tuple[str, str]:
        async with make_server(tmp_path) as server:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            cli.close()
            return server.lock_path, server.socket_path

    return ide_wire.run(main())


def test_planted_lock_never_deletes_a_listening_socket(tmp_path: Any, dead_pid: int, short_dirs: Any) -> None:
    """Someone else's listening socket (a held named pipe on Windows), named by a lock
    with our marker and a dead pid; beside it such a lock naming a dead one."""
    if platforms.WINDOWS:
        pipe = ide_wire.HeldPipe()
        other, close, alive = pipe.path, pipe.close, ide_wire.pipe_is_held
        dead = "\\\\.\\pipe\\mcp-planted-%d.sock" % os.getpid()  # nobody holds it
    else:
        other = os.path.join(short_dirs("other-"), "app.sock")
        close, alive = listening_socket(other).close, lambda path: os.path.exists(path) and accepts(path)
        dead = os.path.join(short_dirs("other-"), "app.sock")
        dead_socket(dead)
    try:
        lock = plant(str(tmp_path / "locks"), other, dead_pid)
        gone = plant(str(tmp_path / "locks"), dead, dead_pid)
        start_and_stop(tmp_path)
        assert alive(other)
        assert os.path.exists(lock)  # its socket accepts: not provably stale
        assert not os.path.exists(gone)  # pid dead and socket refusing: stale
    finally:
        close()


@platforms.socket_files
def test_live_server_of_ours_in_another_namespace_is_kept(tmp_path: Any, dead_pid: int, short_dirs: Any) -> None:
    """Exactly the shape we create (`mcp-*/mcp.sock`, 0700) and listening: a live server
    whose pid we cannot see. Neither its lock nor its socket may go."""
    path = os.path.join(short_dirs("mcp-"), "mcp.sock")
    live = listening_socket(path)
    try:
        lock = plant(str(tmp_path / "locks"), path, dead_pid)
        start_and_stop(tmp_path)
        assert os.path.exists(lock) and os.path.exists(path) and accepts(path)
    finally:
        live.close()


@platforms.socket_files
def test_dead_sockets_go_only_from_our_private_directories(tmp_path: Any, dead_pid: int, short_dirs: Any) -> None:
    lock_dir = str(tmp_path / "locks")
    ours_dir = short_dirs("mcp-")
    ours = os.path.join(ours_dir, "mcp.sock")
    foreign = os.path.join(short_dirs("other-"), "app.sock")        # not our directory shape
    shared = os.path.join(short_dirs("mcp-", 0o755), "mcp.sock")     # not private
    renamed = os.path.join(short_dirs("mcp-"), "other.sock")         # not our socket name
    for path in (ours, foreign, shared, renamed):
        dead_socket(path)
    locks = [plant(lock_dir, path, dead_pid) for path in (ours, foreign, shared, renamed)]
    missing = plant(lock_dir, os.path.join(short_dirs("mcp-"), "mcp.sock"), dead_pid)  # socket gone already
    start_and_stop(tmp_path)
    for lock in locks + [missing]:
        assert not os.path.exists(lock), lock  # pid dead and socket refusing: stale
    assert not os.path.exists(ours) and not os.path.exists(ours_dir)
    for kept in (foreign, shared, renamed):
        assert os.path.exists(kept), kept


# -------------------------------------------------------- another PID namespace


def unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    try:
        return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=WAIT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not unshare_works(), reason="unshare -p -f --mount-proc is not permitted here (needs root "
                                                 "or user namespaces)")
@platforms.pid_namespaces  # (the marker nearest the test gives the reason)
def test_serve_in_another_pid_namespace_leaves_a_live_server_alone(tmp_path: Any) -> None:
    """A `serve` in a new PID namespace with the same home sees the outer server's pid
    as dead. Its start-up cleanup must still keep the outer lock and socket, because
    that socket accepts."""
    outer = Serve(tmp_path)
    try:
        env = dict(os.environ)
        env["COPILOT_HOME"] = outer.home
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        inner = subprocess.run(
            ["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c",
             "import os, sys, ide_protocol.common.lockfile as l; "
             "assert not l.pid_alive(%d), 'the outer pid is visible'; "
             "from ide_protocol.programs import serve; sys.exit(serve.main([%r]))" % (outer.proc.pid, outer.folder)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
        assert inner.returncode == 0, inner.stderr.decode(errors="replace")
        assert b"serving " in inner.stdout
        assert os.path.exists(outer.lock_path) and os.path.exists(outer.socket_path)

        async def still_serves() -> None:
            cli = Cli(outer.socket_path, outer.nonce)
            await cli.handshake()
            cli.close()

        ide_wire.run(still_serves())
        outer.send("quit")
        assert outer.wait() == 0
        assert_gone(outer)
    finally:
        outer.kill()
