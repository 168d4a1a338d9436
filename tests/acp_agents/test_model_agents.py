"""Our client (library and command line) against two agents that need a model, each
given a fake one on 127.0.0.1 (fake_models.py) and kept offline: Claude Code's ACP
adapter (npm @zed-industries/claude-code-acp, Claude Code inside it) against a fake
Anthropic Messages API, and Gemini CLI's `--acp` (npm @google/gemini-cli) against a fake
Gemini API. Pinned and installed by `make acp-agents`, run by `make interop-acp-agents`
(docs/ACP.md §10); optional: skipped, with the reason, when they cannot be installed or
what is installed is not the pin.

Offline: each agent gets its model's URL, a fake key, the switches that turn its
telemetry, update checks and feature flags off, and the fake as its HTTP(S) proxy for
every other host, so that anything still trying the internet arrives at the fake as a
`CONNECT`, which each test asserts never came.

Each test takes 10 to 40 s (slow, and why): the agents are Node.js programs of 10 to
100 MB that take a few seconds per process to start, and each test starts two (the
library: a session, then its load in a new process) or four (the command line: one run
per option) of them; together about a minute and a half in CI."""
import glob
import json
import os
import re
from types import SimpleNamespace

import pytest

from conftest import cli, cli_interrupted, run, texts
from fake_models import SLOW_CHUNKS, TERMINAL_COMMAND, WRITTEN, FakeAnthropic, FakeGemini
from acp import Client, NotAdvertised, permissions

OLD = "to be replaced\n"


@pytest.fixture
def work(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "hello.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    # An existing file to write: gemini-cli 0.61.0 cannot create a file through the client
    # (it reads it first, and takes the client's "not found" error, which its ACP SDK
    # hands over as a plain object, not an Error, for a failure).
    (root / "out.txt").write_text(OLD, encoding="utf-8")
    return str(root)


def base_env(model, home):
    """This environment without other model settings, with HOME in the test's folder and
    the fake as the proxy for every host but 127.0.0.1."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_", "GEMINI_", "GOOGLE_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.pop("PYTHONPATH", None)
    os.makedirs(home, exist_ok=True)
    env.update(HOME=home, HTTPS_PROXY=model.url, HTTP_PROXY=model.url, https_proxy=model.url,
               http_proxy=model.url, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def assert_offline(model, paths, blocked=()):
    """Every request the fake saw was one of its API's, or a proxy CONNECT (which it
    refuses, so nothing left the machine) to one of the `blocked` hosts we know of."""
    seen = model.paths()
    assert seen, "the agent never asked the fake model"
    connects = [path for method, path, _ in model.requests if method == "CONNECT"]
    assert set(connects) <= set(blocked), connects
    assert all(path in connects or any(path.endswith(p) for p in paths) for path in seen), seen


def tool_lines(text):
    """The fake model's summary of a tools turn: {"READ": result, ...}."""
    lines = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("READ", "WRITE", "TERMINAL"):
            lines[name] = json.loads(value)
    return lines


def tools_turn(agent, work, env):
    """The tools turn from the command line, `--allow once`, `--json`: the fake model's
    summary of the tool results and the session's id."""
    code, out, err = cli(agent, ["--cwd", work, "--json", "--allow", "once", "fake:tools " + work], env=env)
    assert code == 0, err
    *updates, last = [json.loads(line) for line in out.splitlines()]
    assert last["result"]["stopReason"] == "end_turn"
    return tool_lines(texts(line["update"] for line in updates)), last["sessionId"]


def interrupted(agent, work, env):
    """Ctrl-C in the command line at the slow turn's first chunk: the turn cancelled."""
    code, out, err = cli_interrupted(agent, ["--cwd", work, "fake:slow"], "tick 0.", env=env)
    assert code == 130, err
    assert "(turn cancelled)" in err and "tick %d." % (SLOW_CHUNKS - 1) not in out


def read(work, name):
    with open(os.path.join(work, name), encoding="utf-8") as handle:
        return handle.read()


class Recorder:
    """A permission policy choosing allow-once by kind, and a terminal policy allowing
    once, each keeping what it was asked."""

    def __init__(self):
        self.asked, self.terminals = [], []

    def permission(self, request):
        choice = permissions.allow_once(request)
        self.asked.append(([o["kind"] for o in request.options], choice))
        return choice

    def terminal(self, request):
        self.terminals.append((request.command, request.args, request.cwd))
        return "once"


