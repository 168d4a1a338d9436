"""Logging in (ACP.md §11), over stdio and TCP, against the fake agent asking for a
login (FAKE_ACP_AUTH): its methods listed with the exact command each runs, the
command run in the person's terminal only with consent (`--yes`, or an answer on the
terminal; `--no` or nobody to ask refuses), the agent started afresh and the refused
request tried once more; `--login [METHOD]` up front, `--logout`, and the library's
`login`, whose consent is the host's callback."""
from __future__ import annotations

import os
import sys

import pytest

import acp_testlib
from acp import AcpError, LoginFailed, LoginRefused
from acp_testlib import FAKE, OnTerminal, make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

LOGIN_LINE = "      $ %s %s login" % (sys.executable, FAKE)  # Copilot's form: the agent names it


@pytest.fixture
def auth(tmp_path):
    """The agent's environment: a login is needed, done once the marker file exists."""
    marker = str(tmp_path / "logged-in")
    return {"FAKE_ACP_AUTH": marker, "FAKE_ACP_LOG": str(tmp_path / "agent.log")}


def methods_sent(log):
    return [msg.get("method") for direction, msg in read_log(log) if direction == "C>A" and isinstance(msg, dict)]


def test_yes_runs_the_login_the_agent_names_then_the_session_opens(tmp_path, auth):
    code, out, err = run_cli(["--yes", "--folder", workspace(tmp_path), "hello"], env=auth)
    assert code == 0, err
    assert out == "Hello from the fake agent.\n"
    assert "The agent needs you to log in. It offers:" in err
    assert "  [1] Log in with Fake CLI (fake-copilot)" in err and LOGIN_LINE in err
    assert "Logging in with [1] (--yes)" in err
    assert "Logging in as someone (terminal: no)" in err  # the login program's own words
    assert "(logged in with fake-copilot)" in err
    assert os.path.exists(auth["FAKE_ACP_AUTH"])
    # Refused, logged in, started afresh (a new initialize), then opened.
    sent = methods_sent(auth["FAKE_ACP_LOG"])
    assert sent.count("initialize") == 2 and sent.count("session/new") == 2
    assert "authenticate" not in sent  # a terminal method is run, never sent


@pytest.mark.parametrize("flag,said", [("--no", "refused by --no"), (None, "nobody to ask on a terminal")])
def test_without_consent_nothing_runs(tmp_path, auth, flag, said):
    code, out, err = run_cli(([flag] if flag else []) + ["--folder", workspace(tmp_path), "hello"], env=auth)
    assert code == 1 and out == ""
    assert LOGIN_LINE in err and "(not logged in: %s" % said in err
    assert "Error: the agent needs a login, and none was done" in err
    assert not os.path.exists(auth["FAKE_ACP_AUTH"])
    assert methods_sent(auth["FAKE_ACP_LOG"]).count("session/new") == 1  # no retry


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal (pty) is POSIX")
@pytest.mark.parametrize("answer,logged_in", [("1", True), ("", False)])
def test_on_a_terminal_the_person_is_asked_and_the_login_uses_that_terminal(tmp_path, auth, answer, logged_in):
    screen = OnTerminal(["--folder", workspace(tmp_path), "hello"], env=auth)
    screen.wait_for("Which one? (its number; Enter: none) ")
    screen.type(answer + "\r")
    code, seen = screen.close()
    assert LOGIN_LINE in seen
    if logged_in:
        assert code == 0 and "Logging in as someone (terminal: yes)" in seen  # stdin: the terminal
        assert "Hello from the fake agent." in seen
    else:
        assert code == 1 and "(not logged in)" in seen and "Logging in as" not in seen
    assert os.path.exists(auth["FAKE_ACP_AUTH"]) is logged_in


