"""`python3 -m ide_protocol doctor`: one fixture per finding, over real files and sockets.

Lock files are written by the tests into a private lock directory (``$HOME/.copilot/ide``
with a private HOME); the servers behind them are a real `serve` subprocess (whose own
lock goes to a directory doctor does not read, so each test decides what the CLI would
see), a small misbehaving HTTP server on a real Unix socket, or nothing at all. Every
run of doctor checks that it left the lock directory exactly as it was (names, bytes,
modes, mtimes): it must never change or delete a lock, not even a stale one of ours.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ide_protocol.common import lock_rules, lockfile
from ide_protocol.programs.doctor import cli

import platforms


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 30.0


# ------------------------------------------------------------------ a real `serve`


class Serve:
    """`python3 -m ide_protocol serve FOLDER --lock-dir DIR` as a subprocess."""

    def __init__(self, folder: str, lock_dir: str, *args: str, env: Optional[Dict[str, str]] = None) -> None:
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        argv = [sys.executable, "-m", "ide_protocol", "serve", folder, "--ignore-eof"] + list(args)
        if lock_dir:
            argv += ["--lock-dir", lock_dir]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=full_env, cwd=REPO)
        self.output: List[str] = []
        self._ready = threading.Event()
        self.lock_path = ""
        threading.Thread(target=self._pump, daemon=True).start()
        if not self._ready.wait(WAIT) or not self.lock_path:
            self.stop()
            raise AssertionError("serve did not start:\n" + "\n".join(self.output))
        with open(self.lock_path, encoding="utf-8") as fh:
            self.lock: Dict[str, Any] = json.load(fh)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.output.append(line)
            m = re.match(r"^serving .+ on .+, lock (.+)$", line)
            if m:
                self.lock_path = m.group(1)
                self._ready.set()
        self._ready.set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
            except OSError:
                pass
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT)


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Any:
    """One `serve` for the module; its own lock lives where doctor does not look."""
    base = tmp_path_factory.mktemp("doctor-serve")
    folder = os.path.realpath(str(base / "ws"))
    os.makedirs(os.path.join(folder, "sub"))
    srv = Serve(folder, str(base / "serve-locks"))
    srv.folder = folder
    yield srv
    srv.stop()


# --------------------------------------------------------------------- the set-up


def home_vars(home: str) -> Dict[str, str]:
    """The variables that make ``home`` the CLI's home folder (Node's os.homedir()):
    HOME; on Windows USERPROFILE, with a HOME elsewhere (Git Bash sets one) not read."""
    if platforms.WINDOWS:
        return {"USERPROFILE": home, "HOME": os.path.join(home, "not-the-home")}
    return {"HOME": home}


class Env:
    """A private HOME whose ``.copilot/ide`` is the lock directory doctor reads."""

    def __init__(self, tmp_path: Any, monkeypatch: Any) -> None:
        self.root = os.path.realpath(str(tmp_path))
        self.home = os.path.join(self.root, "home")
        self.config = os.path.join(self.home, ".copilot")
        self.lock_dir = os.path.join(self.config, "ide")
        os.makedirs(self.lock_dir)
        for name in ("COPILOT_HOME", "XDG_STATE_HOME", "COPILOT_ALLOW_ALL"):
            monkeypatch.delenv(name, raising=False)
        for name, value in home_vars(self.home).items():
            monkeypatch.setenv(name, value)

    def write(self, name: str, content: Any) -> str:
        path = os.path.join(self.lock_dir, name)
        data = content if isinstance(content, bytes) else json.dumps(content).encode("utf-8")
        with open(path, "wb") as fh:
            fh.write(data)
        return path


@pytest.fixture
def env(tmp_path: Any, monkeypatch: Any) -> Env:
    return Env(tmp_path, monkeypatch)


def lock_of(srv: Serve, **changes: Any) -> Dict[str, Any]:
    """The server's lock with some fields changed (``drop=[...]`` removes fields)."""
    lock = dict(srv.lock)
    lock.pop(lockfile.WRITER_KEY, None)
    for key in changes.pop("drop", []):
        del lock[key]
    lock.update(changes)
    return lock


def _snapshot(directory: str) -> Dict[str, Tuple[bytes, int, int]]:
    out = {}
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            st = os.lstat(path)
            data = b""
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as fh:
                    data = fh.read()
            out[name] = (data, st.st_mtime_ns, st.st_mode)
    return out


