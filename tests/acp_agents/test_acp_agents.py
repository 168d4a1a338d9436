"""Our client (library and command line) against ACP agents this project did not write:
the official Python SDK's example agents and an agent built on that SDK (its models and
connection on the wire: permission, fs, terminals, list, load), and the TypeScript
SDK's example agent (streamed turn with tool calls, permission, cancel). Pinned and
installed by `make acp-agents`; run by `make interop-acp-agents` (docs/ACP.md §10)."""
import json
import os

import pytest

from conftest import HERE, cli, run, texts
from acp import Client, NotAdvertised

# ------------------------------------------------------------------ the Python SDK's examples


def example(python_sdk, name):
    python, examples = python_sdk
    return "%s %s" % (python, os.path.join(examples, name))


def test_python_sdk_example_agent_from_the_library(python_sdk, work):
    async def main():
        async with Client(example(python_sdk, "agent.py"), cwd=work) as client:
            await client.initialize()
            session = await client.new_session(work)
            turn = session.prompt("hello there")
            streamed = [update async for update in turn]
            result = await turn
            await session.cancel()  # a notification the agent takes (nothing is running)
            again = await session.prompt("and again")
            with pytest.raises(NotAdvertised):  # loadSession: false, no session/list
                await client.load_session(session.session_id, work)
            with pytest.raises(NotAdvertised):
                await client.list_sessions()
            return client.agent_info, streamed, result, again

    info, streamed, result, again = run(main())
    assert info["name"] == "example-agent"
    assert texts(streamed) == "Client sent:hello there"
    assert result.stop_reason == "end_turn" and result.ok
    assert again.text == "Client sent:and again"


def test_python_sdk_example_agents_from_the_command_line(python_sdk, work):
    code, out, err = cli(example(python_sdk, "agent.py"), ["--cwd", work, "hello"])
    assert code == 0, err
    assert out == "Client sent:hello\n"
    code, out, err = cli(example(python_sdk, "echo_agent.py"), ["--cwd", work, "--json", "echo", "me"])
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert texts(line["update"] for line in lines[:-1]) == "echo me"
    assert lines[-1]["result"]["stopReason"] == "end_turn"
    code, out, err = cli(example(python_sdk, "agent.py"), ["--cwd", work, "--resume", "0"])
    assert code == 2 and "does not advertise loadSession" in err


# ------------------------------------------------------------------ an agent on the Python SDK


def tools_agent(python_sdk):
    return "%s %s" % (python_sdk[0], os.path.join(HERE, "sdk_tools_agent.py"))


def test_python_sdk_agent_permission_fs_terminal_cancel_list_load(python_sdk, work, tmp_path):
    store = str(tmp_path / "store.json")
    asked = []

    def terminal_policy(request):
        asked.append((request.command, request.args, request.cwd))
        return "once"

    async def main():
        env = dict(os.environ, SDK_AGENT_STORE=store)
        async with Client(tools_agent(python_sdk), cwd=work, env=env, permission="allow",
                          terminal=terminal_policy) as client:
            await client.initialize()
            session = await client.new_session(work)
            tools = await session.prompt("tools")
            slow = session.prompt("slow")
            async for update in slow:  # the first chunk: the turn is running
                await slow.cancel()
                break
            cancelled = await slow
            listed = await client.list_sessions()
        async with Client(tools_agent(python_sdk), cwd=work, env=env) as client:  # a new process
            await client.initialize()
            loaded = await client.load_session(session.session_id, work)
        return session.session_id, tools, cancelled, listed, loaded

    session_id, tools, cancelled, listed, loaded = run(main())
    lines = tools.text.splitlines()
    assert lines[0] == "PERMISSION once"  # by kind, although allow-always came first
    assert lines[1] == 'READ "line two\\n"'
    assert lines[2] == "WRITE ok"
    assert lines[3] == 'TERMINAL exit=0 output="from the terminal\\n"'
    with open(os.path.join(work, "out.txt"), encoding="utf-8") as handle:
        assert handle.read() == "written by the SDK agent\n"
    assert asked == [(python_sdk[0], ["-c", "print('from the terminal')"], work)]
    assert cancelled.stop_reason == "cancelled"
    assert [entry["sessionId"] for entry in listed] == [session_id]
    assert [m["role"] for m in loaded.history][:2] == ["user", "agent"]
    assert loaded.history[0]["text"] == "tools"


