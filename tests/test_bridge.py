"""`python3 -m ide_protocol bridge`: a real bridge process on real pipes, driven as an
editor drives it (docs/BRIDGE.md), with a CLI-like client on its socket (tests/ide_wire)."""
from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional

import pytest

from ide_protocol.common.paths import path_to_uri
from ide_protocol.programs.bridge_positions import codepoints_of_bytes, to_utf16

import ide_wire
import platforms
from ide_wire import Cli, tool_json


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 20.0
# Line 1 holds characters of 1, 2, 3 and 4 UTF-8 bytes; 😀 is 2 UTF-16 units.
SAMPLE = "first\naé€😀b😀c\nthird\n"
LINE1 = "aé€😀b😀c"


def _no_constant(name: str) -> Any:
    raise AssertionError("the bridge wrote %s, which is not JSON" % name)


def strict_json(line: bytes) -> Any:
    """A line of the bridge's, decoded as a strict JSON parser (JavaScript's, Emacs')
    decodes it: UTF-8, no NaN or Infinity."""
    return json.loads(line.decode("utf-8"), parse_constant=_no_constant)


class BridgeProc:
    """The bridge subprocess: JSON lines written to its stdin, read from its stdout."""

    def __init__(self, tmp_path: Any, *args: str) -> None:
        self.folder = str(tmp_path / "ws")
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, "a.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(SAMPLE)   # as is: no CRLF on Windows
        self.home = str(tmp_path / "home")
        os.makedirs(self.home, exist_ok=True)
        self.lock_dir = os.path.join(self.home, "ide")
        env = dict(os.environ, COPILOT_HOME=self.home, PYTHONPATH=REPO)
        self.proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "bridge", self.folder, "--debounce", "0",
                                      *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=REPO)
        self.messages: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self.raw: List[bytes] = []
        self.reading = threading.Event()  # cleared: the editor stops reading (after the line in hand)
        self.reading.set()
        threading.Thread(target=self._pump, daemon=True).start()
        self.ready: Dict[str, Any] = {}

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self.messages.put(strict_json(line))  # every line must be JSON, strictly
            self.reading.wait()
        self.messages.put(None)

    def send(self, message: Any) -> None:
        data = message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next(self, timeout: float = WAIT) -> Optional[Dict[str, Any]]:
        return self.messages.get(timeout=timeout)

    def expect(self, kind: str, timeout: float = WAIT) -> Dict[str, Any]:
        """The next message, which must be of type `kind` (no message is skipped)."""
        message = self.next(timeout)
        assert message is not None and message.get("type") == kind, (kind, message)
        return message

    async def aexpect(self, kind: str) -> Dict[str, Any]:
        return await asyncio.get_event_loop().run_in_executor(None, self.expect, kind)

    async def reject(self, diff: Dict[str, Any], call: "asyncio.Future[Any]") -> None:
        """The editor rejects `diff`: the CLI's `call` is answered REJECTED, then the
        bridge says the diff closed."""
        self.send({"type": "diff_answer", "diff": diff["id"], "accept": False})
        assert tool_json(await asyncio.wait_for(call, WAIT))["result"] == "REJECTED"
        await self.aexpect("diff_closed")

    async def aexpect_any(self) -> Dict[str, Any]:
        message = await asyncio.get_event_loop().run_in_executor(None, self.next)
        assert message is not None
        return message

    def hello(self, unit: str = "utf-16", **extra: Any) -> Dict[str, Any]:
        self.send(dict({"type": "hello", "protocol": 1, "unit": unit}, **extra))
        self.ready = self.expect("ready")
        return self.ready

    def cli(self) -> Cli:
        with open(self.ready["lock"], encoding="utf-8") as f:
            lock = json.load(f)
        return Cli(lock["socketPath"], lock["headers"]["Authorization"].split(" ", 1)[1])

    async def connected_cli(self) -> Cli:
        """A CLI-like client with an MCP session, once the bridge said `connected`."""
        cli = self.cli()
        await cli.handshake()
        await self.aexpect("connected")
        return cli

    def locks(self) -> List[str]:
        return [n for n in os.listdir(self.lock_dir) if n.endswith(".lock")] if os.path.isdir(self.lock_dir) else []

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = WAIT) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


@pytest.fixture
def bridge(tmp_path: Any) -> Any:
    started: List[BridgeProc] = []

    def make(*args: str) -> BridgeProc:
        b = BridgeProc(tmp_path, *args)
        started.append(b)
        return b

    yield make
    for b in started:
        b.kill()


