"""The readers of lock files judge them by the CLI's rules (PROTOCOL.md §1), the same
for the client's discovery, `check` and `doctor`. Real files, real Unix sockets (held
named pipes on Windows), a real `serve` and real processes; only the public API, so that these tests run against any
version of the library.

Each rule the client used to bend (a byte-order mark stripped, another user's pid
counted as alive, an integer-only pid, folders compared without lexical normalisation)
has a test here that failed before the readers shared `common.lock_rules`.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from contextlib import redirect_stdout
from typing import Any, Dict, List, Optional

import pytest

import platforms
from ide_protocol.client import NoIdeFound, discovery
from ide_protocol.common import lock_rules, lockfile
from ide_protocol.programs import check
from ide_protocol.programs.doctor.diagnose import diagnose
from test_lock_rules import OLD_TIMESTAMP, listening, lock_json, short_dir  # noqa: F401 (fixtures)
from test_serve import Serve

NOBODY = 65534


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def ws(short_dir: str) -> str:
    """A workspace folder, its physical path (what the CLI's cwd is)."""
    folder = os.path.join(short_dir, "ws")
    os.mkdir(folder)
    os.chmod(folder, 0o755)
    return os.path.realpath(folder)


def plant(directory: str, name: str, content: Any, prefix: bytes = b"") -> str:
    """Write a lock by hand, as another IDE would: JSON text (or the raw text given)."""
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, name)
    text = content if isinstance(content, str) else json.dumps(content)
    with open(path, "wb") as fh:
        fh.write(prefix + text.encode("utf-8"))
    os.chmod(path, 0o644)
    return path


def picked(folder: str, directory: str) -> Optional[str]:
    """The lock file `client` discovery picks for `folder`, or None (NoIdeFound)."""
    try:
        return discovery.discover(folder, directory).path
    except NoIdeFound:
        return None


# ------------------------------------------------------------ the readers' bent rules


def test_discover_skips_a_lock_with_a_byte_order_mark(tmp_path: Any) -> None:
    """A real `serve`, and a copy of its lock with a UTF-8 BOM under a name that sorts
    first: the CLI's JSON.parse fails on the BOM, so the CLI (and the client) connect
    through the real lock, and with only the BOM copy there is no IDE at all."""
    serve = Serve(tmp_path)
    try:
        copy = dict(serve.lock, ideName="BOM copy")
        bom = plant(serve.lock_dir, "0000-bom.lock", copy, prefix=b"\xef\xbb\xbf")
        choice = discovery.choose(serve.folder, serve.lock_dir)
        assert choice.chosen.path == serve.lock_path and choice.chosen.ide_name != "BOM copy"
        assert choice.passed_over == []
        assert dict(lockfile.read_locks(serve.lock_dir))[bom].code == "invalid-json"

        alone = str(tmp_path / "alone")
        os.makedirs(alone)
        shutil.copy(bom, os.path.join(alone, "x.lock"))
        with pytest.raises(NoIdeFound) as err:
            discovery.discover(serve.folder, alone)
        assert "byte-order mark" in str(err.value)
        serve.send("quit")
        assert serve.wait() == 0
    finally:
        serve.kill()


#: Run as a child: import the library, drop to uid/gid 65534, then discover.
_AS_NOBODY = """
import os, sys
from ide_protocol.client import NoIdeFound, discovery
os.setgroups([])
os.setgid(%d)
os.setuid(%d)
try:
    print("picked %%s" %% discovery.discover(sys.argv[1], sys.argv[2]).path)
except NoIdeFound as exc:
    print("none %%s" %% exc)
""" % (NOBODY, NOBODY)


def _discover_as_nobody(folder: str, directory: str) -> str:
    """Run discovery in a child process that dropped to uid/gid 65534, so that the
    lock's pid (ours, root's) is another user's: kill(pid, 0) fails with EPERM. A new
    interpreter, not a fork: this process has threads."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(discovery.__file__)))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(root))
    done = subprocess.run([sys.executable, "-c", _AS_NOBODY, folder, directory], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout.decode("utf-8", "replace")


@platforms.other_users
def test_discover_skips_a_pid_of_another_user(ws: str, listening: str, short_dir: str) -> None:
    """The CLI's kill(pid, 0) fails with EPERM for another user's process, which it
    counts as not running (PROTOCOL.md §1). Not root: pid 1 (init) is root's. Root:
    discovery runs in a child that became `nobody`, and the lock names our pid."""
    directory = os.path.join(short_dir, "ide")
    if os.geteuid() != 0:
        plant(directory, "a.lock", lock_json(listening, [ws], pid=1))
        assert picked(ws, directory) is None
        with pytest.raises(NoIdeFound, match="EPERM"):
            discovery.discover(ws, directory)
        return
    plant(directory, "a.lock", lock_json(listening, [ws], pid=os.getpid()))
    assert picked(ws, directory) is not None  # root signals its own pid: running
    answer = _discover_as_nobody(ws, directory)
    assert answer.startswith("none ") and "EPERM" in answer, answer


def test_a_pid_written_as_a_float_is_a_pid(ws: str, listening: str, short_dir: str) -> None:
    """The CLI's schema wants a number and Node signals 1234.0 as 1234."""
    directory = os.path.join(short_dir, "ide")
    text = json.dumps(lock_json(listening, [ws], pid=float(os.getpid())))
    assert '"pid": %d.0' % os.getpid() in text
    path = plant(directory, "a.lock", text)
    found, _others = lockfile.find_lock_for_folder(ws, directory)
    assert found is not None and found.path == path and found.pid == os.getpid()
    assert picked(ws, directory) == path
    # a fraction is a number too (the schema passes) but no pid: the lock is skipped
    os.unlink(path)
    plant(directory, "b.lock", lock_json(listening, [ws], pid=os.getpid() + 0.5))
    with pytest.raises(NoIdeFound, match="32-bit integer"):
        discovery.discover(ws, directory)