class Result:
    def __init__(self, rc: int, report: Dict[str, Any], text: str, text_rc: int) -> None:
        self.rc = rc
        self.report = report
        self.text = text
        self.text_rc = text_rc

    def lock(self, name: str) -> Dict[str, Any]:
        for lock in self.report["locks"]:
            if os.path.basename(lock["path"]) == name:
                return lock
        raise AssertionError("no lock %s in %s" % (name, self.report))

    def codes(self, name: Optional[str] = None) -> List[str]:
        findings = self.report["findings"] if name is None else self.lock(name)["findings"]
        return [f["code"] for f in findings]

    def finding(self, code: str, name: Optional[str] = None) -> Dict[str, str]:
        findings = self.report["findings"] if name is None else self.lock(name)["findings"]
        for f in findings:
            if f["code"] == code:
                return f
        raise AssertionError("no %s finding in %s" % (code, findings))


def doctor(capsys: Any, folder: str, *args: str, watch: Tuple[str, ...] = ()) -> Result:
    """Run doctor in-process twice (JSON, then text); every watched directory must be
    left exactly as it was."""
    before = {d: _snapshot(d) for d in watch}
    capsys.readouterr()
    rc = cli.main([folder, "--json"] + list(args))
    out = capsys.readouterr().out
    report = json.loads(out)
    text_rc = cli.main([folder] + list(args))
    text = capsys.readouterr().out
    for directory, snap in before.items():
        assert _snapshot(directory) == snap, "doctor changed %s" % directory
    assert rc == text_rc
    assert out.isascii(), out
    return Result(rc, report, text, text_rc)


def assert_shown(result: Result, code: str, fix_words: str, name: Optional[str] = None) -> Dict[str, str]:
    """The finding is in the JSON, its fix names ``fix_words``, and the text output
    shows the code with its message and that fix."""
    finding = result.finding(code, name)
    assert fix_words in finding["fix"], finding
    # The two runs may time a step differently: numbers aside, the same line.
    numbers = re.compile(r"\d+(\.\d+)?")
    assert numbers.sub("N", "%s: %s" % (code, cli.one_line(finding["message"]))) in numbers.sub("N", result.text), \
        result.text
    assert "fix: %s" % cli.one_line(finding["fix"]) in result.text, result.text
    return finding


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --------------------------------------------------------------------- the good case


