"""`python3 -m ide_protocol serve` as a real subprocess, driven through a pipe.

Each test runs the terminal IDE with a private `COPILOT_HOME`, talks to it over its real
Unix socket with the CLI-like client of `ide_wire`, types commands on its standard input
and reads what it prints. Waits are bounded (generous timeouts against hangs only).
"""
from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from typing import Any, List, Optional

import pytest

from ide_protocol.common import lockfile
from ide_protocol.programs.serve import commands as serve_commands, diffs as serve_diffs
from ide_protocol.common.paths import path_to_uri

import ide_wire
import platforms
from ide_wire import Cli, tool_json


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 20.0
SAMPLE = "hello\nwörld 😀 x\nthird\n"


class Serve:
    """The `serve` subprocess: stdin to type into, stdout read line by line."""

    def __init__(self, tmp_path: Any, *args: str, env: Optional[dict] = None, stdin: Any = subprocess.PIPE) -> None:
        self.folder = os.path.join(str(tmp_path), "ws")
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, "a.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(SAMPLE)
        self.home = os.path.join(str(tmp_path), "home")
        self.lock_dir = os.path.join(self.home, "ide")
        full_env = dict(os.environ)
        full_env.pop("NO_COLOR", None)
        full_env["COPILOT_HOME"] = self.home
        full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env.update(env or {})
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        cmd = [sys.executable, "-m", "ide_protocol", "serve", self.folder] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, cwd=str(tmp_path))
        threading.Thread(target=self._pump, daemon=True).start()
        first = self.expect(r"^serving (.+) on (.+), lock (.+)$")
        self.socket_path = first.group(2)
        self.lock_path = first.group(3)
        try:
            with open(self.lock_path, encoding="utf-8") as f:
                self.lock = json.load(f)
        except FileNotFoundError:  # already gone: a serve whose input ended at once
            self.lock = {"headers": {"Authorization": "Nonce -"}}
        self.nonce = self.lock["headers"]["Authorization"].split(" ", 1)[1]

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", errors="replace").rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern: str, timeout: float = WAIT) -> "re.Match[str]":
        """The next printed line matching `pattern` (earlier lines are kept in `seen`)."""
        regex = re.compile(pattern)
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("no line matching %r within %ss; output so far:\n%s"
                                     % (pattern, timeout, "\n".join(self.seen)))
            if line is None:
                self.lines.put(None)
                raise AssertionError("serve exited before printing %r; output:\n%s\nstderr:\n%s"
                                     % (pattern, "\n".join(self.seen), self.stderr()))
            self.seen.append(line)
            m = regex.search(line)
            if m:
                return m

    async def aexpect(self, pattern: str, timeout: float = WAIT) -> "re.Match[str]":
        """`expect` without blocking the client's loop (a request may be in flight)."""
        return await asyncio.get_event_loop().run_in_executor(None, self.expect, pattern, timeout)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def wait(self, timeout: float = WAIT) -> int:
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode("utf-8", errors="replace")

    def rest(self) -> List[str]:
        """Every line printed until the process closed stdout."""
        while True:
            line = self.lines.get(timeout=WAIT)
            if line is None:
                return self.seen
            self.seen.append(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


@pytest.fixture
def make_serve(tmp_path: Any) -> Any:
    started: List[Serve] = []

    def make(*args: str, **kw: Any) -> Serve:
        s = Serve(tmp_path, *args, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        s.kill()


def assert_gone(s: Serve) -> None:
    assert not os.path.exists(s.lock_path)
    assert not os.path.exists(s.socket_path)
    assert platforms.WINDOWS or not os.path.exists(os.path.dirname(s.socket_path))  # (a pipe has no folder)
    assert [n for n in os.listdir(s.lock_dir) if n.endswith(".lock")] == []


def open_diff_args(s: Serve, name: str, contents: str, tab: str) -> dict:
    return {"original_file_path": os.path.join(s.folder, name), "new_file_contents": contents, "tab_name": tab}


# ---------------------------------------------------------------------- end to end


def test_serve_session_driven_through_stdin(make_serve: Any) -> None:
    s = make_serve("--debounce", "0.05")
    real_folder = os.path.realpath(s.folder)
    assert s.lock["workspaceFolders"][0] == real_folder
    assert s.lock["ideName"] == "Terminal IDE" and s.lock["isTrusted"] is False
    assert s.lock["pid"] == s.proc.pid
    a_txt = platforms.wire_path(os.path.join(s.folder, "a.txt"))  # a lower-case drive (§6)

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)
        await cli.handshake()
        await s.aexpect(r"^connected: session %s, Copilot CLI 1\.0\.102 \(pid 32748\)" % cli.session_id[:8])
        head, stream = await cli.open_stream()
        assert head.status == 200

        # A pushed selection: 1-based columns in, 0-based UTF-16 characters out.
        s.send("select a.txt 2:3-2:9")
        await s.aexpect(r"^selected a\.txt 2:3-2:9 \(6 characters\)")
        note = await stream.next_notification()
        assert note["method"] == "selection_changed"
        assert note["params"] == {"text": "rld 😀 ", "filePath": a_txt, "fileUrl": path_to_uri(a_txt),
                                  "selection": {"start": {"line": 1, "character": 2},
                                                "end": {"line": 1, "character": 9}, "isEmpty": False}}
        selection = tool_json(await cli.call_tool("get_selection", {}))
        assert selection["current"] is True and selection["text"] == "rld 😀 "
        await s.aexpect(r"^tool get_selection\(\) from session %s -> " % cli.session_id[:8])

        # A diff accepted by `accept` on stdin.
        accepted = asyncio.ensure_future(cli.call_tool("open_diff", open_diff_args(
            s, "a.txt", "hello\nnew line\nthird\n", "[Copilot CLI] - a.txt (aaaaaa)")))
        await s.aexpect(r"^diff 1 proposed by session %s: \[Copilot CLI\] - a\.txt \(aaaaaa\)" % cli.session_id[:8])
        await s.aexpect(r"^\+new line$")
        await s.aexpect(r"^diff 1 waits")
        assert not accepted.done()
        s.send("accept")
        answer = tool_json(await asyncio.wait_for(accepted, WAIT))
        assert answer["result"] == "SAVED" and answer["trigger"] == "accepted_via_button"
        assert answer["tab_name"] == "[Copilot CLI] - a.txt (aaaaaa)"
        await s.aexpect(r"^diff 1 SAVED \(accepted_via_button\)")
        with open(a_txt, encoding="utf-8", newline="") as f:
            assert f.read() == SAMPLE  # the IDE never writes the file (PROTOCOL.md §4)

        # A diff of a new file rejected by `reject TAB` (a tab name with blanks).
        rejected = asyncio.ensure_future(cli.call_tool("open_diff", open_diff_args(
            s, "new.txt", "brand new\n", "[Copilot CLI] - new.txt (bbbbbb)")))
        await s.aexpect(r"^  new file of new\.txt$")
        await s.aexpect(r"^diff 2 waits")
        s.send("reject --tab [Copilot CLI] - new.txt (bbbbbb)")
        answer = tool_json(await asyncio.wait_for(rejected, WAIT))
        assert answer["result"] == "REJECTED" and answer["trigger"] == "rejected_via_button"
        await s.aexpect(r"^diff 2 REJECTED \(rejected_via_button\)")
        assert not os.path.exists(os.path.join(s.folder, "new.txt"))

        # Diagnostics typed on stdin are what get_diagnostics answers.
        s.send("diag a.txt 2 error something is wrong here")
        await s.aexpect(r"^diagnostic a\.txt 2:1-2:10: \[Error\] something is wrong here")
        s.send("diag a.txt 3:1-3:3 hint a hint")
        await s.aexpect(r"\[Hint\] a hint \(2 in this file\)")
        diags = tool_json(await cli.call_tool("get_diagnostics", {"uri": path_to_uri(a_txt)}))
        assert diags == [{"uri": path_to_uri(a_txt), "filePath": a_txt, "diagnostics": [
            {"message": "something is wrong here", "severity": "Error",
             "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 10}},
             "source": "serve", "code": None},
            {"message": "a hint", "severity": "Hint",
             "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 2}},
             "source": "serve", "code": None}]}]
        note = await stream.next_notification()
        assert note["method"] == "diagnostics_changed"
        assert note["params"]["uris"][0]["uri"] == path_to_uri(a_txt)
        s.send("diag a.txt clear")
        await s.aexpect(r"^diagnostics of a\.txt cleared")
        assert tool_json(await cli.call_tool("get_diagnostics", {})) == []

        # A file reference is pushed at once.
        s.send("ref a.txt 1-2")
        await s.aexpect(r"^sent add_file_reference a\.txt:1:1-2:10 to 1 session$")
        note = await stream.next_notification()
        while note["method"] == "diagnostics_changed":
            note = await stream.next_notification()
        assert note == {"jsonrpc": "2.0", "method": "add_file_reference", "params": {
            "filePath": a_txt, "fileUrl": path_to_uri(a_txt),
            "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 10}},
            "selectedText": "hello\nwörld 😀 x"}}
        s.send("ref a.txt")
        note = await stream.next_notification()
        while note["method"] == "diagnostics_changed":  # the clear's debounced push may come late
            note = await stream.next_notification()
        assert note["method"] == "add_file_reference"
        assert note["params"]["selection"] is None and note["params"]["selectedText"] is None

        await cli.call_tool("update_session_name", {"name": "fix the bug"})
        await s.aexpect(r'^session %s is named "fix the bug"' % cli.session_id[:8])
        s.send("status")
        await s.aexpect(r"^sessions: 1$")
        await s.aexpect(r"^  %s Copilot CLI 1\.0\.102 \(pid 32748\), stream open, name \"fix the bug\"" % cli.session_id)
        await s.aexpect(r"^pending diffs: 0$")
        await s.aexpect(r"^selection: a\.txt 2:3-2:9$")  # as typed: 1-based, not the wire's

        s.send("quit")
        note = await stream.next_notification()
        while note is not None and note["method"] == "diagnostics_changed":
            note = await stream.next_notification()  # the clear's debounced push, if still due: sent first
        assert note is None  # the server ended the stream
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    assert s.wait() == 0
    out = s.rest()
    assert any(re.match(r"^disconnected: session", line) for line in out)
    assert out[-1] == "stopped (lock file and socket removed)"
    assert not any("\x1b[" in line for line in out)  # stdout is a pipe: no colour
    assert s.nonce not in "\n".join(out)
    assert_gone(s)


def test_close_diff_and_disconnect_are_shown(make_serve: Any) -> None:
    s = make_serve()

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)
        await cli.handshake()
        pending = asyncio.ensure_future(cli.call_tool("open_diff", open_diff_args(s, "a.txt", "x\n", "tab-1")))
        await s.aexpect(r"^diff 1 waits")
        other = Cli(s.socket_path, s.nonce, client_session_id=cli.client_session_id)
        other.session_id = cli.session_id
        closed = tool_json(await other.call_tool("close_diff", {"tab_name": "tab-1"}))
        assert closed["already_closed"] is False
        answer = tool_json(await asyncio.wait_for(pending, WAIT))
        assert answer["result"] == "REJECTED" and answer["trigger"] == "closed_via_tool"
        await s.aexpect(r"^diff 1 REJECTED \(closed_via_tool\): tab-1")
        s.send("accept")
        await s.aexpect(r"^error: no diff is waiting")
        reply = await cli.delete()
        assert reply.status == 200
        await s.aexpect(r"^disconnected: session %s \(deleted\)" % cli.session_id[:8])
        cli.close()
        other.close()

    ide_wire.run(scenario())
    s.send("quit")
    assert s.wait() == 0
    assert_gone(s)