def assert_stopped_cleanly(b: BridgeProc, reason: str) -> None:
    """The bridge ends: sessions still open are reported ended, then `stopped`, then
    the end of its output; exit status 0, no lock, no socket."""
    message = b.next()
    while message is not None and message["type"] == "disconnected":
        assert message["reason"] == "server stopped"
        message = b.next()
    assert message is not None and message["type"] == "stopped" and message["reason"] == reason, message
    assert b.next() is None
    assert b.wait() == 0
    assert b.locks() == []
    assert not os.path.exists(b.ready["socket"])


def pos(line: int, character: int) -> Dict[str, int]:
    return {"line": line, "character": character}


# ---------------------------------------------------------------------- positions


def test_columns_of_each_unit_become_utf16() -> None:
    # a(1 byte) é(2) €(3) 😀(4 bytes, 2 units) b 😀 c
    assert [to_utf16("codepoints", LINE1, c) for c in range(8)] == [0, 1, 2, 3, 5, 6, 8, 9]
    assert [to_utf16("bytes", LINE1, b) for b in (0, 1, 3, 6, 10, 11, 15, 16)] == [0, 1, 2, 3, 5, 6, 8, 9]
    assert to_utf16("utf-16", LINE1, 4) == 4
    # Inside a multi-byte character: its start; past the end: the end.
    assert codepoints_of_bytes(LINE1, 2) == 1 and codepoints_of_bytes(LINE1, 8) == 3
    assert to_utf16("bytes", LINE1, 99) == 9 and to_utf16("codepoints", LINE1, 99) == 9


# ---------------------------------------------------------------------- the session


def test_hello_ready_lock_and_status(bridge: Any) -> None:
    b = bridge("--name", "Emacs")
    b.send({"type": "status", "id": 1})
    error = b.expect("error")
    assert error == {"type": "error", "line": 1, "id": 1, "message": "status before hello: say hello first"}
    b.send({"type": "hello", "protocol": 2, "unit": "utf-16"})
    assert "protocol 2 is not spoken here" in b.expect("error")["message"]
    b.send({"type": "hello", "protocol": 1, "unit": "lines"})
    assert "'unit' must be one of utf-16, codepoints, bytes" in b.expect("error")["message"]
    assert b.locks() == []  # no lock before a good hello
    ready = b.hello("codepoints", name="ignored: --name wins")
    assert ready["protocol"] == 1 and ready["unit"] == "codepoints" and ready["name"] == "Emacs"
    assert ready["folders"] == [b.folder] and ready["pid"] == b.proc.pid
    assert b.locks() == [os.path.basename(ready["lock"])]
    with open(ready["lock"], encoding="utf-8") as f:
        lock = json.load(f)
    assert lock["ideName"] == "Emacs" and lock["workspaceFolders"] == [b.folder] and lock["isTrusted"] is False
    if not platforms.WINDOWS:  # (POSIX modes; Windows locks have ACLs)
        assert oct(os.stat(ready["lock"]).st_mode & 0o777) == "0o600"
    b.send({"type": "hello", "protocol": 1, "unit": "utf-16"})
    assert b.expect("error")["message"] == "hello: already said (the bridge serves one editor)"
    b.send({"type": "status", "id": "s"})
    status = b.expect("status")
    assert status["id"] == "s" and status["sessions"] == [] and status["diffs"] == [] and status["lock"] == ready["lock"]
    b.send({"type": "stop"})
    assert_stopped_cleanly(b, "stop")


def test_every_bad_line_gets_an_error_naming_it_and_the_bridge_goes_on(bridge: Any) -> None:
    b = bridge()
    b.hello()
    bad = [
        (b"{not json\n", "not JSON"),
        (b"\xff\xfe{}\n", "not UTF-8"),
        (b"[1, 2]\n", "a message must be a JSON object, not an array"),
        (b'{"id": 7}\n', 'a message needs a "type" (a string), not null'),
        (b'{"type": "frobnicate"}\n', "unknown message type 'frobnicate'"),
        (b"[" * 100000 + b"]" * 100000 + b"\n", "maximum recursion depth"),
        (b"[" * 300 + b"]" * 300 + b"\n", "nested more than 200 deep"),
        (b'{"type": "selection", "path": 3}\n', "selection: 'path' must be a file path"),
        (b'{"type": "selection", "path": "a.txt", "start": {"line": -1, "character": 0}}\n',
         "'start.line' must be an integer >= 0, not -1"),
        (b'{"type": "selection", "path": "a.txt", "start": [0, 0]}\n', "'start' must be a position"),
        (b'{"type": "diagnostics", "path": "a.txt"}\n', "'diagnostics' is required: an array"),
        (b'{"type": "diagnostics", "path": "a.txt", "diagnostics": [{"message": "m", "severity": "fatal", '
         b'"start": {"line": 0, "character": 0}}]}\n', "'diagnostics[0].severity' must be one of Error, Warning, "
                                                     "Information, Hint (any case), not 'fatal'"),
        (b'{"type": "add_selection", "path": "a.txt"}\n', "'start' is required"),
        (b'{"type": "folders", "folders": []}\n', "'folders' must be a non-empty array"),
        (b'{"type": "diff_answer", "diff": 99, "accept": true}\n', "no pending diff 99"),
        (b'{"type": "diff_answer", "diff": "1", "accept": true}\n', "'diff' must be an integer, not '1'"),
        (b'{"type": "diff_answer", "diff": 1, "accept": "yes"}\n', "'accept' must be true or false"),
    ]
    for number, (line, text) in enumerate(bad, start=2):
        b.send(line)
        error = b.expect("error")
        assert error["line"] == number and text in error["message"], (line[:60], error)
    b.send(b"\n")  # blank lines are skipped, but counted
    b.send({"type": "status", "id": 1})
    assert b.expect("status")["id"] == 1
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


