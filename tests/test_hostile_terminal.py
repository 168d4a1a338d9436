"""Peer text that reaches a terminal is shown escaped, by the one function for it.

`serve` is tested end to end in test_hostile_serve.py; here the function itself, the
client's `watch` (a real IdeServer pushing a selection whose text carries escape
sequences, read by `python3 -m ide_protocol client watch` in a subprocess), the ACP
command line's output of an agent's message, and `client`, `check` and `trace` run
against a hostile server (`hostile_peer.HostileIde`) and lock files: its errors, its
answers and the locks' names and folders.
"""
from __future__ import annotations

import asyncio
import io
import json
import os
import re
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
    # Invisible characters that can hide text (tags: read by a model, shown by no terminal).
    assert safe_text("a\xadb\u200bc\u2060d\ufeffe\U000e0041f") == "a\\xadb\\u200bc\\u2060d\\ufeffe\\U000e0041f"
    assert safe_text("emoji \U0001f468\u200d\U0001f469, script \u0645\u200c\u06cc") == (
        "emoji \U0001f468\u200d\U0001f469, script \u0645\u200c\u06cc")  # joiners stay
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
    from acp.cli_output import Output

    class FakeSession:
        tool_calls: dict = {}

    out, err = io.StringIO(), io.StringIO()
    shown = Output(FakeSession(), out=out, err=err)  # type: ignore[arg-type]
    shown.show({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": EVIL + "\n"}})
    assert "\x1b" not in out.getvalue() and "\u202e" not in out.getvalue()
    assert "\\x1b[8m" in out.getvalue() and out.getvalue().endswith("\n")


# ------------------------------------------- client, check, trace: a hostile server


#: What a server or a lock file's author may put in a name, a folder, an error or a
#: body: escape sequences, and a line break to print a line of its own.
FORGED = "\x1b]0;pwned\x07\x1b[2J\r\nFAKE: all good \u202e"


def assert_nothing_raw(text: str) -> None:
    for char in ("\x1b", "\x07", "\r", "\u202e"):
        assert char not in text, (char, text)
    assert not any(line.startswith("FAKE") for line in text.splitlines()), text


def assert_shown_escaped(text: str) -> None:
    assert_nothing_raw(text)
    assert "\\x1b]0;pwned" in text, text


def hostile_ide(tmp_path: Any, handlers: Any = None, **lock_fields: Any) -> Any:
    """A `HostileIde` whose lock file says what the test wants."""
    from hostile_peer import HostileIde
    ide = HostileIde(str(tmp_path), handlers or {})
    with open(ide.lock_path, encoding="utf-8") as f:
        lock = json.load(f)
    lock.update(lock_fields)
    with open(ide.lock_path, "w", encoding="utf-8") as f:
        json.dump(lock, f)
    return ide


unix_only = pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")


@unix_only
def test_client_shows_the_ide_name_and_a_servers_error_escaped(tmp_path: Any) -> None:
    """The `# connected to` line printed the lock's ideName raw, and `run_command` the
    text of the JSON-RPC error the server answered."""
    from hostile_peer import answer, run_program

    def error(sock: Any, request: Any) -> None:
        answer(sock, {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32000, "message": FORGED}})

    ide = hostile_ide(tmp_path, {"tools/call": error}, ideName="IDE " + FORGED)
    try:
        ran = run_program(["client", "--lock", ide.lock_path, "call", "get_selection"], limit=60)
    finally:
        ide.close()
    assert ran.code == 1 and "Traceback" not in ran.err, ran
    assert_shown_escaped(ran.err)
    assert ran.err.startswith("# connected to IDE \\x1b]0;pwned"), ran
    assert "(-32000)" in ran.err, ran


@unix_only
def test_client_shows_the_body_of_a_refusal_escaped(tmp_path: Any) -> None:
    """An HTTP refusal's error quotes the start of its body (`HttpStatusError`)."""
    from hostile_peer import run_program

    def refuse(sock: Any, request: Any) -> None:
        body = FORGED.encode("utf-8")
        sock.sendall(b"HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))

    ide = hostile_ide(tmp_path, {"initialize": refuse})
    try:
        ran = run_program(["client", "--lock", ide.lock_path, "list"], limit=60)
    finally:
        ide.close()
    assert ran.code == 1 and "HTTP 500 Oops" in ran.err, ran
    assert_shown_escaped(ran.err)


@unix_only
def test_check_shows_the_lock_and_the_servers_answer_escaped(tmp_path: Any) -> None:
    """The `checking` line printed the lock's ideName raw, and a FAIL's evidence the
    server's body."""
    from hostile_peer import chunk, run_program, sse_head

    def raw_data(sock: Any, request: Any) -> None:  # a 200 answer whose data is not JSON
        sock.sendall(sse_head() + chunk(b"event: message\ndata: " + FORGED.encode("utf-8") + b"\n\n")
                     + b"0\r\n\r\n")

    ide = hostile_ide(tmp_path, {"ping": raw_data}, ideName="IDE " + FORGED)
    try:
        ran = run_program(["check", "--lock", ide.lock_path, "--only", "jsonrpc.ping", "--timeout", "5", "--strict"],
                          limit=60)
    finally:
        ide.close()
    assert "Traceback" not in ran.err, ran
    assert re.search(r"^FAIL +jsonrpc\.ping ", ran.out, re.M), ran  # (VS Code's rule: a FAIL with --strict)
    assert_shown_escaped(ran.out)
    assert ran.out.startswith("checking IDE \\x1b]0;pwned"), ran
    assert "       | data: \\x1b]0;pwned" in ran.out, ran


@unix_only
@pytest.mark.parametrize("program", ["client", "check", "trace"])
def test_no_ide_found_shows_the_lock_folder_escaped(tmp_path: Any, program: str) -> None:
    """With no IDE for the folder, the error lists the other IDEs and the locks skipped
    with their reasons, all text from lock files."""
    from hostile_peer import run_program
    ide = hostile_ide(tmp_path, ideName="Other " + FORGED, workspaceFolders=["/elsewhere " + FORGED])
    with open(os.path.join(ide.lock_dir, "bad.lock"), "w", encoding="utf-8") as f:
        json.dump({"socketPath": "x", "scheme": "unix", "headers": {"H " + FORGED: 1}, "pid": 1, "ideName": "b",
                   "timestamp": 0, "workspaceFolders": []}, f)
    try:
        args = [program, "list", ide.folder] if program == "client" else [program, ide.folder]
        ran = run_program(args, home=ide.home, limit=60)
    finally:
        ide.close()
    assert ran.code in (1, 2) and "Traceback" not in ran.err, ran
    assert_shown_escaped(ran.err)
    lines = ran.err.splitlines()
    assert any(line.startswith("  other IDE: Other \\x1b]0;pwned") for line in lines), ran
    assert any(line.startswith("  skipped: ") and "bad.lock" in line for line in lines), ran


@unix_only
@pytest.mark.parametrize("program", ["client", "check"])
def test_the_choice_between_two_ides_is_shown_escaped(tmp_path: Any, program: str) -> None:
    """Two live locks list the folder: the program says which it chose, naming both."""
    from hostile_peer import run_program
    ide = hostile_ide(tmp_path, ideName="Second " + FORGED)
    with open(ide.lock_path, encoding="utf-8") as f:
        lock = json.load(f)
    with open(os.path.join(ide.lock_dir, "a-first.lock"), "w", encoding="utf-8") as f:
        json.dump(dict(lock, ideName="First " + FORGED), f)
    try:
        args = ([program, "list", ide.folder] if program == "client"
                else [program, ide.folder, "--only", "jsonrpc.ping", "--timeout", "5"])
        ran = run_program(args, home=ide.home, limit=60)
    finally:
        ide.close()
    assert "Traceback" not in ran.err, ran
    assert "2 live IDE locks list this folder; chose First \\x1b]0;pwned" in ran.err, ran
    assert_shown_escaped(ran.err)
    assert_nothing_raw(ran.out)


@unix_only
def test_trace_shows_the_lock_folder_escaped(tmp_path: Any) -> None:
    """`trace` says where to run the CLI: `cd` into the lock's first folder; and what it
    traces, the lock's ideName on one line (a newline in it printed a line of its own)."""
    import signal
    ide = hostile_ide(tmp_path, workspaceFolders=["/work " + FORGED], ideName="IDE " + FORGED)
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "trace", "--lock", ide.lock_path,
                             "--copilot-home", str(tmp_path / "trace-home")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode("utf-8", "replace")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        ide.close()
    assert line.startswith("run the CLI as:  cd /work \\x1b]0;pwned"), (line, err)
    assert_shown_escaped(line + err.decode("utf-8", "replace") + out.decode("utf-8", "replace"))
    assert "tracing IDE \\x1b]0;pwned" in err.decode("utf-8", "replace") + out.decode("utf-8", "replace")
    assert proc.returncode == 0, err
