"""ACP.md §5, session/request_permission: policies on real edits of real files, only
offered ids ever sent, `cancelled` for every pending request after a cancel."""
from __future__ import annotations

import asyncio

import pytest

from acp_testlib import make_client, read_log, run, workspace
from acp import PermissionRequest, TerminalAsker
from acp.askers import parse_answer

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

EDITED = "line one\nline two (edited)\nline three\n"
ORIGINAL = "line one\nline two\nline three\n"


def edit_with(tmp_path, permission):
    root = workspace(tmp_path)

    async def main():
        async with make_client(permission=permission) as client:
            await client.initialize()
            session = await client.new_session(root)
            result = await session.prompt("EDIT")
            [call] = session.tool_calls.values()
            return result, call

    result, call = run(main())
    with open(root + "/hello.txt", encoding="utf-8") as handle:
        return result, call, handle.read()


def test_allow_once_lets_the_edit_happen(tmp_path):
    result, call, text = edit_with(tmp_path, "allow")
    assert text == EDITED and call["status"] == "completed"
    assert call["rawOutput"]["outcome"] == "allow_once"


def test_reject_is_the_default_and_leaves_the_file_alone(tmp_path):
    result, call, text = edit_with(tmp_path, None)
    assert text == ORIGINAL and call["status"] == "failed"
    assert "Info: Operation cancelled by user" in result.text  # still end_turn (ACP.md §5)
    assert result.stop_reason == "end_turn"


def test_async_callback_sees_the_request_and_chooses(tmp_path):
    seen = []

    async def policy(request):
        seen.append(request)
        await asyncio.sleep(0)
        return "allow_always"

    result, call, text = edit_with(tmp_path, policy)
    assert text == EDITED and call["rawOutput"]["outcome"] == "allow_always"
    [request] = seen
    assert request.option_ids == ["allow_once", "allow_always", "reject_once"]
    assert request.tool_call_id == call["toolCallId"]  # shared id (ACP.md §4)
    assert request.title == "Edit file"


def test_an_id_that_was_not_offered_is_never_sent(tmp_path):
    result, call, text = edit_with(tmp_path, lambda request: "reject_always")
    assert text == ORIGINAL
    assert call["rawOutput"]["message"] == "Permission denied (cancelled)."


def test_a_raising_policy_gives_an_error_response_not_a_dead_connection(tmp_path):
    def policy(request):
        raise RuntimeError("boom")

    result, call, text = edit_with(tmp_path, policy)
    assert text == ORIGINAL
    assert call["rawOutput"]["message"] == "Permission denied (error)."
    assert result.stop_reason == "end_turn"


def two_questions_then_cancel(tmp_path, log, policy, until):
    """The fake agent's PERM2 turn (two permission requests at once) under `policy`,
    cancelled once `until(client)` holds; the turn's result."""
    async def main():
        async with make_client(log=log, permission=policy) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("PERM2")
            while not until(client):
                await asyncio.sleep(0.01)
            await turn.cancel()
            return await turn

    return run(main())


def test_cancel_answers_every_pending_request_cancelled(tmp_path):
    log = str(tmp_path / "agent.log")
    asked = []

    async def never(request):
        asked.append(request.tool_call_id)
        await asyncio.sleep(3600)

    assert two_questions_then_cancel(tmp_path, log, never, lambda client: len(asked) == 2).stop_reason == "cancelled"
    entries = read_log(log)
    ids = [m["id"] for d, m in entries if d == "A>C" and m.get("method") == "session/request_permission"]
    answers = {m["id"]: m["result"] for d, m in entries if d == "C>A" and m.get("id") in ids and "result" in m}
    assert ids == [0, 1]
    assert answers == {0: {"outcome": {"outcome": "cancelled"}}, 1: {"outcome": {"outcome": "cancelled"}}}


def test_terminal_asker_reads_answers_and_defaults_to_deny():
    request = PermissionRequest("s", {"toolCallId": "c", "title": "Edit file", "kind": "edit",
                                      "rawInput": {"diff": "-a\n+b\n"}},
                                [{"optionId": "allow_once", "kind": "allow_once", "name": "Allow once"},
                                 {"optionId": "allow_always", "kind": "allow_always", "name": "Always allow"},
                                 {"optionId": "reject_once", "kind": "reject_once", "name": "Deny"}])
    assert parse_answer("1", request) == "allow_once"
    assert parse_answer(" always ", request) == "allow_always"
    assert parse_answer("Deny", request) == "reject_once"
    assert parse_answer("y", request) == "allow_once"
    assert parse_answer("allow always", request) == "allow_always"  # the labels shown
    assert parse_answer("reject", request) == "reject_once"
    assert parse_answer("", request) == "reject_once"
    assert parse_answer("9", request) is not None and parse_answer("9", request) not in request.option_ids

    async def ask(lines):
        written = []
        queue = list(lines)

        async def readline():
            return queue.pop(0) if queue else None

        choice = await TerminalAsker(readline, written.append)(request)
        return choice, "".join(written)

    choice, text = asyncio.run(ask(["what?", "2"]))
    assert choice == "allow_always"
    assert "Permission requested: Edit file (edit)" in text and "+b" in text
    assert "[1] allow once  [2] allow always  [3] reject" in text and "Please answer" in text
    assert asyncio.run(ask([]))[0] == "reject_once"  # end of input denies


