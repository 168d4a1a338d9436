"""The server's lock file and socket (PROTOCOL.md §1), through IdeServer."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, List

import pytest

from ide_protocol.common import lockfile
from ide_protocol.common.lockfile import LockInfo, pid_alive, write_lock
from ide_protocol.server.ide_server import IdeServer
from ide_wire import cli_for, run

import platforms

UUID_LOCK = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.lock$")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    return proc.pid


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@platforms.posix_permissions
def test_lock_content_types_modes_and_removal(tmp_path) -> None:
    real = tmp_path / "real project"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    lock_dir = str(tmp_path / "copilot" / "ide")

    async def main() -> None:
        server = IdeServer([str(link)], ide_name="Test IDE", lock_dir=lock_dir)
        await server.start()
        try:
            assert os.listdir(lock_dir) == [os.path.basename(server.lock_path)]
            assert UUID_LOCK.match(os.path.basename(server.lock_path))
            assert _mode(lock_dir) == 0o700
            assert _mode(server.lock_path) == 0o600
            with open(server.lock_path, "rb") as f:
                raw = f.read()
            data = json.loads(raw.decode("utf-8"))
            expected_types = {"socketPath": str, "scheme": str, "headers": dict, "pid": int, "ideName": str,
                              "timestamp": int, "workspaceFolders": list, "isTrusted": bool}
            for key, kind in expected_types.items():
                assert type(data[key]) is kind, key
            assert data["socketPath"] == server.socket_path
            assert data["scheme"] == "unix"
            assert data["headers"] == {"Authorization": "Nonce " + server.nonce}
            assert len(server.nonce) >= 32  # >= 128 bits of hex
            assert data["pid"] == os.getpid()
            assert data["ideName"] == "Test IDE"
            assert data["timestamp"] > 10 ** 12  # milliseconds, not seconds
            assert data["workspaceFolders"] == [os.path.realpath(str(real)), os.path.abspath(str(link))]
            assert data["isTrusted"] is False
            # The socket: a fresh private directory, socket 0600, inside sun_path.
            sock_dir = os.path.dirname(server.socket_path)
            assert os.path.basename(sock_dir).startswith("mcp-")
            assert _mode(sock_dir) == 0o700
            assert stat.S_ISSOCK(os.stat(server.socket_path).st_mode)
            assert _mode(server.socket_path) == 0o600
            assert len(os.fsencode(server.socket_path)) <= 107
            # The lock's nonce is what the server checks.
            cli = cli_for(server)
            await cli.handshake(probes=2)
            cli.close()
        finally:
            lock, sock_dir = server.lock_path, os.path.dirname(server.socket_path)
            await server.stop()
        assert not os.path.exists(lock)
        assert os.listdir(lock_dir) == []
        assert not os.path.exists(sock_dir)
    run(main())


def test_trusted_flag_and_new_nonce_per_server(tmp_path) -> None:
    async def main() -> None:
        nonces = []
        for trusted in (True, False):
            async with IdeServer([str(tmp_path)], is_trusted=trusted, lock_dir=str(tmp_path / "locks")) as server:
                with open(server.lock_path) as f:
                    assert json.load(f)["isTrusted"] is trusted
                nonces.append(server.nonce)
        assert nonces[0] != nonces[1]
    run(main())


def test_lock_written_only_after_the_socket_listens(tmp_path, monkeypatch) -> None:
    seen: List[Any] = []
    real_write = lockfile.write_lock

    def spy(info: LockInfo, directory: Any = None) -> str:
        seen.append(lockfile.socket_reachable(info.socket_path))
        return real_write(info, directory)

    monkeypatch.setattr(lockfile, "write_lock", spy)

    async def main() -> None:
        async with IdeServer([str(tmp_path)], lock_dir=str(tmp_path / "locks")) as server:
            assert server.lock_path
    run(main())
    assert seen == [True]


def test_atomic_write_leaves_only_the_lock(tmp_path) -> None:
    async def main() -> None:
        d = str(tmp_path / "locks")
        async with IdeServer([str(tmp_path)], lock_dir=d) as server:
            # No temp file left behind, and every *.lock file is complete JSON.
            assert os.listdir(d) == [os.path.basename(server.lock_path)]
            server.set_workspace_folders([str(tmp_path / "other")])
            names = os.listdir(d)
            assert names == [os.path.basename(server.lock_path)]
            with open(server.lock_path) as f:
                assert json.load(f)["workspaceFolders"] == [os.path.realpath(str(tmp_path / "other"))]
        assert os.listdir(d) == []
    run(main())


def test_workspace_change_rewrites_the_lock_in_place(tmp_path) -> None:
    """PROTOCOL.md §1, "Changing folders": the same lock file (name and inode), never a
    new one with the old deleted (the CLI connected through it would disconnect); the
    socket, the nonce and the timestamp stay (VS Code keeps its lock's timestamp)."""
    async def main() -> None:
        d = str(tmp_path / "locks")
        async with IdeServer([str(tmp_path)], lock_dir=d) as server:
            first = server.lock_path
            assert first
            before, raw = os.stat(first), json.load(open(first))
            server.set_workspace_folders([str(tmp_path / "a"), str(tmp_path / "b")])
            assert server.lock_path == first and os.listdir(d) == [os.path.basename(first)]
            after = os.stat(first)
            assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
            now = json.load(open(first))
            assert now["workspaceFolders"] == [os.path.realpath(str(tmp_path / f)) for f in ("a", "b")]
            for key in ("socketPath", "headers", "timestamp", "pid"):
                assert now[key] == raw[key], key
            if os.name != "nt":
                assert _mode(first) == 0o600
        assert os.listdir(d) == []
    run(main())


def test_a_restarted_server_writes_a_lock_of_its_own(tmp_path) -> None:
    """A stop and a start: a new lock with a new timestamp (a new run), not the last one's."""
    async def main() -> None:
        d = str(tmp_path / "locks")
        server = IdeServer([str(tmp_path)], lock_dir=d)
        await server.start()
        first, stamp = server.lock_path, json.load(open(server.lock_path))["timestamp"]
        await server.stop()
        await asyncio.sleep(0.01)
        await server.start()
        try:
            assert server.lock_path != first and json.load(open(server.lock_path))["timestamp"] > stamp
        finally:
            await server.stop()
    run(main())


@platforms.unix_sockets
def test_stale_locks_cleaned_foreign_untouched(tmp_path, dead_pid: int) -> None:
    d = str(tmp_path / "locks")
    os.makedirs(d, mode=0o700)
    stale_dir = tempfile.mkdtemp(prefix="mcp-")
    stale_sock = os.path.join(stale_dir, "mcp.sock")
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(stale_sock)  # a crashed server's socket file
    leftover.close()
    ours_dead = write_lock(LockInfo.new(stale_sock, {"Authorization": "Nonce x"}, [str(tmp_path)], "old",
                                        pid=dead_pid), d)
    ours_alive = write_lock(LockInfo.new("/tmp/none/mcp.sock", {"Authorization": "Nonce y"}, [str(tmp_path)],
                                         "alive", pid=os.getpid()), d)
    foreign = os.path.join(d, "foreign.lock")
    with open(foreign, "w") as f:
        json.dump({"socketPath": "/tmp/x.sock", "scheme": "unix", "headers": {}, "pid": dead_pid,
                   "ideName": "VS Code", "timestamp": 1, "workspaceFolders": [], "isTrusted": False}, f)
    junk = os.path.join(d, "junk.lock")
    with open(junk, "w") as f:
        f.write("{not json")

    async def main() -> None:
        async with IdeServer([str(tmp_path)], lock_dir=d) as server:
            names = set(os.listdir(d))
            assert os.path.basename(ours_dead) not in names
            assert {os.path.basename(ours_alive), "foreign.lock", "junk.lock",
                    os.path.basename(server.lock_path)} == names
    try:
        run(main())
        assert not os.path.exists(stale_dir)  # the dead server's socket directory too
    finally:
        import shutil
        shutil.rmtree(stale_dir, ignore_errors=True)


@platforms.unix_sockets
def test_too_long_socket_path_is_a_clear_error(tmp_path) -> None:
    long_dir = tmp_path / ("d" * 120)
    long_dir.mkdir()
    locks = str(tmp_path / "locks")

    async def main() -> None:
        server = IdeServer([str(tmp_path)], lock_dir=locks, socket_dir=str(long_dir))
        with pytest.raises(ValueError) as info:
            await server.start()
        message = str(info.value)
        assert "socket" in message and ("107" in message or "103" in message)
        assert not server.started
    run(main())
    assert os.listdir(str(long_dir)) == []  # no half-made socket directory
    assert not os.path.exists(locks) or os.listdir(locks) == []


@platforms.posix_signals
def test_sigterm_of_a_serving_process_removes_lock_and_socket(tmp_path) -> None:
    locks = str(tmp_path / "locks")
    script = textwrap.dedent("""
        import asyncio, sys
        sys.path.insert(0, %r)
        from ide_protocol.server.ide_server import IdeServer

        async def main():
            server = IdeServer([%r], lock_dir=%r)
            await server.start()
            server.install_signal_handlers()
            print(server.lock_path, server.socket_path, flush=True)
            await server.wait_stopped()
            print("stopped", flush=True)

        asyncio.run(main())
    """) % (ROOT, str(tmp_path), locks)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        lock_path, socket_path = proc.stdout.readline().split()
        assert os.path.exists(lock_path) and os.path.exists(socket_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not os.path.exists(lock_path)
    assert not os.path.exists(os.path.dirname(socket_path))
    assert os.listdir(locks) == []


def test_nonce_comes_from_secrets_and_is_new_per_server(tmp_path, monkeypatch) -> None:
    # Security default: the nonce is drawn with `secrets` (the OS CSPRNG), 128 bits or more,
    # a fresh one for every server, and it is exactly what the lock file's header carries.
    import secrets

    drawn: List[str] = []
    real = secrets.token_hex

    def spy(nbytes=None):
        value = real(nbytes)
        drawn.append(value)
        return value

    monkeypatch.setattr(secrets, "token_hex", spy)
    first = IdeServer([str(tmp_path)], lock_dir=str(tmp_path / "locks"))
    second = IdeServer([str(tmp_path)], lock_dir=str(tmp_path / "locks"))
    assert drawn == [first.nonce, second.nonce]
    assert first.nonce != second.nonce and len(first.nonce) >= 32

    async def main() -> dict:
        async with first:
            with open(first.lock_path, encoding="utf-8") as f:
                return json.load(f)

    assert run(main())["headers"] == {"Authorization": "Nonce " + first.nonce}