def test_the_stable_terminal_method_runs_the_agents_own_program(tmp_path, auth):
    """ACP's `type: "terminal"`: the agent's program with `args` added and `env` set,
    offered only to a client that started the agent (not over TCP)."""
    code, out, err = run_cli(["--login", "fake-terminal", "--yes", "--folder", workspace(tmp_path), "hello"],
                             env=auth)
    if acp_testlib.TRANSPORT == "tcp":
        assert code == 1 and "no login method 'fake-terminal'" in err and "fake-copilot, fake-login" in err
        return
    assert code == 0, err
    assert "      with FAKE_LOGIN_NAME=tester" in err and LOGIN_LINE in err
    assert "Logging in as tester" in err


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal (pty) is POSIX")
def test_one_method_asks_yes_or_no(tmp_path, auth):
    screen = OnTerminal(["--login", "fake-copilot", "--folder", workspace(tmp_path), "hello"], env=auth)
    screen.wait_for("Log in with [1]? [y/N] ")
    screen.type("y\r")
    code, seen = screen.close()
    assert code == 0 and "Hello from the fake agent." in seen


def test_the_agents_own_method_is_authenticate(tmp_path, auth):
    code, _, err = run_cli(["--login", "fake-login", "--yes", "--folder", workspace(tmp_path), "hello"], env=auth)
    assert code == 0, err
    assert "(the agent logs in by itself)" in err
    sent = methods_sent(auth["FAKE_ACP_LOG"])
    assert sent.count("authenticate") == 1 and sent.count("initialize") == 1


def test_login_alone_logs_in_and_exits(tmp_path, auth):
    code, out, err = run_cli(["--login", "--yes"], env=auth)
    assert code == 0 and out == "", err
    assert os.path.exists(auth["FAKE_ACP_AUTH"])
    assert "session/new" not in methods_sent(auth["FAKE_ACP_LOG"])


def test_a_failed_login_is_an_error_and_not_retried(tmp_path, auth):
    env = dict(auth, FAKE_ACP_LOGIN_STATUS="3")
    code, _, err = run_cli(["--yes", "--folder", workspace(tmp_path), "hello"], env=env)
    assert code == 1
    assert "login exited with status 3: not logged in" in err
    assert methods_sent(auth["FAKE_ACP_LOG"]).count("session/new") == 1


def test_a_prompt_needing_a_login_is_sent_again_after_it(tmp_path, auth):
    env = dict(auth, FAKE_ACP_AUTH_AT="prompt")
    code, out, err = run_cli(["--yes", "--folder", workspace(tmp_path), "hello"], env=env)
    assert code == 0, err
    assert out == "Hello from the fake agent.\n"
    assert methods_sent(auth["FAKE_ACP_LOG"]).count("session/prompt") == 2


def test_logout_where_advertised(tmp_path):
    log = str(tmp_path / "agent.log")
    code, _, err = run_cli(["--logout"], env={"FAKE_ACP_CAPS": "full", "FAKE_ACP_LOG": log})
    assert (code, err) == (0, "(logged out)\n")
    assert "logout" in methods_sent(log)
    code, _, err = run_cli(["--logout"])  # Copilot 1.0.102 advertises it; the plain fake does not
    assert code == 2 and "does not advertise auth.logout" in err


def test_the_library_logs_in_only_with_the_hosts_consent(tmp_path, auth, monkeypatch):
    # (over TCP the login program gets this process's environment: the agent's is unknown)
    monkeypatch.setenv("FAKE_ACP_AUTH", auth["FAKE_ACP_AUTH"])
    asked = []

    async def main():
        async with make_client(env=auth) as client:
            await client.initialize()
            with pytest.raises(LoginRefused):
                await client.login()  # no consent callback: nothing runs
            with pytest.raises(LoginRefused):
                await client.login(consent=lambda method: asked.append(method.id) or False)
            with pytest.raises(AcpError):
                await client.authenticate("fake-copilot")  # a terminal method is never sent
            assert not os.path.exists(auth["FAKE_ACP_AUTH"])
            method = await client.login(consent=lambda method: asked.append(method.id) or True)
            session = await client.new_session(workspace(tmp_path))
            return method, (await session.prompt("hello")).text

    method, text = run(main())
    assert asked == ["fake-copilot", "fake-copilot"] and method.id == "fake-copilot"
    assert method.command.argv == [sys.executable, FAKE, "login"]
    assert text == "Hello from the fake agent."


def test_the_library_reports_a_failed_login(tmp_path, auth):
    async def main():
        async with make_client(env=dict(auth, FAKE_ACP_LOGIN_STATUS="1")) as client:
            await client.initialize()
            with pytest.raises(LoginFailed):
                await client.login(consent=lambda method: True)

    run(main())
