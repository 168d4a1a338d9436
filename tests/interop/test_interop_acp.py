"""`python3 -m acp --agent "<the real copilot --acp --stdio>"` against the fake model."""

import json
import os
import signal

import pytest

import copilot_harness as H
from acp_output import result_line
from fake_model import Turn

pytestmark = pytest.mark.interop


def test_plain_prompt_streams_the_model_text(acp_cli, fake_model):
    fake_model.script(Turn.say("Hello from the fake model, streamed in words"))
    proc = acp_cli("Say hello")
    assert proc.wait(60) == 0, proc.output()
    assert "Hello from the fake model, streamed in words" in proc.output("out")
    assert "Say hello" in fake_model.user_texts()[-1]
    assert len(fake_model.chat_requests()) == 1


def test_plain_prompt_json_updates(acp_cli, fake_model):
    fake_model.script(Turn.say("one two three"))
    proc = acp_cli("--json", "Count")
    assert proc.wait(60) == 0, proc.output()
    chunks = []
    for line in proc.lines("out"):
        obj = json.loads(line)
        upd = obj.get("update") or obj.get("params", {}).get("update") or obj
        if upd.get("sessionUpdate") == "agent_message_chunk":
            chunks.append(upd["content"]["text"])
    assert "".join(chunks) == "one two three"
    assert len(chunks) > 1  # streamed, not one block
    assert result_line(proc)["stopReason"] == "end_turn"


def test_text_is_streamed_as_it_comes(acp_cli, fake_model):
    """With 0.4 s between the fake model's chunks, the first words are out while the
    turn is still running."""
    fake_model.script(Turn.say("first second third fourth fifth", chunk_delay=0.4))
    proc = acp_cli("--json", "Stream please")
    proc.wait_output(r'"sessionUpdate": ?"agent_message_chunk".*"first ', stream="out",
                     timeout=60)
    assert proc.proc.poll() is None, "the turn ended before its text was streamed"
    assert "fifth" not in proc.output("out")
    assert proc.wait(60) == 0, proc.output()
    assert "fifth" in proc.output("out")
    assert result_line(proc)["stopReason"] == "end_turn"


@pytest.mark.parametrize("answer", ["--yes", "--no"])
def test_edit_permission(acp_cli, fake_model, workspace, answer):
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    fake_model.script(
        Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 42"}),
        Turn.say("Changed it."))
    proc = acp_cli(answer, "Fix hello.py")
    status = proc.wait(60)
    if answer == "--yes":
        assert status == 0, proc.output()
        assert H.read(path) == before.replace("return x", "return 42")
        assert "Changed it." in proc.output("out")
        # The CLI told the model the edit was made.
        assert any("updated" in r or "edited" in r.lower() for r in fake_model.tool_results("edit")), \
            fake_model.tool_results("edit")
    else:
        assert H.read(path) == before
        # A rejection ends the turn at once: the model is not asked again.
        assert len(fake_model.chat_requests()) == 1
        assert status == 0, proc.output()


def test_permission_answered_through_stdin(acp_cli, fake_model, workspace):
    path = os.path.join(workspace, "hello.py")
    fake_model.script(
        Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 9"}),
        Turn.say("Changed after asking."))
    proc = acp_cli("Fix hello.py")
    proc.send("y")
    assert proc.wait(60) == 0, proc.output()
    assert "return 9" in H.read(path)
    assert "Changed after asking." in proc.output("out")


def test_chat_keeps_the_session_across_prompts(acp_cli, fake_model):
    fake_model.script(Turn.say("First answer."), Turn.say("Second answer."))
    proc = acp_cli()
    proc.send("My name is Ada.")
    proc.wait_output(r"First answer\.", timeout=60)
    proc.send("What is my name?")
    proc.wait_output(r"Second answer\.", timeout=60)
    proc.send("/quit")
    assert proc.wait(30) == 0, proc.output()
    first, second = fake_model.chat_requests()
    roles = [(m["role"], m.get("content")) for m in second["body"]["messages"]]
    assert ("assistant", "First answer.") in roles, roles
    assert any("My name is Ada." in (c or "") for r, c in roles if r == "user")
    assert "What is my name?" in fake_model.user_texts(second)[-1]


def test_create_with_yes(acp_cli, fake_model, workspace):
    path = os.path.join(workspace, "new_file.txt")
    fake_model.script(Turn.tool("create", {"path": path, "file_text": "fresh\n"}),
                      Turn.say("Created."))
    proc = acp_cli("--yes", "Create a file")
    assert proc.wait(60) == 0, proc.output()
    assert H.read(path) == "fresh\n"


def test_cancelled_slow_turn(acp_cli, fake_model):
    fake_model.script(Turn.say("too late", delay=60))
    proc = acp_cli("--json", "Take your time")
    fake_model.wait_for_chat(1, timeout=60)          # the turn is in flight
    proc.signal(signal.SIGINT)
    status = proc.wait(20)  # the model would answer after 60 s: ended by the cancel, not by the answer
    assert result_line(proc)["stopReason"] == "cancelled", proc.output()
    assert status == 130, proc.output()
    assert "too late" not in proc.output("out")


def test_provider_error_exits_non_zero(acp_cli, fake_model):
    # 400: not retried by the CLI (a 5xx is retried 5 times over ~15 s first).
    fake_model.script(Turn.fail(400, "fake provider says no"))
    proc = acp_cli("Say hello")
    status = proc.wait(60)
    assert status != 0, proc.output()
    err = proc.output("err")
    assert "Error:" in err and "fake provider says no" in err, proc.output()


def test_session_listed_and_resumed_over_stdio(acp_cli, fake_model):
    """--json's last line gives the session id; a later run lists it and resumes it
    (session/load replays the history, shown briefly; --quiet hides it)."""
    fake_model.script(Turn.say("Noted: blue."), Turn.say("Blue."), Turn.say("Still blue."))
    first = acp_cli("--json", "My colour is blue.")
    assert first.wait(60) == 0, first.output()
    result = result_line(first)
    session_id = result["sessionId"]
    assert result["stopReason"] == "end_turn"
    listed = acp_cli("--list-sessions")
    assert listed.wait(60) == 0, listed.output()
    assert any(line.startswith(session_id) and "My colour is blue." in line
               for line in listed.lines("out")), listed.output()
    resumed = acp_cli("--resume", session_id, "What is my colour?")
    assert resumed.wait(60) == 0, resumed.output()
    out = resumed.lines("out")
    assert "  you: My colour is blue." in out and "  agent: Noted: blue." in out, out
    assert out[-1] == "Blue."
    quiet = acp_cli("--resume", session_id, "--quiet", "And now?")
    assert quiet.wait(60) == 0, quiet.output()
    assert quiet.lines("out") == ["Still blue."]
    said = [(m["role"], m.get("content")) for m in fake_model.chat_requests()[-1]["body"]["messages"]]
    assert ("assistant", "Blue.") in said and ("assistant", "Noted: blue.") in said, said

