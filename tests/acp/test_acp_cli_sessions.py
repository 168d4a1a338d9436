"""Sessions across runs of the command line (ACP.md §3.5), over stdio and TCP:
`--json` ends with a line carrying sessionId and stopReason, `--list-sessions` shows
it, `--resume` replays its history briefly (or not, with --quiet) and continues it, in
a one-shot prompt or in the chat. And the chat's own commands: `/commands` lists what
the agent advertised; on a terminal, Tab completes them and a permission question
shows its choices and reads the answer."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

import acp_testlib
from acp_testlib import FAKE, ROOT, fake_env, program_text, read_log, start_tcp_agent, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

TIMEOUT = 30  # only against hangs


@pytest.fixture
def acp(tmp_path, transport):
    """`acp(args, stdin)` runs the command line against one fake agent whose sessions
    outlive each run: over stdio a store file the next child reads, over TCP one agent
    that every run connects to."""
    agent_env = {"FAKE_ACP_STORE": str(tmp_path / "sessions.json"),
                 "FAKE_ACP_LOG": str(tmp_path / "agent.log")}
    prefix = []
    if acp_testlib.TRANSPORT == "tcp":
        _, port = start_tcp_agent(fake_env(**agent_env))
        prefix = ["--connect", str(port)]

    def run(args, stdin=""):
        env = fake_env(**agent_env)
        env["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run([sys.executable, "-m", "acp"] + prefix + args, input=stdin.encode(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                              timeout=TIMEOUT)
        return proc.returncode, program_text(proc.stdout), program_text(proc.stderr)

    run.log = agent_env["FAKE_ACP_LOG"]
    return run


def last_json(out):
    return json.loads(out.splitlines()[-1])


def test_a_script_starts_lists_and_resumes_a_session(acp, tmp_path):
    root = workspace(tmp_path)
    status, out, err = acp(["--cwd", root, "--json", "hello there"])
    assert status == 0, err
    last = last_json(out)
    session_id = last["sessionId"]
    assert last["result"]["sessionId"] == session_id and last["result"]["stopReason"] == "end_turn"

    status, listed, err = acp(["--list-sessions"])
    assert status == 0, err
    [line] = [l for l in listed.splitlines() if session_id in l]
    assert line.split() == [session_id, "2026-01-01T00:00:00Z", "hello", "there"]
    status, elsewhere, err = acp(["--list-sessions", "--cwd", str(tmp_path)])
    assert status == 0 and session_id not in elsewhere

    status, out, err = acp(["--resume", session_id, "again"])
    assert status == 0, err
    assert out.splitlines() == [
        "(resuming session %s: 2 earlier entries)" % session_id,
        "  you: hello there",
        "  agent: Hello from the fake agent.",
        "  ---",
        "Hello from the fake agent."]
    status, out, err = acp(["--resume", session_id, "--quiet", "--json", "once more"])
    assert status == 0, err
    records = [json.loads(l) for l in out.splitlines()]
    assert not any(r.get("replayed") for r in records)
    assert records[-1]["result"]["usage"]["inputTokens"] == 300  # the third turn of one session
    loads = [m["params"] for d, m in read_log(acp.log) if d == "C>A" and isinstance(m, dict)
             and m.get("method") == "session/load"]
    assert [p["cwd"] for p in loads] == [root, root]  # the session's own folder, from session/list


def test_resume_shows_tool_calls_and_json_marks_replayed_updates(acp, tmp_path):
    root = workspace(tmp_path)
    status, out, err = acp(["--cwd", root, "--yes", "--json", "EDIT"])
    assert status == 0, err
    session_id = last_json(out)["sessionId"]
    status, out, err = acp(["--resume", session_id, "--cwd", root, "hi"])
    assert status == 0, err
    shown = out.splitlines()
    assert shown[1:3] == ["  you: EDIT", "  agent: I will edit it."]
    assert shown[3].startswith("  [edit] done: Editing ")  # in its place among the messages
    assert shown[4:6] == ["  agent: Tool finished.", "  ---"]
    status, out, err = acp(["--resume", session_id, "--cwd", root, "--json", "hi"])
    replayed = [json.loads(l)["update"]["sessionUpdate"] for l in out.splitlines()
                if json.loads(l).get("replayed")]
    assert replayed[:2] == ["user_message_chunk", "agent_message_chunk"] and "tool_call" in replayed


def test_resume_continues_in_the_chat(acp, tmp_path):
    root = workspace(tmp_path)
    status, out, err = acp(["--cwd", root, "--json", "first"])
    assert status == 0, err
    session_id = last_json(out)["sessionId"]
    status, out, err = acp(["--resume", session_id, "--json", "--quiet"], stdin="second\nthird\n/quit\n")
    assert status == 0, err
    results = [json.loads(l)["result"] for l in out.splitlines() if '"result"' in l]
    assert [r["usage"]["inputTokens"] for r in results] == [200, 300]
    assert {r["sessionId"] for r in results} == {session_id}


def test_resuming_an_unknown_session_is_an_error(acp):
    status, out, err = acp(["--resume", "00000000-0000-0000-0000-000000000000", "hi"])
    assert status == 1
    assert "Error: could not resume session 00000000-0000-0000-0000-000000000000" in err
    assert "not found" in err


def test_slash_commands_lists_the_advertised_commands_locally(acp, tmp_path):
    status, out, err = acp(["--cwd", workspace(tmp_path)], stdin="/commands\nPLAN\n/commands\n/quit\n")
    assert status == 0, err
    first, rest = out.split("Planned.", 1)
    assert "/context" in first and "Show context usage" in first
    assert "/session <info>" in first and "/usage" in first
    assert "/context" in rest and "/usage" not in rest  # the latest list replaces the first
    prompts = [m["params"]["prompt"][0]["text"] for d, m in read_log(acp.log)
               if d == "C>A" and isinstance(m, dict) and m.get("method") == "session/prompt"]
    assert prompts == ["PLAN"]  # /commands never went to the agent


def test_advertised_commands_are_sent_as_prompts(acp, tmp_path):
    status, out, err = acp(["--cwd", workspace(tmp_path)], stdin="/usage\n/quit\n")
    assert status == 0 and out == "Hello from the fake agent.\n"  # advertised ones are prompts


def test_a_permission_question_in_the_chat_is_answered_from_a_pipe(acp, tmp_path):
    root = workspace(tmp_path)
    status, out, err = acp(["--cwd", root], stdin="EDIT\nallow always\nhello\n")
    assert status == 0, err
    assert "[1] allow once  [2] allow always  [3] reject" in err
    assert "[edit] done" in out and out.endswith("Hello from the fake agent.\n")
    answers = [m.get("result") for d, m in read_log(acp.log) if d == "C>A" and isinstance(m, dict)]
    assert {"outcome": {"outcome": "selected", "optionId": "allow_always"}} in answers


# --------------------------------------------------------------------- on a terminal


def test_tab_completion_and_a_permission_question_on_a_terminal(tmp_path):
    """A real pseudo-terminal: `/us` + Tab becomes `/usage`; EDIT asks, showing the
    three choices, and `2` (allow always) is read from the terminal."""
    pty = pytest.importorskip("pty")
    pytest.importorskip("readline")
    root = workspace(tmp_path)
    log = str(tmp_path / "agent.log")
    args = [sys.executable, "-m", "acp", "--cwd", root]
    env = fake_env(FAKE_ACP_LOG=log, TERM="xterm", PYTHONPATH=ROOT)
    if acp_testlib.TRANSPORT == "tcp":
        _, port = start_tcp_agent(fake_env(FAKE_ACP_LOG=log))
        args[3:3] = ["--connect", str(port)]
    else:
        env["ACP_AGENT"] = "%s %s" % (sys.executable, FAKE)
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                            start_new_session=True)
    os.close(slave)
    seen = [b""]

    def wait_for(text):
        deadline = time.monotonic() + TIMEOUT
        while text.encode() not in seen[0]:
            if time.monotonic() > deadline:
                raise AssertionError("no %r on the terminal; got %r" % (text, seen[0][-2000:]))
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen[0] += os.read(master, 65536)
                except OSError:
                    break

    try:
        wait_for("> ")
        os.write(master, b"/us\t")
        wait_for("/usage")
        os.write(master, b"\r")
        wait_for("Hello from the fake agent.")
        wait_for("> ")
        os.write(master, b"EDIT\r")
        wait_for("[1] allow once  [2] allow always  [3] reject")
        os.write(master, b"2\r")
        wait_for("[edit] done")
        wait_for("> ")
        os.write(master, b"/quit\r")
        proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0, seen[0][-2000:]
    sent = [m for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    assert [m["params"]["prompt"][0]["text"] for m in sent if m.get("method") == "session/prompt"] \
        == ["/usage", "EDIT"]
    assert {"outcome": {"outcome": "selected", "optionId": "allow_always"}} in \
        [m.get("result") for m in sent]
    with open(os.path.join(root, "hello.txt"), encoding="utf-8") as handle:
        assert "line two (edited)" in handle.read()
