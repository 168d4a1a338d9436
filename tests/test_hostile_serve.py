"""A hostile client against a real `serve` subprocess, over its real Unix socket.

Each test is one way a client (or what it names on disk) could freeze the terminal IDE,
make the person accept the wrong diff, or write on their terminal: the diff numbers
`serve` prints against tab names a client chooses, an `open_diff` that fails half-way,
paths that never end or block (FIFOs, devices), a 32 MB diff, terminal escape
sequences in tab names and diff lines, stdout that nobody reads, and a diff still
waiting when `serve` is told to stop. Waits are bounded (generous, against hangs only).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, List, Optional, Tuple

import pytest

import ide_wire
import platforms
from ide_wire import Cli, tool_error, tool_json
from test_serve import WAIT, Serve, assert_gone, make_serve, open_diff_args  # noqa: F401 (make_serve: a fixture)


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def second_session(s: Serve) -> Cli:
    cli = Cli(s.socket_path, s.nonce)
    await cli.handshake()
    return cli


# ------------------------------------------------ diff numbers and tab names (finding 1)


def test_accept_number_means_the_number_not_a_tab_named_so(make_serve: Any) -> None:
    """Session A's diff is number 1; session B names its tab "1". `accept 1` must save
    A's diff, and a bare `accept` with both waiting must ask instead of guessing."""
    s = make_serve()

    async def scenario() -> None:
        a, b = await second_session(s), await second_session(s)
        first = asyncio.ensure_future(a.call_tool("open_diff", open_diff_args(s, "a.txt", "A\n", "tab-a")))
        await s.aexpect(r"^diff 1 waits")
        second = asyncio.ensure_future(b.call_tool("open_diff", open_diff_args(s, "a.txt", "B\n", "1")))
        await s.aexpect(r"^diff 2 waits")
        third = asyncio.ensure_future(b.call_tool("open_diff", open_diff_args(s, "a.txt", "C\n", "tab-c")))
        await s.aexpect(r"^diff 3 waits")
        s.send("accept 1")
        answer = tool_json(await asyncio.wait_for(first, WAIT))
        assert (answer["result"], answer["tab_name"]) == ("SAVED", "tab-a")
        await s.aexpect(r"^diff 1 SAVED \(accepted_via_button\): tab-a$")
        assert not second.done() and not third.done()
        s.send("accept")
        await s.aexpect(r"^error: 2 diffs are waiting; say which")
        s.send("status")
        await s.aexpect(r"^pending diffs: 2$")
        s.send("reject --tab 1")
        answer = tool_json(await asyncio.wait_for(second, WAIT))
        assert (answer["result"], answer["trigger"], answer["tab_name"]) == ("REJECTED", "rejected_via_button", "1")
        s.send('accept "tab-c"')
        assert tool_json(await asyncio.wait_for(third, WAIT))["tab_name"] == "tab-c"
        a.close()
        b.close()

    ide_wire.run(scenario(), timeout=90)
    s.send("quit")
    assert s.wait() == 0
    assert_gone(s)


# ------------------------------------------------- a failed open_diff leaves nothing (2)


@pytest.mark.parametrize("bad_path", ["/tmp/nul\u0000byte.txt", "/tmp/lone-\ud800-surrogate.txt",
                                      "/tmp/escaped-\udcff-byte.txt"])  # (os.fsencode takes this one on POSIX)
def test_failed_open_diff_leaves_no_ghost(make_serve: Any, bad_path: str) -> None:
    s = make_serve()

    async def scenario() -> None:
        cli = await second_session(s)
        message = tool_error(await asyncio.wait_for(cli.call_tool("open_diff", {
            "original_file_path": bad_path, "new_file_contents": "x\n", "tab_name": "ghost"}), WAIT))
        s.send("status")
        await s.aexpect(r"^pending diffs: 0$")
        assert "Invalid original_file_path" in message
        real = asyncio.ensure_future(cli.call_tool("open_diff", open_diff_args(s, "a.txt", "real\n", "real")))
        await s.aexpect(r"^diff \d+ waits")
        s.send("accept")  # the only waiting diff: the real one, not a ghost
        answer = tool_json(await asyncio.wait_for(real, WAIT))
        assert (answer["result"], answer["tab_name"]) == ("SAVED", "real")
        cli.close()

    ide_wire.run(scenario(), timeout=90)
    s.send("quit")
    assert s.wait() == 0