@pytest.mark.parametrize("unit, start, end", [
    ("utf-16", 3, 8),
    ("codepoints", 3, 6),
    ("bytes", 6, 15),
])
def test_selection_in_each_unit_reaches_the_cli_in_utf16(bridge: Any, unit: str, start: int, end: int) -> None:
    b = bridge()
    b.hello(unit)
    path = os.path.join(b.folder, "a.txt")

    async def scenario() -> None:
        cli = b.cli()
        await cli.handshake()
        assert (await b.aexpect("connected"))["client"] == "copilot-cli"
        _, stream = await cli.open_stream()
        b.send({"type": "selection", "path": path, "text": "😀b😀", "start": pos(1, start), "end": pos(1, end),
                "lines": {"1": LINE1}})
        note = await stream.next_notification()
        assert note["method"] == "selection_changed"
        # The drive letter in lower case on Windows, in filePath as in fileUrl (PROTOCOL.md §6).
        assert note["params"] == {"text": "😀b😀", "filePath": platforms.wire_path(path), "fileUrl": path_to_uri(path),
                                  "selection": {"start": pos(1, 3), "end": pos(1, 8), "isEmpty": False}}
        # No active editor: get_selection answers the last one, current false.
        b.send({"type": "selection", "path": None})
        b.send({"type": "status", "id": 2})
        await b.aexpect("status")
        selection = tool_json(await cli.call_tool("get_selection", {}))
        assert selection["current"] is False and selection["selection"]["end"] == pos(1, 8)
        await cli.delete()
        disconnected = await b.aexpect("disconnected")
        assert disconnected["sessions"] == 0 and disconnected["session"] == cli.session_id
        cli.close()

    ide_wire.run(scenario())
    if unit != "utf-16":  # without the line's text there is nothing to convert by
        b.send({"type": "selection", "path": path, "text": "", "start": pos(1, 2)})
        message = b.expect("error")["message"]
        assert "line 1" in message and '"lines"' in message
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


def test_diagnostics_references_and_folders(bridge: Any, tmp_path: Any) -> None:
    b = bridge()
    b.hello("codepoints")
    path = os.path.join(b.folder, "a.txt")
    uri = path_to_uri(path)

    async def scenario() -> None:
        cli = await b.connected_cli()
        _, stream = await cli.open_stream()
        b.send({"type": "diagnostics", "path": path, "lines": {"1": LINE1}, "diagnostics": [
            {"message": "emoji", "severity": "warning", "start": pos(1, 3), "end": pos(1, 4), "source": "flymake"},
            {"message": "tail", "start": pos(1, 6), "code": 12}]})
        note = await stream.next_notification()
        assert note["method"] == "diagnostics_changed" and note["params"]["uris"][0]["uri"] == uri
        diags = tool_json(await cli.call_tool("get_diagnostics", {"uri": uri}))
        assert diags == [{"uri": uri, "filePath": platforms.wire_path(path), "diagnostics": [
            {"message": "emoji", "severity": "Warning", "range": {"start": pos(1, 3), "end": pos(1, 5)},
             "source": "flymake", "code": None},
            {"message": "tail", "severity": "Error", "range": {"start": pos(1, 8), "end": pos(1, 8)},
             "source": None, "code": 12}]}]
        b.send({"type": "diagnostics", "path": path, "diagnostics": []})   # cleared, per file
        await stream.next_notification()
        assert tool_json(await cli.call_tool("get_diagnostics", {})) == []
        b.send({"type": "diagnostics", "path": path, "diagnostics": [{"message": "x", "start": pos(0, 0)}],
                "lines": {"0": "first"}})
        await stream.next_notification()
        b.send({"type": "clear_diagnostics"})
        await stream.next_notification()
        assert tool_json(await cli.call_tool("get_diagnostics", {})) == []

        b.send({"type": "add_file", "id": "f", "path": path})
        assert await b.aexpect("sent") == {"type": "sent", "sessions": 1, "id": "f"}
        note = await stream.next_notification()
        assert note["method"] == "add_file_reference"
        assert note["params"] == {"filePath": platforms.wire_path(path), "fileUrl": uri, "selection": None,
                                  "selectedText": None}
        b.send({"type": "add_selection", "path": path, "start": pos(1, 3), "end": pos(1, 6), "text": "😀b😀",
                "lines": {"1": LINE1}})
        assert (await b.aexpect("sent"))["sessions"] == 1
        note = await stream.next_notification()
        assert note["method"] == "add_selection"
        assert note["params"]["selection"] == {"start": pos(1, 3), "end": pos(1, 8)}
        assert note["params"]["selectedText"] == "😀b😀"
        cli.close()

    ide_wire.run(scenario())
    old = b.ready["lock"]
    other = str(tmp_path / "other")
    os.makedirs(other)
    b.send({"type": "folders", "folders": [b.folder, other]})
    lock = b.expect("lock")
    # The same lock, rewritten in place (PROTOCOL.md §1, "Changing folders").
    assert lock["folders"] == [b.folder, other] and lock["lock"] == old
    assert b.locks() == [os.path.basename(old)]
    with open(old, encoding="utf-8") as fh:
        assert json.load(fh)["workspaceFolders"] == [b.folder, other]
    b.ready = lock
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