@pytest.mark.parametrize("flag,result,trigger", [("--auto-accept", "SAVED", "accepted_via_button"),
                                                  ("--auto-reject", "REJECTED", "rejected_via_button")])
def test_auto_accept_and_reject(make_serve: Any, flag: str, result: str, trigger: str) -> None:
    s = make_serve(flag)

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)
        await cli.handshake()
        answer = tool_json(await cli.call_tool("open_diff", open_diff_args(s, "a.txt", "changed\n", "t")))
        assert (answer["result"], answer["trigger"]) == (result, trigger)
        cli.close()

    ide_wire.run(scenario())
    s.expect(r"^diff 1: auto-%s" % ("accepting" if result == "SAVED" else "rejecting"))
    s.send("quit")
    assert s.wait() == 0


def test_folders_rewrite_the_lock_in_place(make_serve: Any, tmp_path: Any) -> None:
    """`folders`: what an IDE does when its user opens a folder. The same lock file,
    rewritten in place (PROTOCOL.md §1, "Changing folders"), the socket and nonce kept."""
    s = make_serve()
    other = os.path.join(str(tmp_path), "other dir")
    os.makedirs(other)
    # (Windows: a path's letter case is not its identity; serve may print the drive's otherwise.)
    case = "(?i)" if platforms.WINDOWS else ""
    before = os.stat(s.lock_path)
    s.send("folders . '%s'" % other)
    s.expect(case + r"^folders: %s, %s \(lock rewritten in place\)$" % (re.escape(s.folder), re.escape(other)))
    after = os.stat(s.lock_path)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    with open(s.lock_path, encoding="utf-8") as f:
        lock = json.load(f)
    listed = [os.path.normcase(os.path.realpath(f)) for f in (s.folder, other)]
    if platforms.WINDOWS:  # (a folder may be listed twice, as resolved and as given: §1)
        assert {os.path.normcase(f) for f in lock["workspaceFolders"]} == set(listed)
    else:
        assert lock["workspaceFolders"] == listed
    assert {k: lock[k] for k in ("socketPath", "headers", "timestamp")} == \
        {k: s.lock[k] for k in ("socketPath", "headers", "timestamp")}
    s.send("status")
    s.expect(case + r"^workspace folders: %s, %s$" % (re.escape(s.folder), re.escape(other)))
    s.send("folders .")  # (relative to serve's folder)
    s.expect(case + r"^folders: %s \(lock rewritten in place\)$" % re.escape(s.folder))
    s.send("quit")
    assert s.wait() == 0
    assert_gone(s)


