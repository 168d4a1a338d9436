"""The command line fails fast and clearly, each case a subprocess with a timeout (the
timeout only stops a hang): a bad or empty agent command line is a one-line usage error;
a program that does not speak ACP is named with its first line quoted, long before the
120 s request timeout; an agent dying mid-turn ends the client with `Error:` and its exit
status or signal and its last stderr lines; over TCP a refused, reset or closed
connection, and a listener that never answers, are one-line errors."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from acp_testlib import (FAKE, ROOT, WINDOWS, fake_env, gone, program_text, refused_reason, start_tcp_agent,
                         stop_tcp_agents, workspace)

TIMEOUT = 30  # far below the 120 s a request waits by default: not waiting that long is the point


def run_cli(args, stdin="", env_extra=None, timeout=TIMEOUT):
    env = dict(os.environ)
    env["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-m", "acp"] + args, input=stdin.encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                          timeout=timeout)
    return proc.returncode, program_text(proc.stdout), program_text(proc.stderr)


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("agent, said", [
    ('unterminated "quote', "No closing quotation"),
    ("", "--agent is empty"),
    ("   ", "--agent is empty"),
])
def test_bad_or_empty_agent_is_a_one_line_usage_error(agent, said):
    status, out, err = run_cli(["--agent", agent, "hi"])
    assert status == 2
    assert len(lines(err)) == 1 and said in err and "Traceback" not in err, err
    assert err.startswith("python3 -m acp: error: ") or ": error: " in err


def test_bad_acp_agent_variable_is_a_usage_error_too():
    status, out, err = run_cli(["hi"], env_extra={"ACP_AGENT": 'copilot "oops'})
    assert status == 2 and len(lines(err)) == 1 and "ACP_AGENT" in err and "No closing quotation" in err


def test_agent_and_connect_together_are_a_usage_error():
    status, out, err = run_cli(["--agent", "copilot --acp", "--connect", "3000", "hi"])
    assert status == 2 and len(lines(err)) == 1 and "--connect" in err


@pytest.mark.parametrize("address", ["nope", "host:", "70000", "[::1]"])
def test_bad_connect_address_is_a_usage_error(address):
    status, out, err = run_cli(["--connect", address, "hi"])
    assert status == 2 and len(lines(err)) == 1 and "--connect" in err


def python_script(tmp_path, name, code):
    """An agent command line running `code` with this Python (for Windows, which has
    neither `yes` nor `sh`)."""
    script = tmp_path / name
    script.write_text(code, encoding="utf-8")
    return "%s %s" % (sys.executable, script)


def test_a_program_that_is_not_an_acp_agent_is_named_quickly(tmp_path):
    """`yes` writes "y" lines for ever: reported with its first line quoted, not after
    the 120 s request timeout (the subprocess timeout would fail the test first)."""
    agent = python_script(tmp_path, "yes.py", "while True:\n    print('y')\n") if WINDOWS else "yes"
    status, out, err = run_cli(["--agent", agent, "hi"])
    assert status == 1
    assert "Error: the agent does not speak ACP: its output starts with 'y', not JSON-RPC" in err, err
    assert "Traceback" not in err


def test_a_silent_non_acp_line_then_nothing_is_reported_too(tmp_path):
    if WINDOWS:
        agent = python_script(tmp_path, "banner.py", "import sys, time\nprint('Welcome to my tool')\n"
                                                     "sys.stdout.flush()\ntime.sleep(60)\n")
    else:
        script = tmp_path / "banner.sh"
        script.write_text("echo 'Welcome to my tool'; sleep 60\n")
        agent = "sh %s" % script
    status, out, err = run_cli(["--agent", agent, "hi"])
    assert status == 1 and "'Welcome to my tool'" in err, err


def test_a_banner_line_before_the_protocol_is_tolerated(tmp_path):
    status, out, err = run_cli(["--cwd", workspace(tmp_path), "hi"],
                               env_extra={"FAKE_ACP_BANNER": "Starting fake agent v0"})
    assert status == 0, err
    assert out == "Hello from the fake agent.\n"


@pytest.mark.parametrize("turn, said, tail", [
    ("CRASH", "Error: the agent exited with status 3", "fatal: simulated crash"),
    pytest.param("SIGNAL", "Error: the agent was killed by signal 9 (SIGKILL)", "fatal: killing myself",
                 marks=pytest.mark.skipif(WINDOWS, reason="no death by signal on Windows (no SIGKILL; a killed "
                                                          "process has an exit status): untested there")),
])
def test_agent_dying_mid_turn_ends_the_client_with_its_status(tmp_path, turn, said, tail):
    status, out, err = run_cli(["--cwd", workspace(tmp_path), turn])
    assert status == 1
    assert said in err and tail in err, err
    assert out.startswith("about to")  # what came before the death was shown


def test_a_dead_agent_is_reported_even_while_a_child_holds_its_pipes(tmp_path):
    """The crashed agent left a process (in its own session) holding stdout and stderr
    for 60 s: the client reports the exit without waiting for the pipes to close."""
    proc = subprocess.Popen([sys.executable, "-m", "acp", "--cwd", workspace(tmp_path), "CRASHHOLD"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=dict(fake_env(ACP_AGENT="%s %s" % (sys.executable, FAKE)),
                                     PYTHONPATH=ROOT), cwd=ROOT)
    holder = None
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
        out, err = program_text(out), program_text(err)
        holder = int(out.split("HOLDER ")[1].split()[0])
    finally:
        proc.kill()
        proc.wait()
        if holder and WINDOWS:  # the agent's job object ended it with the agent
            assert gone(holder)
        elif holder:
            os.kill(holder, signal.SIGKILL)
    assert proc.returncode == 1
    assert "Error: the agent exited with status 4" in err and "a child still holds the pipes" in err, err


# --------------------------------------------------------------------- over TCP


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_is_one_line():
    port = free_port()
    status, out, err = run_cli(["--connect", str(port), "hi"])
    assert status == 1 and len(lines(err)) == 1, err
    assert err.startswith("Error: could not connect to the agent at 127.0.0.1:%d: %s" % (port, refused_reason()))


@pytest.mark.parametrize("how, said", [("HANGUP", "closed the connection"),
                                       ("HANGUP reset", "reset the connection")])
def test_connection_closed_or_reset_mid_turn_is_one_line(tmp_path, how, said):
    try:
        server, port = start_tcp_agent(fake_env())
        status, out, err = run_cli(["--connect", "127.0.0.1:%d" % port, "--cwd", workspace(tmp_path), how])
        assert server.poll() is None  # the agent itself lives on
    finally:
        stop_tcp_agents()
    assert status == 1 and out == "hanging up\n"
    assert lines(err) == ["Error: the agent at 127.0.0.1:%d %s" % (port, said)], err


def test_a_listener_that_never_answers_is_one_line():
    """Half-open: the connection is accepted (the kernel's backlog does it) but nothing
    ever answers. The command line gives up after --timeout (at most 10 s over TCP)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        status, out, err = run_cli(["--connect", str(port), "--timeout", "1", "hi"])
    assert status == 1 and len(lines(err)) == 1, err
    assert ("Error: the agent at 127.0.0.1:%d accepted the connection but did not answer "
            "initialize within 1 s" % port) in err
