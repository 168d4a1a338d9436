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
            self.messages.put(json.loads(line.decode("utf-8")))  # every line must be JSON
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
        (b"[1, 2]\n", "a message must be a JSON object, not list"),
        (b'{"id": 7}\n', 'a message needs a "type"'),
        (b'{"type": "frobnicate"}\n', "unknown message type 'frobnicate'"),
        (b"[" * 100000 + b"]" * 100000 + b"\n", "nested too deep"),
        (b'{"type": "selection", "path": 3}\n', "selection: 'path' must be a file path"),
        (b'{"type": "selection", "path": "a.txt", "start": {"line": -1, "character": 0}}\n',
         "start.line must be an integer >= 0"),
        (b'{"type": "selection", "path": "a.txt", "start": [0, 0]}\n', "start must be an object"),
        (b'{"type": "diagnostics", "path": "a.txt"}\n', "'diagnostics' must be a list"),
        (b'{"type": "diagnostics", "path": "a.txt", "diagnostics": [{"message": "m", "severity": "fatal", '
         b'"start": {"line": 0, "character": 0}}]}\n', "unknown severity 'fatal'"),
        (b'{"type": "add_selection", "path": "a.txt"}\n', "'start' and 'end' are required"),
        (b'{"type": "folders", "folders": []}\n', "non-empty list"),
        (b'{"type": "diff_answer", "diff": 99, "accept": true}\n', "no pending diff 99"),
        (b'{"type": "diff_answer", "diff": "1", "accept": true}\n', "'diff' must be the id of a diff"),
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
    assert lock["folders"] == [b.folder, other] and lock["lock"] != old
    assert not os.path.exists(old) and b.locks() == [os.path.basename(lock["lock"])]
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
