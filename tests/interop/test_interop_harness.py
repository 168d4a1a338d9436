"""Self-checks of the harness: the real CLI against the fake model, without any code of
this project (so a failure here is the environment's, not the library's)."""

import os

import pytest

import copilot_harness as H
from fake_model import Turn

pytestmark = pytest.mark.interop


def test_acp_plain_prompt_against_fake_model(copilot_bin, workspace, cli_env, fake_model,
                                             logdir):
    fake_model.script(Turn.say("Hello from the fake model"))
    agent = H.RawAcp(copilot_bin, workspace, cli_env, logdir)
    try:
        init, _ = agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["agentInfo"]["version"] == H.PINNED_VERSION
        new, _ = agent.request("session/new", {"cwd": workspace, "mcpServers": []})
        result, updates = agent.request("session/prompt", {
            "sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "Say hello"}]})
        assert result["stopReason"] == "end_turn"
        text = "".join(u["content"]["text"] for u in updates
                       if u.get("sessionUpdate") == "agent_message_chunk")
        assert text == "Hello from the fake model"
        agent.close_stdin()
        assert agent.wait(15) == 0
    finally:
        agent.stop()
    req = fake_model.chat_requests()[-1]
    assert req["body"]["model"] == H.MODEL and req["body"]["stream"] is True
    assert "Say hello" in fake_model.user_texts()[-1]
    assert {"edit", "create", "view"} <= set(fake_model.offered_tools())


def test_tui_starts_offline_answers_and_exits(tui, fake_model):
    fake_model.script(Turn.say("Hi from the fake model"))
    tui.start()
    tui.prompt("Say hi")
    tui.wait_screen(r"Hi from the fake model", timeout=30)
    assert "Say hi" in fake_model.user_texts()[-1]
    # Without an IDE the model is not offered the ide-* tools.
    assert not [t for t in fake_model.offered_tools() if t.startswith("ide-")]
    assert tui.exit() == 0
    tui.wait_log(r"offline mode")


def test_fake_model_edit_tool_in_tui(tui, fake_model, workspace):
    """The edit permission dialog of the TUI, answered in the terminal (no IDE)."""
    path = os.path.join(workspace, "hello.py")
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x",
                                         "new_str": "return 1"}),
                      Turn.say("Edited it."))
    tui.start()
    tui.prompt("Fix hello.py")
    tui.answer_permission(1)
    tui.wait_screen(r"Edited it\.", timeout=30)
    assert "return 1" in H.read(path)
    assert fake_model.tool_results("edit")
    assert tui.exit() == 0
