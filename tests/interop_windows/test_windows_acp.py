"""ACP with the Windows CLI: `copilot.exe --acp --port P` and `--acp --stdio` under
Wine 10, driven by this project's ACP client (`python.exe -m acp`) from the Windows
CPython: one prompt whose edit asks one permission question, allowed; the CLI writes
the file (ACP.md §5)."""

import os
import re

import pytest

import copilot_harness as H
from fake_model import Turn
import wine_root as W

pytestmark = pytest.mark.interop


def _edit_turn(root, fake_model, workspace, text):
    path = workspace + "\\hello.py"
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 42"}),
                      Turn.say(text))
    return root.host(path)


def _check_turn(status, out, err, host_path, text):
    """The turn's output and its --verbose protocol log: ``fs/*`` methods the agent called."""
    assert status == 0, out + err
    # One permission question (the edit's), allowed by --yes; the CLI wrote the file.
    assert len(re.findall(r'"method": ?"session/request_permission"', err)) == 1, err
    assert H.read(host_path) == "def hello():\n    return 42\n"
    assert text in out and "[edit] done" in out, out
    return re.findall(r'"method": ?"(fs/[a-z_]+)"', err)


def test_acp_over_tcp(root, workspace, copilot_home, cli_env, fake_model, logdir):
    port = H.free_port()
    cli_logs = root.win(os.path.join(logdir, "cli-tcp"))
    argv = root.argv(["wine", root.exe, "--acp", "--port", str(port), "--log-level", "all",
                      "--log-dir", cli_logs], workspace, cli_env)
    agent = W.FileProc(argv, os.path.join(logdir, "agent-tcp.log"))
    try:
        H.wait_until(lambda: H.tcp_listening(port) or agent.proc.poll() is not None, 90,
                     message="copilot.exe --acp --port %d listening" % port)
        assert agent.proc.poll() is None, "the agent exited: %s" % agent.output()
        host_path = _edit_turn(root, fake_model, workspace, "Changed it over TCP.")
        status, out, err = root.run_python(["-m", "acp", "--connect", str(port), "--folder", workspace,
                                       "--yes", "--verbose", "Fix hello.py"], workspace,
                                      {"COPILOT_HOME": copilot_home})
        with open(os.path.join(logdir, "acp-tcp.log"), "w", encoding="utf-8") as fh:
            fh.write(out + err)
        fs_calls = _check_turn(status, out, err, host_path, "Changed it over TCP.")
        assert fs_calls == [], fs_calls   # CLI 1.0.102 reads and writes files itself (ACP.md §5)
        assert agent.proc.poll() is None  # the client left, the agent did not
    finally:
        agent.stop()


def test_acp_over_stdio(root, workspace, copilot_home, cli_env, fake_model, logdir):
    """The client starts copilot.exe itself: its standard streams are Windows pipes,
    which the CLI takes (only Unix pipes handed to Wine from outside fail)."""
    cli_logs = root.win(os.path.join(logdir, "cli-stdio"))
    host_path = _edit_turn(root, fake_model, workspace, "Changed it over stdio.")
    # (Unquoted: the client splits --agent with shlex's non-POSIX mode on Windows, which
    # keeps the quotes in the words; these paths have no spaces.)
    agent = "%s --acp --stdio --log-level all --log-dir %s" % ("Z:" + root.exe.replace("/", "\\"), cli_logs)
    env = dict(cli_env)
    status, out, err = root.run_python(["-m", "acp", "--agent", agent, "--folder", workspace,
                                   "--yes", "--verbose", "Fix hello.py"], workspace, env)
    with open(os.path.join(logdir, "acp-stdio.log"), "w", encoding="utf-8") as fh:
        fh.write(out + err)
    fs_calls = _check_turn(status, out, err, host_path, "Changed it over stdio.")
    assert fs_calls == [], fs_calls