@pytest.mark.parametrize("suffix", ["/", "/.", "//", "/./", "/sub/..", "/./sub/../"])
def test_a_folder_listed_with_dots_or_slashes_matches(ws: str, listening: str, short_dir: str, suffix: str) -> None:
    """The CLI normalises the listed folder lexically before comparing (PROTOCOL.md §1);
    the Windows CLI takes `/` for `\\` too."""
    directory = os.path.join(short_dir, "ide")
    path = plant(directory, "a.lock", lock_json(listening, [ws + suffix]))
    assert picked(ws, directory) == path
    assert lockfile.find_lock_for_folder(ws, directory)[0] is not None


@platforms.symlinks_followed
def test_lexical_only_no_prefix_no_symlink(ws: str, listening: str, short_dir: str) -> None:
    directory = os.path.join(short_dir, "ide")
    os.mkdir(os.path.join(ws, "sub"))
    link = os.path.join(short_dir, "link")
    os.symlink(ws, link)
    plant(directory, "a.lock", lock_json(listening, [os.path.join(ws, "sub"), link, ws.upper()]))
    assert picked(ws, directory) is None                       # none of them is the CLI's folder (POSIX: case kept)
    assert picked(os.path.join(ws, "sub"), directory) is not None
    assert picked(link, directory) is None  # the CLI's cwd is physical; the listed link is not resolved


# ----------------------------------------------------------------- check, too


def _check(argv: List[str]) -> Dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = check.main(argv + ["--json"])
    report = json.loads(out.getvalue())
    report["rc"] = rc
    return report


def test_check_fails_a_lock_the_cli_cannot_parse(listening: str, ws: str, short_dir: str) -> None:
    directory = os.path.join(short_dir, "ide")
    bom = plant(directory, "6f9619ff-8b86-4d11-b42d-00c04fc964ff.lock", lock_json(listening, [ws]),
                prefix=b"\xef\xbb\xbf")
    report = _check(["--lock", bom, "--only", "lock.fields"])
    (result,) = report["results"]
    assert result["status"] == "FAIL" and "byte-order mark" in result["message"], result


def test_check_takes_a_lexically_equal_folder(listening: str, ws: str, short_dir: str) -> None:
    directory = os.path.join(short_dir, "ide")
    path = plant(directory, "6f9619ff-8b86-4d11-b42d-00c04fc964ff.lock", lock_json(listening, [ws + "/"]))
    report = _check(["--lock", path, "--only", "lock.folders"])
    (result,) = report["results"]
    assert result["status"] == "PASS", result


# ------------------------------------------------------- doctor and discovery agree


#: The fixture that needs a symlink that realpath follows: not on Windows (see tests/platforms.py).
POSIX_ONLY_FIXTURES = ("k-symlink.lock",)


def _fixtures(listening: str, refusing: str, ws: str, link: str, dead: int) -> Dict[str, Any]:
    """Lock files (name -> content, bytes for raw text) covering each rule."""
    good = lock_json(listening, [ws])
    text = json.dumps(good)
    every = {
        "a-valid.lock": good,
        "b-bom.lock": b"\xef\xbb\xbf" + text.encode(),
        "c-float-pid.lock": text.replace('"pid": %d' % os.getpid(), '"pid": %d.0' % os.getpid()).encode(),
        "d-fraction-pid.lock": lock_json(listening, [ws], pid=os.getpid() + 0.25),
        "e-dead-pid.lock": lock_json(listening, [ws], pid=dead),
        "f-pid-one.lock": lock_json(listening, [ws], pid=1),     # EPERM unless we are root
        "g-refusing.lock": lock_json(refusing, [ws]),
        "h-trailing-slash.lock": lock_json(listening, [ws + "/"]),
        "i-nan.lock": text.replace('"timestamp": %d' % OLD_TIMESTAMP, '"timestamp": NaN').encode(),
        "j-trusted-null.lock": lock_json(listening, [ws], isTrusted=None),
        "k-symlink.lock": lock_json(listening, [link]),
        "l-header-number.lock": lock_json(listening, [ws], headers={"Authorization": 1}),
        "m-pid-string.lock": lock_json(listening, [ws], pid=str(os.getpid())),
        "n-bad-utf8.lock": text.replace("Fixture", "Fi\udcffture").encode("utf-8", "surrogateescape"),
        "o-other-folder.lock": lock_json(listening, [os.path.dirname(ws)]),
        "p-dot-folder.lock": lock_json(listening, [ws + "/./"]),
    }
    return {name: lock for name, lock in every.items() if not (platforms.WINDOWS and name in POSIX_ONLY_FIXTURES)}


