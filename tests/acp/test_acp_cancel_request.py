"""`$/cancel_request`, both ways (ACP's request cancellation), over stdio and TCP: a
request the client gives up on (its timeout, `--timeout`) is named to the agent; a
request the agent gives up on cancels the client's handler (a permission question
waiting for a person, a terminal's wait for exit), which answers -32800."""
from __future__ import annotations

import asyncio
import json
import sys

import pytest

from acp import RequestTimeout
from acp_testlib import make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def cancels(log):
    return [msg["params"] for direction, msg in read_log(log)
            if direction == "C>A" and isinstance(msg, dict) and msg.get("method") == "$/cancel_request"]


def requests(log, method):
    return [msg for direction, msg in read_log(log)
            if direction == "C>A" and isinstance(msg, dict) and msg.get("method") == method]


def permission_given_up(tmp_path, person, turn):
    """A permission question asked of `person` (a policy), which the agent gives up
    after 0.3 s in the `turn` (CANCELREQ; CANCELWRONG names the id as a string): the
    answer the agent got."""
    params = {"toolCall": {"toolCallId": "c1", "title": "Edit"},
              "options": [{"optionId": "ok", "kind": "allow_once", "name": "OK"}]}

    async def main():
        async with make_client(permission=person) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return (await session.prompt("%s session/request_permission %s" % (turn, json.dumps(params)))).text

    text = run(main())
    return json.loads(text[len("RAW-RESULT "):])


def test_a_request_that_times_out_is_cancelled_at_the_agent(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            await client.initialize()
            with pytest.raises(RequestTimeout):
                await client.request("_fake/echo", {"delay": 30, "value": 1}, timeout=0.3)
            # A caller cancelled while it waits gives the request up too.
            waiting = asyncio.ensure_future(client.request("_fake/echo", {"delay": 30, "value": 2}))
            await asyncio.sleep(0.3)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert (await client.request("_fake/echo", {"value": 3})) == {"value": 3}

    run(main())
    echoes = requests(log, "_fake/echo")
    assert cancels(log) == [{"requestId": echoes[0]["id"]}, {"requestId": echoes[1]["id"]}]


def test_the_command_lines_timeout_cancels_the_request(tmp_path):
    log = str(tmp_path / "agent.log")
    env = {"FAKE_ACP_LOG": log, "FAKE_ACP_HANG": "session/list"}
    code, _, err = run_cli(["--timeout", "0.5", "--list-sessions"], env=env)
    assert code == 1 and "did not answer session/list within 0.5 s" in err
    listed = requests(log, "session/list")
    assert cancels(log) == [{"requestId": listed[0]["id"]}]


def test_a_permission_question_the_agent_gives_up_is_cancelled_and_answered(tmp_path):
    asked, ended = [], []

    async def person(request):  # a person who never answers
        asked.append(request.title)
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(request.title)

    answer = permission_given_up(tmp_path, person, "CANCELREQ")
    assert answer["error"] == {"code": -32800, "message": "Request cancelled"}
    assert asked == ["Edit"] and ended == ["Edit"]  # the question was withdrawn, not left waiting


@pytest.mark.skipif(sys.platform == "win32", reason="sleep(1) is POSIX")
def test_a_terminal_wait_the_agent_gives_up_is_answered_and_the_command_runs_on(tmp_path):
    plan = {"create": {"command": "sleep 2; echo done"}, "steps": ["cancelwait", "wait", "output", "release"]}

    async def main():
        async with make_client(terminal="allow") as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            result = await session.prompt("TERM " + json.dumps(plan))
            return json.loads(result.text[len("TERM-RESULT "):])

    create, cancelled, wait, output, release = run(main())
    assert cancelled["error"]["code"] == -32800
    assert wait == {"result": {"exitCode": 0, "signal": None}}  # only the wait was given up
    assert output["result"]["output"] == "done\n"


def test_a_cancel_naming_the_id_with_another_type_changes_nothing(tmp_path):
    """`"3"` does not name request 3 (ids match by value and type, ACP.md §2): the
    question stays, and the person's answer goes back."""
    async def person(request):
        await asyncio.sleep(1.0)  # answers after the agent's mistyped cancel came
        return "ok"

    answer = permission_given_up(tmp_path, person, "CANCELWRONG")
    assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": "ok"}}