def test_options_reach_the_lock_file(make_serve: Any, tmp_path: Any) -> None:
    lock_dir = os.path.join(str(tmp_path), "elsewhere")
    s = make_serve("--name", "My Term", "--trusted", "--lock-dir", lock_dir)
    assert os.path.dirname(s.lock_path) == lock_dir
    info = lockfile.LockInfo.from_json(s.lock)
    assert info.ide_name == "My Term" and info.is_trusted is True
    assert not os.path.exists(os.path.join(s.home, "ide"))  # --lock-dir wins over COPILOT_HOME
    s.send("quit")
    assert s.wait() == 0
    assert not os.path.exists(s.lock_path)


def test_trace_prints_http_exchanges_without_the_nonce(make_serve: Any) -> None:
    s = make_serve("--trace")

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)
        await cli.handshake()
        cli.close()

    ide_wire.run(scenario())
    s.expect(r"^  \[#\d+\] POST /mcp \(\d+ bytes\) .*Authorization: <redacted>")
    s.expect(r'^  << \{"jsonrpc":"2\.0","id":1,"method":"initialize"')
    s.expect(r"^  \[#\d+\] -> 200 \(stream\) .*mcp-session-id")
    s.expect(r"^  \[#\d+\] -> 202 ")
    s.send("quit")
    assert s.wait() == 0
    assert s.nonce not in "\n".join(s.rest())


