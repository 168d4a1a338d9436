"""ACP.md §3: initialize, sessions (new, load, list, close), prompts and their updates,
cancel, one prompt at a time, modes and config options, unknown methods, slash commands."""
from __future__ import annotations

import asyncio
import os

import pytest

import acp_testlib
from acp_testlib import make_client, read_log, run, workspace
from acp import JsonRpcError, SessionBusy

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def test_initialize_advertises_what_is_registered(tmp_path):
    async def main():
        async with make_client(terminal="allow") as client:
            full = await client.initialize()
        async with make_client(fs=False) as bare:  # terminals: offered only when the host says so
            none = await bare.initialize()
        return client, full, none

    client, full, none = run(main())
    # A terminal login (ACP.md §11) runs the agent's own program: only one we started.
    login = acp_testlib.TRANSPORT == "stdio"
    assert full["_echo"]["clientCapabilities"] == {"fs": {"readTextFile": True, "writeTextFile": True},
                                                   "terminal": True, "auth": {"terminal": login},
                                                   "session": {"configOptions": {"boolean": {}}}}
    assert full["_echo"]["clientInfo"]["name"] == "acp-python"
    assert none["_echo"]["clientCapabilities"] == {"fs": {"readTextFile": False, "writeTextFile": False},
                                                   "terminal": False, "auth": {"terminal": login},
                                                   "session": {"configOptions": {"boolean": {}}}}
    assert client.agent_capabilities["loadSession"] is True
    assert client.agent_info["name"] == "fake"
    assert client.auth_methods[0]["id"] == "fake-login"


