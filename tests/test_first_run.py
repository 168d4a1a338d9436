"""What a new user meets first: one way to name the folder and the lock folder in every
program, messages that say what to run next, and `serve` telling who connected (Copilot
CLI, or our own `doctor`, `client`, `check`, which name themselves in clientInfo) with a
`check` run folded into one line. Real subprocesses over real sockets."""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional

import pytest

from ide_protocol.client import CLIENT_NAME, describe_client, program_client_info
from ide_protocol.programs.serve import ide as serve_program
from ide_protocol.programs.options import no_ide_advice

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 60.0  # generous: a loaded 2-core machine
MODULE = "python3 -m ide_protocol"


def run(*argv: str, cwd: str = ROOT, env: Optional[Dict[str, str]] = None,
        module: str = "ide_protocol") -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", module] + list(argv), cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ, timeout=WAIT * 2)


def text(done: subprocess.CompletedProcess) -> str:
    return done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")


class Serve:
    """`python3 -m ide_protocol serve ARGS` with its output read line by line."""

    def __init__(self, *args: str, cwd: str = ROOT) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", "--ignore-eof"] + list(args),
                                     cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        self.ended = False  # the end of its output was read
        threading.Thread(target=self._pump, daemon=True).start()
        self.lock_path = self.expect(r"^serving .+ lock (.+)$").group(1)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern: str) -> "re.Match[str]":
        rx = re.compile(pattern)
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                line = None
            if line is None:
                self.ended = True
                raise AssertionError("no line matching %r; output:\n%s" % (pattern, "\n".join(self.seen)))
            self.seen.append(line)
            m = rx.search(line)
            if m:
                return m

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self) -> List[str]:
        """Quit; every line printed from now to the end."""
        if self.proc.poll() is None:
            try:
                self.send("quit")
            except OSError:
                pass
        self.proc.wait(WAIT)
        rest: List[str] = []
        while not self.ended:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                break
            if line is None:
                self.ended = True
                break
            rest.append(line)
        self.seen.extend(rest)
        return rest


@pytest.fixture
def project(tmp_path: Any) -> str:
    folder = os.path.realpath(str(tmp_path / "project"))
    os.makedirs(folder)
    with open(os.path.join(folder, "calc.py"), "w", encoding="utf-8") as fh:
        fh.write("def add(a, b):\n    return a - b\n")
    return folder


@pytest.fixture
def lock_dir(tmp_path: Any) -> str:
    return os.path.realpath(str(tmp_path / "locks" / "ide"))


@pytest.fixture
def served(project: str, lock_dir: str) -> Any:
    s = Serve("--folder", project, "--lock-dir", lock_dir)
    yield s
    s.stop()


# ----------------------------------------------------------------- one way to name things


def test_serve_takes_the_folder_positionally_or_as_folder_option(project: str, lock_dir: str) -> None:
    for how in ([project], ["--folder", project]):
        s = Serve(*how, "--lock-dir", lock_dir)
        with open(s.lock_path, encoding="utf-8") as fh:
            assert json.load(fh)["workspaceFolders"] == [project]
        s.stop()
    assert run("serve", project, "--folder", os.path.dirname(project)).returncode == 2


@pytest.mark.parametrize("command", ["serve", "doctor", "check", "trace", "client"])
def test_every_program_lists_folder_option_and_lock_dir(command: str) -> None:
    help_text = text(run(command, "--help"))
    assert "--lock-dir DIR" in help_text and "--folder" in help_text
    assert not re.search(r"^\s*--config-dir", help_text, re.M)  # doctor's old name works, unlisted