def test_python_sdk_agent_from_the_command_line(python_sdk, work, tmp_path):
    agent = tools_agent(python_sdk)
    env = {"SDK_AGENT_STORE": str(tmp_path / "store.json")}
    code, out, err = cli(agent, ["--cwd", work, "--allow", "always", "tools"], env=env)
    assert code == 0, err
    assert out.splitlines()[0] == "PERMISSION always"
    assert 'TERMINAL exit=0 output="from the terminal\\n"' in out
    code, out, err = cli(agent, ["--cwd", work, "--no", "tools"], env=env)
    assert code == 0, err
    assert out.splitlines()[0] == "PERMISSION no"
    assert "TERMINAL refused: Refused: the user did not allow running this command" in out
    code, out, err = cli(agent, ["--cwd", work, "tools"], stdin="3\n", env=env)  # piped: nobody to ask
    assert "TERMINAL refused" in out
    code, out, err = cli(agent, ["--cwd", work, "--list-sessions"], env=env)
    assert code == 0, err
    first = out.splitlines()[0].split()[0]
    code, out, err = cli(agent, ["--cwd", work, "--resume", first, "hello"], env=env)
    assert code == 0, err
    assert "(resuming session %s:" % first in out and out.rstrip().endswith("one two three")


# ------------------------------------------------------------------ the TypeScript SDK's example


def ts_agent(ts_sdk):
    return "node %s" % os.path.join(ts_sdk, "dist", "examples", "agent.js")


def test_typescript_sdk_example_agent_from_the_library(ts_sdk, work):
    async def main():
        async with Client(ts_agent(ts_sdk), cwd=work, permission="allow") as client:
            await client.initialize()
            session = await client.new_session(work)
            allowed = await session.prompt("change the configuration")
            slow = session.prompt("again")
            async for update in slow:
                await slow.cancel()
                break
            cancelled = await slow
            with pytest.raises(NotAdvertised):
                await client.load_session(session.session_id, work)
            return session, allowed, cancelled

    session, allowed, cancelled = run(main())
    assert allowed.stop_reason == "end_turn"
    assert "successfully updated the configuration" in allowed.text
    assert [(c["title"], c["status"]) for c in session.tool_calls.values()][:2] == [
        ("Reading project files", "completed"), ("Modifying critical configuration file", "completed")]
    assert cancelled.stop_reason == "cancelled"


def test_typescript_sdk_example_agent_from_the_command_line(ts_sdk, work):
    code, out, err = cli(ts_agent(ts_sdk), ["--cwd", work, "--no", "change it"])
    assert code == 0, err
    assert "[edit]" in out and "skip the configuration update" in out


# ------------------------------------------------------------------ an agent on the TypeScript SDK


def ts_tools_agent(ts_sdk):
    return "node %s %s" % (os.path.join(HERE, "ts_tools_agent.mjs"), ts_sdk)


def test_typescript_sdk_agent_permission_fs_terminal_list_load(ts_sdk, work):
    async def main():
        async with Client(ts_tools_agent(ts_sdk), cwd=work, permission="always", terminal="allow") as client:
            await client.initialize()
            session = await client.new_session(work)
            tools = await session.prompt("tools")
            listed = await client.list_sessions()
            loaded = await client.load_session(session.session_id, work)
            return session.session_id, tools, listed, loaded

    session_id, tools, listed, loaded = run(main())
    assert tools.text.splitlines() == [
        "PERMISSION always", 'READ "line one\\nline two\\nline three\\n"', "WRITE ok",
        'TERMINAL exit=0 output="from the terminal\\n"']
    with open(os.path.join(work, "out.txt"), encoding="utf-8") as handle:
        assert handle.read() == "written by the TS agent\n"
    assert [entry["sessionId"] for entry in listed] == [session_id]
    assert loaded.history[0] == {"role": "user", "text": "tools"}


def test_typescript_sdk_agent_from_the_command_line(ts_sdk, work):
    code, out, err = cli(ts_tools_agent(ts_sdk), ["--cwd", work, "--allow", "once", "tools"])
    assert code == 0, err
    assert out.splitlines()[0] == "PERMISSION once"
    assert 'TERMINAL exit=0 output="from the terminal\\n"' in out
    code, out, err = cli(ts_tools_agent(ts_sdk), ["--cwd", work, "--no", "tools"])
    assert code == 0, err
    assert out.splitlines()[0] == "PERMISSION no" and "TERMINAL refused" in out
