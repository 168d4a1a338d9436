"""`winpipe`, the Windows-only transport, as far as Linux can test it.

The module must import everywhere. Its plumbing (`transport.Listener`'s protocol
factory handed to `start_serving_pipe`, close) is exercised by a loop
whose `start_serving_pipe` is faked with a Unix socket: real HTTP goes through it. The
Windows API itself (a real named pipe on the Proactor loop) is not tested here.
"""
from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any, List

import pytest

from ide_protocol.common import winpipe

import ide_wire
from ide_wire import Cli


def test_pipe_names() -> None:
    name = winpipe.pipe_name()
    assert name.startswith("\\\\.\\pipe\\mcp-") and name.endswith(".sock")
    assert len(name) == len("\\\\.\\pipe\\mcp-") + 36 + len(".sock")
    assert winpipe.pipe_name("x") == "\\\\.\\pipe\\x"
    assert winpipe.pipe_name("\\\\.\\PIPE\\y") == "\\\\.\\PIPE\\y"


def test_a_loop_without_pipes_gives_a_clear_error() -> None:
    async def scenario() -> None:
        async def client(reader: Any, writer: Any) -> None:
            pass

        loop = asyncio.get_event_loop()
        if hasattr(loop, "start_serving_pipe"):
            pytest.skip("this loop serves pipes")
        with pytest.raises(RuntimeError, match="Proactor"):
            await winpipe.start_pipe_server(client)

    ide_wire.run(scenario())


@pytest.mark.skipif(sys.platform == "win32", reason="fakes the pipe with a Unix socket")
def test_listener_serves_http_through_the_pipe_plumbing(tmp_path: Any) -> None:
    from ide_protocol.server.ide_server import IdeServer

    path = os.path.join(str(tmp_path), "pipe.sock")
    served: List[str] = []

    async def scenario() -> None:
        loop = asyncio.get_event_loop()

        async def fake_start_serving_pipe(factory: Any, address: str) -> List[Any]:
            served.append(address)
            return [await loop.create_unix_server(factory, path)]

        loop.start_serving_pipe = fake_start_serving_pipe  # type: ignore[attr-defined]
        server = IdeServer([str(tmp_path)], write_lock=False)
        # What IdeServer.start does on Windows, up to the lock file.
        address = await server.listener.start_pipe()
        assert served == [address] and address.startswith("\\\\.\\pipe\\mcp-")
        cli = Cli(path, server.nonce)
        result = await cli.handshake()
        assert result["serverInfo"]["name"] == "vscode-copilot-cli"
        tools = await cli.request("tools/list")
        assert len(tools["tools"]) == 6
        assert server.listener.accepted >= 3
        cli.close()
        await server.listener.close()
        assert server.listener.connections == set()

    ide_wire.run(scenario())


def test_the_pid_check_delegates_to_winpipe_on_windows(monkeypatch: Any) -> None:
    # lockfile delegates to winpipe on Windows (all Windows-only code in one module).
    from ide_protocol.common import lockfile

    calls: List[int] = []
    monkeypatch.setattr(winpipe, "pid_alive", lambda pid: calls.append(pid) or False)
    monkeypatch.setattr(lockfile.os, "name", "nt")
    assert lockfile.pid_alive(4242) is False
    assert calls == [4242]


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has a kernel32 to ask")
def test_without_kernel32_the_windows_pid_check_errs_on_the_safe_side() -> None:
    # Without a usable kernel32 (here: not Windows) the check answers "alive", so
    # stale-lock cleanup keeps the lock rather than deleting a live IDE's.
    assert winpipe.pid_alive(12345) is True


@pytest.mark.skipif(sys.platform != "win32", reason="asks the Windows kernel (OpenProcess)")
def test_windows_pid_check_is_libuvs_uv_kill(tmp_path: Any) -> None:
    import subprocess

    # Node's process.kill(pid, 0) is libuv's uv_kill: pid 0 is the calling process,
    # a negative pid opens no process (ESRCH), an exited process is not running.
    assert winpipe.pid_alive(0) is True
    assert winpipe.pid_alive(os.getpid()) is True
    assert winpipe.pid_alive(-1) is False
    assert winpipe.pid_alive(-os.getpid()) is False
    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    proc.wait()
    assert winpipe.pid_alive(proc.pid) is False


@pytest.mark.skipif(sys.platform != "win32", reason="only Windows can tell whether a named pipe is served "
                    "(elsewhere the answer is 'cannot tell': see the next test)")