# ------------------------------------------ paths that block or never end (finding 3)


async def ask_selection(cli: Cli, timeout: float = WAIT) -> float:
    """get_selection on a connection of its own; seconds it took (answered or fails)."""
    start = time.monotonic()
    conn = await cli.new_conn()
    try:
        result = await asyncio.wait_for(cli.call_tool("get_selection", {}, conn=conn), timeout)
    finally:
        conn.close()
        if conn in cli.pool:
            cli.pool.remove(conn)
    assert not result.get("isError"), result
    return time.monotonic() - start


@platforms.posix_fifos
def test_fifo_as_original_file_is_refused_and_blocks_nothing(make_serve: Any, tmp_path: Any) -> None:
    """A FIFO would block the whole loop in `open()` (no writer ever comes): every other
    connection, standard input and SIGTERM with it. It must be refused at once."""
    fifo = os.path.join(str(tmp_path), "ws", "fifo")
    os.makedirs(os.path.dirname(fifo), exist_ok=True)
    os.mkfifo(fifo)
    s = make_serve()

    async def scenario() -> None:
        cli = await second_session(s)
        pending = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": fifo, "new_file_contents": "x\n", "tab_name": "fifo"}))
        await ask_selection(cli)  # answered: the loop is not stuck in the FIFO
        message = tool_error(await asyncio.wait_for(pending, WAIT))
        assert "FIFO" in message and "not a regular file" in message
        s.send("status")
        await s.aexpect(r"^pending diffs: 0$")
        cli.close()

    try:
        ide_wire.run(scenario(), timeout=60)
    finally:
        s.proc.send_signal(signal.SIGTERM)
    assert s.wait() == 0
    assert_gone(s)


#: Devices by the names a client would give: Windows' are names of its own.
DEVICES = ["NUL", "\\\\.\\NUL"] if platforms.WINDOWS else ["/dev/zero", "/dev/stdin", "/dev/null"]


@pytest.mark.parametrize("name", DEVICES + ["directory", pytest.param("symlink-to-fifo", marks=platforms.posix_fifos)])
def test_devices_and_directories_are_refused(make_serve: Any, tmp_path: Any, name: str) -> None:
    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder, exist_ok=True)
    if name == "directory":
        path = folder
    elif name == "symlink-to-fifo":  # symlinks are resolved before the type is judged
        os.mkfifo(os.path.join(folder, "fifo"))
        path = os.path.join(folder, "link")
        os.symlink(os.path.join(folder, "fifo"), path)
    else:
        path = name
    s = make_serve()

    async def scenario() -> None:
        cli = await second_session(s)
        message = tool_error(await asyncio.wait_for(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "x\n", "tab_name": "t"}), WAIT))
        assert "not a regular file" in message
        await ask_selection(cli)
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    s.send("quit")
    assert s.wait() == 0
    assert_gone(s)


def test_original_over_the_body_limit_is_refused(make_serve: Any, tmp_path: Any) -> None:
    """A file larger than the body limit is not read at all (it could be huge)."""
    big = os.path.join(str(tmp_path), "ws", "sparse.bin")
    os.makedirs(os.path.dirname(big), exist_ok=True)
    with open(big, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MB on paper, nothing on disk
    s = make_serve()

    async def scenario() -> None:
        cli = await second_session(s)
        message = tool_error(await asyncio.wait_for(cli.call_tool("open_diff", {
            "original_file_path": big, "new_file_contents": "x\n", "tab_name": "t"}), WAIT))
        assert "more than the limit" in message
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    s.send("quit")
    assert s.wait() == 0


def test_32_mb_open_diff_does_not_stall_other_connections(make_serve: Any, tmp_path: Any) -> None:
    """While a 32 MB open_diff (its original a 32 MB file) is sent, read and shown, a
    get_selection on another connection keeps being answered: several answers come
    before the diff is shown (a loop held for the whole big request, as before, answers
    none until then). Counted, not timed: the time is the benchmark's to measure (a
    3 s bound here failed once on a host loaded by two suites at once)."""
    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "big.txt")
    lines = ["line %07d of a large file, with some text to make it longer\n" % i for i in range(540000)]
    original = "".join(lines)
    assert len(original) >= 32 * 1024 * 1024
    with open(path, "w") as f:
        f.write(original)
    for i in range(0, len(lines), 4):  # many changes: a long diff to compute and print
        lines[i] = "changed " + lines[i]
    s = make_serve()
    latencies: List[float] = []
    answered_meanwhile: List[int] = []

    async def scenario() -> None:
        cli = await second_session(s)
        big = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "".join(lines), "tab_name": "big"}))
        shown = asyncio.ensure_future(s.aexpect(r"^diff 1 waits", timeout=120))
        while not shown.done():
            latencies.append(await ask_selection(cli, timeout=60))
            await asyncio.sleep(0.05)
        answered_meanwhile.append(len(latencies))
        await shown
        assert not big.done()  # still waiting for the person
        latencies.append(await ask_selection(cli))
        s.send("reject 1")
        answer = tool_json(await asyncio.wait_for(big, WAIT))
        assert answer["result"] == "REJECTED"
        cli.close()

    ide_wire.run(scenario(), timeout=240)
    assert answered_meanwhile[0] >= 2, latencies
    s.send("quit")
    assert s.wait() == 0