def _write(directory: str, name: str, content: Any) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as fh:
        fh.write(content if isinstance(content, bytes) else json.dumps(content).encode())


def _doctor(ws: str, home: str) -> Any:
    return diagnose(ws, env={"COPILOT_HOME": home, "HOME": home}, home=home, try_handshake=False)


def test_doctor_and_discovery_give_the_same_verdicts(listening: str, ws: str, short_dir: str,
                                                     dead_pid: int, monkeypatch: Any) -> None:
    """Every fixture lock alone, then all together: doctor's prediction of the CLI
    (usable, matching, picked) and `client` discovery's choice are the same."""
    # Each reader still reads an invalid lock three times (PROTOCOL.md §1), without the
    # 100 ms between reads: about seventy of them here, and no writer to wait for.
    monkeypatch.setattr(lock_rules, "READ_RETRY_SECONDS", 0.0)
    link = os.path.join(short_dir, "link")
    if platforms.WINDOWS:  # a pipe nobody holds refuses
        refusing = "\\\\.\\pipe\\mcp-refusing-%d.sock" % os.getpid()
    else:
        refusing = os.path.join(short_dir, "refusing.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(refusing)
        sock.close()
        os.symlink(ws, link)
    fixtures = _fixtures(listening, refusing, ws, link, dead_pid)
    expected_usable = {"a-valid.lock", "c-float-pid.lock", "h-trailing-slash.lock", "k-symlink.lock",
                       "n-bad-utf8.lock", "o-other-folder.lock", "p-dot-folder.lock"}.intersection(fixtures)
    if getattr(os, "geteuid", lambda: None)() == 0:
        expected_usable.add("f-pid-one.lock")  # root may signal init
    for name, content in sorted(fixtures.items()):
        home = os.path.join(short_dir, "home-" + name)
        directory = os.path.join(home, "ide")
        _write(directory, name, content)
        report = _doctor(ws, home)
        (lock,) = report.locks
        found, others = lockfile.find_lock_for_folder(ws, directory)
        usable = [info.path for info in ([found] if found else []) + others]
        assert lock.usable is (usable == [lock.path]) is (name in expected_usable), (name, lock.findings)
        doctor_pick = report.picked.path if report.would_connect and report.picked else None
        assert doctor_pick == picked(ws, directory), name
        assert (found.path if found else None) == doctor_pick, name

    home = os.path.join(short_dir, "home-all")
    directory = os.path.join(home, "ide")
    for name, content in fixtures.items():
        _write(directory, name, content)
    report = _doctor(ws, home)
    assert report.would_connect and report.picked is not None
    assert report.picked.path == picked(ws, directory) == os.path.join(directory, "a-valid.lock")
    doctor_usable = [lock.path for lock in report.locks if lock.usable]
    found, others = lockfile.find_lock_for_folder(ws, directory)
    assert found is not None and sorted(doctor_usable) == sorted([found.path] + [o.path for o in others])
    choice = discovery.choose(ws, directory)
    several = [lock.path for lock in report.locks if lock.matches]
    assert [choice.chosen.path] + [o.path for o in choice.passed_over] == several
    assert [os.path.basename(p) for p in several] == [
        n for n in sorted(expected_usable) if n not in ("k-symlink.lock", "o-other-folder.lock")]


def test_serve_warns_of_a_live_ide_the_cli_would_see_for_its_folder(tmp_path: Any) -> None:
    """`serve` warns when another live IDE lists its folder, judged by the CLI's rules:
    here a planted copy of the first server's lock that lists the folder with a
    trailing `/` (the CLI matches it, on Windows too) and one with a BOM (the CLI skips it)."""
    first = Serve(tmp_path)
    second = None
    try:
        plant(first.lock_dir, "0-slash.lock", dict(first.lock, ideName="Slash", timestamp=OLD_TIMESTAMP,
                                                   workspaceFolders=[os.path.realpath(first.folder) + "/"]))
        plant(first.lock_dir, "0-bom.lock", dict(first.lock, ideName="Bom"), prefix=b"\xef\xbb\xbf")
        os.unlink(first.lock_path)  # only the planted locks name the first server now
        second = Serve(tmp_path)
        second.send("quit")
        assert second.wait() == 0
        err = second.stderr()
        assert '"Slash"' in err and "already serves" in err, err
        assert '"Bom"' not in err, err
        first.send("quit")
        assert first.wait() == 0
    finally:
        first.kill()
        if second is not None:
            second.kill()