def test_clean_serve_connects_and_names_the_ide(tmp_path: Any) -> None:
    """A real `serve` writing its lock where the CLI looks; doctor as a real command."""
    home = os.path.realpath(str(tmp_path / "home"))
    folder = os.path.realpath(str(tmp_path / "ws"))
    os.makedirs(folder)
    env = {k: v for k, v in os.environ.items() if k not in ("COPILOT_HOME", "XDG_STATE_HOME", "COPILOT_ALLOW_ALL")}
    env.update(home_vars(home), PYTHONPATH=REPO + os.pathsep + env.get("PYTHONPATH", ""))
    srv = Serve(folder, "", "--name", "Clean IDE", env=env)
    try:
        before = _snapshot(os.path.dirname(srv.lock_path))
        argv = [sys.executable, "-m", "ide_protocol", "doctor"]
        text = subprocess.run(argv + [folder], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=WAIT)
        js = subprocess.run(argv + [folder, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            timeout=WAIT)
        here = subprocess.run(argv, env=env, cwd=folder, stdout=subprocess.PIPE, timeout=WAIT)
        assert _snapshot(os.path.dirname(srv.lock_path)) == before
    finally:
        srv.stop()
    assert text.returncode == 0, text.stdout + text.stderr
    assert js.returncode == 0 and here.returncode == 0
    out = text.stdout.decode()
    assert 'connects to "Clean IDE" at start-up' in out, out
    report = json.loads(js.stdout)
    assert report["folder"] == folder and report["would_connect"] is True and report["ide"] == "Clean IDE"
    (lock,) = report["locks"]
    assert lock["path"] == srv.lock_path and lock["usable"] is True
    assert [f["code"] for f in lock["findings"]] == ["not-trusted"]  # serve without --trusted
    assert set(lock["timings_ms"]) == {"discover", "initialize"}
    assert report["findings"] == []
    assert b"Clean IDE" in here.stdout   # FOLDER defaults to the current folder


def test_trusted_lock_has_no_trust_finding(env: Env, server: Serve, capsys: Any) -> None:
    env.write("a.lock", lock_of(server, isTrusted=True))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 0 and result.report["ide"] == "Terminal IDE"
    assert result.codes("a.lock") == []
    assert result.lock("a.lock")["usable"] is True


def test_not_trusted_folder(env: Env, server: Serve, capsys: Any) -> None:
    env.write("a.lock", lock_of(server))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 0                     # the CLI connects anyway, and asks
    assert_shown(result, "not-trusted", "isTrusted: true", "a.lock")


def test_trusted_folder_in_config_is_no_trust_finding(env: Env, server: Serve, capsys: Any) -> None:
    # The CLI trusts a folder below a trusted one (its folderTrustIsTrusted).
    with open(os.path.join(env.config, "config.json"), "w") as fh:
        json.dump({"trustedFolders": [os.path.dirname(server.folder)]}, fh)
    env.write("a.lock", lock_of(server))
    result = doctor(capsys, server.folder)
    assert result.rc == 0 and result.codes("a.lock") == []


# --------------------------------------------------------------- locks the CLI skips


@pytest.mark.parametrize("data, words", [
    (b"{oops", "not valid JSON"),
    (b"\xef\xbb\xbf{}", "byte-order mark"),
    (b'{"pid": NaN}', "not valid JSON"),
    (b"", "not valid JSON"),
])
def test_invalid_json(env: Env, capsys: Any, data: bytes, words: str) -> None:
    env.write("bad.lock", data)
    result = doctor(capsys, env.root, watch=(env.lock_dir,))
    assert result.rc == 1
    finding = assert_shown(result, "invalid-json", "the IDE", "bad.lock")
    assert words in finding["message"]
    assert result.lock("bad.lock")["usable"] is False


def test_a_directory_named_like_a_lock_is_reported_not_followed(env: Env, capsys: Any) -> None:
    os.makedirs(os.path.join(env.lock_dir, "dir.lock"))
    result = doctor(capsys, env.root, watch=(env.lock_dir,))
    assert "cannot be read" in result.finding("invalid-json", "dir.lock")["message"]


@platforms.posix_fifos
def test_a_fifo_named_like_a_lock_does_not_hang_doctor(env: Env, capsys: Any) -> None:
    os.mkfifo(os.path.join(env.lock_dir, "fifo.lock"))
    result = doctor(capsys, env.root, watch=(env.lock_dir,))
    assert "not a regular file" in result.finding("invalid-json", "fifo.lock")["message"]


@pytest.mark.parametrize("headers, words", [
    ({"Authorization": "Nonce x\r\nX-Injected: 1"}, "invalid header value"),
    ({"Bad Name": "x"}, "invalid header name"),
])
def test_headers_that_cannot_be_sent_fail_the_handshake(env: Env, server: Serve, capsys: Any,
                                                        headers: Dict[str, str], words: str) -> None:
    env.write("h.lock", lock_of(server, headers=headers))
    result = doctor(capsys, server.folder)
    assert result.rc == 1
    assert words in result.finding("handshake-failed", "h.lock")["message"]


def test_folders_that_name_no_file_are_a_mismatch(env: Env, server: Serve, capsys: Any) -> None:
    env.write("n.lock", lock_of(server, workspaceFolders=["/tmp/\u0000x", "/tmp/\udcff", "relative/x"]))
    result = doctor(capsys, server.folder)
    assert result.rc == 1 and "folder-mismatch" in result.codes("n.lock")
    assert "\\0x" in result.text and "\\udcff" in result.text


@pytest.mark.parametrize("changes, field, wants", [
    ({"pid": "12"}, "pid", "a number"),
    ({"timestamp": "now"}, "timestamp", "a number"),
    ({"headers": {"Authorization": 1}}, "headers", "values are all strings"),
    ({"headers": ["Authorization"]}, "headers", "an object"),
    ({"isTrusted": None}, "isTrusted", "true, false or no field"),
    ({"isTrusted": "yes"}, "isTrusted", "true, false or no field"),
    ({"workspaceFolders": "/x"}, "workspaceFolders", "an array of strings"),
    ({"workspaceFolders": ["/x", 3]}, "workspaceFolders", "an array of strings"),
    ({"drop": ["ideName"]}, "ideName", "a string"),
    ({"drop": ["scheme"]}, "scheme", "a string"),
    ({"socketPath": 7}, "socketPath", "a string"),
])
def test_schema(env: Env, server: Serve, capsys: Any, changes: Dict[str, Any], field: str, wants: str) -> None:
    env.write("s.lock", lock_of(server, **changes))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1 and result.report["ide"] is None
    finding = assert_shown(result, "schema", '"%s"' % field, "s.lock")
    assert '"%s"' % field in finding["message"] and wants in finding["message"], finding


def test_schema_top_level_not_an_object(env: Env, capsys: Any) -> None:
    env.write("s.lock", [1, 2])
    result = doctor(capsys, env.root)
    assert "JSON object" in assert_shown(result, "schema", "JSON object", "s.lock")["message"]


def test_schema_accepts_what_the_cli_accepts(env: Env, server: Serve, capsys: Any) -> None:
    """The CLI's schema wants numbers, not integers, and ignores unknown keys: a float
    timestamp and an extra key are fine."""
    env.write("a.lock", lock_of(server, timestamp=1764480000000.5, extra={"any": 1}))
    result = doctor(capsys, server.folder)
    assert result.rc == 0, result.text


@pytest.mark.parametrize("pid, words", [
    ("dead", "no such process"),
    (2 ** 31, "32-bit integer"),
    (1234.5, "32-bit integer"),
])
def test_pid_not_running(env: Env, server: Serve, capsys: Any, pid: Any, words: str) -> None:
    pid = dead_pid() if pid == "dead" else pid
    # Our own marker on a dead lock: remove_stale_locks would delete it; doctor must not.
    # (Its socket is gone too: a pid not seen here with a live socket is another case.)
    lock = lock_of(server, pid=pid, socketPath=os.path.join(env.root, "gone.sock"))
    lock[lockfile.WRITER_KEY] = lockfile.WRITER_VALUE
    env.write("p.lock", lock)
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1
    finding = assert_shown(result, "pid-not-running", "restart the IDE", "p.lock")
    assert words in finding["message"]
    assert os.path.exists(os.path.join(env.lock_dir, "p.lock"))


def test_a_pid_not_visible_here_whose_socket_accepts_is_not_called_stale(env: Env, server: Serve,
                                                                          capsys: Any) -> None:
    """An IDE in another PID namespace (a container, WSL): its pid names no process here,
    yet its socket accepts. The CLI skips it all the same; doctor says why, and that the
    relay joins the two sides, instead of calling the lock stale."""
    pid = dead_pid()
    env.write("v.lock", lock_of(server, pid=pid))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1
    finding = assert_shown(result, "pid-not-visible", "ide_protocol relay", "v.lock")
    assert "pid %d is not visible from here (no such process)" % pid in finding["message"]
    assert "stale" in finding["message"] and "not a stale lock" in finding["message"]
    assert "restart the IDE" not in finding["fix"]
    assert os.path.exists(os.path.join(env.lock_dir, "v.lock"))


def test_socket_missing(env: Env, server: Serve, capsys: Any) -> None:
    if platforms.WINDOWS:  # (a lock there names a pipe)
        missing, words = "\\\\.\\pipe\\mcp-none-%d.sock" % os.getpid(), "no such named pipe"
    else:
        missing, words = os.path.join(env.root, "none.sock"), "no such file"
    env.write("k.lock", lock_of(server, socketPath=missing))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1
    assert words in assert_shown(result, "socket-unreachable", "restart the IDE", "k.lock")["message"]


@platforms.unix_sockets
def test_socket_refusing_even_for_a_fresh_lock(env: Env, server: Serve, capsys: Any) -> None:
    """A socket file nothing listens on; the lock is fresh, so the CLI (and doctor) try
    for a second before giving up."""
    path = os.path.join(env.root, "refuse.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)   # bound, never listening: connect() is refused
    try:
        env.write("k.lock", lock_of(server, socketPath=path, timestamp=time.time() * 1000))
        started = time.monotonic()
        result = doctor(capsys, server.folder, watch=(env.lock_dir,))
        assert time.monotonic() - started >= 2 * lock_rules.FRESH_PROBE_SECONDS * 0.9   # two runs, retried
    finally:
        sock.close()
    finding = assert_shown(result, "socket-unreachable", "not listening", "k.lock")
    assert "refused" in finding["message"]


def test_the_sockets_of_many_locks_are_probed_at_once(env: Env, capsys: Any, monkeypatch: Any) -> None:
    """Each probe may wait up to 1 s (a fresh lock): one after another, 40 locks of
    live IDEs whose sockets do not answer held doctor for 40 s. Every probe here waits
    until all 20 are under way at once (a barrier), which only a parallel scan gets
    through; the report keeps the order of the lock files all the same. A lock whose
    pid names no process here is probed too, as an older lock (PROTOCOL.md §1), to tell
    another PID namespace from a stale lock."""
    count = 20
    barrier = threading.Barrier(count, timeout=30)
    probed: Dict[str, Any] = {}

    def probe(socket_path: str, timestamp: Any, cwd: str, now_ms: Any = None) -> str:
        probed[socket_path] = timestamp
        barrier.wait()  # BrokenBarrierError (a failure) unless all probes run together
        return "refused by this test"

    monkeypatch.setattr(lock_rules, "probe_lock_socket", probe)
    monkeypatch.setattr(lockfile, "MAX_PARALLEL_PROBES", count)
    folder = os.path.realpath(env.root)
    gone = dead_pid()
    now = time.time() * 1000
    for n in range(count):
        env.write("%02d.lock" % n, {"socketPath": "/nonexistent/%d.sock" % n, "scheme": "unix", "headers": {},
                                    "pid": os.getpid() if n % 2 else gone, "ideName": "IDE %d" % n,
                                    "timestamp": now, "workspaceFolders": [folder]})
    result = doctor(capsys, folder, "--no-handshake", watch=(env.lock_dir,))
    assert [os.path.basename(lock["path"]) for lock in result.report["locks"]] == ["%02d.lock" % n
                                                                                  for n in range(count)]
    for n in range(count):
        assert result.codes("%02d.lock" % n) == ["socket-unreachable" if n % 2 else "pid-not-running"], result.report
        assert probed["/nonexistent/%d.sock" % n] == (now if n % 2 else None)
    assert result.text.index("00.lock") < result.text.index("01.lock") < result.text.index("19.lock")


# ------------------------------------------------------------ the handshake


def test_auth_refused(env: Env, server: Serve, capsys: Any) -> None:
    env.write("w.lock", lock_of(server, headers={"Authorization": "Nonce not-the-right-one"}))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1 and result.report["would_connect"] is False
    finding = assert_shown(result, "auth-refused", "nonce", "w.lock")
    assert "401" in finding["message"]
    assert result.lock("w.lock")["usable"] is False


class TinyHttp:
    """A misbehaving /ide server on a real Unix socket: ``answers`` maps a JSON-RPC
    method to ``(delay seconds, raw HTTP response)``; anything else gets a 500."""

    def __init__(self, path: str, answers: Dict[str, Tuple[float, bytes]]) -> None:
        self.path = path
        self.answers = answers
        self.methods: List[str] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        conn.settimeout(WAIT)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                if head.startswith(b"POST") and b"chunked" in head.lower():
                    while b"0\r\n\r\n" not in rest:
                        data = conn.recv(65536)
                        if not data:
                            return
                        rest += data
                    body, _, buf = rest.partition(b"0\r\n\r\n")
                else:
                    body, buf = b"", rest
                m = re.search(rb'"method":\s*"([^"]+)"', body)
                method = m.group(1).decode() if m else head.split(b" ", 1)[0].decode()
                self.methods.append(method)
                delay, answer = self.answers.get(method, (0.0, _http(500, b"boom")))
                time.sleep(delay)
                conn.sendall(answer)
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def _http(status: int, body: bytes, ctype: str = "text/plain", extra: str = "") -> bytes:
    reason = {200: "OK", 202: "Accepted", 404: "Not Found", 500: "Internal Server Error"}[status]
    return ("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
            % (status, reason, ctype, len(body), extra)).encode() + body


def _rpc(id_: int, **member: Any) -> bytes:
    return _http(200, json.dumps(dict(jsonrpc="2.0", id=id_, **member)).encode(), "application/json",
                 "mcp-session-id: s1\r\n")


def _tiny_lock(env: Env, path: str, folder: str) -> Dict[str, Any]:
    return {"socketPath": path, "scheme": "unix", "headers": {"Authorization": "Nonce x"}, "pid": os.getpid(),
            "ideName": "Tiny", "timestamp": 0, "workspaceFolders": [folder], "isTrusted": True}


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_handshake_failed_names_the_status(env: Env, capsys: Any) -> None:
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {"server/discover": (0.0, _rpc(0, error={"code": -32601, "message": "nope"}))})
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root, watch=(env.lock_dir,))
    finally:
        tiny.close()
    assert result.rc == 1 and result.report["ide"] is None
    finding = assert_shown(result, "handshake-failed", "restart the IDE's Copilot integration", "t.lock")
    assert "initialize answered HTTP 500" in finding["message"]
    assert "check --lock" in finding["fix"]
    assert tiny.methods[:2] == ["server/discover", "initialize"]


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_handshake_failed_when_initialized_is_not_202(env: Env, capsys: Any) -> None:
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {
        "server/discover": (0.0, _http(404, b"")),
        "initialize": (0.0, _rpc(1, result={"protocolVersion": "2025-11-25", "capabilities": {}})),
        "notifications/initialized": (0.0, _http(200, b"")),
    })
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root)
    finally:
        tiny.close()
    assert "needs 202" in assert_shown(result, "handshake-failed", "restart", "t.lock")["message"]


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_slow_discover(env: Env, capsys: Any) -> None:
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {
        "server/discover": (1.6, _rpc(0, error={"code": -32601, "message": "Method not found"})),
        "initialize": (0.0, _rpc(1, result={"protocolVersion": "2025-11-25", "capabilities": {},
                                            "serverInfo": {"name": "tiny"}})),
        "notifications/initialized": (0.0, _http(202, b"")),
        "DELETE": (0.0, _http(200, b"")),
    })
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root, watch=(env.lock_dir,))
    finally:
        tiny.close()
    assert result.rc == 0 and result.report["ide"] == "Tiny"     # slow, but it connects
    finding = assert_shown(result, "slow-discover", "answer server/discover at once", "t.lock")
    assert "every start" in finding["message"]
    assert result.lock("t.lock")["timings_ms"]["discover"] >= 1600
    assert "DELETE" in tiny.methods          # the probe ends its session


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_slow_initialize(env: Env, capsys: Any) -> None:
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {
        "server/discover": (0.0, _rpc(0, error={"code": -32601, "message": "Method not found"})),
        "initialize": (1.3, _rpc(1, result={"protocolVersion": "2025-11-25", "capabilities": {}})),
        "notifications/initialized": (0.0, _http(202, b"")),
        "DELETE": (0.0, _http(200, b"")),
    })
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root)
    finally:
        tiny.close()
    assert result.rc == 0
    assert_shown(result, "slow-initialize", "answer initialize at once", "t.lock")
    assert "slow-discover" not in result.codes("t.lock")


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_an_answer_on_a_stream_left_open_is_taken_when_it_comes(env: Env, capsys: Any) -> None:
    event = b"event: message\ndata: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-11-25", "capabilities": {}}}).encode() + b"\n\n"
    open_stream = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                   b"mcp-session-id: s1\r\n\r\n%x\r\n%s\r\n" % (len(event), event))   # no last chunk
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {
        "server/discover": (0.0, _http(404, b"")),
        "initialize": (0.0, open_stream),
        "notifications/initialized": (0.0, _http(202, b"")),
        "DELETE": (0.0, _http(200, b"")),
    })
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root, "--timeout", "3")
    finally:
        tiny.close()
    assert result.rc == 0, result.text
    assert result.codes("t.lock") == []