# ------------------------------------------------------------------- ways to stop


@platforms.posix_signals
def test_sigterm_removes_lock_and_socket(make_serve: Any) -> None:
    s = make_serve()
    assert os.path.exists(s.lock_path) and os.path.exists(s.socket_path)

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)
        await cli.handshake()
        _, stream = await cli.open_stream()
        s.proc.send_signal(signal.SIGTERM)
        assert await stream.next_notification() is None
        cli.close()

    ide_wire.run(scenario())
    assert s.wait() == 0
    assert_gone(s)


@platforms.posix_signals
def test_sigint_stops_cleanly(make_serve: Any) -> None:
    s = make_serve()
    s.proc.send_signal(signal.SIGINT)
    assert s.wait() == 0
    assert_gone(s)


def test_eof_on_stdin_exits_cleanly(make_serve: Any) -> None:
    s = make_serve()
    assert s.proc.stdin is not None
    s.proc.stdin.close()
    assert s.wait() == 0
    assert "end of input" in s.rest()
    assert_gone(s)


def test_stdin_from_dev_null_or_a_file(make_serve: Any, tmp_path: Any) -> None:
    """/dev/null cannot be polled (epoll refuses it) and a regular file never blocks:
    both must still be read to their end, then serve exits cleanly."""
    s = make_serve(stdin=subprocess.DEVNULL)
    assert s.wait() == 0
    assert "end of input" in s.rest()
    assert_gone(s)
    script = os.path.join(str(tmp_path), "script.txt")
    with open(script, "w") as f:
        f.write("select a.txt 1\nstatus\n")
    with open(script, "rb") as f:
        s = make_serve(stdin=f)
        assert s.wait() == 0
    out = s.rest()
    assert "selected a.txt 1:1-1:6 (5 characters)" in out and "sessions: 0" in out
    assert out[-2:] == ["end of input", "stopped (lock file and socket removed)"]
    assert_gone(s)


