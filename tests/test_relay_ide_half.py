"""The relay's IDE half alone, on every platform: it finds our IdeServer's lock (a Unix
socket, or a named pipe on Windows, where this runs under Wine), announces it without
its nonce, and carries a request of the CLI's half to the IDE with the IDE's nonce added.
The CLI's half is a stand-in (tests/relay_cli_half.py) started by `--via`, since the real
one listens on a Unix socket."""
from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from typing import Any, List

import pytest

from ide_protocol.common.lock_rules import is_pipe_path
from ide_protocol.server.ide_server import IdeServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def shell_command(argv: List[str]) -> str:
    """`argv` as the one string `--via` runs through the platform's shell."""
    if os.name == "nt":
        return subprocess.list2cmdline(argv)
    return " ".join(shlex.quote(a) for a in argv)


@pytest.mark.parametrize("started_by", ["ide-side --via", "the other half (--stdio)"])
def test_the_ide_half_reaches_the_ide_and_adds_its_nonce(tmp_path: Any, started_by: str) -> None:
    """`ide-side --via` starts the stand-in; `ide-side --stdio` is started by it, as
    WSL's CLI half starts the Windows one (`python.exe ... ide-side --stdio`)."""
    project = tmp_path / "project"
    project.mkdir()
    stand_in = [sys.executable, os.path.join(HERE, "relay_cli_half.py")]
    ide_side = [sys.executable, "-m", "ide_protocol", "relay", "ide-side", "--folder", str(project),
                "--lock-dir", str(tmp_path / "ide")]
    argv = ide_side + ["--via", shell_command(stand_in)] if started_by.startswith("ide-side") \
        else stand_in + ide_side + ["--stdio"]

    async def scenario() -> None:
        async with IdeServer([str(project)], lock_dir=str(tmp_path / "ide"), ide_name="Piped IDE") as server:
            assert is_pipe_path(server.socket_path or "") == (os.name == "nt")
            relay = await asyncio.create_subprocess_exec(
                *argv, env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + HERE), cwd=str(tmp_path),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                _, err = await asyncio.wait_for(relay.communicate(), 60)
            finally:
                if relay.returncode is None:
                    relay.kill()
                    await relay.wait()
            text = err.decode("utf-8", "replace")
            lines = [line for line in text.splitlines() if line.startswith(("lock ", "answer "))]
            assert len(lines) == 2, text
            news = json.loads(lines[0][len("lock "):])
            # the lock news carry the IDE's name and folders, never its nonce or trust
            assert news == {"ideName": "Piped IDE", "workspaceFolders": [str(project)]}, text
            # 200, not 401: the IDE's half added the IDE's nonce
            assert lines[1].startswith("answer HTTP/1.1 200 "), text
            assert server.headers["Authorization"] not in text
            assert relay.returncode == 0, text

    asyncio.run(asyncio.wait_for(scenario(), 90))