@platforms.unix_sockets  # (TinyHttp serves a Unix socket)
def test_no_handshake_option_connects_to_nothing(env: Env, capsys: Any) -> None:
    path = os.path.join(env.root, "tiny.sock")
    tiny = TinyHttp(path, {})
    try:
        env.write("t.lock", _tiny_lock(env, path, env.root))
        result = doctor(capsys, env.root, "--no-handshake")
    finally:
        tiny.close()
    assert result.rc == 0 and "handshake not tried" in result.text
    assert tiny.methods == []                # only the CLI's empty probe connections


# -------------------------------------------------------------------- folders


def test_folder_mismatch(env: Env, server: Serve, capsys: Any) -> None:
    other = os.path.join(env.root, "elsewhere")
    os.makedirs(other)
    env.write("a.lock", lock_of(server))
    result = doctor(capsys, other, watch=(env.lock_dir,))
    assert result.rc == 1 and result.lock("a.lock")["usable"] is True
    finding = assert_shown(result, "folder-mismatch", "start copilot in %s" % server.folder, "a.lock")
    assert "/ide" in finding["fix"]


def test_folder_is_parent(env: Env, server: Serve, capsys: Any) -> None:
    env.write("a.lock", lock_of(server))
    result = doctor(capsys, os.path.join(server.folder, "sub"), watch=(env.lock_dir,))
    assert result.rc == 1
    finding = assert_shown(result, "folder-is-parent", "start copilot in %s" % server.folder, "a.lock")
    assert "or pick this IDE with /ide" in finding["fix"]