@platforms.posix_signals
def test_ignore_eof_keeps_serving_until_a_signal(make_serve: Any) -> None:
    s = make_serve("--ignore-eof")
    assert s.proc.stdin is not None
    s.proc.stdin.close()

    async def scenario() -> None:
        cli = Cli(s.socket_path, s.nonce)  # still answering after the end of input
        await cli.handshake()
        cli.close()

    ide_wire.run(scenario())
    s.expect(r"^connected: ")
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait() == 0
    assert_gone(s)


def test_bad_commands_print_errors_and_keep_running(make_serve: Any) -> None:
    s = make_serve()
    bad = [
        ("frobnicate", r"unknown command 'frobnicate'"),
        ("select", r"usage: select PATH"),
        ("select a.txt", r"usage: select PATH"),
        ("select missing.txt 1-2", r"cannot read .*missing\.txt"),
        ("select a.txt one-two", r"bad range 'one-two'"),
        ("select a.txt 9-10", r"line 9 is outside the file, which has lines 1-4"),
        ("select a.txt 1:99", r"column 99 is outside line 1"),
        ("select \"a.txt 1-2", r"unterminated quote"),
        ("diag a.txt 1 fatal boom", r"unknown severity 'fatal'"),
        ("diag a.txt 1 error", r"usage: diag PATH"),
        ("ref", r"usage: ref PATH"),
        ("addsel a.txt", r"usage: addsel PATH"),
        ("accept", r"no diff is waiting"),
        ("reject nope", r"no diff is waiting"),
        ("accept --tab x", r"no diff is waiting"),
        ("select . 1", r".*ws is a directory"),
        ("folders", r"usage: folders PATH"),
        ("folders . missing", r".*missing is not a folder"),
        ("folders a.txt", r".*a\.txt is not a folder"),
    ]
    for command, message in bad:
        s.send(command)
        s.expect(r"^error: " + message)
    s.send("status")
    s.expect(r"^sessions: 0$")
    s.send("select 'a.txt' 1")
    s.expect(r"^selected a\.txt 1:1-1:6 \(5 characters\)")
    s.send("quit")
    assert s.wait() == 0
    assert_gone(s)


