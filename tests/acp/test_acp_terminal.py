"""ACP.md §5, terminal/*: real subprocesses driven by the fake agent through the client:
output and exit status, byte limits, kill, release, and nothing left running."""
from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from acp_testlib import WINDOWS, gone, make_client, run, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def drive(tmp_path, create, steps, **client_kwargs):
    """One TERM turn; returns the list of answers (create first, then each step)."""
    root = workspace(tmp_path)
    client_kwargs.setdefault("terminal", "allow")

    async def main():
        async with make_client(**client_kwargs) as client:
            await client.initialize()
            session = await client.new_session(root)
            result = await session.prompt("TERM " + json.dumps({"create": create, "steps": steps}))
            assert result.text.startswith("TERM-RESULT "), result.text
            return json.loads(result.text[len("TERM-RESULT "):]), len(client.terminals)

    return run(main())


def sleeper(pid_file):
    """For Windows, whose cmd.exe has no `$$`: a command that writes its pid to
    `pid_file`, then prints "started" and sleeps a minute."""
    code = ("import os, time; open(%r, 'w').write(str(os.getpid())); print('started', flush=True); "
            "time.sleep(60)" % str(pid_file))
    return {"command": sys.executable, "args": ["-c", code]}


def test_output_and_exit_status_of_a_shell_command(tmp_path):
    # Without args the command goes to the shell: sh on POSIX, cmd.exe on Windows.
    command = "echo out& echo err 1>&2& cd& exit 7" if WINDOWS else "echo out; echo err >&2; pwd; exit 7"
    answers, left = drive(tmp_path, {"command": command}, ["wait", "output", "release"])
    create, wait, output, release = answers
    assert create["result"]["terminalId"]
    assert wait == {"result": {"exitCode": 7, "signal": None}}
    text = output["result"]["output"]
    if WINDOWS:  # cmd.exe ends lines with CRLF (and keeps the space before a redirection)
        assert {"out", "err"} <= {line.strip() for line in text.splitlines()}
        text = text.replace("\r\n", "\n")
    else:
        assert "out\n" in text and "err\n" in text
    assert text.rstrip("\n").endswith(os.path.realpath(str(tmp_path / "work")))  # the session cwd
    assert output["result"]["truncated"] is False
    assert output["result"]["exitStatus"] == {"exitCode": 7, "signal": None}
    assert release == {"result": {}}
    assert left == 0


def test_args_env_and_cwd(tmp_path):
    inner = tmp_path / "work" / "sub"
    inner.mkdir(parents=True)
    answers, _ = drive(tmp_path, {"command": sys.executable,
                                  "args": ["-c", "import os; print(os.environ['ACP_T'], os.getcwd())"],
                                  "env": [{"name": "ACP_T", "value": "v a l"}], "cwd": str(inner)},
                       ["wait", "output", "release"])
    assert answers[1] == {"result": {"exitCode": 0, "signal": None}}
    # (print ends the line with os.linesep: CRLF on Windows)
    assert answers[2]["result"]["output"] == "v a l %s%s" % (os.path.realpath(str(inner)), os.linesep)


def test_a_cwd_outside_the_session_folder_is_refused_unless_the_host_allows_it(tmp_path):
    marker = tmp_path / "ran"
    create = {"command": sys.executable, "args": ["-c", "open(%r, 'w').close()" % str(marker)],
              "cwd": str(tmp_path)}
    answers, left = drive(tmp_path, create, [])
    assert answers[0]["error"]["code"] == -32602
    assert "outside the session's folder" in answers[0]["error"]["message"]
    assert not marker.exists() and left == 0
    answers, _ = drive(tmp_path, create, ["wait", "release"], terminal_any_cwd=True)
    assert answers[1] == {"result": {"exitCode": 0, "signal": None}} and marker.exists()


def test_output_byte_limit_keeps_the_end_on_a_character_boundary(tmp_path):
    # 3000 bytes of 3-byte characters, then a marker; limit 100 bytes.
    # (UTF-8 bytes: on Windows sys.stdout's encoding is the code page, which lacks the character)
    script = "import sys; sys.stdout.buffer.write(('\u65e5' * 1000 + 'TAIL').encode('utf-8')); sys.stdout.flush()"
    answers, _ = drive(tmp_path, {"command": sys.executable, "args": ["-c", script],
                                  "outputByteLimit": 100}, ["wait", "output", "release"])
    output = answers[2]["result"]
    assert output["truncated"] is True
    assert output["output"].endswith("TAIL")
    assert len(output["output"].encode("utf-8")) <= 100
    assert "\ufffd" not in output["output"]  # no broken character at the cut
    assert set(output["output"][:-4]) == {"\u65e5"}