def converse(agent, work, env, recorder, before_load=lambda: None):
    """One agent through the library: initialize, a streamed turn, the tools turn, a slow
    turn cancelled at its first chunk, session/list where advertised (else None: refused
    before sending), then session/load of the session in a second process."""
    async def main():
        async with Client(agent, cwd=work, env=env, permission=recorder.permission,
                          terminal=recorder.terminal) as client:
            info = await client.initialize()
            session = await client.new_session(work)
            hello = session.prompt("fake:hello")
            streamed = [update async for update in hello]
            hello = await hello
            tools = await session.prompt("fake:tools " + work)
            slow = session.prompt("fake:slow")
            async for update in slow:  # the first chunk: the turn is running
                await slow.cancel()
                break
            cancelled = await slow
            try:
                listed = await client.list_sessions(cwd=work)
            except NotAdvertised:
                listed = None
        before_load()
        async with Client(agent, cwd=work, env=env) as client:  # a new process
            await client.initialize()
            loaded = await client.load_session(session.session_id, work)
        return SimpleNamespace(info=info, session=session, streamed=streamed, hello=hello, tools=tools,
                               cancelled=cancelled, listed=listed, loaded=loaded)

    result = run(main(), timeout=120)  # two agent processes, a few seconds each
    chunks = [u for u in result.streamed if u.get("sessionUpdate") == "agent_message_chunk"]
    assert len(chunks) >= 2 and texts(chunks) == result.hello.text == "Hello from the fake model."
    assert result.hello.stop_reason == "end_turn" and result.cancelled.stop_reason == "cancelled"
    assert [m["role"] for m in result.loaded.history][:2] == ["user", "agent"]
    assert result.loaded.history[0]["text"].endswith("fake:hello")  # gemini-cli: after a context
    return result


# ------------------------------------------------------------------ Claude Code's adapter


def claude(package):
    return "node %s" % os.path.join(package, "dist", "index.js")


def claude_env(model, tmp_path):
    home = str(tmp_path / "home")
    env = base_env(model, home)
    env.update(
        ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-fake",
        CLAUDE_CONFIG_DIR=os.path.join(home, ".claude"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_FAST_MODE="1",  # else it asks api.anthropic.com about "fast mode"
        IS_SANDBOX="1",  # else, as root (CI), Claude Code refuses the adapter's options
    )
    return env


CLAUDE_PATHS = ("/v1/messages", "/v1/messages/count_tokens")
#: Claude Code 2.1.44 (inside the adapter) exports usage metrics for API-key users and,
#: before that, asks api.anthropic.com (/api/claude_code/organizations/metrics_enabled)
#: whether the organisation allows it: at the latest when the process exits, whatever
#: DISABLE_TELEMETRY and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC say. The fake, as the
#: proxy, refuses it.
CLAUDE_BLOCKED = ("api.anthropic.com:443",)


def test_claude_code_from_the_library(claude_code_acp, work, tmp_path):
    recorder = Recorder()
    with FakeAnthropic() as model:
        result = converse(claude(claude_code_acp), work, claude_env(model, tmp_path), recorder)
    assert_offline(model, CLAUDE_PATHS, CLAUDE_BLOCKED)
    assert result.info["agentInfo"]["name"] == "@zed-industries/claude-code-acp"
    caps = result.info["agentCapabilities"]
    assert caps["loadSession"] is True and "list" in caps["sessionCapabilities"]

    # Read needs no permission; Write and Bash are asked, allow-always offered first.
    assert recorder.asked == [(["allow_always", "allow_once", "reject_once"], "allow")] * 2
    lines = tool_lines(result.tools.text)
    assert lines["READ"].startswith("line one\nline two\nline three\n")  # through our fs/read_text_file
    assert "updated successfully" in lines["WRITE"] and read(work, "out.txt") == WRITTEN
    assert recorder.terminals == [(TERMINAL_COMMAND, [], work)]  # a shell line, asked about, then run
    assert "Exited with code 0" in lines["TERMINAL"] and "from the terminal" in lines["TERMINAL"]
    calls = result.session.tool_calls.values()
    assert sorted(c.get("kind") for c in calls) == ["edit", "execute", "read"]
    assert all(c.get("status") == "completed" for c in calls)

    assert result.session.session_id in [entry["sessionId"] for entry in result.listed]
    assert result.loaded.history[0]["text"] == "fake:hello"


def test_claude_code_from_the_command_line(claude_code_acp, work, tmp_path):
    with FakeAnthropic() as model:
        env = claude_env(model, tmp_path)
        agent = claude(claude_code_acp)
        lines, session_id = tools_turn(agent, work, env)
        assert lines["READ"].startswith("line one\n") and "from the terminal" in lines["TERMINAL"]
        assert read(work, "out.txt") == WRITTEN

        (tmp_path / "work" / "out.txt").write_text(OLD, encoding="utf-8")
        code, out, err = cli(agent, ["--cwd", work, "--allow", "reject", "fake:tools " + work], env=env)
        assert code == 0, err
        assert "[edit] FAILED" in out and "TERMINAL" not in out  # the adapter ends the turn
        assert read(work, "out.txt") == OLD
        interrupted(agent, work, env)
        code, out, err = cli(agent, ["--cwd", work, "--list-sessions"], env=env)
        assert code == 0, err
        assert session_id in out
        code, out, err = cli(agent, ["--cwd", work, "--resume", session_id, "fake:hello"], env=env)
        assert code == 0, err
        assert "(resuming session %s:" % session_id in out
        assert out.rstrip().endswith("Hello from the fake model.")
    assert_offline(model, CLAUDE_PATHS, CLAUDE_BLOCKED)


# ------------------------------------------------------------------ Gemini CLI


def gemini(package):
    return "node %s --acp" % os.path.join(package, "bundle", "gemini.js")


def gemini_env(model, tmp_path):
    home = str(tmp_path / "home")
    env = base_env(model, home)
    settings = os.path.join(home, ".gemini")
    os.makedirs(settings, exist_ok=True)
    with open(os.path.join(settings, "settings.json"), "w", encoding="utf-8") as handle:
        json.dump({"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                   "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}, handle)
    env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="fake-key",
               GEMINI_CLI_NO_RELAUNCH="1")  # one process, not a child relaunched with more heap
    return env