def test_diffs_accepted_rejected_closed_by_the_cli_and_wrong_ids(bridge: Any) -> None:
    b = bridge()
    b.hello()
    path = os.path.join(b.folder, "a.txt")

    async def scenario() -> None:
        cli = await b.connected_cli()
        accepted = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "new 😀\n", "tab_name": "tab A"}))
        diff = await b.aexpect("diff")
        assert diff == {"type": "diff", "id": 1, "tab": "tab A", "path": path, "original": SAMPLE,
                        "new": "new 😀\n", "new_file": False, "original_exact": True, "session": cli.session_id}
        b.send({"type": "status"})
        assert (await b.aexpect("status"))["diffs"] == [1]
        assert not accepted.done()
        b.send({"type": "diff_answer", "diff": 1, "accept": True})
        answer = tool_json(await asyncio.wait_for(accepted, WAIT))
        assert answer["result"] == "SAVED" and answer["trigger"] == "accepted_via_button"
        closed = await b.aexpect("diff_closed")
        assert closed == {"type": "diff_closed", "id": 1, "tab": "tab A", "path": path, "result": "SAVED",
                          "trigger": "accepted_via_button"}
        b.send({"type": "diff_answer", "diff": 1, "accept": False})   # answered already
        assert "no pending diff 1" in (await b.aexpect("error"))["message"]

        rejected = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": os.path.join(b.folder, "new.txt"), "new_file_contents": "x", "tab_name": "B"}))
        diff = await b.aexpect("diff")
        assert diff["id"] == 2 and diff["new_file"] is True and diff["original"] == ""
        assert diff["original_exact"] is True
        b.send({"type": "diff_answer", "diff": 2, "accept": False})
        answer = tool_json(await asyncio.wait_for(rejected, WAIT))
        assert answer["result"] == "REJECTED" and answer["trigger"] == "rejected_via_button"
        assert (await b.aexpect("diff_closed"))["result"] == "REJECTED"

        # Answered in the terminal: the CLI closes the diff (PROTOCOL.md §4).
        waiting = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "y", "tab_name": "C"}))
        assert (await b.aexpect("diff"))["id"] == 3
        assert tool_json(await cli.call_tool("close_diff", {"tab_name": "C"}))["already_closed"] is False
        closed = await b.aexpect("diff_closed")
        assert closed["id"] == 3 and closed["result"] == "REJECTED" and closed["trigger"] == "closed_via_tool"
        assert tool_json(await asyncio.wait_for(waiting, WAIT))["trigger"] == "closed_via_tool"
        cli.close()

    ide_wire.run(scenario())
    b.send({"type": "stop"})
    assert_stopped_cleanly(b, "stop")


def test_a_10_mb_diff_arrives_whole(bridge: Any) -> None:
    b = bridge()
    b.hello()
    path = os.path.join(b.folder, "a.txt")
    big = "".join("line é 😀 %07d\n" % i for i in range(600000))
    assert len(big.encode("utf-8")) > 10 * 1024 * 1024

    async def scenario() -> None:
        cli = await b.connected_cli()
        call = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": big, "tab_name": "big"}))
        diff = await b.aexpect("diff")
        assert diff["new"] == big and diff["original"] == SAMPLE
        b.send({"type": "diff_answer", "diff": diff["id"], "accept": True})
        assert tool_json(await asyncio.wait_for(call, 120))["result"] == "SAVED"
        await b.aexpect("diff_closed")
        cli.close()

    ide_wire.run(scenario(), timeout=180)
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