def test_doctor_folder_option_and_lock_dir(served: Serve, project: str, lock_dir: str) -> None:
    for argv in (["--folder", project, "--lock-dir", lock_dir], [project, "--lock-dir", lock_dir],
                 ["--folder", project, "--config-dir", os.path.dirname(lock_dir)]):  # the old name
        done = run("doctor", *argv)
        assert done.returncode == 0, text(done)
        assert "connects to \"Terminal IDE\"" in text(done)
    done = run("doctor", project, "--lock-dir", os.path.dirname(lock_dir))  # not a folder the CLI reads
    assert done.returncode == 2 and "CONFIG/ide" in text(done)


def test_client_takes_the_folder_positionally(served: Serve, project: str, lock_dir: str) -> None:
    for argv in (["list", project], ["list", "--folder", project], ["--folder", project, "list"]):
        done = run("client", *argv, "--lock-dir", lock_dir)
        assert done.returncode == 0, text(done)
        assert "get_selection" in done.stdout.decode()  # the server's tools, as README says


def test_check_takes_folder_option(served: Serve, project: str, lock_dir: str) -> None:
    done = run("check", "--folder", project, "--lock-dir", lock_dir, "--only", "lock.fields")
    assert done.returncode == 0, text(done)
    assert re.search(r"^PASS +lock.fields ", done.stdout.decode(), re.M), done.stdout.decode()


def test_acp_client_takes_folder_option(tmp_path: Any) -> None:
    missing = str(tmp_path / "missing")
    for option in ("--folder", "--cwd"):
        done = run(option, missing, "hi", module="acp")
        assert done.returncode == 2 and "--folder %s is not a folder" % missing in text(done), text(done)


# ------------------------------------------------------------ messages that say what to do


@pytest.mark.parametrize("argv, name", [
    (["check"], "check"), (["client", "list"], "client"), (["client", "call", "get_selection"], "client"),
    (["trace"], "trace"),
])
def test_no_ide_errors_name_the_program_and_say_what_to_run(argv: List[str], name: str, project: str,
                                                            lock_dir: str) -> None:
    done = run(*argv, "--folder", project, "--lock-dir", lock_dir)
    err = done.stderr.decode()
    assert done.returncode != 0
    assert err.startswith("%s %s: no IDE lock in " % (MODULE, name)), err
    assert "ide-check" not in err
    assert "`%s serve` in %s" % (MODULE, project) in err
    assert "`%s doctor %s`" % (MODULE, project) in err
    assert err.rstrip().endswith(no_ide_advice(project).splitlines()[-1])


def test_doctor_without_an_ide_says_how_to_start_one(project: str, lock_dir: str) -> None:
    done = run("doctor", project, "--lock-dir", lock_dir)
    assert done.returncode == 1
    assert done.stdout.decode().rstrip().splitlines()[-1] == (
        "   To start one: `%s serve %s` (or open the folder in an editor with Copilot CLI's IDE integration)."
        % (MODULE, project))


def test_doctor_shows_discover_declined_as_expected_and_names_trust_settings(served: Serve, project: str,
                                                                             lock_dir: str) -> None:
    """A healthy report: server/discover declined as the CLI expects, in words, with no
    error text (it printed "JSON-RPC error -32601 Method not found: server/discover")."""
    done = run("doctor", project, "--lock-dir", lock_dir)
    out = text(done)
    assert done.returncode == 0, out
    assert re.search(r"server/discover \d+ ms \(declined, as the CLI expects: it goes on with initialize\)", out), out
    assert "error" not in out.lower() and "-32601" not in out and "Method not found" not in out, out
    assert "not-trusted" in out
    fix = next(line for line in out.splitlines() if "answer the prompt" in line)
    assert "`%s serve --trusted`" % MODULE in fix
    assert "g:copilot_ide_trusted" in fix and "copilot-ide-trusted" in fix


def test_acp_client_without_copilot_says_how_to_install_it(tmp_path: Any) -> None:
    empty = str(tmp_path / "bin")
    os.makedirs(empty)
    done = run("hello", module="acp", env={"PATH": empty})
    err = done.stderr.decode()
    assert done.returncode == 1
    assert "could not start the agent `copilot --acp --stdio`" in err
    assert "npm install -g @github/copilot" in err and "log in" in err


