"""Tests for ide_protocol.common.lockfile: PROTOCOL.md §1 (format, validation, atomic write,
stale cleanup, discovery), with real files, real Unix sockets and a real dead pid."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from typing import Any, Dict, Iterator, List

import pytest

import platforms

from ide_protocol.common import lockfile
from ide_protocol.common.lockfile import (
    WRITER_KEY,
    WRITER_VALUE,
    LockFileError,
    LockInfo,
    find_lock_for_folder,
    lock_dir,
    pid_alive,
    read_locks,
    remove_lock,
    remove_stale_locks,
    rewrite_lock,
    socket_reachable,
    workspace_folders,
    write_lock,
)

posix_only = pytest.mark.skipif(os.name == "nt" or not hasattr(socket, "AF_UNIX"), reason="POSIX only")

UUID_LOCK = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.lock$")


def wire(**overrides: Any) -> Dict[str, Any]:
    """A valid wire lock (the PROTOCOL.md §1 example), with fields overridden."""
    d: Dict[str, Any] = {
        "socketPath": "/tmp/mcp-Ab12Cd/mcp.sock",
        "scheme": "unix",
        "headers": {"Authorization": "Nonce 3f2b"},
        "pid": 12345,
        "ideName": "Sublime Text",
        "timestamp": 1764480000000,
        "workspaceFolders": ["/home/user/project"],
        "isTrusted": False,
    }
    d.update(overrides)
    return d


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    return proc.pid


@pytest.fixture
def sockdir() -> Iterator[str]:
    """A short private directory for sockets (sun_path is ~104 bytes; tmp_path may be longer)."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    d = tempfile.mkdtemp(prefix="mcp-", dir=base)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def listening(sockdir: str) -> Iterator[str]:
    """A real listening Unix socket; yields its path."""
    path = os.path.join(sockdir, "mcp.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    try:
        yield path
    finally:
        srv.close()


def write_raw(directory: str, name: str, obj: Any) -> str:
    """Write a lock file by hand, as another IDE would."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as fh:
        if isinstance(obj, str):
            fh.write(obj)
        else:
            json.dump(obj, fh)
    return path


# --- lock_dir ----------------------------------------------------------------------


def test_lock_dir_copilot_home() -> None:
    assert lock_dir({"COPILOT_HOME": "/x/ch"}, home="/home/u") == os.path.join("/x/ch", "ide")


def test_lock_dir_default_home() -> None:
    assert lock_dir({}, home="/home/u") == os.path.join("/home/u", ".copilot", "ide")
    assert lock_dir({"COPILOT_HOME": ""}, home="/home/u") == os.path.join("/home/u", ".copilot", "ide")
    # XDG_STATE_HOME is VS Code's variant, not read by the CLI (PROTOCOL.md §1)
    assert lock_dir({"XDG_STATE_HOME": "/s"}, home="/h") == os.path.join("/h", ".copilot", "ide")


def test_lock_dir_uses_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path))
    assert lock_dir() == os.path.join(str(tmp_path), "ide")


# --- format and validation ---------------------------------------------------------


def test_to_json_exact_keys_and_round_trip() -> None:
    info = LockInfo.from_json(wire(), path="/d/x.lock")
    assert info.path == "/d/x.lock"
    assert info.pid == 12345 and info.ide_name == "Sublime Text" and info.is_trusted is False
    d = info.to_json()
    assert list(d) == [
        "socketPath", "scheme", "headers", "pid", "ideName", "timestamp", "workspaceFolders", "isTrusted",
    ]
    assert d == wire()
    assert WRITER_KEY not in d


def test_optional_is_trusted_float_timestamp_and_extra_keys() -> None:
    d = wire(timestamp=1764480000000.5, extra={"anything": 1})
    del d["isTrusted"]
    info = LockInfo.from_json(d)
    assert info.is_trusted is False
    assert info.timestamp == 1764480000000.5
    assert LockInfo.from_json(wire(isTrusted=True)).is_trusted is True
    assert LockInfo.from_json(wire(headers={})).headers == {}
    assert LockInfo.from_json(wire(workspaceFolders=[])).workspace_folders == []


@pytest.mark.parametrize(
    "key", ["socketPath", "scheme", "headers", "pid", "ideName", "timestamp", "workspaceFolders"]
)
def test_missing_required_field(key: str) -> None:
    d = wire()
    del d[key]
    with pytest.raises(LockFileError) as err:
        LockInfo.from_json(d, path="/locks/a.lock")
    assert err.value.field == key
    assert key in str(err.value) and "missing" in str(err.value)
    assert str(err.value).startswith("/locks/a.lock: ")


@pytest.mark.parametrize(
    "key, value",
    [
        ("socketPath", None),
        ("socketPath", 5),
        ("scheme", ["unix"]),
        ("headers", []),
        ("headers", "Authorization: x"),
        ("headers", {"Authorization": 1}),
        ("headers", {"Authorization": None}),
        ("pid", True),
        ("pid", "12345"),
        ("pid", float("nan")),
        ("pid", None),
        ("ideName", 1),
        ("timestamp", "1764480000000"),
        ("timestamp", False),
        ("timestamp", float("nan")),
        ("timestamp", float("inf")),
        ("workspaceFolders", "/home/user/project"),
        ("workspaceFolders", ["/ok", 3]),
        ("workspaceFolders", [None]),
        ("isTrusted", None),
        ("isTrusted", "true"),
        ("isTrusted", 1),
    ],
)
def test_wrong_type(key: str, value: Any) -> None:
    with pytest.raises(LockFileError) as err:
        LockInfo.from_json(wire(**{key: value}))
    assert err.value.field == key
    assert '"%s"' % key in str(err.value)


def test_pid_is_any_number_as_for_the_cli() -> None:
    # PROTOCOL.md §1: the schema wants a number, and JSON has one number type: 1234.0 is
    # the pid 1234 (read back as an int); 1234.5 passes the schema but never runs.
    info = LockInfo.from_json(json.loads(json.dumps(wire(pid=12345.0))))
    assert info.pid == 12345 and isinstance(info.pid, int)
    assert LockInfo.from_json(wire(pid=12345.5)).pid == 12345.5
    assert not pid_alive(12345.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [[], "x", None, 3])
def test_not_an_object(value: Any) -> None:
    with pytest.raises(LockFileError, match="object"):
        LockInfo.from_json(value)


def test_lock_file_error_is_value_error() -> None:
    assert issubclass(LockFileError, ValueError)


def test_new_defaults(tmp_path) -> None:
    info = LockInfo.new("/s/mcp.sock", {"Authorization": "Nonce n"}, [str(tmp_path)], "Test IDE")
    assert info.pid == os.getpid()
    assert info.scheme == ("pipe" if os.name == "nt" else "unix")
    assert info.is_trusted is False
    assert isinstance(info.timestamp, int) and info.timestamp > 1_600_000_000_000
    assert info.workspace_folders == workspace_folders([str(tmp_path)])
    LockInfo.from_json(info.to_json())  # valid for the CLI


# --- workspace_folders -------------------------------------------------------------


@posix_only
def test_workspace_folders_symlink(tmp_path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    real_s = os.path.realpath(str(real))
    assert workspace_folders([str(link)]) == [real_s, str(link)]
    # the real folder itself is listed once; duplicates are removed in order
    assert workspace_folders([str(real), str(link), str(real) + "/"]) == [real_s, str(link)]
    assert workspace_folders(str(link)) == [real_s, str(link)]


def test_workspace_folders_relative(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("proj")
    out = workspace_folders(["proj", "./proj/../proj"])
    absolute = os.path.abspath("proj")
    real = os.path.realpath(absolute)
    assert out == ([real] if real == absolute else [real, absolute])
    assert all(os.path.isabs(p) for p in out)


# --- write_lock --------------------------------------------------------------------


def make_info(folder: str = "/home/user/project", pid: int = 0, socket_path: str = "/tmp/x/mcp.sock") -> LockInfo:
    return LockInfo(
        socket_path=socket_path,
        scheme="unix",
        headers={"Authorization": "Nonce abc"},
        pid=pid or os.getpid(),
        ide_name="Test IDE",
        timestamp=1764480000000,
        workspace_folders=[folder],
    )


def test_lock_info_is_equal_by_content_wherever_it_lives() -> None:
    a, b = make_info(), make_info()
    b.path = "/elsewhere/x.lock"
    assert a == b and not a != b  # (the path is not compared)
    assert a != make_info(pid=1) and a != make_info(folder="/other") and a != a.to_json()
    assert repr(b).startswith("LockInfo(socket_path='/tmp/x/mcp.sock', scheme='unix', ") and repr(b).endswith(
        "is_trusted=False, path='/elsewhere/x.lock')")
    with pytest.raises(TypeError):
        hash(a)  # mutable, compared by content


def test_write_lock_content_and_name(tmp_path) -> None:
    d = str(tmp_path / "ide")
    info = make_info()
    path = write_lock(info, d)
    assert info.path == path
    assert os.path.dirname(path) == d
    assert UUID_LOCK.match(os.path.basename(path))
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    assert raw[WRITER_KEY] == WRITER_VALUE
    del raw[WRITER_KEY]
    assert raw == info.to_json()
    assert LockInfo.from_json(raw) == info
    assert os.listdir(d) == [os.path.basename(path)]  # no temp file left behind


def test_write_lock_new_name_each_time(tmp_path) -> None:
    d = str(tmp_path)
    a = write_lock(make_info(), d)
    b = write_lock(make_info(), d)
    assert a != b and os.path.exists(a) and os.path.exists(b)


@posix_only
def test_write_lock_modes_new_dir(tmp_path) -> None:
    d = str(tmp_path / "home" / "ide")
    old = os.umask(0)  # a permissive umask must not leak into our modes
    try:
        path = write_lock(make_info(), d)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@posix_only
def test_write_lock_modes_strict_umask(tmp_path) -> None:
    d = str(tmp_path / "ide")
    old = os.umask(0o077)
    try:
        path = write_lock(make_info(), d)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@posix_only
def test_write_lock_leaves_existing_dir_mode(tmp_path) -> None:
    d = tmp_path / "ide"
    d.mkdir()
    os.chmod(str(d), 0o755)
    path = write_lock(make_info(), str(d))
    assert stat.S_IMODE(os.stat(str(d)).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_write_lock_is_atomic(tmp_path, monkeypatch) -> None:
    """Just before the rename, the directory holds only a complete temp file whose name
    does not end in .lock, so a CLI listing *.lock sees nothing partial (PROTOCOL.md §1)."""
    d = str(tmp_path)
    real_replace = os.replace
    seen: List[Any] = []

    def spy(src: str, dst: str) -> None:
        names = os.listdir(d)
        seen.append((src, dst, names, read_locks(d)))
        assert names == [os.path.basename(src)]
        assert not os.path.basename(src).endswith(".lock")
        assert os.path.basename(src).startswith(".")
        if os.name != "nt":
            assert stat.S_IMODE(os.stat(src).st_mode) == 0o600
        with open(src, encoding="utf-8") as fh:
            assert json.load(fh)[WRITER_KEY] == WRITER_VALUE  # complete before rename
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = write_lock(make_info(), d)
    assert len(seen) == 1
    src, dst, names, locks_before = seen[0]
    assert dst == path
    assert locks_before == []  # a reader during the write finds no lock at all
    assert [p for p, _ in read_locks(d)] == [path]


def test_write_lock_failure_leaves_nothing(tmp_path, monkeypatch) -> None:
    d = str(tmp_path)

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_lock(make_info(), d)
    assert os.listdir(d) == []


def test_write_lock_refuses_invalid(tmp_path) -> None:
    info = make_info()
    info.pid = True  # type: ignore[assignment]
    with pytest.raises(LockFileError, match="pid"):
        write_lock(info, str(tmp_path / "ide"))
    assert not os.path.exists(str(tmp_path / "ide"))


def test_remove_lock(tmp_path) -> None:
    path = write_lock(make_info(), str(tmp_path))
    remove_lock(path)
    assert not os.path.exists(path)
    remove_lock(path)  # missing is fine
    remove_lock(None)


# --- rewrite_lock: a folder change, in place (PROTOCOL.md §1, "Changing folders") ----------


def _read(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def test_rewrite_lock_keeps_the_file(tmp_path, monkeypatch) -> None:
    """The same name and the same file (inode): the CLI connected through the lock takes
    a deletion, or a file renamed over it, for the IDE leaving."""
    d = str(tmp_path)
    path = write_lock(make_info(), d)
    before = os.stat(path)

    def no_rename(*args: Any) -> None:
        raise AssertionError("a rename over the lock: the CLI connected through it disconnects")

    monkeypatch.setattr(os, "replace", no_rename)
    monkeypatch.setattr(os, "rename", no_rename)
    info = make_info("/home/user/other")
    assert rewrite_lock(info, path) == path and info.path == path
    after = os.stat(path)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    raw = _read(path)
    assert raw["workspaceFolders"] == ["/home/user/other"] and raw[WRITER_KEY] == WRITER_VALUE
    assert os.listdir(d) == [os.path.basename(path)]  # no temp file, no second lock
    assert lockfile.written_here(path)


@platforms.posix_permissions
def test_rewrite_lock_makes_the_mode_0600_again(tmp_path) -> None:
    d = tmp_path / "ide"
    path = write_lock(make_info(), str(d))
    os.chmod(path, 0o644)
    old = os.umask(0)
    try:
        rewrite_lock(make_info("/elsewhere"), path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(str(d)).st_mode) == 0o700


def test_a_lock_being_rewritten_is_never_taken_half_written(tmp_path, monkeypatch) -> None:
    """While the new content is being written, a reader finds the lock invalid (and
    reads it again later, as the CLI does), never a lock with other content."""
    d = str(tmp_path)
    path = write_lock(make_info(), d)
    info = make_info("/home/user/other")
    seen: List[Any] = []
    real_write = os.write
    lock_file = os.stat(path).st_ino

    def spy(fd: int, data: Any) -> int:
        if os.fstat(fd).st_ino == lock_file:  # (only the lock's writes)
            with open(path, "rb") as fh:
                seen.append(fh.read())
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    rewrite_lock(info, path)
    monkeypatch.setattr(os, "write", real_write)
    assert seen == [b""]  # truncated, then written at once
    # Every part of the new content a reader could find is no JSON at all, but the whole.
    data = lockfile._encode_lock(info)
    for end in range(len(data)):
        try:
            json.loads(data[:end].decode("ascii"))
        except ValueError:
            continue
        assert data[:end].strip() == data.strip(), end
    assert [i for _, i in read_locks(d)] == [info]


def test_rewrite_lock_leaves_a_file_that_is_not_the_one_written(tmp_path) -> None:
    """Someone else's file now at the lock's path is not ours to write: the lock goes to
    a new file, that one is left as it is."""
    d = str(tmp_path)
    path = write_lock(make_info(), d)
    other = write_raw(d, "other.tmp", wire(ideName="Another IDE"))
    os.replace(other, path)
    foreign = open(path, "rb").read()
    info = make_info("/home/user/other")
    new = rewrite_lock(info, path)
    assert new != path and open(path, "rb").read() == foreign
    assert _read(new)["workspaceFolders"] == ["/home/user/other"]
    assert not lockfile.written_here(path) and lockfile.written_here(new)


def test_rewrite_lock_of_a_lock_deleted_meanwhile_writes_a_new_one(tmp_path) -> None:
    d = str(tmp_path)
    path = write_lock(make_info(), d)
    os.unlink(path)
    new = rewrite_lock(make_info("/home/user/other"), path)
    assert new != path and not os.path.exists(path)
    assert os.listdir(d) == [os.path.basename(new)]


def test_rewrite_lock_of_a_lock_it_did_not_write_writes_a_new_one(tmp_path) -> None:
    d = str(tmp_path)
    theirs = write_raw(d, "theirs.lock", wire())
    before = open(theirs, "rb").read()
    new = rewrite_lock(make_info(), theirs)
    assert new != theirs and open(theirs, "rb").read() == before


@platforms.symlinks_followed
def test_rewrite_lock_never_writes_through_a_symlink(tmp_path) -> None:
    d = str(tmp_path / "ide")
    path = write_lock(make_info(), d)
    target = tmp_path / "target.txt"
    target.write_text("not a lock")
    os.unlink(path)
    os.symlink(str(target), path)
    new = rewrite_lock(make_info("/home/user/other"), path)
    assert new != path and target.read_text() == "not a lock"


@platforms.posix_fifos
def test_rewrite_lock_does_not_block_on_a_fifo(tmp_path) -> None:
    import threading
    d = str(tmp_path)
    path = write_lock(make_info(), d)
    os.unlink(path)
    os.mkfifo(path)
    result: List[str] = []
    worker = threading.Thread(target=lambda: result.append(rewrite_lock(make_info(), path)), daemon=True)
    worker.start()
    worker.join(10)
    assert result and result[0] != path, "rewrite_lock blocked on a FIFO"
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_failed_rewrite_removes_the_damaged_lock(tmp_path, monkeypatch) -> None:
    d = str(tmp_path)
    path = write_lock(make_info(), d)

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        rewrite_lock(make_info("/home/user/other"), path)
    assert os.listdir(d) == [] and not lockfile.written_here(path)


def test_rewrite_lock_refuses_invalid(tmp_path) -> None:
    path = write_lock(make_info(), str(tmp_path))
    before = open(path, "rb").read()
    info = make_info()
    info.headers = {"Authorization": 1}  # type: ignore[dict-item]
    with pytest.raises(LockFileError, match="headers"):
        rewrite_lock(info, path)
    assert open(path, "rb").read() == before


# --- pid_alive and socket_reachable ------------------------------------------------


def test_pid_alive(dead_pid: int) -> None:
    # The CLI's test (PROTOCOL.md §1): kill(pid, 0) as Node makes it.
    assert pid_alive(os.getpid())
    assert pid_alive(float(os.getpid()))  # type: ignore[arg-type]
    assert not pid_alive(dead_pid)
    assert pid_alive(0)  # Node lets kill(0, 0) through: it signals our own process group
    assert not pid_alive(True)  # type: ignore[arg-type]
    assert not pid_alive(2 ** 70)
    assert not pid_alive(2 ** 31)  # not a 32-bit integer
    assert not pid_alive("1")  # type: ignore[arg-type]


@posix_only
@pytest.mark.skipif(os.name != "nt" and os.geteuid() == 0,
                    reason="as root kill(1, 0) succeeds; tests/test_lock_readers.py covers EPERM from another uid")
def test_pid_of_another_user_is_not_running() -> None:
    # pid 1 exists on every POSIX system and is root's: kill() raises EPERM, which the
    # CLI counts as "not running" (PROTOCOL.md §1)
    assert not pid_alive(1)


@posix_only
def test_socket_reachable(listening: str, sockdir: str) -> None:
    assert socket_reachable(listening)
    assert not socket_reachable(os.path.join(sockdir, "missing.sock"))
    # a bound socket nobody listens on refuses the connection
    bound = os.path.join(sockdir, "bound.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(bound)
    try:
        assert not socket_reachable(bound)
    finally:
        s.close()
    # a regular file is not a socket
    plain = os.path.join(sockdir, "plain")
    open(plain, "w").close()
    assert not socket_reachable(plain)
    assert not socket_reachable("/" + "x" * 300)  # longer than sun_path


def test_pipe_path_is_existence_check() -> None:
    assert not socket_reachable("\\\\.\\pipe\\mcp-does-not-exist-1234.sock")


# --- read_locks --------------------------------------------------------------------


def test_read_locks(tmp_path) -> None:
    d = str(tmp_path)
    good = write_lock(make_info(), d)
    bad_type = write_raw(d, "b-bad.lock", wire(pid="1"))
    garbage = write_raw(d, "c-garbage.lock", "{not json")
    write_raw(d, ".x.lock.tmp", wire())  # in-progress temp file: not a lock
    write_raw(d, "notes.txt", wire())
    os.mkdir(os.path.join(d, "dir.lock"))
    result = dict(read_locks(d))
    assert set(result) == {good, bad_type, garbage}
    assert isinstance(result[good], LockInfo) and result[good].path == good
    assert isinstance(result[bad_type], LockFileError) and result[bad_type].field == "pid"
    assert isinstance(result[garbage], LockFileError) and "JSON" in str(result[garbage])
    assert [p for p, _ in read_locks(d)] == sorted(result)


def test_read_locks_missing_dir(tmp_path) -> None:
    assert read_locks(str(tmp_path / "nope")) == []


# --- remove_stale_locks ------------------------------------------------------------


@platforms.unix_sockets  # its locks name Unix sockets, which Windows cannot probe (kept: cannot tell)
def test_remove_stale_locks(tmp_path, dead_pid: int) -> None:
    d = str(tmp_path)
    ours_dead = write_lock(make_info(pid=dead_pid), d)
    ours_alive = write_lock(make_info(pid=os.getpid()), d)
    foreign_dead = write_raw(d, "foreign-dead.lock", wire(pid=dead_pid))
    foreign_alive = write_raw(d, "foreign-alive.lock", wire(pid=os.getpid()))
    ours_invalid = write_raw(d, "ours-invalid.lock", {WRITER_KEY: WRITER_VALUE, "pid": dead_pid})
    other_writer = write_raw(d, "other-writer.lock", dict(wire(pid=dead_pid), _writer="someone-else"))
    garbage = write_raw(d, "garbage.lock", "\x00\x01")
    assert remove_stale_locks(d) == [ours_dead]
    assert not os.path.exists(ours_dead)
    for kept in (ours_alive, foreign_dead, foreign_alive, ours_invalid, other_writer, garbage):
        assert os.path.exists(kept), kept
    assert remove_stale_locks(d) == []


def test_remove_stale_locks_missing_dir(tmp_path) -> None:
    assert remove_stale_locks(str(tmp_path / "nope")) == []


@posix_only
def test_remove_stale_locks_cleans_socket_dir(tmp_path, dead_pid: int) -> None:
    sdir = tempfile.mkdtemp(prefix="mcp-", dir="/tmp" if os.path.isdir("/tmp") else None)
    spath = os.path.join(sdir, "mcp.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(spath)
    s.close()  # a crashed server leaves the socket file behind
    try:
        write_lock(make_info(pid=dead_pid, socket_path=spath), str(tmp_path))
        assert len(remove_stale_locks(str(tmp_path))) == 1
        assert not os.path.exists(spath)
        assert not os.path.exists(sdir)
    finally:
        shutil.rmtree(sdir, ignore_errors=True)


@posix_only
def test_remove_stale_locks_never_deletes_non_socket(tmp_path, dead_pid: int) -> None:
    victim_dir = tmp_path / "mcp-victim"
    victim_dir.mkdir()
    victim = victim_dir / "important.txt"
    victim.write_text("keep me")
    write_lock(make_info(pid=dead_pid, socket_path=str(victim)), str(tmp_path / "ide"))
    assert len(remove_stale_locks(str(tmp_path / "ide"))) == 1
    assert victim.read_text() == "keep me"


# --- find_lock_for_folder ----------------------------------------------------------


@posix_only
def test_find_lock_for_folder(tmp_path, listening: str, dead_pid: int) -> None:
    d = str(tmp_path / "ide")
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(proj)
    real = os.path.realpath(str(proj))

    match_lock = LockInfo.new(listening, {"Authorization": "Nonce a"}, [str(link)], "Match")
    write_lock(match_lock, d)
    other = LockInfo.new(listening, {"Authorization": "Nonce b"}, ["/somewhere/else"], "Other")
    write_lock(other, d)
    dead = LockInfo.new(listening, {}, [real], "Dead", pid=dead_pid)
    write_lock(dead, d)
    # (Written long ago: a fresh lock whose socket refuses is probed again until it is
    # two seconds old, PROTOCOL.md §1; that rule has tests of its own.)
    refused = LockInfo.new(os.path.join(os.path.dirname(listening), "gone.sock"), {}, [real], "Refused",
                           timestamp=1764480000000)
    write_lock(refused, d)
    write_raw(d, "0-invalid.lock", wire(workspaceFolders=[real], pid=os.getpid(), socketPath=listening, ideName=5))

    found, others = find_lock_for_folder(str(link), d)  # cwd through the symlink: physical path
    assert found is not None and found.ide_name == "Match"
    assert [o.ide_name for o in others] == ["Other"]

    found, others = find_lock_for_folder(str(proj), d)
    assert found is not None and found.ide_name == "Match"

    # no prefix matching: a subfolder of a workspace is not that workspace
    found, others = find_lock_for_folder(str(proj / "sub"), d)
    assert found is None
    assert sorted(o.ide_name for o in others) == ["Match", "Other"]

    # without the socket probe the refused lock becomes usable too
    found, others = find_lock_for_folder(str(tmp_path / "nothing"), d, check_socket=False)
    assert found is None
    assert sorted(o.ide_name for o in others) == ["Match", "Other", "Refused"]


@posix_only
def test_find_lock_first_match_wins(tmp_path, listening: str) -> None:
    d = str(tmp_path)
    folder = os.path.realpath(str(tmp_path))
    base = wire(socketPath=listening, pid=os.getpid(), workspaceFolders=[folder])
    write_raw(d, "b.lock", dict(base, ideName="Second"))
    write_raw(d, "a.lock", dict(base, ideName="First"))
    found, others = find_lock_for_folder(folder, d)
    assert found is not None and found.ide_name == "First"
    assert [o.ide_name for o in others] == ["Second"]


def test_the_sockets_of_many_locks_are_probed_at_once(tmp_path, monkeypatch) -> None:
    """Each probe may wait up to 1 s: one after another, 20 live servers that do not
    answer held a client's discovery for 20 s. Every probe here waits until all 20 are
    under way at once (a barrier), which only a parallel scan gets through."""
    import threading
    from ide_protocol.common import lock_rules
    count = 20
    barrier = threading.Barrier(count, timeout=30)

    def probe(socket_path: str, timestamp: Any, cwd: str, now_ms: Any = None) -> str:
        barrier.wait()  # BrokenBarrierError (a failure) unless all probes run together
        return "refused by this test"

    monkeypatch.setattr(lock_rules, "probe_lock_socket", probe)
    monkeypatch.setattr(lockfile, "MAX_PARALLEL_PROBES", count)
    folder = os.path.realpath(str(tmp_path))
    for n in range(count):
        write_raw(str(tmp_path / "ide"), "%02d.lock" % n,
                  wire(socketPath="/nonexistent/%d.sock" % n, pid=os.getpid(), workspaceFolders=[folder]))
    scanned = lockfile.scan_locks(str(tmp_path / "ide"), folder)
    assert len(scanned) == count
    assert all(isinstance(info, LockFileError) and "refused by this test" in str(info) for _, info in scanned)
    assert [os.path.basename(path) for path, _ in scanned] == ["%02d.lock" % n for n in range(count)]


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="threads have no signal masks here")
def test_the_probe_threads_leave_signals_to_the_host(tmp_path, monkeypatch) -> None:
    """The probes run on threads the library starts inside its host's process: they
    block the host's signals (SIGHUP, SIGTERM...) for themselves, so that a host's
    handlers run on its own threads; the caller's mask is left as it was."""
    import signal
    from ide_protocol.common import lock_rules
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    masks: List[Any] = []

    def probe(socket_path: str, timestamp: Any, cwd: str, now_ms: Any = None) -> str:
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return "refused by this test"

    monkeypatch.setattr(lock_rules, "probe_lock_socket", probe)
    folder = os.path.realpath(str(tmp_path))
    for n in range(3):
        write_raw(str(tmp_path / "ide"), "%02d.lock" % n,
                  wire(socketPath="/nonexistent/%d.sock" % n, pid=os.getpid(), workspaceFolders=[folder]))
    assert len(lockfile.scan_locks(str(tmp_path / "ide"), folder)) == 3
    assert len(masks) == 3
    for mask in masks:
        assert {signal.SIGHUP, signal.SIGTERM, signal.SIGINT} <= mask and signal.SIGSEGV not in mask
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before and signal.SIGTERM not in before


def test_find_lock_missing_dir(tmp_path) -> None:
    assert find_lock_for_folder(str(tmp_path), str(tmp_path / "nope")) == (None, [])


def test_module_exports() -> None:
    for name in lockfile.__all__:
        assert hasattr(lockfile, name)


@pytest.mark.skipif(sys.platform != "win32", reason="POSIX unlinks a file another handle has open; "
                                                    "only Windows refuses (a sharing violation)")
def test_a_lock_being_read_elsewhere_is_still_removed(tmp_path) -> None:
    """Windows refuses to delete a file that another handle has open: a reader of the
    lock folder (the CLI, or serve's own scan) holding the lock for an instant must not
    leave it behind when the server stops (PROTOCOL.md §1)."""
    import threading
    import time
    path = tmp_path / "held.lock"
    path.write_text("{}")
    opened = threading.Event()

    def hold() -> None:
        with open(str(path), "rb"):
            opened.set()
            time.sleep(0.05)

    reader = threading.Thread(target=hold)
    reader.start()
    opened.wait(5)
    lockfile.remove_lock(str(path))
    reader.join()
    assert not path.exists()
