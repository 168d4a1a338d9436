"""Elicitation (ACP.md §12), over stdio and TCP: the agent asks the person for
information, in a form or by a URL. Not advertised unless the host answers; the
host's answer is checked against the form's schema before it goes; a request that
does not fit is -32602; a cancelled turn withdraws the question. The command line
asks on the terminal (each field, then a review), declines with `--no` or nobody to
ask, and never opens a URL."""
from __future__ import annotations

import asyncio
import json
import sys

import pytest

from acp import elicitation
from acp.askers import ElicitationAsker
from acp.elicitation import ElicitationRequest
from acp_testlib import OnTerminal, make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

FORM = {"mode": "form", "message": "How should I refactor?",
        "requestedSchema": {"type": "object", "required": ["strategy", "files"],
                            "properties": {
                                "strategy": {"type": "string", "title": "Strategy",
                                             "oneOf": [{"const": "safe", "title": "Conservative"},
                                                       {"const": "bold", "title": "Aggressive"}]},
                                "files": {"type": "integer", "title": "Files at most", "minimum": 1, "maximum": 9},
                                "tests": {"type": "boolean", "title": "Run the tests", "default": True},
                                "note": {"type": "string", "maxLength": 10}}}}
URL = {"mode": "url", "message": "Authorize access to your repositories.", "elicitationId": "gh-1",
       "url": "https://xn--gthub-n4a.example/connect?e=gh-1"}


def ask(form):
    return "RAW elicitation/create " + json.dumps(form)


def answer_of(text):
    assert text.startswith("RAW-RESULT "), text
    return json.loads(text[len("RAW-RESULT "):])


async def prompts(client, tmp_path, *texts):
    await client.initialize()
    session = await client.new_session(workspace(tmp_path))
    return [(await session.prompt(text)).text for text in texts]