def test_serve_status_shows_the_selection_as_typed_and_ref_says_why_nobody_got_it(served: Serve,
                                                                                  project: str) -> None:
    served.send("select calc.py 2:5-2:16")
    served.expect(r"^selected calc\.py 2:5-2:16 ")
    served.send("status")
    served.expect(r"^selection: calc\.py 2:5-2:16$")
    served.send("ref calc.py")
    line = served.expect(r"^sent add_file_reference calc\.py to 0 sessions.*").group(0)
    assert "no client is connected: start `copilot` in %s" % project in line


def test_help_and_readme_give_the_same_severities() -> None:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert "SEVERITY: error, warning, info, hint" in serve_program.HELP
    assert "SEVERITY: error, warning, info, hint" in readme
    for command in ("deselect", "addsel PATH", "diag clear"):
        assert command in readme and command in serve_program.HELP


# ------------------------------------------------------------------ serve names its peers


def test_program_identity() -> None:
    assert program_client_info("doctor")["name"] == "copilot-ide-doctor"
    assert describe_client(CLIENT_NAME, "1.0.102") == "Copilot CLI 1.0.102"
    assert describe_client("copilot-ide-check", "0.1.0") == "copilot-ide check"
    assert describe_client("zed", "2") == "zed 2"
    assert describe_client(None) == "a client that did not say who it is"


def test_serve_names_doctor_client_and_folds_a_check_run(served: Serve, project: str, lock_dir: str) -> None:
    assert run("doctor", project, "--lock-dir", lock_dir).returncode == 0
    done = run("doctor", project, "--lock-dir", lock_dir)
    served.expect(r"^connected: session \w+, copilot-ide doctor \(pid \d+\)$")
    assert run("client", "call", "get_selection", "--folder", project, "--lock-dir", lock_dir).returncode == 0
    served.expect(r"^connected: session \w+, copilot-ide client \(pid \d+\)$")
    served.expect(r"^tool get_selection\(\) from session")
    served.send("status")  # a mark: everything printed before it is read below
    served.expect(r"^diagnostics: ")
    done = run("check", project, "--lock-dir", lock_dir)
    assert done.returncode == 0, text(done)
    rest = served.stop()
    assert not any("Copilot CLI" in line for line in served.seen), served.seen
    check_lines = [line for line in rest if line != "stopped (lock file and socket removed)"]
    # The whole run (dozens of sessions, tool calls, diffs it closes itself): one line.
    assert len(check_lines) == 1, rest
    assert re.match(r"^connected: copilot-ide check \(pid \d+\) is checking this server", check_lines[0])


def test_a_check_diff_that_waits_for_a_person_is_shown_in_full(served: Serve, project: str,
                                                               lock_dir: str) -> None:
    """`check --with-diff` waits for the user to accept its diff in the IDE: folded or
    not, serve must show it, in full (that a session is check's is only its own
    account), and take `accept N`."""
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    checker = subprocess.Popen([sys.executable, "-m", "ide_protocol", "check", project, "--lock-dir", lock_dir,
                                "--with-diff", "--only", "diff.accept"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        served.expect(r"^connected: copilot-ide check \(pid %d\) is checking this server" % checker.pid)
        m = served.expect(r"^diff (\d+) from copilot-ide check \(session \w+, by its own account\): \[ide-check\] - ")
        served.expect(r"^\+")  # its content, as for any diff
        served.expect(r"^diff %s waits: type `accept %s`" % (m.group(1), m.group(1)))
        served.send("accept %s" % m.group(1))
        out, _ = checker.communicate(timeout=WAIT * 2)
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.wait()
    assert checker.returncode == 0, out.decode()
    assert re.search(r"^PASS +diff.accept ", out.decode(), re.M), out.decode()
    assert "%s: a diff" % (MODULE + " check") in out.decode()
