"""ACP.md §2: id 0 from the agent, responses out of order, updates naming a session
before `session/new` answers."""
from __future__ import annotations

import asyncio

import pytest

from acp_testlib import make_client, read_log, run, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def test_agent_request_with_id_zero_is_answered(tmp_path):
    log = str(tmp_path / "agent.log")
    root = workspace(tmp_path)

    async def main():
        async with make_client(log=log, permission="allow") as client:
            await client.initialize()
            session = await client.new_session(root)
            return await session.prompt("EDIT")

    result = run(main())
    assert result.stop_reason == "end_turn"
    entries = read_log(log)
    asked = [m for d, m in entries if d == "A>C" and m.get("method") == "session/request_permission"]
    assert asked[0]["id"] == 0
    answer = [m for d, m in entries if d == "C>A" and m.get("id") == 0 and "result" in m]
    assert answer == [{"jsonrpc": "2.0", "id": 0,
                       "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}]
    with open(root + "/hello.txt", encoding="utf-8") as handle:
        assert "line two (edited)" in handle.read()


def test_responses_out_of_order_are_matched_by_id(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            return await asyncio.gather(
                client.request("_fake/echo", {"value": "slow", "delay": 0.4}),
                client.request("_fake/echo", {"value": "fast", "delay": 0}),
                client.request("_fake/echo", {"value": "middle", "delay": 0.2}))

    assert run(main()) == [{"value": "slow"}, {"value": "fast"}, {"value": "middle"}]
    order = [m["result"]["value"] for d, m in read_log(log)
             if d == "A>C" and isinstance(m.get("result"), dict) and "value" in m["result"]]
    assert order == ["fast", "middle", "slow"]  # the agent really answered out of order


def test_updates_before_the_session_new_answer_reach_the_session(tmp_path):
    log = str(tmp_path / "agent.log")
    seen = []

    async def main():
        async with make_client(log=log) as client:
            client.add_update_listener(lambda sid, update: seen.append((sid, update["sessionUpdate"])))
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            commands = list(session.commands)
            return session.session_id, commands

    session_id, commands = run(main())
    assert [c["name"] for c in commands] == ["context", "usage", "session"]
    assert seen[0] == (session_id, "available_commands_update")
    # In the agent's output the update really came before the answer.
    lines = [m for d, m in read_log(log) if d == "A>C"]
    first_update = next(i for i, m in enumerate(lines) if m.get("method") == "session/update")
    answer = next(i for i, m in enumerate(lines) if isinstance(m.get("result"), dict) and "sessionId" in m["result"])
    assert first_update < answer


def test_two_sessions_get_their_own_updates(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            one = await client.new_session(workspace(tmp_path))
            two = await client.new_session(str(tmp_path))
            first, second = await asyncio.gather(one.prompt("PLAN"), two.prompt("UNICODE"))
            return one, two, first, second

    one, two, first, second = run(main())
    assert one.title == "Planned work" and two.title == "UNICODE"
    assert one.plan and not two.plan
    assert first.text == "Planned." and second.text.startswith("a\u2028b")