def test_not_advertised_unless_the_host_answers(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:
            return await prompts(client, tmp_path, ask(FORM))

    (text,) = run(main())
    assert answer_of(text)["error"]["code"] == -32601
    caps = [m["params"]["clientCapabilities"] for d, m in read_log(log)
            if d == "C>A" and isinstance(m, dict) and m.get("method") == "initialize"][0]
    assert "elicitation" not in caps


def test_the_hosts_answer_checked_against_the_form(tmp_path):
    answers = iter([elicitation.answer("accept", {"strategy": "bold", "files": 3}),
                    elicitation.answer("accept", {"strategy": "bold", "files": 30}),  # over maximum
                    elicitation.answer("accept", {"files": 3}),  # strategy is required
                    {"action": "maybe"}])
    seen = []

    def host(request):
        seen.append((request.mode, request.message, [f.name for f in request.fields]))
        return next(answers)

    async def main():
        async with make_client(elicitation=host) as client:
            return await prompts(client, tmp_path, *[ask(FORM)] * 4)

    texts = run(main())
    assert [answer_of(t)["result"] for t in texts] == [
        {"action": "accept", "content": {"strategy": "bold", "files": 3}},
        {"action": "decline"}, {"action": "decline"}, {"action": "decline"}]
    assert seen[0] == ("form", "How should I refactor?", ["strategy", "files", "tests", "note"])


@pytest.mark.parametrize("params,said", [
    ({"mode": "other", "message": "x"}, "mode must be form or url"),
    ({"mode": "form", "message": "x", "requestedSchema": {"type": "object",
                                                          "properties": {"f": {"type": "object"}}}},
     "a type this client cannot ask for"),
    ({"mode": "url", "message": "x", "url": "https://a.example"}, "needs url and elicitationId"),
])
def test_a_request_that_does_not_fit_is_invalid_params(tmp_path, params, said):
    async def main():
        async with make_client(elicitation="decline") as client:
            return await prompts(client, tmp_path, ask(params))

    error = answer_of(run(main())[0])["error"]
    assert error["code"] == -32602 and said in error["message"]


def test_a_url_accepted_then_completed(tmp_path):
    completed = []

    class Host:
        def __call__(self, request):
            return elicitation.answer("accept")

        def completed(self, request):
            completed.append(request.elicitation_id)

    async def main():
        async with make_client(elicitation=Host()) as client:
            texts = await prompts(client, tmp_path, ask(URL),
                                  'NOTIFY elicitation/complete {"elicitationId": "gh-1"}',
                                  'NOTIFY elicitation/complete {"elicitationId": "gh-1"}',  # already done: ignored
                                  'NOTIFY elicitation/complete {"elicitationId": "unknown"}')
            return texts

    texts = run(main())
    assert answer_of(texts[0])["result"] == {"action": "accept"}
    assert completed == ["gh-1"]


def test_a_cancelled_turn_withdraws_the_question(tmp_path):
    async def host(request):
        await asyncio.sleep(3600)  # a person who does not answer

    async def main():
        async with make_client(elicitation=host, env={"FAKE_ACP_IGNORE_CANCEL": "1"}) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt(ask(FORM))
            await asyncio.sleep(0.5)
            await turn.cancel()
            return (await turn).text

    assert answer_of(run(main()))["result"] == {"action": "cancel"}


@pytest.mark.parametrize("flag", ["--no", None])
def test_the_command_line_declines_without_a_person_to_ask(tmp_path, flag):
    code, out, err = run_cli(([flag] if flag else []) + ["--folder", workspace(tmp_path), ask(FORM)])
    assert code == 0, err
    assert answer_of(out.strip())["result"] == {"action": "decline"}


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal (pty) is POSIX")
def test_a_form_on_the_terminal_field_by_field_then_reviewed(tmp_path):
    screen = OnTerminal(["--folder", workspace(tmp_path), ask(FORM)])
    screen.wait_for("How should I refactor?")
    screen.wait_for("Strategy (strategy) [1=Conservative, 2=Aggressive]: ")
    screen.type("3\r")  # not a choice: asked again
    screen.wait_for("(expected one of: Conservative, Aggressive)")
    screen.type("Aggressive\r")
    screen.wait_for("Files at most (files) [a whole number]: ")
    screen.type("12\r")
    screen.wait_for("(expected at most 9)")
    screen.type("4\r")
    screen.wait_for('Run the tests (tests) [yes/no] (Enter: true): ')
    screen.type("\r")
    screen.wait_for("note (Enter: leave empty): ")
    screen.type("\r")
    screen.wait_for("Send them? [y: send, e: edit, n: decline] ")
    screen.type("y\r")
    code, seen = screen.close()
    assert code == 0, seen
    assert '    strategy: "bold"\n    files: 4\n    tests: true\n' in seen
    result = answer_of(seen[seen.index("RAW-RESULT "):].splitlines()[0])
    assert result["result"] == {"action": "accept", "content": {"strategy": "bold", "files": 4, "tests": True}}


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal (pty) is POSIX")
def test_a_url_is_shown_with_its_host_and_warnings_and_not_opened(tmp_path):
    screen = OnTerminal(["--folder", workspace(tmp_path), ask(URL)])
    screen.wait_for("Do you agree to open it? [y: yes, n: no; Enter: not now] ")
    screen.type("n\r")
    code, seen = screen.close()
    assert code == 0, seen
    assert "URL: https://xn--gthub-n4a.example/connect?e=gh-1" in seen
    assert "host: xn--gthub-n4a.example" in seen and "Punycode" in seen
    assert "Nothing is opened by this client" in seen
    assert answer_of(seen[seen.index("RAW-RESULT "):].splitlines()[0])["result"] == {"action": "decline"}


@pytest.mark.stdio_only  # (no agent involved)
def test_no_answer_in_time_declines():
    async def never():
        await asyncio.sleep(3600)

    written = []
    asker = ElicitationAsker(never, written.append, timeout=0.2)
    result = asyncio.run(asker(ElicitationRequest(FORM)))
    assert result == {"action": "decline"}
    assert "(no answer in 0.2 s: declined)" in "".join(written)


@pytest.mark.stdio_only  # (no agent involved)
def test_the_agents_pattern_is_not_run_here():
    """A regular expression of the agent's making could take any time to run on the
    person's answer ("(a+)+$" on thirty a's and a b): it is left to the agent."""
    form = {"mode": "form", "message": "x", "requestedSchema": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^(a+)+$", "maxLength": 100}}}}
    field = ElicitationRequest(form).fields[0]
    assert field.parse("a" * 30 + "b") == "a" * 30 + "b"  # returns at once


@pytest.mark.stdio_only  # (no agent involved)
def test_a_refusal_lists_at_most_forty_names():
    from acp.options import OptionError, resolve_mode

    class Session:
        modes = {"availableModes": [{"id": "mode-%d" % n} for n in range(1000)]}
        config_options = []

    with pytest.raises(OptionError) as info:
        resolve_mode(Session(), "none")
    assert str(info.value).endswith("mode-39 and 960 more")
