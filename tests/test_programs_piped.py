"""`serve`, then `client`, `check` and `doctor` against it, each a real process whose
output goes through a pipe, for a folder whose name is not ASCII.

On Windows this is the named-pipe path end to end (the lock's ``"scheme": "pipe"``, a
``\\\\.\\pipe\\mcp-*.sock`` socket path, the Proactor loop on both sides), and the
programs' output on a pipe, which Python writes in the ANSI code page unless told
otherwise: every program must write UTF-8, as `serve` does. Elsewhere the same test
runs over a Unix socket, with the output encoding set to cp1252 to stand for the code
page.
"""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 60.0
#: Cyrillic and CJK (no ANSI code page holds both) and "§", which cp1252 writes as 0xA7.
FOLDER_NAME = "проект 项目 §1"
TEXT = "привет, 世界"


def _env(home: str) -> Dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTHONUTF8", "PYTHONIOENCODING", "NO_COLOR"):
        env.pop(name, None)
    if sys.platform != "win32":
        env["PYTHONIOENCODING"] = "cp1252"  # what a Windows pipe gets from the locale
    env["COPILOT_HOME"] = home
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _program(args: List[str], env: Dict[str, str], cwd: str) -> Tuple[int, str, str]:
    """One program run to its end, stdout and stderr on pipes, decoded as UTF-8 strictly."""
    proc = subprocess.run([sys.executable, "-m", "ide_protocol"] + args, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, timeout=WAIT)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


class ServeProcess:
    def __init__(self, folder: str, env: Dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", folder],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, cwd=cwd)
        self.lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def expect(self, pattern: str) -> "re.Match[str]":
        regex = re.compile(pattern)
        while True:
            try:
                raw = self.lines.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError("serve printed no line matching %r; so far:\n%s" % (pattern, "\n".join(self.seen)))
            if raw is None:
                self.lines.put(None)
                raise AssertionError("serve ended before %r:\n%s" % (pattern, "\n".join(self.seen)))
            line = raw.decode("utf-8").rstrip("\r\n")
            self.seen.append(line)
            match = regex.search(line)
            if match:
                return match

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def quit(self) -> int:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        return self.proc.wait(WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


def test_serve_client_check_doctor_through_pipes_for_a_non_ascii_folder(tmp_path: Any) -> None:
    folder = os.path.join(str(tmp_path), FOLDER_NAME)
    os.mkdir(folder)
    with open(os.path.join(folder, "a.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT + "\n")
    home = os.path.join(str(tmp_path), "home")
    env = _env(home)
    cwd = str(tmp_path)
    serve = ServeProcess(folder, env, cwd)
    try:
        served = serve.expect(r"^serving (.+) on (.+), lock (.+)$")
        socket_path, lock_path = served.group(2), served.group(3)
        assert FOLDER_NAME in served.group(1)
        with open(lock_path, encoding="utf-8") as f:
            lock = json.load(f)
        assert lock["socketPath"] == socket_path
        assert any(FOLDER_NAME in listed for listed in lock["workspaceFolders"])
        if sys.platform == "win32":
            assert lock["scheme"] == "pipe"
            assert re.match(r"^\\\\\.\\pipe\\mcp-[0-9a-f-]{36}\.sock$", socket_path), socket_path
        else:
            assert lock["scheme"] == "unix"

        status, out, err = _program(["client", "--folder", folder, "list"], env, cwd)
        assert status == 0, err
        assert "get_vscode_info" in out and "# connected to" in err
        serve.send("select a.txt 1")
        serve.expect(r"^selected ")
        status, out, err = _program(["client", "--folder", folder, "call", "get_selection"], env, cwd)
        assert status == 0, err
        selection = json.loads(out)
        assert selection["text"] == TEXT and FOLDER_NAME in selection["filePath"]

        status, out, err = _program(["check", "--strict", folder], env, cwd)
        assert status == 0, out + err
        assert "(PROTOCOL.md §1)" in out and " 0 failed" in out
        assert socket_path in out.splitlines()[0]

        status, out, err = _program(["doctor", folder], env, cwd)
        assert status == 0, out + err
        assert FOLDER_NAME in out
        status, out, err = _program(["doctor", folder, "--json"], env, cwd)
        assert status == 0, out + err
        report = json.loads(out)
        assert FOLDER_NAME in json.dumps(report, ensure_ascii=False)

        assert serve.quit() == 0
        assert not os.path.exists(lock_path)
    finally:
        serve.kill()
