"""ACP.md §4: session state merged from updates, unknown kinds tolerated, tool calls
merged field by field, and tool calls left open by a cancelled turn closed locally."""
from __future__ import annotations

import pytest

from acp_testlib import make_client, run, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def test_state_follows_plan_mode_config_commands_title_and_usage(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("PLAN")
            kinds = [update["sessionUpdate"] async for update in turn]
            return session, kinds, await turn

    session, kinds, result = run(main())
    assert [e["content"] for e in session.plan] == ["Read", "Write"]  # the later plan replaced the first
    assert session.current_mode_id.endswith("#plan")
    assert session.config_value("allow_all") == "on"
    assert [c["name"] for c in session.commands] == ["context"]  # a full replacement list
    assert session.title == "Planned work"
    assert session.context == {"used": 9000, "size": 64000}
    assert {"role": "thought", "text": "thinking"} in session.history
    # The unknown kind was kept, passed to the caller, and did not disturb the rest.
    assert "future_kind_of_update" in kinds
    assert session.unknown_updates[-1]["whatever"] == [1, 2]
    assert result.text == "Planned." and result.stop_reason == "end_turn"


def test_tool_call_updates_merge_only_the_fields_they_carry(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            states = []

            def snapshot(session_id, update):  # runs as each update arrives, after merging
                if update.get("toolCallId") == "call_run1":
                    call = session.tool_calls["call_run1"]
                    states.append((call.get("status"), call.get("content")))

            client.add_update_listener(snapshot)
            turn = session.prompt("RUN")
            await turn
            return session, states, turn

    session, states, turn = run(main())
    # The first shell update has no status: the pending status survives it.
    assert states[1] == ("pending", [{"type": "content", "content": {"type": "text", "text": "hi\n"}}])
    call = session.tool_calls["call_run1"]
    assert call["status"] == "completed" and call["title"] == "echo hi" and call["kind"] == "execute"
    assert call["content"][0]["content"]["text"] == "hi\n<exit 0>"  # replaced, not appended
    assert call["rawInput"] == {"command": "echo hi"} and call["rawOutput"] == {"exitCode": 0}
    assert turn.tool_call_ids == ["call_run1"]


def test_cancelled_turn_closes_its_running_tool_calls(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("RUNSLOW")
            seen = []
            async for update in turn:
                seen.append(update)
                if update.get("status") == "in_progress":
                    await session.cancel()
            return session, seen, await turn

    session, seen, result = run(main())
    assert result.stop_reason == "cancelled"
    assert session.tool_calls["call_long"]["status"] == "cancelled"
    assert seen[-1] == {"sessionUpdate": "tool_call_update", "toolCallId": "call_long",
                        "status": "cancelled", "_local": True}


@pytest.mark.stdio_only  # in-process streams: no agent at all
def test_updates_sent_with_the_answer_in_one_read_all_come_before_the_end():
    # The agent's 200 updates and the prompt's answer arrive in one chunk: the read loop
    # applies each update before it reads the next line, so the answer can only be
    # matched after all of them, and the turn ends behind the last (ACP.md §3.3) —
    # with no extra loop pass to hope for.
    import asyncio
    import json

    from acp import Client

    class Sink:
        def __init__(self):
            self.sent = []

        def write(self, data):
            self.sent.append(json.loads(data))

        async def drain(self):
            pass

        def close(self):
            pass

    async def main():
        reader, sink = asyncio.StreamReader(), Sink()
        async with Client(streams=(reader, sink)) as client:
            lines = [{"jsonrpc": "2.0", "id": 0, "result": {"sessionId": "s"}}]
            reader.feed_data(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            session = await client.new_session("/")
            turn = session.prompt("go")
            while len(sink.sent) < 2:  # the prompt request is out
                await asyncio.sleep(0.01)
            burst = [{"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                             "content": {"type": "text", "text": "%d " % i}}}}
                     for i in range(200)]
            burst.append({"jsonrpc": "2.0", "id": sink.sent[1]["id"], "result": {"stopReason": "end_turn"}})
            reader.feed_data(b"".join(json.dumps(m).encode() + b"\n" for m in burst))
            streamed = [update["content"]["text"] async for update in turn]
            result = await turn
            reader.feed_eof()
            return streamed, result

    streamed, result = run(main())
    assert streamed == ["%d " % i for i in range(200)]
    assert result.text == "".join(streamed) and result.stop_reason == "end_turn"