@platforms.symlinks_followed
def test_folder_is_parent_through_a_symlink(env: Env, server: Serve, capsys: Any) -> None:
    link = os.path.join(env.root, "link")
    os.symlink(server.folder, link)
    env.write("a.lock", lock_of(server, workspaceFolders=[link]))
    result = doctor(capsys, os.path.join(server.folder, "sub"))
    assert result.rc == 1
    finding = assert_shown(result, "folder-is-parent", "resolved path %s" % server.folder, "a.lock")
    assert "through a symlink" in finding["message"]


@platforms.symlinks_followed
@pytest.mark.parametrize("start_in_link", [False, True])
def test_symlinked_folder(env: Env, server: Serve, capsys: Any, start_in_link: bool) -> None:
    link = os.path.join(env.root, "link")
    os.symlink(server.folder, link)
    env.write("a.lock", lock_of(server, workspaceFolders=[link]))
    # Started in the link or in the real folder, the CLI works in the physical path.
    result = doctor(capsys, link if start_in_link else server.folder, watch=(env.lock_dir,))
    assert result.rc == 1 and result.report["folder"] == server.folder
    assert_shown(result, "symlinked-folder", "resolved path %s" % server.folder, "a.lock")
    assert ("you gave %s" % link in result.text) == start_in_link