def test_editor_closing_stdin_mid_diff_rejects_it_as_client_disconnected(bridge: Any) -> None:
    b = bridge()
    b.hello()
    path = os.path.join(b.folder, "a.txt")

    async def scenario() -> None:
        cli = await b.connected_cli()
        call = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "z", "tab_name": "T"}))
        await b.aexpect("diff")
        b.close_stdin()   # the editor died
        answer = tool_json(await asyncio.wait_for(call, WAIT))
        assert answer["result"] == "REJECTED" and answer["trigger"] == "client_disconnected"
        cli.close()

    ide_wire.run(scenario())
    messages = []
    while True:
        message = b.next()
        if message is None:
            break
        messages.append(message)
    assert messages[-1] == {"type": "stopped", "reason": "end of input"}
    assert {"type": "diff_closed", "id": 1, "tab": "T", "path": path, "result": "REJECTED",
            "trigger": "client_disconnected"} in messages
    assert b.wait() == 0 and b.locks() == []
    with open(path, encoding="utf-8") as f:
        assert f.read() == SAMPLE


@platforms.posix_signals
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_signals_remove_the_lock(bridge: Any, signame: str) -> None:
    b = bridge()
    b.hello()
    assert len(b.locks()) == 1
    b.proc.send_signal(getattr(signal, signame))
    assert_stopped_cleanly(b, "signal")


def test_output_with_lone_surrogates_stays_utf8(bridge: Any) -> None:
    b = bridge()
    b.hello()

    async def scenario() -> None:
        cli = await b.connected_cli()
        body = b'{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"open_diff","arguments":' \
               b'{"original_file_path":%s,"new_file_contents":"a\\ud800b","tab_name":"S"}}}' % \
               json.dumps(os.path.join(b.folder, "a.txt")).encode()
        call = asyncio.ensure_future(cli.post(body))
        diff = await b.aexpect("diff")   # _pump decodes every line as strict UTF-8
        assert diff["new"] == "a\ufffdb"
        b.send({"type": "diff_answer", "diff": diff["id"], "accept": False})
        await asyncio.wait_for(call, WAIT)
        cli.close()

    ide_wire.run(scenario())
    b.close_stdin()
    b.expect("diff_closed")
    assert_stopped_cleanly(b, "end of input")


def test_a_unified_diff_marks_a_last_line_without_newline_and_a_large_one_is_left_out(bridge: Any) -> None:
    """A removed last line without a newline had the added line glued to it (`-DEBUG =
    False+import os...`: diff-mode showed one removal and no addition); it is marked as
    `diff` marks it. Texts too large to diff quickly (difflib took minutes on 96 000
    short lines, a core busy, the diff never sent) come without `unified`: the editor
    shows the proposal."""
    b = bridge()
    b.hello("codepoints", unified_diff=True)
    path = os.path.join(b.folder, "settings.py")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("DEBUG = False")

    async def scenario() -> None:
        cli = await b.connected_cli()
        for n, new in enumerate(["import os; os.system('x')\n", "x\n" * 30000]):
            call = asyncio.ensure_future(cli.call_tool("open_diff", {
                "original_file_path": path, "new_file_contents": new, "tab_name": "T%d" % n}))
            diff = await b.aexpect("diff")
            if n == 0:
                assert diff["unified"].endswith("@@ -1 +1 @@\n-DEBUG = False\n\\ No newline at end of file\n"
                                                "+import os; os.system('x')\n"), diff["unified"]
            else:
                assert "unified" not in diff and diff["new"] == new
            await b.reject(diff, call)
        cli.close()

    ide_wire.run(scenario())
    b.send({"type": "stop"})
    assert_stopped_cleanly(b, "stop")


