"""The CLI's lock-file rules, written once in `common.lock_rules` (PROTOCOL.md §1):
parse, schema, re-reads, the socket probe and the choice, on real files and real Unix
sockets (held named pipes on Windows). The readers built on them are tested in
test_lock_readers.py.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from typing import Any, Dict, Iterator, List

import pytest

import ide_wire
import platforms
from ide_protocol.common import lock_rules

#: Old enough (Nov 2025) that the probe makes its single 250 ms try.
OLD_TIMESTAMP = 1764480000000


@pytest.fixture
def short_dir() -> Iterator[str]:
    """A short directory under /tmp (sun_path is ~107 bytes), others may traverse it."""
    d = tempfile.mkdtemp(prefix="lr-", dir=None if platforms.WINDOWS else "/tmp")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def listening(short_dir: str) -> Iterator[str]:
    """A real listening Unix socket anyone may connect to (a held named pipe on
    Windows); yields its path."""
    if platforms.WINDOWS:
        pipe = ide_wire.HeldPipe()
        try:
            yield pipe.path
        finally:
            pipe.close()
        return
    path = os.path.join(short_dir, "mcp.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(64)
    try:
        yield path
    finally:
        srv.close()


def lock_json(socket_path: str, folders: List[str], **changes: Any) -> Dict[str, Any]:
    d: Dict[str, Any] = {"socketPath": socket_path, "scheme": "unix", "headers": {"Authorization": "Nonce x"},
                         "pid": os.getpid(), "ideName": "Fixture", "timestamp": OLD_TIMESTAMP,
                         "workspaceFolders": folders, "isTrusted": False}
    d.update(changes)
    return d


# ------------------------------------------------------------------ the rules


def test_parse_is_json_parse() -> None:
    assert lock_rules.parse_lock_bytes(b'{"a": 1}') == {"a": 1}
    for data, words in ((b"\xef\xbb\xbf{}", "byte-order mark"), (b'{"a": NaN}', "NaN"),
                        (b'{"a": -Infinity}', "Infinity"), (b"{", "not valid JSON")):
        with pytest.raises(lock_rules.LockFileError, match=words) as err:
            lock_rules.parse_lock_bytes(data, "/d/x.lock")
        assert err.value.code == "invalid-json" and err.value.path == "/d/x.lock"
    # undecodable bytes become U+FFFD, as readFile(utf-8) makes them
    assert lock_rules.parse_lock_bytes(b'{"a": "\xff"}') == {"a": "\ufffd"}


def test_schema_reports_every_field(listening: str) -> None:
    raw = lock_json(listening, ["/w"], pid="1", timestamp=float("inf"), isTrusted=None, headers={"A": 2})
    del raw["ideName"]
    fields = [p.field for p in lock_rules.schema_problems(raw)]
    assert fields == ["headers", "pid", "timestamp", "ideName", "isTrusted"]
    assert lock_rules.schema_problems(lock_json(listening, ["/w"], pid=7.5, extra=[1])) == []


def test_a_half_written_lock_is_read_again(short_dir: str, listening: str) -> None:
    """The CLI reads a failing file three times, 100 ms apart (PROTOCOL.md §1): a lock
    completed between two reads is used. The sleep completes it: no race."""
    path = os.path.join(short_dir, "a.lock")
    with open(path, "w") as fh:
        fh.write('{"socketPath": ')
    slept: List[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        with open(path, "w") as fh:
            json.dump(lock_json(listening, ["/w"]), fh)

    raw, problems = lock_rules.read_lock(path, sleep=sleep)
    assert problems == [] and raw is not None and slept == [lock_rules.READ_RETRY_SECONDS]
    with open(path, "w") as fh:
        fh.write("{")
    raw, problems = lock_rules.read_lock(path, sleep=slept.append)
    assert raw is None and [p.code for p in problems] == ["invalid-json"] and len(slept) == 3


@platforms.posix_fifos
def test_a_fifo_named_like_a_lock_is_not_waited_for(short_dir: str) -> None:
    path = os.path.join(short_dir, "f.lock")
    os.mkfifo(path)
    raw, problems = lock_rules.read_lock(path, attempts=1)
    assert raw is None and "not a regular file" in problems[0].reason


def test_a_fresh_lock_gets_a_second_to_listen(short_dir: str) -> None:
    """For a lock at most 2 s old the probe is retried for up to 1 s (PROTOCOL.md §1):
    a server that starts listening after the first refusal is found. The sleep starts
    it, so the test does not depend on timing; an old lock gets one try only. On
    Windows the same holds for a named pipe that its server makes after the first try."""
    if platforms.WINDOWS:
        path, missing = "\\\\.\\pipe\\mcp-late-%d.sock" % os.getpid(), "no such named pipe"
    else:
        path, missing = os.path.join(short_dir, "late.sock"), "no such file"
    servers: List[Any] = []

    def start_listening(seconds: float) -> None:
        if not servers:
            if platforms.WINDOWS:
                servers.append(ide_wire.HeldPipe(path))
                return
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(8)
            servers.append(srv)

    try:
        now = time.time() * 1000
        assert lock_rules.probe_lock_socket(path, OLD_TIMESTAMP, "/", now, sleep=start_listening) == missing
        assert not servers  # one try for an old lock: no sleep
        assert lock_rules.probe_lock_socket(path, now, "/", now, sleep=start_listening) is None
        assert servers
    finally:
        for srv in servers:
            srv.close()


@platforms.unix_sockets
def test_a_relative_socket_path_is_relative_to_the_clis_folder(short_dir: str, listening: str) -> None:
    assert lock_rules.probe_lock_socket("mcp.sock", OLD_TIMESTAMP, short_dir) is None
    assert lock_rules.probe_lock_socket("mcp.sock", OLD_TIMESTAMP, "/") is not None
    assert lock_rules.probe_lock_socket("", OLD_TIMESTAMP, short_dir) == "the path is empty"


def test_auto_connect_choice_first_by_name() -> None:
    class L:
        def __init__(self, folders: List[str]) -> None:
            self.workspace_folders = folders

    a, b, c = L(["/x"]), L(["/w/"]), L(["/y", "/w"])
    assert lock_rules.auto_connect_choice([a, b, c], "/w") == (b, [c])
    assert lock_rules.auto_connect_choice([a], "/w") == (None, [])


# The Windows CLI's folder rules, measured with copilot.exe 1.0.102 under Wine 10 started
# in C:\ws (tests/interop_windows/test_windows_folders.py runs the CLI on them): a lock
# listing these connects or not. Judged the same on every system (``windows=True``).
@pytest.mark.parametrize("listed, connects", [
    ("C:\\ws", True),
    ("c:\\WS", True),                     # letter case, the drive's too
    ("C:/ws", True),                       # `/` as `\`
    ("C:\\ws\\", True),                   # a trailing separator
    ("C:\\ws\\sub\\..\\.", True),           # `.` and `..` folded
    ("Z:\\root\\.wine\\drive_c\\ws", False),  # the same folder through another drive
    ("\\\\?\\C:\\ws", False),               # the \\?\ prefix
])
def test_same_folder_follows_the_windows_clis_measured_rules(listed: str, connects: bool) -> None:
    assert lock_rules.same_folder(listed, "C:\\ws", windows=True) is connects


@pytest.mark.parametrize("listed", ["C:\\ws\\sub", "C:\\w", "D:\\ws", "ws", "", "C:\\ws ", "C:\\"])
def test_windows_folders_are_never_prefixes_or_relative(listed: str) -> None:
    assert lock_rules.same_folder(listed, "C:\\ws", windows=True) is False


def test_posix_folders_keep_their_case_and_backslashes() -> None:
    assert lock_rules.same_folder("/W", "/w", windows=False) is False
    assert lock_rules.same_folder("/w\\", "/w", windows=False) is False   # a backslash is a character there
    assert lock_rules.folder_key("C:\\WS\\", windows=True) == "c:\\ws"
    assert lock_rules.lexical("C:/ws/../x/", windows=True) == "C:\\x"


def test_the_default_rules_are_this_systems() -> None:
    assert lock_rules.same_folder("C:/WS", "C:\\ws") is (os.name == "nt")