def test_authenticate(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            ok = await client.authenticate("fake-login")
            with pytest.raises(JsonRpcError) as info:
                await client.authenticate("nope")
            return ok, info.value.code

    assert run(main()) == ({}, -32602)


def test_new_session_with_a_missing_folder_is_an_error(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            with pytest.raises(JsonRpcError) as info:
                await client.new_session(str(tmp_path / "missing"))
            return info.value.code, client.sessions

    code, sessions = run(main())
    assert code == -32603 and sessions == {}


def test_prompt_streams_updates_then_the_result(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("Say hello")
            kinds = []
            async for update in turn:
                if update["sessionUpdate"] != "available_commands_update":  # may trail session/new
                    kinds.append(update["sessionUpdate"])
            first = await turn
            second = await session.prompt("again")
            return session, kinds, first, second

    session, kinds, first, second = run(main())
    assert kinds == ["session_info_update", "user_message_chunk", "usage_update",
                     "agent_message_chunk", "agent_message_chunk"]
    assert first.stop_reason == "end_turn" and first.ok
    assert first.text == "Hello from the fake agent."
    # usage is cumulative for the session (ACP.md §3.3)
    assert first.usage["inputTokens"] == 100 and second.usage["inputTokens"] == 200
    assert session.usage == second.usage
    assert session.context == {"used": 8000, "size": 64000}
    assert session.title == "Say hello"
    assert [h["role"] for h in session.history] == ["user", "agent", "user", "agent"]


def test_cancel_ends_the_turn_with_cancelled(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("SLOW 60")
            async for update in turn:
                if update["sessionUpdate"] == "agent_message_chunk":
                    await turn.cancel()
            result = await turn
            after = await session.prompt("hello")
            return result, after

    result, after = run(main())
    assert result.stop_reason == "cancelled" and not result.ok
    assert after.text == "Hello from the fake agent."


def test_prompts_on_one_session_are_queued_not_overlapped(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            first = session.prompt("SLOW 0.3")
            second = session.prompt("hello")
            with pytest.raises(SessionBusy):
                session.prompt("refused", queue=False)
            return await first, await second

    first, second = run(main())
    # The fake agent cancels a running turn when a second prompt arrives (as Copilot
    # does): both ending normally shows the second waited for the first.
    assert first.stop_reason == "end_turn" and first.text == "working...slow done"
    assert second.stop_reason == "end_turn"
    prompts = [m["params"]["prompt"][0]["text"] for d, m in read_log(log)
               if d == "C>A" and m.get("method") == "session/prompt"]
    assert prompts == ["SLOW 0.3", "hello"]


def test_cancelling_a_queued_turn_never_sends_it(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            first = session.prompt("SLOW 0.2")
            queued = session.prompt("never sent")
            await queued.cancel()
            return await first, await queued

    first, queued = run(main())
    assert first.stop_reason == "end_turn" and queued.stop_reason == "cancelled"
    texts = [m["params"]["prompt"][0]["text"] for d, m in read_log(log)
             if d == "C>A" and m.get("method") == "session/prompt"]
    assert texts == ["SLOW 0.2"]


def test_list_close_and_load_replays_history(tmp_path):
    root = workspace(tmp_path)

    async def main():
        async with make_client(permission="allow") as client:
            await client.initialize()
            session = await client.new_session(root)
            other = await client.new_session(str(tmp_path))
            await session.prompt("hello")
            await session.prompt("EDIT")
            listed = await client.list_sessions()
            filtered = await client.list_sessions(cwd=root)
            with pytest.raises(JsonRpcError) as busy:
                await client.load_session(session.session_id, root)  # still open
            await session.close()
            with pytest.raises(JsonRpcError) as closed:
                await session.prompt("after close")
            loaded = await client.load_session(session.session_id, root)
            with pytest.raises(JsonRpcError) as missing:
                await client.load_session("00000000-0000-0000-0000-000000000000", root)
            return session, other, listed, filtered, busy.value, closed.value, loaded, missing.value, client

    session, other, listed, filtered, busy, closed, loaded, missing, client = run(main())
    assert {s["sessionId"] for s in listed} == {session.session_id, other.session_id}
    assert [s["sessionId"] for s in filtered] == [session.session_id]
    assert busy.code == -32602 and closed.code == -32602 and missing.code == -32002
    assert session.closed
    assert loaded is not session and client.sessions[session.session_id] is loaded
    assert [(h["role"], h["text"]) for h in loaded.history] == [
        ("user", "hello"), ("agent", "Hello from the fake agent."),
        ("user", "EDIT"), ("agent", "I will edit it.Tool finished.")]
    [call] = loaded.tool_calls.values()
    assert call["status"] == "completed" and call["kind"] == "edit"
    assert loaded.current_mode_id and loaded.config_options


def test_modes_and_config_options(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            start_mode = session.current_mode_id
            plan = [m["id"] for m in session.modes["availableModes"] if m["id"].endswith("#plan")][0]
            await session.set_mode(plan)
            with pytest.raises(JsonRpcError) as bad_mode:
                await session.set_mode("nope")
            result = await session.set_config_option("allow_all", "on")
            with pytest.raises(JsonRpcError) as bad_option:
                await client.set_config_option(session.session_id, "allow_all", "maybe")
            return session, start_mode, plan, bad_mode.value, result, bad_option.value

    session, start_mode, plan, bad_mode, result, bad_option = run(main())
    assert start_mode.endswith("#agent")
    assert session.current_mode_id == plan and session.modes["currentModeId"] == plan
    assert session.config_value("allow_all") == "on" and session.config_value("mode") == plan
    assert bad_mode.code == -32602 and bad_option.code == -32602
    assert result["configOptions"] == session.config_options


def test_unknown_methods_answer_method_not_found(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            with pytest.raises(JsonRpcError) as info:
                await client.request("session/resume", {"sessionId": "x"})
            session = await client.new_session(workspace(tmp_path))
            # ...and the other way: the agent asks us for something we do not serve.
            raw = await session.prompt('RAW _vendor/thing {"a": 1}')
            return info.value, raw

    exc, raw = run(main())
    assert exc.code == -32601
    assert raw.text.startswith("RAW-RESULT ") and '"code": -32601' in raw.text


def test_slash_commands_are_sent_as_plain_text(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            server = {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": []}
            session = await client.new_session(workspace(tmp_path), mcp_servers=[server])
            return await session.prompt("/session info"), server

    result, server = run(main())
    assert result.stop_reason == "end_turn"
    sent = [m for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    [prompt] = [m["params"]["prompt"] for m in sent if m.get("method") == "session/prompt"]
    assert prompt == [{"type": "text", "text": "/session info"}]
    [new] = [m["params"] for m in sent if m.get("method") == "session/new"]
    assert new == {"cwd": os.path.join(str(tmp_path), "work"), "mcpServers": [server]}


@pytest.mark.stdio_only  # about the agent as our child process
def test_streams_given_by_the_caller(tmp_path):
    """A connection over an already-open pair of streams instead of a spawned agent."""
    from acp_testlib import agent_cmd

    async def main():
        proc = await asyncio.create_subprocess_exec(*agent_cmd(), stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE)
        from acp import Client

        async with Client(streams=(proc.stdout, proc.stdin)) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            result = await session.prompt("hello")
        return result, await proc.wait()

    result, code = run(main())
    assert result.text == "Hello from the fake agent." and code == 0


def test_relative_cwd_is_made_absolute(tmp_path):
    async def main():
        async with make_client(cwd=str(tmp_path)) as client:
            await client.initialize()
            return await client.new_session()

    session = run(main())
    assert os.path.isabs(session.cwd) and session.cwd == str(tmp_path)