# ------------------------------------------------------------------ colour on a tty


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
@pytest.mark.parametrize("no_color", [False, True])
def test_diff_colour_on_a_terminal_and_no_color(tmp_path: Any, no_color: bool) -> None:
    """On a terminal the diff is coloured unless NO_COLOR is set. The terminal is stdin
    too, so this also drives the tty path of the stdin reader."""
    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder)
    with open(os.path.join(folder, "a.txt"), "w") as f:
        f.write("old\n")
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    env["COPILOT_HOME"] = os.path.join(str(tmp_path), "home")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", folder, "--debounce", "0"],
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=env, close_fds=True)
    os.close(slave)
    chunks: "queue.Queue[Optional[bytes]]" = queue.Queue()

    def pump() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            chunks.put(data or None)
            if not data:
                return

    threading.Thread(target=pump, daemon=True).start()
    seen = [b""]

    def wait_for(pattern: bytes) -> "re.Match[bytes]":
        regex = re.compile(pattern)
        while True:
            m = regex.search(seen[0])
            if m:
                return m
            try:
                data = chunks.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError("no %r in %r" % (pattern, seen[0]))
            if data is None:
                raise AssertionError("serve exited; output %r, stderr %r" % (seen[0], proc.stderr.read()))
            seen[0] += data

    try:
        m = wait_for(rb"serving .+ on (\S+), lock (\S+)\r?\n")
        socket_path, lock_path = m.group(1).decode(), m.group(2).decode()
        with open(lock_path) as f:
            nonce = json.load(f)["headers"]["Authorization"].split(" ", 1)[1]

        async def scenario() -> None:
            cli = Cli(socket_path, nonce)
            await cli.handshake()
            pending = asyncio.ensure_future(cli.call_tool("open_diff", {
                "original_file_path": os.path.join(folder, "a.txt"), "new_file_contents": "new\n",
                "tab_name": "t"}))
            await asyncio.get_event_loop().run_in_executor(None, wait_for, rb"diff 1 waits")
            os.write(master, b"accept\n")  # typed on the terminal
            answer = tool_json(await asyncio.wait_for(pending, WAIT))
            assert answer["result"] == "SAVED"
            cli.close()

        ide_wire.run(scenario())
        os.write(master, b"quit\n")
        assert proc.wait(WAIT) == 0
        text = seen[0]
        if no_color:
            assert b"\x1b[" not in text
            assert b"\n+new" in text.replace(b"\r", b"")
        else:
            assert b"\x1b[32m+new\x1b[0m" in text
            assert b"\x1b[31m-old\x1b[0m" in text
        assert not os.path.exists(lock_path) and not os.path.exists(socket_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        os.close(master)


# ------------------------------------------------------------------- pure helpers


def test_split_args_quotes_and_backslashes() -> None:
    assert serve_commands.split_args('select "my file.py" 1-2', 1) == (["select"], '"my file.py" 1-2')
    assert serve_commands.split_args('"my file.py" 1-2', 2) == (["my file.py", "1-2"], "")
    assert serve_commands.split_args(r"C:\src\x.py 3 error it's  broken", 3) == ([r"C:\src\x.py", "3", "error"],
                                                                       "it's  broken")
    with pytest.raises(serve_commands.CommandError):
        serve_commands.split_args("'open", 1)


def test_file_text_ranges_follow_editor_numbering(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "f.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("ab\r\n😀😀c\rlast")
    text = serve_commands.FileText(path)
    assert text.lines == ["ab", "😀😀c", "last"]
    rng = text.resolve("2:2-2:4")  # a backwards selection is normalised too
    assert rng == ((2, 2), (2, 4))
    assert text.text_of(rng) == "😀c"
    assert text.wire(rng[0]) == (1, 2) and text.wire(rng[1]) == (1, 5)
    assert text.text_of(text.resolve("1-2")) == "ab\r\n😀😀c"
    assert text.resolve("3:5-1:1") == ((1, 1), (3, 5))
    assert text.resolve("2:3") == ((2, 3), (2, 3))


def test_unified_diff_lines_end_at_newline_only_and_names_stay_one_line(tmp_path: Any) -> None:
    """Lines end at "\\n", as `diff` and `patch` count them: `str.splitlines` also
    ended one at a form feed, "\\r" or U+2028 (the hunks miscounted, the no-newline
    marker mid-file, and a file of "\\r"-ended lines slipped past the line limits). A
    newline in the file's name would forge header lines: escaped."""
    from ide_protocol.server.diffs import DiffRequest, PendingDiffs

    async def diffed() -> Any:
        diff = DiffRequest(PendingDiffs(), "t", "/w/x\n+++ b/etc/passwd", "a\x0cb\rc\u2028e\nsame\n", None,
                           original_contents="a\x0cb\rc\u2028d\nsame\n")
        many = DiffRequest(PendingDiffs(), "t", "/w/y", "z\r" * 30000, None, original_contents="y\n" * 30000)
        return diff.unified_diff_lines(), many.small_enough_to_diff(), DiffRequest(
            PendingDiffs(), "t", "/w/z", "q\n" * 30000, None).small_enough_to_diff()

    lines, small, large = asyncio.run(diffed())
    assert lines == ["--- a/w/x\\n+++ b/etc/passwd", "+++ b/w/x\\n+++ b/etc/passwd", "@@ -1,2 +1,2 @@",
                     "-a\x0cb\rc\u2028d", "+a\x0cb\rc\u2028e", " same"]
    assert small is False and large is False  # 30 000 lines on a side, whatever ends the other's


def test_unified_diff_marks_missing_final_newline(tmp_path: Any) -> None:
    from ide_protocol.server.diffs import DiffRequest, PendingDiffs

    async def diffed() -> List[str]:  # (a DiffRequest's future belongs to a loop)
        diff = DiffRequest(PendingDiffs(), "t", os.path.join(str(tmp_path), "x.txt"), "one\nthree\n", None,
                           original_contents="one\ntwo")
        return serve_diffs.unified_diff(diff, str(tmp_path))

    lines = asyncio.run(diffed())
    assert lines[:2] == ["--- a/x.txt", "+++ b/x.txt"]
    assert lines[3:] == [" one", "-two", "\\ No newline at end of file", "+three"]