def test_case_mismatch(env: Env, server: Serve, capsys: Any) -> None:
    """The CLI compares letter case on POSIX; the Windows CLI does not (PROTOCOL.md §1)."""
    upper = os.path.join(os.path.dirname(server.folder), os.path.basename(server.folder).upper())
    env.write("a.lock", lock_of(server, workspaceFolders=[upper]))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    if platforms.WINDOWS:
        assert result.rc == 0, result.text
        return
    assert result.rc == 1
    assert_shown(result, "case-mismatch", "spelled exactly %s" % server.folder, "a.lock")


def _lexically_equal_spellings(folder: str) -> List[str]:
    """The folder as the CLI of this system takes it too: `.`, `..` and extra separators
    folded (never symlinks); on Windows `/` for `\\` and any letter case as well."""
    parent, name = os.path.split(folder)
    spellings = [folder + os.sep, os.path.join(parent, "nothing", "..", name, ".")]
    if platforms.WINDOWS:
        return spellings + [folder.replace("\\", "/") + "/", folder.swapcase()]
    return spellings + ["/" + folder + "/"]


def test_lexically_equal_folder_matches(env: Env, server: Serve, capsys: Any) -> None:
    for spelling in _lexically_equal_spellings(server.folder):
        env.write("a.lock", lock_of(server, workspaceFolders=[spelling]))
        result = doctor(capsys, server.folder)
        assert result.rc == 0, (spelling, result.text)


