"""ACP.md §1 (framing) against the fake agent: raw U+2028, multi-MB lines both ways,
bad lines ignored in both directions, stderr of a failed start surfaced, timeouts."""
from __future__ import annotations

import asyncio

import pytest

from acp_testlib import make_client, read_log, run, workspace
from acp import AgentExited, LineTooLong, RequestTimeout

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def test_u2028_inside_strings_is_not_a_line_break(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            result = await session.prompt("UNICODE")
            return result

    result = run(main())
    assert result.text == "a\u2028b\u2029c \u65e5\u672c \U0001F30D \"q\" \\ \t\r\x0c end"


def test_five_megabyte_line_from_the_agent(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await session.prompt("BIG"), client.connection.bad_lines

    result, bad = run(main())
    assert len(result.text) == 5 * 1024 * 1024 and result.text.endswith("END")
    assert bad == 0


@pytest.mark.parametrize("scenario", ["BIG 2000000", "BIGANSWER 2000000"])
def test_a_line_over_the_limit_ends_the_connection_naming_the_limit(tmp_path, scenario):
    # The lost line may be an update or the very answer the turn waits for (which
    # used to be dropped, leaving the turn waiting for ever): either way the turn and
    # the connection fail at once, with the limit in the message.
    async def main():
        async with make_client(max_line=1024 * 1024) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            with pytest.raises(LineTooLong) as info:
                await session.prompt(scenario)
            with pytest.raises(LineTooLong):
                await client.request("_fake/echo", {"value": 1})
            return info.value

    error = run(main())
    assert error.limit == 1024 * 1024 and error.size > error.limit
    assert "over the limit of 1048576 bytes" in str(error)


def test_long_request_lines_are_sent_whole(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            value = "\u00e9\u65e5\U0001F30D" * 100000  # ~0.9 MB of UTF-8 in one line
            return value, await client.request("_fake/echo", {"value": value})

    value, answer = run(main())
    assert answer == {"value": value}


def test_junk_from_the_agent_never_breaks_the_connection(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            junk = await session.prompt("JUNK")
            after = await session.prompt("hello")
            return junk, after, client.connection.bad_lines

    junk, after, bad = run(main())
    assert junk.text == "still fine" and after.text == "Hello from the fake agent."
    assert bad == 3  # "not json at all", "[1,2" and the non-UTF-8 line
    # A request with an id but a bad method got a JSON-RPC error back with that id.
    answers = [m for d, m in read_log(log) if d == "C>A" and isinstance(m, dict) and m.get("id") == "junk-1"]
    assert answers and answers[0]["error"]["code"] == -32600


def test_agent_drops_a_malformed_line_and_a_request_times_out(tmp_path):
    async def main():
        async with make_client(request_timeout=0.5) as client:
            await client.initialize(timeout=30)  # only the dropped request should time out
            await client.connection.send_raw(b'{"jsonrpc":"2.0","id":77,"method":"session/list"\n')
            with pytest.raises(RequestTimeout) as info:
                await client.request("_fake/ignore", {})
            assert "_fake/ignore" in str(info.value)
            # Nothing is stuck: the next request is answered.
            return await client.request("session/list", {}, timeout=10)

    assert run(main()) == {"sessions": []}


@pytest.mark.stdio_only  # about the agent as our child process
@pytest.mark.parametrize("start", ["fail", "fail-late"])
def test_failed_start_reports_the_stderr_line(tmp_path, start):
    # "fail-late": the agent stops reading first, so the client's write fails while the
    # agent still runs; the error must still be its exit, not the broken pipe.
    async def main():
        async with make_client(env={"FAKE_ACP_START": start}) as client:
            if start == "fail-late":
                await asyncio.sleep(1)  # (its stdin closed by now: the write fails at once)
            with pytest.raises(AgentExited) as info:
                await client.initialize()
            return info.value

    exc = run(main())
    assert exc.returncode == 1
    assert "Offline mode requires a local model provider" in str(exc)
    assert "status 1" in str(exc)