def test_medium_diff_is_computed_off_the_loop_and_capped(make_serve: Any, tmp_path: Any) -> None:
    """A diff of 15 000 lines (over 256 KB) is computed in a thread (the loop answers
    meanwhile) and printed up to --diff-lines, with a note of what was left out."""
    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "medium.txt")
    lines = ["line %06d, a bit longer\n" % i for i in range(15000)]
    with open(path, "w") as f:
        f.write("".join(lines))
    for i in range(0, len(lines), 100):
        lines[i] = "changed %d\n" % i
    s = make_serve("--diff-lines", "50")

    async def scenario() -> None:
        cli = await second_session(s)
        pending = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": path, "new_file_contents": "".join(lines), "tab_name": "medium"}))
        await s.aexpect(r"^diff 1 proposed")
        await ask_selection(cli)
        await s.aexpect(r"^  \.\.\. \d+ more diff lines not shown \(--diff-lines 50\)", timeout=120)
        await s.aexpect(r"^diff 1 waits")
        s.send("accept 1")
        assert tool_json(await asyncio.wait_for(pending, WAIT))["result"] == "SAVED"
        cli.close()

    ide_wire.run(scenario(), timeout=240)
    shown = [line for line in s.seen if line.startswith(("+", "-", " ", "@@")) and not line.startswith("  ")]
    assert len(shown) <= 50
    s.send("quit")
    assert s.wait() == 0


# ------------------------------------------------- terminal escape injection (finding 4)


EVIL_TAB = "\x1b]0;pwned\x07tab\x1b[1A\x1b[2K\rfake\nline"
EVIL_LINE = "visible \x1b[8mhidden\x1b[0m \u202egnp.exe \x9b31m"
#: A file name with a terminal escape; Windows refuses control characters in names, so
#: there it holds a bidi override, which it allows.
EVIL_NAME = "a\u202eb.txt" if platforms.WINDOWS else "a\x1b[5mb.txt"


def shown_then_rejected(s: Any, proposals: List[Tuple[str, str]]) -> List[str]:
    """Each (path, new contents) proposed in turn by one session, shown by `serve` and
    rejected there; then `serve` quits: every line it printed."""
    async def scenario() -> None:
        cli = await second_session(s)
        for n, (path, new) in enumerate(proposals, 1):
            pending = asyncio.ensure_future(cli.call_tool("open_diff", {
                "original_file_path": path, "new_file_contents": new, "tab_name": "t%d" % n}))
            await s.aexpect(r"^diff %d waits" % n)
            s.send("reject %d" % n)
            assert tool_json(await asyncio.wait_for(pending, WAIT))["result"] == "REJECTED"
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    s.send("quit")
    assert s.wait() == 0
    return s.rest()


@pytest.mark.skipif(platforms.WINDOWS, reason="Windows refuses a newline in a file name")
def test_a_newline_in_a_diffs_path_starts_no_line_of_the_clients_making(make_serve: Any) -> None:
    """The diff's `---`/`+++` header lines carry the path: a newline in it printed a
    line of the client's making (a forged "diff 1 waits" above the real one)."""
    s = make_serve()
    forged = "diff 1 waits: type `accept 1` or `reject 1`"
    lines = shown_then_rejected(s, [(os.path.join(s.folder, "a.txt\n" + forged), "new\n")])
    assert [line for line in lines if line.startswith("diff 1 waits")] == [forged]
    assert any(line.startswith("+++ b/a.txt\\ndiff 1 waits") for line in lines), lines


