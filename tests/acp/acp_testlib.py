"""Shared helpers of the acp tests (a plain module: no conftest name clashes).

`make_client` talks to the fake agent over the transport the running test was given
(conftest.py's `transport` fixture): a child on stdio, or a fake agent listening on TCP
that `make_client` starts (and the fixture stops).
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

WINDOWS = sys.platform == "win32"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKE = os.path.join(HERE, "fake_agent.py")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from acp import Client  # noqa: E402


def agent_cmd() -> List[str]:
    return [sys.executable, FAKE]


def run(coro: Any, timeout: float = 30.0) -> Any:
    """Run a test coroutine; the timeout only stops a hang, it asserts nothing."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def workspace(tmp_path: Any) -> str:
    root = tmp_path / "work"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    return str(root)


def program_text(data: bytes) -> str:
    """What a program under test (the command line, a terminal's command) printed, as
    text. On Windows its stdout and stderr to a pipe are in text mode, in the ANSI code
    page (pytest's own -X utf8 is not inherited): decoded with that, the CRLF line ends
    of text mode read as "\n". Elsewhere: UTF-8, exactly as printed."""
    if not WINDOWS:
        return data.decode("utf-8")
    return data.decode(program_encoding()).replace("\r\n", "\n")


def program_encoding() -> str:
    """The encoding of a program's stdout to a pipe: the ANSI code page on Windows."""
    if not WINDOWS:
        return "utf-8"
    import ctypes

    return "cp%d" % ctypes.windll.kernel32.GetACP()  # type: ignore[attr-defined]


def refused_reason() -> str:
    """How the client words a refused TCP connection: strerror(ECONNREFUSED); on
    Windows the system's message for ERROR_CONNECTION_REFUSED, as OSError trims it
    (Wine words it the same as Linux)."""
    if not WINDOWS:
        return "Connection refused"
    import ctypes

    return ctypes.FormatError(1225).rstrip(" .\r\n\t")  # type: ignore[attr-defined]


def fake_env(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


TRANSPORT = "stdio"  # set by conftest.py's `transport` fixture
SERVERS: List["subprocess.Popen[bytes]"] = []  # TCP agents started for the running test


def start_tcp_agent(env: Optional[Dict[str, str]] = None) -> Tuple["subprocess.Popen[bytes]", int]:
    """The fake agent listening on 127.0.0.1 (any free port); stopped after the test."""
    argv = [sys.executable, FAKE, "--port", "0"]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env or fake_env())
    except OSError as exc:
        # Wine's CreateProcess fails now and then with ERROR_INTERNAL_ERROR (1359), for
        # a plain Popen too (seen under `make test-windows`): the harness tries once more.
        if getattr(exc, "winerror", None) != 1359:
            raise
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env or fake_env())
    SERVERS.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()  # FAKE_ACP_PORT=<port>
    if not line.startswith("FAKE_ACP_PORT="):
        raise AssertionError("the TCP fake agent did not start: %r (exit %s)" % (line, proc.poll()))
    return proc, int(line.split("=", 1)[1])


def stop_tcp_agents() -> None:
    while SERVERS:
        proc = SERVERS.pop()
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def make_client(log: Optional[str] = None, env: Optional[Dict[str, str]] = None, **kwargs: Any) -> Client:
    environment = fake_env(**(env or {}))
    if log:
        environment["FAKE_ACP_LOG"] = log
    if TRANSPORT == "tcp":
        _, port = start_tcp_agent(environment)
        return Client(connect=port, **kwargs)
    return Client(agent_cmd(), env=environment, **kwargs)


def read_log(path: str) -> List[Tuple[str, Any]]:
    """The fake agent's log: (direction, decoded message or raw bytes).

    Over TCP the agent outlives the client, so what the client sent last may still be
    on its way when the test reads: wait (bounded) until the agent logged the end of
    the connection."""
    import time

    deadline = time.monotonic() + 10.0
    while TRANSPORT == "tcp" and time.monotonic() < deadline:
        with open(path, "rb") as handle:
            lines = handle.read().rstrip(b"\n").split(b"\n")
        if lines[-1].startswith(b"END "):
            break
        time.sleep(0.02)
    out: List[Tuple[str, Any]] = []
    with open(path, "rb") as handle:
        for line in handle:
            direction, _, data = line.rstrip(b"\n").partition(b" ")
            if direction == b"END":
                continue
            try:
                out.append((direction.decode(), json.loads(data.decode("utf-8"))))
            except ValueError:
                out.append((direction.decode(), data))
    return out


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once `pid` has disappeared; a killed process needs a moment to die, so this
    waits (the timeout only bounds a failure, it asserts nothing about speed)."""
    import time

    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and (where /proc tells) is not a zombie. (On Windows
    os.kill(pid, 0) would terminate it: there the kernel is asked.)"""
    if WINDOWS:
        from ide_protocol.common.winpipe import pid_alive as windows_pid_alive

        return windows_pid_alive(pid)
    if os.path.isdir("/proc/self"):  # (Linux: a zombie is told apart)
        try:
            with open("/proc/%d/stat" % pid) as handle:
                return handle.read().split(") ", 1)[1][0] != "Z"
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        except OSError:
            pass
    try:  # (macOS has no /proc: a missing file there says nothing of the process)
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def run_cli(args: List[str], stdin: str = "", env: Optional[Dict[str, str]] = None,
            timeout: float = 30.0) -> Tuple[int, str, str]:
    """`python3 -m acp ARGS` with the fake agent as ACP_AGENT (and `env` added to the
    environment): its exit status, stdout and stderr. Over TCP (the running test's
    transport, unless ARGS name --connect), a fake agent listening with that
    environment, and `--connect` to it. The timeout only stops a hang."""
    environment = fake_env(**(env or {}))
    if TRANSPORT == "tcp" and "--connect" not in args:
        _, port = start_tcp_agent(environment)
        args = ["--connect", str(port)] + args
    environment["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
    environment["PYTHONPATH"] = ROOT + os.pathsep + environment.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "acp"] + args, input=stdin.encode("utf-8"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, cwd=ROOT,
                          timeout=timeout)
    return proc.returncode, program_text(proc.stdout), program_text(proc.stderr)


class OnTerminal:
    """`python3 -m acp ARGS` on a real pseudo-terminal (POSIX only: `pty`): the fake agent
    as ACP_AGENT (or over TCP, the running test's transport), `wait_for` what it shows,
    `type` what a person types. `close` returns the exit status and all it showed."""

    def __init__(self, args: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 30.0) -> None:
        import pty

        environment = fake_env(TERM="xterm", PYTHONPATH=ROOT, **(env or {}))
        environment["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
        if TRANSPORT == "tcp" and "--connect" not in args:
            _, port = start_tcp_agent(fake_env(**(env or {})))
            args = ["--connect", str(port)] + args
        self.timeout = timeout
        self.seen = b""
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "acp"] + args, stdin=slave, stdout=slave, stderr=slave,
                                     env=environment, cwd=ROOT, start_new_session=True)
        os.close(slave)

    def wait_for(self, text: str) -> None:
        import select
        import time

        deadline = time.monotonic() + self.timeout
        while text.encode() not in self.seen:
            if time.monotonic() > deadline:
                raise AssertionError("no %r on the terminal; got %r" % (text, self.seen[-2000:]))
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    break

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> Tuple[int, str]:
        import select

        try:
            code = self.proc.wait(self.timeout)
            while select.select([self.master], [], [], 0.1)[0]:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.seen += data
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.master)
        return code, self.seen.decode("utf-8", "replace").replace("\r\n", "\n")