def test_the_client_caps_the_output_byte_limit_the_agent_asks_for(tmp_path):
    """An agent's outputByteLimit lowers what a terminal keeps, never raises it past the
    client's own limit (32 MiB unless the host sets another; 1000 bytes here)."""
    script = "import sys; sys.stdout.write('x' * 5000 + 'TAIL'); sys.stdout.flush()"
    plan = {"create": {"command": sys.executable, "args": ["-c", script], "outputByteLimit": 2 ** 62},
            "steps": ["wait", "output", "release"]}

    async def main():
        async with make_client(terminal="allow") as client:
            client.terminals.default_limit = 1000
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            result = await session.prompt("TERM " + json.dumps(plan))
            return json.loads(result.text[len("TERM-RESULT "):])

    output = run(main())[2]["result"]
    assert output["truncated"] is True
    assert output["output"] == "x" * 996 + "TAIL"


def test_kill_stops_the_command_and_keeps_its_output(tmp_path):
    pid_file = tmp_path / "pid"
    if WINDOWS:
        create, first = sleeper(pid_file), "until:started"
    else:
        create, first = {"command": "echo started; echo $$ > %s; sleep 60 & wait" % pid_file}, "sleep:0.3"
    answers, left = drive(tmp_path, create, [first, "output", "kill", "wait", "output", "release"])
    _, running, kill, wait, output, release = answers
    assert "exitStatus" not in running["result"]
    assert kill == {"result": {}}
    # On Windows a kill is TerminateProcess (Popen.kill), which leaves status 1: no signal.
    killed = {"exitCode": 1, "signal": None} if WINDOWS else {"exitCode": None, "signal": "SIGKILL"}
    assert wait == {"result": killed}
    assert output["result"]["output"] == "started" + ("\r\n" if WINDOWS else "\n")
    assert output["result"]["exitStatus"] == killed
    assert release == {"result": {}} and left == 0
    assert gone(int(pid_file.read_text()))


@pytest.mark.parametrize("end", ["kill", "release"])
def test_a_kill_or_release_ends_what_the_command_started_too(tmp_path, end):
    """A command's own children (`npm test` runs node, a shell runs the command) end
    with it: on POSIX through the command's process group, on Windows through its job
    object. Here the command starts a Python that writes its pid and sleeps."""
    pid_file = tmp_path / "grandchild"
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "open(%r, 'w').write(str(child.pid))\n"
            "print('started', flush=True)\n"
            "time.sleep(60)\n" % str(pid_file))
    steps = ["until:started", "kill", "wait", "release"] if end == "kill" else ["until:started", "release"]
    answers, left = drive(tmp_path, {"command": sys.executable, "args": ["-c", code]}, steps)
    assert all("error" not in a for a in answers), answers
    assert left == 0
    assert gone(int(pid_file.read_text()))


def test_release_of_a_running_command_kills_and_forgets_it(tmp_path):
    pid_file = tmp_path / "pid"
    if WINDOWS:
        create, first = sleeper(pid_file), "until:started"
    else:
        create, first = {"command": "echo $$ > %s; exec sleep 60" % pid_file}, "sleep:0.3"
    answers, left = drive(tmp_path, create, [first, "release", "output"])
    assert answers[1] == {"result": {}}
    assert answers[2]["error"]["code"] == -32602  # unknown terminal after release
    assert left == 0
    assert gone(int(pid_file.read_text()))


def test_closing_the_client_releases_forgotten_terminals(tmp_path):
    pid_file = tmp_path / "pid"
    if WINDOWS:
        create, first = sleeper(pid_file), "until:started"
    else:
        create, first = {"command": "echo $$ > %s; exec sleep 60" % pid_file}, "sleep:0.3"
    answers, left = drive(tmp_path, create, [first])
    assert left == 1  # the agent never released it...
    pid = int(pid_file.read_text())
    assert gone(pid)  # ...but closing the client did


def test_bad_terminal_requests_are_errors(tmp_path):
    answers, _ = drive(tmp_path, {"command": "true", "cwd": "relative/dir"}, [])
    assert answers[0]["error"]["code"] == -32602
    answers, _ = drive(tmp_path, {"command": "true"}, [], terminal=False)
    assert answers[0]["error"]["code"] == -32601


@pytest.mark.skipif(WINDOWS, reason="no POSIX signals on Windows (a killed command has an exit status): "
                                     "the report of a signal's name is untested there")
def test_signal_names_are_reported(tmp_path):
    answers, _ = drive(tmp_path, {"command": "kill -TERM $$"}, ["wait", "release"])
    assert answers[1] == {"result": {"exitCode": None, "signal": signal.Signals.SIGTERM.name}}