@pytest.mark.skipif(platforms.WINDOWS, reason="needs symlinks (an administrator's or developer mode's on Windows)")
def test_a_diff_says_where_the_file_really_is(make_serve: Any, tmp_path: Any) -> None:
    """The name alone hid where an accepted diff has the CLI write: a link in the folder
    to a file outside it (shown as a file of the folder), a dangling link (shown as a
    new file of the folder), a relative path (read from serve's own folder)."""
    s = make_serve()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "rc").write_text("old\n")
    os.symlink(str(outside / "rc"), os.path.join(s.folder, "notes.txt"))
    os.symlink(str(outside / "keys"), os.path.join(s.folder, "keys.txt"))
    out = "\n".join(shown_then_rejected(s, [(os.path.join(s.folder, "notes.txt"), "new\n"),
                                             (os.path.join(s.folder, "keys.txt"), "new\n"),
                                             ("config.txt", "new\n")]))
    assert "  (through a link: the file written is %s)" % (outside / "rc") in out
    assert "  (through a link: the file written is %s)" % (outside / "keys") in out
    assert out.count("  (outside %s)" % s.folder) == 3  # (the relative path names a file of serve's folder)
    assert "  (a relative path: here it names " in out


def test_a_file_that_is_not_utf8_is_never_shown_as_unchanged(make_serve: Any) -> None:
    """A Latin-1 file is read with its invalid bytes as U+FFFD: a proposal holding U+FFFD
    there showed "(no changes)", yet accepting changes the file's bytes."""
    s = make_serve()
    path = os.path.join(s.folder, "cafe.txt")
    with open(path, "wb") as f:
        f.write(b"caf\xe9\n")
    lines = shown_then_rejected(s, [(path, "caf\ufffd\n")])
    assert "  (no changes)" not in lines
    assert "  (no changes to the text shown)" in lines
    assert any(line.startswith("  (the file is not UTF-8: its invalid bytes show as U+FFFD") for line in lines)


