"""The real agent in TCP mode (`copilot --acp --port P`, offline against the fake model)
and `python3 -m acp --connect P`: a streamed answer, an edit allowed and one refused,
two clients one after the other on the same agent (which outlives them), and a session
started over stdio, then listed and resumed with --resume over TCP (ACP.md §3.5, §8)."""

import json
import os
import signal
import sys

import pytest

import copilot_harness as H
from acp_output import result_line
from fake_model import Turn

pytestmark = pytest.mark.interop


@pytest.fixture
def tcp_agent(copilot_bin, workspace, cli_env, logdir):
    """`copilot --acp --port P` started in the workspace; stopped (SIGTERM) at the end.
    Yields the Proc, with `.port`."""
    port = H.free_port()
    cli_logs = os.path.join(logdir, "cli-tcp")
    os.makedirs(cli_logs, exist_ok=True)
    argv = [copilot_bin, "--acp", "--port", str(port), "--log-level", "all", "--log-dir", cli_logs]
    agent = H.Proc(argv, cwd=workspace, env=cli_env, log_path=os.path.join(logdir, "agent-tcp.log"))
    agent.port = port
    try:
        H.wait_until(lambda: H.tcp_listening(port) or agent.proc.poll() is not None, 60,
                     message="copilot --acp --port %d listening" % port)
        assert agent.proc.poll() is None, "the agent exited: %s" % agent.output()
        yield agent
    finally:
        agent.signal(signal.SIGTERM)
        try:
            agent.wait(15)
        except Exception:
            pass
        agent.stop()


@pytest.fixture
def connect(tcp_agent, workspace, copilot_home, cli_env, logdir):
    """`connect(*args)` runs `python3 -m acp --connect PORT --cwd WORKSPACE args...`."""
    started = []

    def run(*args):
        argv = [sys.executable, "-m", "acp", "--connect", str(tcp_agent.port),
                "--cwd", workspace] + list(args)
        p = H.Proc(argv, cwd=workspace, env=H.python_env(cli_env, copilot_home),
                   log_path=os.path.join(logdir, "acp-tcp-%d.log" % (len(started) + 1)))
        started.append(p)
        return p

    yield run
    for p in started:
        p.stop()


def _text(proc):
    """The message text of a --json run, its chunks joined."""
    return "".join(json.loads(line)["update"]["content"].get("text", "") for line in proc.lines("out")
                   if '"agent_message_chunk"' in line)


def test_streamed_answer_over_tcp(connect, fake_model, tcp_agent):
    fake_model.script(Turn.say("first second third fourth fifth", chunk_delay=0.4))
    proc = connect("--json", "Stream please")
    proc.wait_output(r'"sessionUpdate": ?"agent_message_chunk".*"first ', stream="out", timeout=60)
    assert proc.proc.poll() is None, "the turn ended before its text was streamed"
    assert proc.wait(60) == 0, proc.output()
    assert _text(proc) == "first second third fourth fifth"
    result = result_line(proc)
    assert result["stopReason"] == "end_turn" and result["sessionId"]
    assert tcp_agent.proc.poll() is None  # the client left, the agent did not


@pytest.mark.parametrize("answer", ["--yes", "--no"])
def test_edit_allowed_or_refused_over_tcp(connect, fake_model, workspace, answer):
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    fake_model.script(
        Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 42"}),
        Turn.say("Changed it."))
    proc = connect(answer, "Fix hello.py")
    assert proc.wait(60) == 0, proc.output()
    if answer == "--yes":
        assert H.read(path) == before.replace("return x", "return 42")
        assert "Changed it." in proc.output("out")
        assert "[edit] done" in proc.output("out")
    else:
        assert H.read(path) == before
        assert len(fake_model.chat_requests()) == 1  # a refusal ends the turn (ACP.md §5)
        assert "[edit] FAILED" in proc.output("out")


def test_two_clients_one_after_the_other_on_one_agent(connect, fake_model, tcp_agent):
    fake_model.script(Turn.say("Answer one."), Turn.say("Answer two."))
    first = connect("--json", "Question one")
    assert first.wait(60) == 0, first.output()
    assert tcp_agent.proc.poll() is None
    second = connect("--json", "Question two")
    assert second.wait(60) == 0, second.output()
    assert _text(first) == "Answer one." and _text(second) == "Answer two."
    one, two = result_line(first)["sessionId"], result_line(second)["sessionId"]
    assert one != two  # each connection its own session
    listed = connect("--list-sessions")
    assert listed.wait(60) == 0, listed.output()
    ids = [line.split()[0] for line in listed.lines("out") if line.strip()]
    assert one in ids and two in ids
    assert tcp_agent.proc.poll() is None


def test_session_started_over_stdio_is_listed_and_resumed_over_tcp(acp_cli, connect, fake_model):
    fake_model.script(Turn.say("Nice to meet you, Ada."), Turn.say("Your name is Ada."))
    started = acp_cli("--json", "My name is Ada.")
    assert started.wait(60) == 0, started.output()
    session_id = result_line(started)["sessionId"]

    listed = connect("--list-sessions")
    assert listed.wait(60) == 0, listed.output()
    [line] = [l for l in listed.lines("out") if l.startswith(session_id)]
    assert "My name is Ada." in line  # the title is the first prompt's text

    resumed = connect("--resume", session_id, "What is my name?")
    assert resumed.wait(60) == 0, resumed.output()
    out = resumed.output("out")
    assert "you: My name is Ada." in out and "agent: Nice to meet you, Ada." in out
    assert out.rstrip().endswith("Your name is Ada.")
    first, second = fake_model.chat_requests()
    said = [(m["role"], m.get("content")) for m in second["body"]["messages"]]
    assert ("assistant", "Nice to meet you, Ada.") in said, said  # the same conversation, continued
    assert "What is my name?" in fake_model.user_texts(second)[-1]
