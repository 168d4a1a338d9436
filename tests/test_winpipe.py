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


def test_windows_pid_check_lives_here_and_errs_on_the_safe_side(monkeypatch) -> None:
    # lockfile delegates to winpipe on Windows (all Windows-only code in one module);
    # without a usable kernel32 (here: Linux) the check answers "alive", so stale-lock
    # cleanup keeps the lock rather than deleting a live IDE's.
    from ide_protocol.common import lockfile

    assert winpipe.pid_alive(12345) is True
    calls: List[int] = []
    monkeypatch.setattr(winpipe, "pid_alive", lambda pid: calls.append(pid) or False)
    monkeypatch.setattr(lockfile.os, "name", "nt")
    assert lockfile.pid_alive(4242) is False
    assert calls == [4242]


def test_client_pipe_connection_needs_the_proactor_loop() -> None:
    from ide_protocol.client import ServerGone, open_socket

    async def main() -> str:
        try:
            await open_socket("\\\\.\\pipe\\mcp-test.sock", timeout=5)
        except ServerGone as exc:
            return str(exc)
        return "connected"

    message = asyncio.run(main())
    assert "Proactor" in message and "mcp-test.sock" in message
