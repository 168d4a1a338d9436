"""An agent on another machine or OS, reached over TCP (ACP.md §8): the session's folder
is the agent's, so a folder that does not exist here is sent as given (the fake agent
plays a Windows agent whose `C:\\` is a folder of the test, as Wine maps a drive); the
client's own files and commands are not the agent's, and `fs/*` and `terminal/*` in
such a folder are refused saying so. Over stdio the agent is ours and local: a missing
folder stays a usage error."""
from __future__ import annotations

import json
import os

import pytest

from acp_testlib import fake_env, read_log, run, run_cli, start_tcp_agent, stop_tcp_agents
from acp import Client

FOLDER = "C:\\ws"


@pytest.fixture
def windows_agent(tmp_path):
    """A fake agent on TCP whose `C:\\ws` is tmp_path/drive_c/ws; yields (port, log)."""
    (tmp_path / "drive_c" / "ws").mkdir(parents=True)
    (tmp_path / "drive_c" / "ws" / "hello.txt").write_text("hi\n", encoding="utf-8")
    log = str(tmp_path / "agent.log")
    _, port = start_tcp_agent(fake_env(FAKE_ACP_DRIVE="C:=" + str(tmp_path / "drive_c"), FAKE_ACP_LOG=log,
                                       FAKE_ACP_STORE=str(tmp_path / "sessions.json")))
    yield port, log
    stop_tcp_agents()


def sent(log, method):
    return [msg["params"] for direction, msg in read_log(log)
            if direction == "C>A" and isinstance(msg, dict) and msg.get("method") == method]


def test_the_agents_folder_is_sent_as_given_and_a_prompt_runs(windows_agent):
    port, log = windows_agent
    code, out, err = run_cli(["--connect", str(port), "--folder", FOLDER, "--json", "Say", "hello"])
    assert code == 0, err
    assert sent(log, "session/new")[0]["cwd"] == FOLDER
    result = json.loads(out.splitlines()[-1])["result"]
    assert result["stopReason"] == "end_turn"

    code, out, err = run_cli(["--connect", str(port), "--folder", FOLDER, "--list-sessions"])
    assert code == 0, err
    assert result["sessionId"] in out
    assert sent(log, "session/list")[-1] == {"cwd": FOLDER}

    # Resumed without --folder: the session's own folder, as the agent lists it.
    code, out, err = run_cli(["--connect", str(port), "--resume", result["sessionId"], "--quiet", "again"])
    assert code == 0, err
    assert sent(log, "session/load")[-1]["cwd"] == FOLDER


def test_files_and_commands_in_the_agents_folder_are_refused_saying_why(windows_agent):
    port, _ = windows_agent

    async def main():
        async with Client(connect=port, terminal=True) as client:
            await client.initialize()
            session = await client.new_session(FOLDER)
            read = await session.prompt('RAW fs/read_text_file {"path": "C:\\\\ws\\\\hello.txt"}')
            term = await session.prompt('RAW terminal/create {"command": "echo", "args": ["hi"]}')
            return session.cwd, read.text, term.text

    cwd, read, term = run(main())
    assert cwd == FOLDER
    for text in (read, term):
        answer = json.loads(text[len("RAW-RESULT "):])
        assert answer["error"]["code"] == -32002, answer
        assert "Not on this machine: the session's folder C:\\ws is the agent's" in answer["error"]["message"]


def test_a_missing_posix_folder_goes_to_the_agent_which_refuses_it(tmp_path):
    _, port = start_tcp_agent(fake_env())
    try:
        missing = str(tmp_path / "missing")
        code, _, err = run_cli(["--connect", str(port), "--folder", missing, "hi"])
    finally:
        stop_tcp_agents()
    assert code == 1
    assert "could not start a session" in err and "Directory does not exist" in err and missing in err


def test_a_relative_missing_folder_is_a_usage_error_even_over_tcp():
    code, _, err = run_cli(["--connect", "1", "--folder", "no/such/folder", "hi"])
    assert code == 2
    assert "is not a folder here" in err and "absolute path" in err


def test_over_stdio_a_missing_folder_is_a_usage_error(tmp_path):
    for folder in (str(tmp_path / "missing"), FOLDER):
        code, _, err = run_cli(["--folder", folder, "hi"])
        assert code == 2 and "is not a folder" in err, err


def test_the_library_sends_a_missing_folder_as_given(tmp_path, monkeypatch):
    """`new_session` makes a folder absolute only when it is one here."""
    monkeypatch.chdir(tmp_path)  # (the relative folder below: on Windows no path leads across drives)
    _, port = start_tcp_agent(fake_env(FAKE_ACP_DRIVE="C:=" + str(tmp_path)))
    (tmp_path / "ws").mkdir()
    here = str(tmp_path / "ws")

    async def main():
        async with Client(connect=port) as client:
            await client.initialize()
            elsewhere = await client.new_session(FOLDER)
            rel = "ws"
            with pytest.raises(Exception) as refused:  # a local folder, made absolute: not the agent's
                await client.new_session(rel)
            return elsewhere.cwd, refused.value

    try:
        cwd, refused = run(main())
    finally:
        stop_tcp_agents()
    assert cwd == FOLDER
    assert "Directory does not exist or cannot be accessed: %s" % here in str(refused)