def test_a_pipe_that_is_not_there_refuses() -> None:
    from ide_protocol.common import lock_rules

    verdict, why = lock_rules.connect_once(winpipe.pipe_name(), 0.25)
    assert (verdict, why) == (lock_rules.REFUSED, "no such named pipe")
    assert lock_rules.connect_once(winpipe.pipe_name("mcp-\0.sock"), 0.25)[0] == lock_rules.REFUSED


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only")
def test_off_windows_a_pipe_lock_is_never_taken_for_stale(tmp_path: Any) -> None:
    """A lock folder shared with Windows (COPILOT_HOME on the Windows side, from WSL)
    holds Windows IDEs' pipe locks. Off Windows nothing tells whether a pipe is served,
    nor what a Windows pid is: such a lock is kept (before, the pipe's name, looked up
    as a file, was missing, and the lock of a live IDE was removed)."""
    from ide_protocol.common import lock_rules, lockfile

    assert lock_rules.connect_once(winpipe.pipe_name(), 0.25)[0] == lock_rules.UNKNOWN
    directory = str(tmp_path)
    for pid in (os.getpid(), 2 ** 22 + 12345):  # running here, and a pid no process has
        path = _foreign_pipe_lock(directory, pid)
        assert lockfile.remove_stale_locks(directory) == []
        assert os.path.exists(path)
        os.unlink(path)


def _foreign_pipe_lock(directory: str, pid: int, pipe: str = "") -> str:
    """A lock of ours (the writer marker) naming `pid` and a pipe nobody serves,
    written the way another process of this library would have: not by this one."""
    from ide_protocol.common import lockfile

    info = lockfile.LockInfo.new(pipe or winpipe.pipe_name(), {"Authorization": "Nonce x"}, [directory],
                                 "Python IDE", pid=pid, scheme="pipe")
    path = os.path.join(directory, "%s.lock" % uuid.uuid4())
    with open(path, "wb") as f:
        f.write(lockfile._encode_lock(info))
    return path


@pytest.mark.skipif(sys.platform != "win32", reason="only Windows can tell that a named pipe is gone")
def test_a_pipe_lock_whose_pipe_is_gone_is_stale_even_when_its_pid_runs(tmp_path: Any) -> None:
    # Windows reuses pids at once: after a hard kill the restarted server often gets
    # the dead one's pid, so "pid alive" proves nothing for a pipe lock. Our own pid
    # makes that deterministic: it runs, the lock's pipe does not exist.
    from ide_protocol.common import lockfile

    directory = str(tmp_path)
    path = _foreign_pipe_lock(directory, os.getpid())
    assert lockfile.pid_alive(os.getpid())
    assert lockfile.remove_stale_locks(directory) == [path]
    assert not os.path.exists(path)


def test_a_pipe_lock_this_process_wrote_is_never_judged_by_its_pid(tmp_path: Any) -> None:
    from ide_protocol.common import lockfile

    directory = str(tmp_path)
    info = lockfile.LockInfo.new(winpipe.pipe_name(), {"Authorization": "Nonce x"}, [directory], "Python IDE",
                                 scheme="pipe")
    path = lockfile.write_lock(info, directory)
    try:
        assert lockfile.written_here(path)
        assert lockfile.remove_stale_locks(directory) == []
        assert os.path.exists(path)
    finally:
        lockfile.remove_lock(path)
    assert not lockfile.written_here(path)


@pytest.mark.skipif(sys.platform != "win32", reason="a real named pipe on the Proactor loop")
def test_a_pipe_lock_whose_pipe_is_served_is_kept(tmp_path: Any) -> None:
    from ide_protocol.common import lock_rules, lockfile

    directory = str(tmp_path)

    async def scenario() -> None:
        server, address = await winpipe.start_pipe_server(asyncio.Protocol)
        try:
            path = _foreign_pipe_lock(directory, os.getpid(), address)
            assert lock_rules.connect_once(address, 0.25) == (lock_rules.ACCEPTS, "")
            assert lockfile.remove_stale_locks(directory) == []
            assert os.path.exists(path)
        finally:
            server.close()
            await server.wait_closed()

    ide_wire.run(scenario())


def test_client_pipe_connection_needs_the_proactor_loop() -> None:
    from ide_protocol.client import ServerGone, open_socket

    async def main() -> str:
        try:
            await open_socket("\\\\.\\pipe\\mcp-test.sock", timeout=5)
        except ServerGone as exc:
            return str(exc)
        return "connected"

    message = asyncio.run(main())
    assert "mcp-test.sock" in message
    if sys.platform != "win32":
        assert "Proactor" in message