@pytest.mark.parametrize("color", ["never", "always"])
def test_client_text_cannot_drive_the_terminal(make_serve: Any, color: str) -> None:
    s = make_serve("--color", color, "--trace")

    async def scenario() -> None:
        cli = await second_session(s)
        await cli.call_tool("update_session_name", {"name": "\x1b[2Jname"})
        pending = asyncio.ensure_future(cli.call_tool("open_diff", {
            "original_file_path": os.path.join(s.folder, EVIL_NAME),
            "new_file_contents": EVIL_LINE + "\nsecond\n", "tab_name": EVIL_TAB}))
        await s.aexpect(r"diff 1 waits")
        s.send("status")
        await s.aexpect(r"^pending diffs: 1$")
        s.send("accept 1")
        assert tool_json(await asyncio.wait_for(pending, WAIT))["result"] == "SAVED"
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    s.send("quit")
    assert s.wait() == 0
    out = "\n".join(s.rest())
    ours = re.compile(r"\x1b\[[0-9;]*m")  # the colours serve adds itself
    if color == "never":
        assert "\x1b" not in out
    else:
        assert ours.search(out)
        for m in re.finditer("\x1b", out):
            assert ours.match(out, m.start()), repr(out[m.start():m.start() + 20])
        assert "\x1b[8m" not in out and "\x1b[5m" not in out and "\x1b[2J" not in out
    assert "\r" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\atab\\x1b[1A\\x1b[2K\\rfake\\nline" in out  # shown, visibly, on one line
    assert "+visible \\x1b[8mhidden\\x1b[0m \\u202egnp.exe \\x9b31m" in out
    assert "\x9b" not in out


# ------------------------------------------------------- stdout nobody reads (finding 5)


class UnreadServe:
    """`serve` whose stdout is a pipe the test does not read (until it chooses to)."""

    def __init__(self, tmp_path: Any, *args: str) -> None:
        self.folder = os.path.join(str(tmp_path), "ws")
        os.makedirs(self.folder, exist_ok=True)
        self.lock_dir = os.path.join(str(tmp_path), "home", "ide")
        env = dict(os.environ)
        env["COPILOT_HOME"] = os.path.dirname(self.lock_dir)
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        self.read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", self.folder] + list(args),
                                     stdin=subprocess.PIPE, stdout=write_fd, stderr=subprocess.DEVNULL, env=env)
        os.close(write_fd)
        deadline = time.monotonic() + WAIT
        while True:
            locks = [n for n in os.listdir(self.lock_dir) if n.endswith(".lock")] \
                if os.path.isdir(self.lock_dir) else []
            if locks:
                break
            assert time.monotonic() < deadline and self.proc.poll() is None, "serve wrote no lock"
            time.sleep(0.05)
        self.lock_path = os.path.join(self.lock_dir, locks[0])
        with open(self.lock_path) as f:
            lock = json.load(f)
        self.socket_path = lock["socketPath"]
        self.nonce = lock["headers"]["Authorization"].split(" ", 1)[1]
        self.output = bytearray()
        self._reader: Optional[threading.Thread] = None

    def start_reading(self) -> None:
        def pump() -> None:
            while True:
                data = os.read(self.read_fd, 65536)
                if not data:
                    return
                self.output.extend(data)

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()

    def wait_output(self, needle: bytes, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output:
            assert time.monotonic() < deadline, "no %r in the output (%d bytes)" % (needle, len(self.output))
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
        if self._reader is None:
            os.close(self.read_fd)


@pytest.fixture
def unread(tmp_path: Any) -> Any:
    made: List[UnreadServe] = []

    def make(*args: str) -> UnreadServe:
        u = UnreadServe(tmp_path, *args)
        made.append(u)
        return u

    yield make
    for u in made:
        u.close()


async def many_calls(socket_path: str, nonce: str, count: int) -> None:
    cli = Cli(socket_path, nonce)
    await cli.handshake()
    for _ in range(count):
        await asyncio.wait_for(cli.call_tool("get_selection", {}), WAIT)
    cli.close()


def test_unread_stdout_never_blocks_and_drops_are_counted(unread: Any) -> None:
    """2 500 tool calls print ~200 KB, three times a pipe's buffer: every call is still
    answered; what did not fit is dropped, and the count shows once output is read."""
    u = unread("--output-buffer", "16384")
    ide_wire.run(many_calls(u.socket_path, u.nonce, 2500), timeout=240)
    u.start_reading()
    u.wait_output(b"of output dropped here")  # the queue drains up to where lines went missing
    u.proc.stdin.write(b"status\n")
    u.proc.stdin.flush()
    u.wait_output(b"pending diffs: 0")
    text = u.output.decode("utf-8", "replace")
    m = re.search(r"\[serve: (\d+) lines of output dropped here: nobody was reading\]", text)
    assert m and int(m.group(1)) > 0, text[-2000:]
    assert text.index(m.group(0)) < text.index("pending diffs: 0")
    u.proc.stdin.write(b"quit\n")
    u.proc.stdin.flush()
    assert u.proc.wait(WAIT) == 0
    assert not os.path.exists(u.lock_path)


@pytest.mark.parametrize("how", [pytest.param("SIGTERM", marks=platforms.posix_signals), "quit"])
def test_unread_stdout_still_stops_at_once(unread: Any, how: str) -> None:
    """With the pipe full and nobody reading, SIGTERM and quit still stop serve, and the
    lock file goes (it is the only disconnect signal the CLI notices)."""
    u = unread()
    ide_wire.run(many_calls(u.socket_path, u.nonce, 1500), timeout=240)
    if how == "SIGTERM":
        u.proc.send_signal(signal.SIGTERM)
    else:
        u.proc.stdin.write(b"quit\n")
        u.proc.stdin.flush()
    assert u.proc.wait(WAIT) == 0
    assert not os.path.exists(u.lock_path)
    assert not os.path.exists(u.socket_path)


# --------------------------------------------- a diff waiting when serve stops (shutdown)


@pytest.mark.parametrize("how", [pytest.param("SIGTERM", marks=platforms.posix_signals), "quit"])
def test_waiting_diff_is_answered_when_serve_stops(make_serve: Any, how: str) -> None:
    s = make_serve()

    async def scenario() -> None:
        cli = await second_session(s)
        pending = asyncio.ensure_future(cli.call_tool("open_diff", open_diff_args(s, "a.txt", "x\n", "t")))
        await s.aexpect(r"^diff 1 waits")
        if how == "SIGTERM":
            s.proc.send_signal(signal.SIGTERM)
        else:
            s.send("quit")
        answer = tool_json(await asyncio.wait_for(pending, WAIT))
        assert (answer["result"], answer["trigger"]) == ("REJECTED", "client_disconnected")
        cli.close()

    ide_wire.run(scenario(), timeout=60)
    assert s.wait() == 0
    assert_gone(s)