def test_an_editor_that_stops_reading_loses_messages_whole_and_a_diff_it_cannot_see_is_rejected(
        bridge: Any) -> None:
    """Past the output limit (the editor does not read) messages are dropped, whole: a
    `dropped` message says how many, and a diff that could not be handed over is
    rejected at once (before, it waited for an answer nobody could give, and the notice
    was a line of plain text in the JSON stream)."""
    b = bridge("--output-limit", "300000")
    b.hello("codepoints")
    path = os.path.join(b.folder, "a.txt")
    big = "x" * 200000 + "\n"

    async def scenario() -> None:
        cli = await b.connected_cli()
        b.reading.clear()
        calls = [asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": big + str(n), "tab_name": "T%d" % n}))
            for n in range(4)]
        done, _ = await asyncio.wait(calls, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        assert done and all(tool_json(c.result())["result"] == "REJECTED" for c in done)  # not seen: rejected
        b.reading.set()

        def next_message() -> Optional[Dict[str, Any]]:
            try:
                return b.next(timeout=0.2)
            except queue.Empty:
                return None

        # The editor reads again: each diff it is shown it rejects; the others (dropped
        # whenever the output was full, before or after the first) are answered already.
        while not all(call.done() for call in calls):
            message = await asyncio.get_event_loop().run_in_executor(None, next_message)
            if message is not None and message["type"] == "diff":
                b.send({"type": "diff_answer", "diff": message["id"], "accept": False})
        for call in calls:
            assert tool_json(await asyncio.wait_for(call, WAIT))["result"] == "REJECTED"
        cli.close()

    ide_wire.run(scenario())
    b.send({"type": "stop"})
    rest = []
    while True:
        message = b.next()
        if message is None:
            break
        rest.append(message)
    seen = [json.loads(line.decode("utf-8")) for line in b.raw]  # every line JSON (the pump checked)
    assert any(m["type"] == "dropped" and m["messages"] >= 1 for m in seen), [m["type"] for m in seen]


def test_a_diff_of_a_file_that_is_not_utf8_says_so(bridge: Any) -> None:
    """Its invalid bytes read as U+FFFD: a proposal holding U+FFFD there would look
    unchanged, yet accepting changes the file's bytes; the editor is told."""
    b = bridge()
    b.hello("codepoints")
    path = os.path.join(b.folder, "cafe.txt")
    with open(path, "wb") as f:
        f.write(b"caf\xe9\n")

    async def scenario() -> None:
        cli = await b.connected_cli()
        call = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "caf\ufffd\n", "tab_name": "T"}))
        diff = await b.aexpect("diff")
        assert diff["original"] == "caf\ufffd\n" and diff["original_exact"] is False
        await b.reject(diff, call)
        cli.close()

    ide_wire.run(scenario())
    b.send({"type": "stop"})
    assert_stopped_cleanly(b, "stop")


def test_hello_may_ask_for_unified_diffs(bridge: Any) -> None:
    b = bridge()
    b.hello("codepoints", unified_diff=True)
    path = os.path.join(b.folder, "a.txt")

    async def scenario() -> None:
        cli = await b.connected_cli()
        call = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": SAMPLE.replace("third", "3rd"), "tab_name": "U"}))
        diff = await b.aexpect("diff")
        name = path.lstrip("/")
        assert diff["unified"] == ("--- a/%s\n+++ b/%s\n@@ -1,3 +1,3 @@\n first\n aé€😀b😀c\n-third\n+3rd\n"
                                   % (name, name))
        await b.reject(diff, call)
        cli.close()

    ide_wire.run(scenario())
    b.send({"type": "stop"})
    assert_stopped_cleanly(b, "stop")


# ---------------------------------------------------------------------- whatever the editor sends


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


def test_an_id_nested_deep_never_stops_the_bridge(bridge: Any) -> None:
    """An id nested about 980 deep parsed, but echoing it in the error overflowed the
    recursion limit: the input task ended silently, and the bridge answered nothing,
    ignored the end of its input (its lock stayed) and never read a diff's answer.
    (Where parsing succeeds and echoing fails depends on the Python: every depth from
    900 to 1000 is sent.)"""
    b = bridge()
    b.hello()
    path = os.path.join(b.folder, "a.txt")

    def deep(depth: int) -> bytes:
        return b'{"type": "frobnicate", "id": ' + b"[" * depth + b"]" * depth + b"}\n"

    for depth in range(900, 1001):
        b.send(deep(depth))
    for line in range(2, 103):
        error = b.expect("error")
        assert error["line"] == line and error["message"].startswith("not JSON: ") and "id" not in error, error
    b.send({"type": "frobnicate", "id": nested(150)})   # within the limits: echoed
    error = b.expect("error")
    assert error["line"] == 103 and error["id"] == nested(150)
    b.send({"type": "status", "id": nested(199)})
    assert b.expect("status")["id"] == nested(199)

    async def scenario() -> None:
        cli = await b.connected_cli()
        call = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "z", "tab_name": "T"}))
        diff = await b.aexpect("diff")
        b.send(deep(980))
        assert (await b.aexpect("error"))["line"] == 105
        await b.reject(diff, call)
        cli.close()

    ide_wire.run(scenario())
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