def age_sessions(home):
    """Gemini CLI 0.61.0 names a session's file by the minute it started and its id, and a
    process loading a session first starts recording it anew, under the current minute:
    within the same minute, that is the same file, emptied before it is read, and the load
    fails ("No previous sessions found"). A user resumes an older session; so do the
    tests: the files are renamed to an earlier minute before loading."""
    for chats in glob.glob(os.path.join(home, ".gemini", "tmp", "*", "chats")):
        for name in os.listdir(chats):
            match = re.match(r"session-[0-9T-]+-([0-9a-f]{8})\.jsonl?$", name)
            if match:
                os.rename(os.path.join(chats, name),
                          os.path.join(chats, "session-2000-01-01T00-00-%s.jsonl" % match.group(1)))


GEMINI_PATHS = (":streamGenerateContent", ":generateContent", ":countTokens")


def test_gemini_cli_from_the_library(gemini_cli, work, tmp_path):
    recorder = Recorder()
    with FakeGemini() as model:
        env = gemini_env(model, tmp_path)
        result = converse(gemini(gemini_cli), work, env, recorder, lambda: age_sessions(env["HOME"]))
    assert_offline(model, GEMINI_PATHS)
    assert result.info["agentInfo"]["name"] == "gemini-cli"
    assert result.info["agentCapabilities"]["loadSession"] is True
    assert result.listed is None  # no sessionCapabilities.list: refused before sending

    # Reading is not asked; writing and the shell are, allow-always offered first.
    assert recorder.asked == [(["allow_always", "allow_once", "reject_once"], "proceed_once")] * 2
    lines = tool_lines(result.tools.text)
    assert lines["READ"] == "line one\nline two\nline three\n"  # through our fs/read_text_file
    assert read(work, "out.txt") == WRITTEN  # through our fs/write_text_file
    # gemini-cli runs the shell itself (after the permission), never a client terminal.
    assert recorder.terminals == [] and "from the terminal" in lines["TERMINAL"]
    assert sorted(c.get("kind") for c in result.session.tool_calls.values()) == ["edit", "execute", "read"]


def test_gemini_cli_from_the_command_line(gemini_cli, work, tmp_path):
    with FakeGemini() as model:
        env = gemini_env(model, tmp_path)
        agent = gemini(gemini_cli)
        lines, session_id = tools_turn(agent, work, env)
        assert lines["READ"] == "line one\nline two\nline three\n" and "from the terminal" in lines["TERMINAL"]
        assert read(work, "out.txt") == WRITTEN

        (tmp_path / "work" / "out.txt").write_text(OLD, encoding="utf-8")
        code, out, err = cli(agent, ["--cwd", work, "--no", "fake:tools " + work], env=env)
        assert code == 0, err
        lines = tool_lines(out)  # each refusal goes back to the model, the turn goes on
        assert "canceled by the user" in lines["WRITE"] and "canceled by the user" in lines["TERMINAL"]
        assert read(work, "out.txt") == OLD
        interrupted(agent, work, env)
        code, out, err = cli(agent, ["--cwd", work, "--list-sessions"], env=env)
        assert code == 2 and "sessionCapabilities.list" in err
        age_sessions(env["HOME"])
        code, out, err = cli(agent, ["--cwd", work, "--resume", session_id, "fake:hello"], env=env)
        assert code == 0, err
        assert "(resuming session %s:" % session_id in out
        assert out.rstrip().endswith("Hello from the fake model.")
    assert_offline(model, GEMINI_PATHS)
