"""ACP.md §6 (errors come as text) and §7 (shutting the agent down): `Error:` turns,
crashes mid-turn, pending requests failed locally, SIGTERM/SIGKILL escalation, no
zombie and no orphan."""
from __future__ import annotations

import asyncio
import os

import pytest

from acp_testlib import WINDOWS, gone, make_client, run, workspace
from acp import AgentExited, AgentStartError, Client

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def assert_reaped(pid):
    assert gone(pid)
    if WINDOWS:
        return  # no zombies there: a process that is gone needs no reaping
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie of ours


def test_error_text_turn_is_reported_even_though_it_ends_with_end_turn(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await session.prompt("ERROR"), await session.prompt("hello")

    error, fine = run(main())
    assert error.stop_reason == "end_turn" and not error.ok
    assert error.usage is None  # usage may be absent (ACP.md §3.3)
    assert error.error == "Error: Request exceeds the model's prompt budget (70308 tokens; limit 64000)."
    assert error.text == "Info: retrying\n"  # Info: lines are not errors
    assert fine.ok and fine.error is None


@pytest.mark.stdio_only  # about the agent as our child process
def test_idle_agent_exits_on_stdin_eof_and_is_reaped(tmp_path):
    async def main():
        client = make_client()
        await client.start()
        await client.initialize()
        pid = client.connection.pid
        code = await client.close()
        return pid, code, client.connection.closed

    pid, code, closed = run(main())
    assert code == 0
    assert isinstance(closed, AgentExited) and "closed" in str(closed)
    assert_reaped(pid)


@pytest.mark.stdio_only  # about the agent as our child process
def test_agent_ignoring_eof_gets_sigterm(tmp_path):
    async def main():
        client = make_client(env={"FAKE_ACP_STUBBORN": "eof"})
        await client.start()
        await client.initialize()
        return client.connection.pid, await client.close(grace=0.3, term_grace=5)

    pid, code = run(main())
    # On Windows SIGTERM is TerminateProcess (Popen.terminate), which leaves status 1.
    assert code == (1 if WINDOWS else -15)
    assert_reaped(pid)


@pytest.mark.skipif(WINDOWS, reason="on Windows SIGTERM is TerminateProcess, which no process can ignore: "
                                     "there is no SIGKILL step to test")
@pytest.mark.stdio_only  # about the agent as our child process
def test_agent_ignoring_sigterm_gets_sigkill(tmp_path):
    async def main():
        client = make_client(env={"FAKE_ACP_STUBBORN": "term"})
        await client.start()
        await client.initialize()
        return client.connection.pid, await client.close(grace=0.2, term_grace=0.3)

    pid, code = run(main())
    assert code == -9
    assert_reaped(pid)


def test_prompt_pending_at_shutdown_fails_locally(tmp_path):
    async def main():
        client = make_client()
        await client.start()
        await client.initialize()
        session = await client.new_session(workspace(tmp_path))
        turn = session.prompt("SLOW 60")
        async for update in turn:
            break  # the turn is running
        await client.close()
        with pytest.raises(AgentExited) as info:
            await turn
        with pytest.raises(AgentExited):
            await client.request("session/list", {})
        return info.value

    exc = run(main())
    assert "connection was closed" in str(exc)


@pytest.mark.stdio_only  # about the agent as our child process
def test_crash_mid_turn_fails_the_turn_and_other_requests_clearly(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            hanging = asyncio.ensure_future(client.request("_fake/ignore", {}, timeout=None))
            turn = session.prompt("CRASH")
            seen = []
            with pytest.raises(AgentExited) as info:
                async for update in turn:
                    seen.append(update["sessionUpdate"])
            with pytest.raises(AgentExited):
                await hanging
            return info.value, seen, client.connection.pid

    exc, seen, pid = run(main())
    assert "agent_message_chunk" in seen  # what came before the crash was delivered
    assert exc.returncode == 3
    assert "exited with status 3" in str(exc) and "fatal: simulated crash" in str(exc)
    assert_reaped(pid)


@pytest.mark.stdio_only  # about the agent as our child process
def test_children_of_the_agent_do_not_outlive_it(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            result = await session.prompt("SPAWN")
            return int(result.text.split()[1])

    grandchild = run(main())
    assert gone(grandchild)


@pytest.mark.stdio_only  # about the agent as our child process
def test_a_missing_program_is_a_start_error(tmp_path):
    async def main():
        with pytest.raises(AgentStartError) as info:
            await Client(["/nonexistent/agent-binary", "--acp"]).start()
        return info.value

    assert "could not start the agent `/nonexistent/agent-binary --acp`" in str(run(main()))


@pytest.mark.stdio_only  # about the agent as our child process
def test_default_agent_comes_from_acp_agent(monkeypatch):
    monkeypatch.delenv("ACP_AGENT", raising=False)
    assert Client().agent == "copilot --acp --stdio"
    monkeypatch.setenv("ACP_AGENT", "my-agent --stdio")
    assert Client().agent == "my-agent --stdio"
    assert Client("explicit").agent == "explicit"