@pytest.mark.parametrize("constant", ["NaN", "-Infinity", "Infinity", "1e999", "-1e400"])
def test_an_id_that_json_cannot_carry_is_refused_and_never_echoed(bridge: Any, constant: str) -> None:
    """`"id": NaN` was echoed as bare NaN, which JavaScript's and Emacs' parsers refuse
    (the whole line lost); `1e999` became Infinity."""
    b = bridge()
    b.hello()
    b.send(('{"type": "status", "id": %s}\n' % constant).encode())
    error = b.expect("error")   # (the pump decodes every line strictly)
    assert error["line"] == 2 and error["message"].startswith("not JSON: ") and "id" not in error
    b.send({"type": "status", "id": 1.5e300})
    assert b.expect("status")["id"] == 1.5e300
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


def test_a_line_over_16_mib_costs_one_error_and_line_numbers_stay_true(bridge: Any) -> None:
    """Before: a second, spurious error for the rest of the line, and every later error
    named the wrong line."""
    b = bridge()
    b.hello()
    long_line = b'{"type": "status", "pad": "' + b"x" * (16 * 1024 * 1024) + b'"}\n'
    b.send(long_line)
    error = b.expect("error")
    assert error["line"] == 2 and error["message"] == (
        "line too long: %d bytes (at most %d): ignored" % (len(long_line) - 1, 16 * 1024 * 1024))
    b.send(b"\n")
    b.send(b"{bad\n")
    assert b.expect("error")["line"] == 4
    b.send({"type": "status", "id": 5})
    assert b.expect("status")["id"] == 5
    b.send(b"x" * (20 * 1024 * 1024) + b"\n" + b"{bad\n")  # a long line and the next in one write
    assert b.expect("error")["line"] == 6
    assert b.expect("error")["line"] == 7
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")


#: The JSON types of docs/BRIDGE.md's "Field types", as the test knows them: which
#: values of each are accepted. Values of any other type (and, for a required field,
#: null) must be refused with an error naming the field.
def _path_ok(v: Any) -> bool:
    return isinstance(v, str) and v != "" and "\0" not in v


def _pos_ok(v: Any) -> bool:
    return isinstance(v, dict) and all(type(v.get(k)) is int and v[k] >= 0 for k in ("line", "character"))


DOC_TYPES = {
    "integer (this is protocol 1)": lambda v: type(v) is int,
    "string: `utf-16`, `codepoints` or `bytes`": lambda v: isinstance(v, str),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "path: a string, not empty, without NUL (a `selection`'s may be `null`: no active editor)": _path_ok,
    'position: object `{"line": L, "character": C}`, integers >= 0': _pos_ok,
    "object: each value a string (the text of the line its key names)":
        lambda v: isinstance(v, dict) and all(isinstance(t, str) for t in v.values()),
    "array of objects (the fields above)": lambda v: isinstance(v, list) and all(isinstance(i, dict) for i in v),
    "string: `Error`, `Warning`, `Information` or `Hint`, any case (`warn`, `info` too)":
        lambda v: isinstance(v, str) and v.lower() in ("error", "warning", "information", "hint", "warn", "info"),
    "string or integer": lambda v: isinstance(v, str) or type(v) is int,
    "non-empty array of paths": lambda v: isinstance(v, list) and bool(v) and all(_path_ok(f) for f in v),
    "integer": lambda v: type(v) is int,
    "any JSON value": lambda v: True,
}

#: Values of every JSON type, and values of the right type that are still wrong.
PALETTE: List[Any] = [True, False, 0, -1, 7, 1.5, 1.0, "", "s", "a\0b", "fatal", [], [1], ["a", ""], {},
                      {"line": -1, "character": 0}, {"line": True, "character": 0}, {"line": 0, "character": 1.5},
                      {"0": 5}, [{"message": 1}], nested(150)]


