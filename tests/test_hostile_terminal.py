"""Peer text that reaches a terminal is shown escaped, by the one function for it.

`serve` is tested end to end in test_hostile_serve.py; here the function itself, the
client's `watch` (a real IdeServer pushing a selection whose text carries escape
sequences, read by `python3 -m ide_protocol client watch` in a subprocess) and the ACP
command line's output of an agent's message.
"""
from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from ide_protocol.common.terminal_text import safe_text
from ide_protocol.common.tools import Selection

import ide_wire

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVIL = "title \x1b]0;pwned\x07 up \x1b[1A\x1b[2K hide \x1b[8m csi \x9b2J \u202eevil\r back\x00\x7f"


def test_safe_text_escapes_every_control_but_newline_and_tab() -> None:
    assert safe_text(EVIL) == ("title \\x1b]0;pwned\\a up \\x1b[1A\\x1b[2K hide \\x1b[8m csi \\x9b2J "
                               "\\u202eevil\\r back\\0\\x7f")
    assert safe_text("keep\ttabs\nand newlines, ünïcödé 😀") == "keep\ttabs\nand newlines, ünïcödé 😀"
    assert safe_text("one\nline", multiline=False) == "one\\nline"
    assert safe_text("lone \ud800") == "lone \\ud800"
    assert safe_text(42) == "42"
    for code in list(range(0x20)) + list(range(0x7f, 0xa0)):
        if chr(code) not in "\n\t":
            assert chr(code) not in safe_text("x%sy" % chr(code))


@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")
@pytest.mark.parametrize("json_mode", [False, True])
def test_client_watch_shows_pushed_text_escaped(tmp_path: Any, json_mode: bool) -> None:
    async def scenario() -> None:
        async with ide_wire.make_server(tmp_path, debounce=0.01) as server:
            folder = server.workspace_folders[0]
            server.set_selection(Selection(os.path.join(folder, "a\x1b[5m.py"), EVIL, (0, 0), (0, 5)))
            server.flush_pushes()
            env = dict(os.environ, PYTHONPATH=REPO)
            args = [sys.executable, "-m", "ide_protocol", "client", "--folder", folder,
                    "--lock-dir", str(tmp_path / "locks")] + (["--json"] if json_mode else []) + [
                "watch", "--count", "1"]
            loop = asyncio.get_event_loop()
            done = await loop.run_in_executor(None, lambda: subprocess.run(
                args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60))
            assert done.returncode == 0, done.stderr
            out = done.stdout.decode("utf-8")
            for char in ("\x1b", "\x07", "\x9b", "\u202e", "\r", "\x00"):
                assert char not in out, (char, out)
            if json_mode:  # still valid JSON, with the same text inside
                assert json.loads(out)["params"]["text"] == EVIL
            else:
                assert "\\x9b2J" in out and "\\u202eevil" in out

    ide_wire.run(scenario(), timeout=90)


def test_acp_output_shows_agent_text_escaped() -> None:
    from acp.cli import Output

    class FakeSession:
        tool_calls: dict = {}

    out, err = io.StringIO(), io.StringIO()
    shown = Output(FakeSession(), out=out, err=err)  # type: ignore[arg-type]
    shown.show({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": EVIL + "\n"}})
    assert "\x1b" not in out.getvalue() and "\u202e" not in out.getvalue()
    assert "\\x1b[8m" in out.getvalue() and out.getvalue().endswith("\n")