def test_several_ides(env: Env, server: Serve, capsys: Any) -> None:
    env.write("b.lock", lock_of(server, ideName="Beta"))
    env.write("a.lock", lock_of(server, ideName="Alpha"))
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 0 and result.report["ide"] == "Alpha"   # first by file name
    picked = assert_shown(result, "several-ides", "close the other IDE windows", "a.lock")
    assert "picks this one, Alpha" in picked["message"] and "Beta" in picked["message"]
    other = result.finding("several-ides", "b.lock")
    assert "picks Alpha" in other["message"] and "pick this one with /ide" in other["fix"]


# ------------------------------------------------------- directory and settings


def test_lock_dir_missing(env: Env, capsys: Any) -> None:
    os.rmdir(env.lock_dir)
    result = doctor(capsys, env.root)
    assert result.rc == 1 and result.report["locks"] == []
    finding = assert_shown(result, "lock-dir", "same HOME and COPILOT_HOME")
    assert "does not exist" in finding["message"]
    assert not os.path.exists(env.lock_dir)       # not created either


def test_lock_dir_empty(env: Env, capsys: Any) -> None:
    result = doctor(capsys, env.root)
    assert "holds no *.lock file" in assert_shown(result, "lock-dir", "Copilot CLI integration")["message"]


def test_copilot_home_that_older_clis_ignore(env: Env, server: Serve, capsys: Any, monkeypatch: Any) -> None:
    copilot_home = os.path.join(env.root, "copilot-home")
    os.makedirs(os.path.join(copilot_home, "ide"))
    monkeypatch.setenv("COPILOT_HOME", copilot_home)
    env.write("old.lock", lock_of(server))   # in ~/.copilot/ide, where older CLIs look
    result = doctor(capsys, server.folder, watch=(env.lock_dir,))
    assert result.rc == 1 and result.report["lock_dir"] == os.path.join(copilot_home, "ide")
    finding = assert_shown(result, "lock-dir", "CLI 1.0 or later")
    assert "older CLIs" in finding["message"] and "1 lock file" in finding["message"]