def doc_fields() -> Dict[str, Dict[str, bool]]:
    """From BRIDGE.md's "From the editor" table: each message type's fields (those of a
    diagnostic as `diagnostics[0].NAME`), and whether each is required (no `?`)."""
    with open(os.path.join(REPO, "docs", "BRIDGE.md"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("### From the editor", 1)[1].strip().split("\n\n", 1)[0]
    fields: Dict[str, Dict[str, bool]] = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        kind = cells[0].strip("`")
        if kind == "selection" and cells[1] == "`path`: null":
            continue
        inner = ""
        if "[{" in cells[1]:
            inner = cells[1][cells[1].index("[{") + 2:cells[1].index("}]")]
            cells[1] = cells[1].replace(inner, "")
        found = fields.setdefault(kind, {})
        for prefix, part in (("", cells[1]), ("diagnostics[0].", inner)):
            for name, mark in __import__("re").findall(r"`([a-z_]+)`(\??)", part):
                found[prefix + name] = mark != "?"
    return fields


def doc_types() -> Dict[str, Any]:
    with open(os.path.join(REPO, "docs", "BRIDGE.md"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("#### Field types", 1)[1].split("| field | JSON type |", 1)[1].split("\n\n", 1)[0]
    types = {}
    for row in table.strip().splitlines()[1:]:
        names, kind = [c.strip() for c in row.strip("|").split("|")]
        assert kind in DOC_TYPES, "a type the test does not know: %r" % kind
        for name in __import__("re").findall(r"`([a-z_]+)`", names):
            types[name] = DOC_TYPES[kind]
    return types


def test_the_documented_fields_are_the_checked_ones() -> None:
    from ide_protocol.programs.bridge_messages import DIAGNOSTIC_FIELDS, FIELDS
    checked = {kind: {name: required for name, _k, required in fields} for kind, fields in FIELDS.items()}
    checked["diagnostics"].update({"diagnostics[0]." + name: required for name, _k, required in DIAGNOSTIC_FIELDS})
    checked["selection"]["path"] = True   # (documented as required; null or absent: no active editor)
    assert doc_fields() == checked
    assert set(doc_types()) >= {name.split(".")[-1] for fields in checked.values() for name in fields} | {"id"}


def test_every_documented_field_of_every_wrong_type_costs_one_error_naming_it(bridge: Any) -> None:
    """Each field of each message from the editor, given a value of every JSON type it
    does not take (nested ones too, in every position): an `error` naming the field, its
    line and the message's id; then the bridge goes on. Before, `protocol: true`,
    `unified_diff: "yes"`, a list `source`, an object `code` or an integer `severity`
    were taken silently, and one error named `None` for the message type."""
    b = bridge()
    pos = {"line": 0, "character": 1}
    good: Dict[str, Dict[str, Any]] = {
        "hello": {"protocol": 1, "unit": "utf-16", "name": "E", "unified_diff": True},
        "selection": {"path": "/w/a.txt", "text": "t", "start": pos, "end": pos, "lines": {"0": "first"}},
        "diagnostics": {"path": "/w/a.txt", "lines": {"0": "first"}, "diagnostics": [
            {"message": "m", "severity": "Warning", "start": pos, "end": pos, "source": "s", "code": "c"}]},
        "add_file": {"path": "/w/a.txt", "start": pos, "end": pos, "text": "t", "lines": {"0": "first"}},
        "add_selection": {"path": "/w/a.txt", "start": pos, "end": pos, "text": "t", "lines": {"0": "first"}},
        "folders": {"folders": ["/w"]},
        "diff_answer": {"diff": 1, "accept": True},
    }
    types = doc_types()
    fields = doc_fields()
    number = 0
    sent = 0

    def bad(kind: str, field: str, value: Any) -> None:
        nonlocal number, sent
        message: Dict[str, Any] = json.loads(json.dumps(dict(good[kind], type=kind)))
        holder, name = message, field
        if field.startswith("diagnostics[0]."):
            holder, name = message["diagnostics"][0], field.split(".", 1)[1]
        if value is None:
            holder.pop(name)
        else:
            holder[name] = value
        number += 1
        sent += 1
        message["id"] = {"line": number, "id": nested(100)}
        b.send(message)
        error = b.expect("error")
        assert error["line"] == number and error["id"] == message["id"], (field, value, error)
        assert error["message"].startswith(kind + ": '" + field), (field, value, error["message"])

    for kind in ["hello"] + [k for k in good if k != "hello"]:
        for field, required in fields[kind].items():
            accepts = types[field.split(".")[-1]]
            for value in PALETTE + ([None] if required else []):
                if value is not None and accepts(value):
                    continue
                if kind == "selection" and field == "path" and value is None:
                    continue   # (no active editor)
                bad(kind, field, value)
        if kind == "hello":
            b.hello()
            number += 1
    # nested values in every other place a message has: the type, an unknown field, a
    # position's members, a line's text, a diagnostic
    for message in ({"type": nested(150)}, {"type": "status", "extra": nested(199)},
                    {"type": "selection", "path": "/w/a", "start": {"line": nested(150), "character": 0}},
                    {"type": "selection", "path": "/w/a", "start": pos, "lines": {"0": nested(150)}},
                    {"type": "diagnostics", "path": "/w/a", "diagnostics": [nested(150)]}):
        number += 1
        b.send(dict(message, id=number))
        reply = b.next()
        assert reply is not None and reply["id"] == number, (message, reply)
        assert reply["type"] == ("status" if "extra" in message else "error")
    assert sent > 200
    b.send({"type": "status", "id": "end"})
    assert b.expect("status")["id"] == "end"
    b.close_stdin()
    assert_stopped_cleanly(b, "end of input")
