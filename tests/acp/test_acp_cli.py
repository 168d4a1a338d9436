"""`python3 -m acp` as a subprocess against the fake agent: streamed text, permissions
by flag and by piped answer, --json, exit statuses, Ctrl-C, chat mode. Each runs over
stdio (the agent a child of the command line) and over TCP (`--connect PORT` to a fake
agent listening), except those about the child process itself."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import acp_testlib
from acp_testlib import (FAKE, ROOT, WINDOWS, fake_env, gone, program_encoding, program_text, read_log,
                         start_tcp_agent, workspace)

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

TIMEOUT = 30  # only against hangs


def cli_env(**extra):
    env = dict(os.environ)
    env["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def over_transport(args, extra):
    """Over TCP: start the fake agent listening (with the agent's environment `extra`)
    and point the command line at it with --connect."""
    if acp_testlib.TRANSPORT != "tcp":
        return args
    _, port = start_tcp_agent(fake_env(**extra))
    return ["--connect", str(port)] + args


def cli(args, stdin="", **extra):
    args = over_transport(args, extra)
    return subprocess.run([sys.executable, "-m", "acp"] + args, input=stdin.encode("utf-8"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(**extra),
                          cwd=ROOT, timeout=TIMEOUT)


def out(proc):
    return program_text(proc.stdout)


def err(proc):
    return program_text(proc.stderr)


def test_one_prompt_streams_the_answer(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path), "Say", "hello"])
    assert proc.returncode == 0, err(proc)
    assert out(proc) == "Hello from the fake agent.\n"


def test_yes_allows_the_edit_and_shows_the_tool_line_and_diff(tmp_path):
    root = workspace(tmp_path)
    proc = cli(["--cwd", root, "--yes", "EDIT"])
    assert proc.returncode == 0, err(proc)
    lines = out(proc).splitlines()
    assert lines[0] == "I will edit it."
    assert lines[1] == "[edit] done: Editing %s" % os.path.join(root, "hello.txt")
    assert "    -line two" in lines and "    +line two (edited)" in lines
    assert lines[-1] == "Tool finished."
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "line two (edited)" in handle.read()


def test_no_rejects(tmp_path):
    root = workspace(tmp_path)
    proc = cli(["--cwd", root, "--no", "EDIT"])
    assert proc.returncode == 0
    assert "[edit] FAILED: Editing" in out(proc)
    assert "Info: Operation cancelled by user" in out(proc)
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "edited" not in handle.read()


def test_permission_answered_through_piped_stdin(tmp_path):
    root = workspace(tmp_path)
    denied = cli(["--cwd", root, "EDIT"], stdin="3\n")
    assert "Permission requested: Edit file (edit)" in err(denied)
    assert "[1] allow once  [2] allow always  [3] reject" in err(denied)
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "edited" not in handle.read()
    allowed = cli(["--cwd", root, "EDIT"], stdin="1\n")
    assert allowed.returncode == 0, err(allowed)
    assert "[edit] done" in out(allowed)
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "line two (edited)" in handle.read()


def test_no_answer_on_stdin_denies(tmp_path):
    root = workspace(tmp_path)
    proc = cli(["--cwd", root, "EDIT"], stdin="")
    assert proc.returncode == 0
    assert "(no answer: denied)" in err(proc)
    assert "[edit] FAILED" in out(proc)


def test_json_prints_every_update_as_one_line(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path), "--json", "PLAN"])
    assert proc.returncode == 0, err(proc)
    records = [json.loads(line) for line in out(proc).splitlines()]
    updates = [r["update"]["sessionUpdate"] for r in records if "update" in r]
    assert updates[0] == "available_commands_update"  # even the one before session/new answered
    for kind in ("plan", "agent_thought_chunk", "current_mode_update", "config_option_update",
                 "session_info_update", "usage_update", "future_kind_of_update", "agent_message_chunk"):
        assert kind in updates
    assert len({r["sessionId"] for r in records}) == 1
    assert records[-1]["result"]["stopReason"] == "end_turn"


def test_text_stdout_cannot_encode_is_escaped_not_a_crash(tmp_path):
    """On Windows stdout to a pipe is in the ANSI code page, which may lack the agent's
    characters: they are written as backslash escapes (as on stderr), the turn goes on."""
    proc = cli(["--cwd", workspace(tmp_path), "UNICODE"])
    assert proc.returncode == 0 and "Traceback" not in err(proc), err(proc)
    shown = "\u65e5\u672c".encode(program_encoding(), "backslashreplace").decode(program_encoding())
    assert shown in out(proc) and out(proc).endswith("end\n")


def test_error_turn_goes_to_stderr_with_exit_status_1(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path), "ERROR"])
    assert proc.returncode == 1
    assert out(proc) == "Info: retrying\n"
    assert "Error: Request exceeds the model's prompt budget (70308 tokens; limit 64000)." in err(proc)
    as_json = cli(["--cwd", workspace(tmp_path), "--json", "ERROR"])
    assert as_json.returncode == 1 and "Error: Request exceeds" in err(as_json)


@pytest.mark.stdio_only  # about the agent as our child process
def test_dying_agent_gives_a_clear_message(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path), "CRASH"])
    assert proc.returncode == 1
    assert out(proc) == "about to crash\n"
    assert "Error: the agent exited with status 3: fatal: simulated crash" in err(proc)


@pytest.mark.stdio_only  # about the agent as our child process
def test_failed_start_and_missing_agent(tmp_path):
    failed = cli(["--cwd", workspace(tmp_path), "hi"], FAKE_ACP_START="fail")
    assert failed.returncode == 1
    assert "Error: the agent failed to start" in err(failed)
    assert "Offline mode requires a local model provider" in err(failed)
    missing = cli(["--agent", "/nonexistent/copilot --acp", "hi"])
    assert missing.returncode == 1
    assert "Error: could not start the agent `/nonexistent/copilot --acp`" in err(missing)


@pytest.mark.stdio_only  # about the agent as our child process
def test_agent_flag_beats_acp_agent(tmp_path):
    proc = cli(["--agent", "%s %s" % (sys.executable, FAKE), "--cwd", workspace(tmp_path), "hi"],
               ACP_AGENT="/nonexistent/agent")
    assert proc.returncode == 0 and out(proc) == "Hello from the fake agent.\n"


def test_chat_keeps_the_session_and_passes_slash_commands(tmp_path):
    log = str(tmp_path / "agent.log")
    proc = cli(["--cwd", workspace(tmp_path), "--json"], stdin="hello\n\n/usage\nagain\n/quit\nnot sent\n",
               FAKE_ACP_LOG=log)
    assert proc.returncode == 0, err(proc)
    results = [json.loads(line) for line in out(proc).splitlines() if '"result"' in line]
    assert len(results) == 3 and len({r["sessionId"] for r in results}) == 1
    assert [r["result"]["usage"]["inputTokens"] for r in results] == [100, 200, 300]  # one session
    sent = [m for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    prompts = [m["params"]["prompt"][0]["text"] for m in sent if m.get("method") == "session/prompt"]
    assert prompts == ["hello", "/usage", "again"]


def start_cli(args, **extra):
    args = over_transport(args, extra)
    return subprocess.Popen([sys.executable, "-m", "acp"] + args, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(**extra), cwd=ROOT)


def wait_for_output(proc, text):
    """Read stdout until `text` shows up while the process still runs (streaming)."""
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    while text.encode() not in seen and time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    return program_text(seen)


#: Why the Ctrl-C tests do not run on Windows.
NO_CTRL_C_TO_ONE_CHILD = ("Ctrl-C cannot be sent to one child on Windows (Popen.send_signal has no SIGINT there, "
                          "and CTRL_C_EVENT reaches every process of a console): the CLI's Ctrl-C handling "
                          "(cancel, then quit) is untested on Windows")


@pytest.mark.skipif(WINDOWS, reason=NO_CTRL_C_TO_ONE_CHILD)
def test_ctrl_c_cancels_the_turn(tmp_path):
    log = str(tmp_path / "agent.log")
    proc = start_cli(["--cwd", workspace(tmp_path), "SLOW", "60"], FAKE_ACP_LOG=log)
    try:
        assert "working..." in wait_for_output(proc, "working...")
        assert proc.poll() is None  # the text came while the turn was still running
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    assert "cancelling the turn" in stderr.decode() and "(turn cancelled)" in stderr.decode()
    assert any(isinstance(m, dict) and m.get("method") == "session/cancel"
               for d, m in read_log(log) if d == "C>A")


@pytest.mark.skipif(WINDOWS, reason=NO_CTRL_C_TO_ONE_CHILD)
@pytest.mark.stdio_only  # about the agent as our child process
def test_second_ctrl_c_quits_and_leaves_no_agent(tmp_path):
    log = str(tmp_path / "agent.log")
    proc = start_cli(["--cwd", workspace(tmp_path), "SLOWPID"], FAKE_ACP_LOG=log,
                     FAKE_ACP_IGNORE_CANCEL="1")
    try:
        shown = wait_for_output(proc, "working...")
        proc.send_signal(signal.SIGINT)  # the agent ignores the cancel...
        deadline = time.monotonic() + TIMEOUT
        while not any(d == "C>A" and isinstance(m, dict) and m.get("method") == "session/cancel"
                      for d, m in read_log(log)):  # the first Ctrl-C handled: the cancel sent
            assert time.monotonic() < deadline, "no session/cancel after the first Ctrl-C"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)  # ...so the second Ctrl-C quits
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    assert "quitting" in stderr.decode()
    agent_pid = int(shown.split("AGENT-PID ")[1].split()[0])
    assert gone(agent_pid)
    # The prompt was given up, and the agent told so before the client hung up (ACP.md §2).
    sent = [m for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    prompt_id = [m["id"] for m in sent if m.get("method") == "session/prompt"][0]
    assert {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompt_id}} in sent


def test_chat_from_a_regular_file_with_a_permission_answer_in_between(tmp_path):
    """stdin redirected from a file (not a pipe): chat lines and the permission answer
    come from the same stream, in order."""
    root = workspace(tmp_path)
    script = tmp_path / "script.txt"
    script.write_text("EDIT\n1\nhello\n", encoding="utf-8")
    with open(str(script), "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "acp", "--cwd", root], stdin=stdin,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
                              cwd=ROOT, timeout=TIMEOUT)
    assert proc.returncode == 0, err(proc)
    assert "[edit] done" in out(proc)
    assert out(proc).endswith("Hello from the fake agent.\n")
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "line two (edited)" in handle.read()


@pytest.mark.stdio_only  # refused before any agent is reached (over TCP it is the agent's: test_acp_elsewhere.py)
def test_bad_cwd_is_a_usage_error(tmp_path):
    proc = cli(["--cwd", str(tmp_path / "missing"), "hi"])
    assert proc.returncode == 2 and "is not a folder" in err(proc)


@pytest.mark.parametrize("reason,status,note", [
    ("end_turn", 0, None),
    ("refusal", 3, "(the agent refused to continue)"),
    ("max_tokens", 4, "(the model reached its token limit)"),
    ("max_turn_requests", 5, "(the turn reached its limit of model requests)"),
    ("cancelled", 130, "(turn cancelled)"),
    ("some_future_reason", 1, "(the agent ended the turn with an unknown stop reason: 'some_future_reason')"),
    ("-", 1, "(the agent ended the turn with an unknown stop reason: None)"),
])
def test_each_stop_reason_has_its_exit_status(tmp_path, reason, status, note):
    """ACP.md §9: a script can tell every way a turn ends from success and from the
    others, in the exit status and in the --json result line."""
    proc = cli(["--cwd", workspace(tmp_path), "STOP", reason])
    assert proc.returncode == status, err(proc)
    assert out(proc) == "stopping\n"
    assert (note in err(proc)) if note else err(proc) == ""
    as_json = cli(["--cwd", workspace(tmp_path), "--json", "STOP", reason])
    result = json.loads(out(as_json).splitlines()[-1])["result"]
    assert as_json.returncode == status and result["exitCode"] == status
    assert result["stopReason"] == (None if reason == "-" else reason)


@pytest.mark.stdio_only  # (no agent involved)
def test_the_exit_statuses_are_in_the_help():
    proc = subprocess.run([sys.executable, "-m", "acp", "--help"], stdout=subprocess.PIPE, env=cli_env(),
                          cwd=ROOT, timeout=TIMEOUT)
    text = out(proc)
    for line in ("  3    the agent refused to continue (stop reason refusal)",
                 "  4    the model reached its token limit (stop reason max_tokens)",
                 "  5    the turn reached its limit of model requests (stop reason max_turn_requests)",
                 "  130  cancelled (Ctrl-C, or stop reason cancelled)"):
        assert line in text