def test_only_what_the_person_was_shown_and_the_documented_words_answer():
    """The agent names its options: an allow option named "n" must not turn the
    documented refusal into consent, nor a name equal to a label take that label's
    place. Answers are a number, a label shown, or y/a/n; one that fits two different
    choices is asked again, and `y` never grants `allow_always`."""
    tricky = PermissionRequest("s", {"title": "Delete the repository"},
                               [{"optionId": "go", "kind": "allow_always", "name": "n"},
                                {"optionId": "stop", "kind": "reject_once", "name": "y"}])
    assert parse_answer("n", tricky) == "stop"
    assert parse_answer("no", tricky) == "stop"
    assert parse_answer("y", tricky) not in ("go", "stop")  # no allow-once offered: asked again
    assert parse_answer("go", tricky) not in ("go", "stop")  # an id is never shown
    assert parse_answer("a", tricky) == "go" and parse_answer("1", tricky) == "go"
    assert parse_answer("", tricky) == "stop"

    posing = PermissionRequest("s", {"title": "x"},
                               [{"optionId": "once", "kind": "allow_once", "name": "Allow once"},
                                {"optionId": "odd", "kind": "something_new", "name": "allow once"},
                                {"optionId": "no_reject", "kind": "allow_always", "name": "Always"}])
    assert parse_answer("allow once", posing) not in ("once", "odd")  # two choices fit: asked again
    assert parse_answer("2", posing) == "odd"
    assert parse_answer("n", posing) is None  # a refusal with no reject option: cancelled

    async def ask():
        written, answers = [], ["n"]

        async def readline():
            return answers.pop(0) if answers else None

        return await TerminalAsker(readline, written.append)(tricky), "".join(written)

    choice, text = asyncio.run(ask())
    assert choice == "stop" and "[1] allow always  [2] reject" in text


def test_the_askers_of_one_console_serve_one_event_loop_after_another():
    """The console of stdin outlives an `asyncio.run` (a program may run several): its
    locks were made once and bound to the first loop, so two questions at once in a
    later loop failed ("bound to a different event loop")."""
    asker = TerminalAsker(None, lambda text: None)

    async def two_at_once():
        async def readline():
            await asyncio.sleep(0)
            return "y"

        asker.readline = readline
        request = PermissionRequest("s", {"title": "x"}, [{"optionId": "a", "kind": "allow_once"}])
        return await asyncio.gather(asker(request), asker(request))

    assert asyncio.run(two_at_once()) == ["a", "a"]
    assert asyncio.run(two_at_once()) == ["a", "a"]


def test_two_questions_at_once_are_asked_one_after_the_other(tmp_path):
    """A person answers the question on the screen right above the cursor. With two
    permission requests at once, the second question is shown only once the first has
    its answer; before, both were on the screen and the line typed for the second went
    to the first."""
    log = str(tmp_path / "agent.log")
    written, arrived, answered = [], [], []

    async def readline():
        while len(arrived) < 2:  # both requests are here: a question shown is on the screen
            await asyncio.sleep(0.01)
        screen = "".join(written)
        last = screen[screen.rindex("Permission requested: "):]
        return "y" if last.startswith("Permission requested: Run 1") else "n"  # allow 1, refuse 2

    asker = TerminalAsker(readline, written.append)

    async def policy(request):
        arrived.append(request.title)
        choice = await asker(request)
        answered.append(request.title)
        return choice

    # Cancelled once both answers are sent (a cancel before would answer them cancelled).
    two_questions_then_cancel(tmp_path, log, policy,
                              lambda client: len(answered) == 2 and client.connection.peer.handler_tasks == 0)
    entries = read_log(log)
    titles = {m["id"]: m["params"]["toolCall"]["title"] for d, m in entries
              if d == "A>C" and m.get("method") == "session/request_permission"}
    answers = {titles[m["id"]]: m["result"]["outcome"] for d, m in entries
               if d == "C>A" and m.get("id") in titles and "result" in m}
    assert answers == {"Run 1": {"outcome": "selected", "optionId": "allow_once"},
                       "Run 2": {"outcome": "selected", "optionId": "reject_once"}}
    screen = "".join(written)
    assert screen.index("Run 1") < screen.index("Answer") < screen.index("Run 2")


def test_unknown_policy_name_is_refused():
    with pytest.raises(ValueError):
        make_client(permission="sometimes")