def test_relative_copilot_home(env: Env, server: Serve, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("COPILOT_HOME", "rel-home")
    result = doctor(capsys, server.folder)
    assert result.report["lock_dir"] == os.path.join(server.folder, "rel-home", "ide")
    assert any("not an absolute path" in f["message"] for f in result.report["findings"])
    assert "set COPILOT_HOME to an absolute path" in result.text


def test_vscode_xdg_state_dir(env: Env, server: Serve, capsys: Any, monkeypatch: Any) -> None:
    xdg = os.path.join(env.root, "state")
    os.makedirs(os.path.join(xdg, ".copilot", "ide"))
    with open(os.path.join(xdg, ".copilot", "ide", "v.lock"), "w") as fh:
        json.dump(lock_of(server), fh)
    monkeypatch.setenv("XDG_STATE_HOME", xdg)
    result = doctor(capsys, server.folder)
    assert result.rc == 1
    assert any("XDG_STATE_HOME" in f["message"] for f in result.report["findings"])
    assert "COPILOT_HOME=%s" % os.path.join(xdg, ".copilot") in result.text


def test_config_dir_option_is_the_clis_flag(env: Env, server: Serve, capsys: Any, monkeypatch: Any) -> None:
    """`copilot --config-dir DIR` reads DIR/ide, whatever COPILOT_HOME says."""
    flag_dir = os.path.join(env.root, "flag-config")
    os.makedirs(os.path.join(flag_dir, "ide"))
    with open(os.path.join(flag_dir, "ide", "f.lock"), "w") as fh:
        json.dump(lock_of(server, isTrusted=True), fh)
    monkeypatch.setenv("COPILOT_HOME", os.path.join(env.root, "elsewhere"))
    result = doctor(capsys, server.folder, "--config-dir", flag_dir)
    assert result.rc == 0 and result.report["lock_dir"] == os.path.join(flag_dir, "ide")
    assert result.report["findings"] == []   # no COPILOT_HOME warning: the flag wins


def test_json_has_the_documented_shape(env: Env, server: Serve, capsys: Any) -> None:
    env.write("a.lock", lock_of(server))
    report = doctor(capsys, server.folder).report
    assert {"folder", "would_connect", "ide", "locks"} <= set(report)
    assert isinstance(report["would_connect"], bool)
    (lock,) = report["locks"]
    assert {"path", "usable", "findings"} <= set(lock) and isinstance(lock["usable"], bool)
    for finding in lock["findings"]:
        assert {"code", "message"} <= set(finding) and all(isinstance(v, str) for v in finding.values())


def test_auto_connect_off(env: Env, server: Serve, capsys: Any) -> None:
    with open(os.path.join(env.config, "settings.json"), "w") as fh:
        json.dump({"ide": {"autoConnect": False}}, fh)
    env.write("a.lock", lock_of(server))
    result = doctor(capsys, server.folder)
    assert result.rc == 1 and result.report["ide"] is None
    assert_shown(result, "auto-connect-off", "/ide menu")


# ------------------------------------------------------------ output and usage


def test_untrusted_strings_are_shown_escaped(env: Env, server: Serve, capsys: Any) -> None:
    evil = "Evil\x1b]0;owned\x07\x1b[2K\r\u202eIDE\nnext"
    name = "e\u202e.lock" if platforms.WINDOWS else "e\x1b[31m.lock"  # (Windows forbids control characters)
    env.write(name, lock_of(server, ideName=evil, workspaceFolders=["/x\x1b[8m"]))
    result = doctor(capsys, server.folder)
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in result.text
    assert "\\x1b" in result.text and "\\u202e" in result.text
    assert all(line.strip() != "next" for line in result.text.splitlines())   # no line injected
    assert result.report["locks"][0]["ideName"] == evil                      # JSON keeps it, escaped


def test_usage_errors_exit_2(tmp_path: Any, capsys: Any) -> None:
    assert cli.main([str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["--bogus"])
    assert exc.value.code == 2
    assert cli.main([str(tmp_path), "--timeout", "0"]) == 2
    done = subprocess.run([sys.executable, "-m", "ide_protocol", "doctor", str(tmp_path / "missing")],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
    assert done.returncode == 2


# ------------------------------------------------------------------ the rules


@pytest.mark.parametrize("listed, equal", [
    # Answers of the CLI's own repoPathsEqual (its native helper, called directly).
    ("/tmp/h6/real", True), ("/tmp/h6/real/", True), ("//tmp/h6/real", True), ("///tmp/h6/real", True),
    ("/tmp/h6/./real", True), ("/tmp/h6/real/../real", True), ("/tmp/h6/nonexist/../real", True),
    ("/tmp/h6/real/.", True), ("/tmp/h6/real//", True), ("/../tmp/h6/real", True),
    ("/tmp/h6/REAL", False), ("/tmp/h6", False), ("tmp/h6/real", False), ("", False), ("/tmp/h6/real ", False),
    ("file:///tmp/h6/real", False), ("/tmp/h6/re\u0301al", False),
])
def test_same_folder_is_the_clis_lexical_comparison(listed: str, equal: bool) -> None:
    cwd = "/tmp/h6/r\u00e9al" if "\u0301" in listed else "/tmp/h6/real"
    assert lock_rules.same_folder(listed, cwd, windows=False) is equal


def test_pid_rules_follow_node() -> None:
    assert lock_rules.pid_running(os.getpid()) == (True, "")
    assert lock_rules.pid_running(0)[0] is True        # kill(0, 0): our own process group
    assert lock_rules.pid_running(dead_pid())[0] is False
    assert lock_rules.pid_running(float(os.getpid()))[0] is True   # a number equal to an integer is fine
    assert lock_rules.pid_running(float("inf"))[0] is False


def test_lock_names_in_the_clis_byte_order(tmp_path: Any) -> None:
    for name in ("zz.lock", "b.lock", "Q.lock", "\u00e9.lock", "_x.lock", "1.lock", "a.lock.tmp", "x.LOCK"):
        (tmp_path / name).write_text("{}")
    # The order libuv's scandir gave the CLI here: bytewise.
    assert lock_rules.lock_names(str(tmp_path)) == ["1.lock", "Q.lock", "_x.lock", "b.lock", "zz.lock", "\u00e9.lock"]
