"""`relay`: the real Copilot CLI on a "remote machine" (its own mount and pid namespaces,
a tmpfs over /tmp, the workspace mounted at another path) uses `serve` outside, through
`python3 -m ide_protocol relay`.

The IDE's half runs outside, next to serve, and starts the CLI's half inside with
`nsenter` (as `docker exec` starts a program in a container). Inside, serve's socket and
lock folder do not exist, its pid is not visible, and the workspace has another name:
every way the CLI finds an IDE by itself fails, so what it finds is the relay's work.
"""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

import copilot_harness as H
import namespaces
from fake_model import Turn

pytestmark = pytest.mark.interop

INNER = "/tmp/remote-machine/project"  # the workspace as the CLI sees it
CONNECTED = r"connected: session (\S+), Copilot CLI %s" % re.escape(H.MCP_CLIENT_VERSION)


def _join(argv):
    return " ".join(shlex.quote(a) for a in argv)


def _lock_files(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".lock")) \
        if os.path.isdir(folder) else []


def test_the_cli_in_other_namespaces_works_with_serve_outside_through_the_relay(
        copilot_bin, tmux, workspace, copilot_home, cli_env, fake_model, logdir, tmp_path,
        tmp_path_factory):
    """One CLI start for every flow (this test takes about a minute: the CLI's start,
    its trust dialog, four model turns, the disconnect)."""
    reason = namespaces.unavailable_reason()
    if reason:
        pytest.skip(reason)
    ide_home = os.path.realpath(str(tmp_path / "ide-home"))
    os.makedirs(ide_home)
    cli_locks = os.path.join(copilot_home, "ide")
    # the relay's socket folder: short (a socket path has ~107 bytes), and carried into
    # the namespace at its own path so that the harness's probe-race check sees it too
    sock_parent = os.path.realpath(str(tmp_path_factory.mktemp("rs")))
    carried = [copilot_home, H.user_home(copilot_home), logdir, sock_parent, H.REPO, sys.prefix,
               H.cli_home(), os.path.dirname(os.path.realpath(sys.executable))]
    carry = [(workspace, INNER)] + sorted({(p, p) for p in map(os.path.realpath, carried)
                                           if namespaces.under_tmp(p)}, key=lambda pair: len(pair[0]))

    srv = H.Serve(workspace, ide_home, cli_env, os.path.join(logdir, "serve.log"))
    ns = relay = None
    try:
        _, ide_lock = srv.wait_lock()
        ns = namespaces.CliNamespace(carry)
        inside_env = H.python_env(cli_env, copilot_home)

        def inside(argv, cwd=INNER):
            return subprocess.run(ns.enter(cwd) + argv, env=inside_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=180)

        # inside: no IDE socket, no outer pid, the workspace only at its other path
        assert not ns.exists(ide_lock["socketPath"]) and not ns.exists(os.path.join(ide_home, "ide"))
        assert not ns.exists("/proc/%d" % srv.pid) and not ns.exists(workspace)
        assert ns.exists(os.path.join(INNER, "hello.py"))

        cli_half = ns.enter("/") + ["env", "TMPDIR=" + sock_parent, sys.executable, "-m", "ide_protocol", "relay",
                                    "cli-side", "--stdio", "--map", "%s=%s" % (workspace, INNER),
                                    "--lock-dir", cli_locks]
        relay = H.Proc([sys.executable, "-m", "ide_protocol", "relay", "ide-side", "--folder", workspace,
                        "--lock-dir", os.path.join(ide_home, "ide"), "--via", _join(cli_half)],
                       cwd=H.REPO, env=H.python_env(cli_env, ide_home), log_path=os.path.join(logdir, "relay.log"))
        relay.wait_output(r"relay cli-side: lock (\S+) for " + re.escape(INNER), timeout=60)
        (lock_path,) = _lock_files(cli_locks)
        lock = json.loads(H.read(lock_path))
        assert lock["workspaceFolders"] == [INNER]
        assert lock["ideName"].endswith(" (relayed)") and lock["isTrusted"] is False
        assert lock["headers"] != ide_lock["headers"]
        assert os.path.dirname(os.path.dirname(lock["socketPath"])) == sock_parent
        # its pid is the relay's as seen inside (the CLI's kill(pid, 0) runs there)
        assert "cli-side" in inside(["cat", "/proc/%d/cmdline" % lock["pid"]]).stdout.decode("utf-8", "replace")

        # `check` on the CLI's side through the relay passes as it does directly
        checked = inside([sys.executable, "-m", "ide_protocol", "check", "--strict", "--lock-dir", cli_locks])
        out = checked.stdout.decode("utf-8", "replace")
        assert checked.returncode == 0 and " 0 failed" in out, out

        tui = H.CopilotTui(tmux, copilot_bin, workspace, cli_env, logdir)
        tui.launcher = ns.enter(INNER)
        tui.start()
        tui.wait_ide_connected()
        srv.wait_output(CONNECTED, timeout=15)
        tui.wait_log(r"Connected to IDE MCP server")

        # a selection in the IDE reaches the CLI under the CLI's path
        inner_file = os.path.join(INNER, "hello.py")
        outer_file = os.path.join(workspace, "hello.py")
        srv.send("select hello.py 2:5-2:13")
        srv.wait_output(r"^selected hello\.py 2:5-2:13")
        tui.wait_log(r"IDE selection changed: %s \[1:4-1:12\]" % re.escape(inner_file))
        tui.wait_screen(r"@hello\.py:2\b")

        # the model reads the selection and the diagnostics, paths the CLI's
        srv.send("diag hello.py 2 error undefined name 'x'")
        srv.wait_output(r"^diagnostic hello\.py 2")
        fake_model.script(Turn.tool("ide-get_selection"), Turn.tool("ide-get_diagnostics"),
                          Turn.say("Selection and diagnostics read."))
        tui.prompt("Check my code")
        tui.wait_screen(r"Selection and diagnostics read\.")
        (sel_text,) = fake_model.tool_results("ide-get_selection")
        sel = json.loads(sel_text)
        assert (sel["filePath"], sel["fileUrl"], sel["text"]) == (inner_file, "file://" + inner_file, "return x")
        (diag_text,) = fake_model.tool_results("ide-get_diagnostics")
        diags = json.loads(diag_text)
        assert [d["filePath"] for d in diags] == [inner_file]
        assert diags[0]["diagnostics"][0]["message"] == "undefined name 'x'"

        def edit_shown_in_serve(old, new, prompt, *after):
            """The model edits hello.py under the CLI's path; serve shows the diff under
            its own (relative to its folder); returns the diff's number."""
            fake_model.script(Turn.tool("edit", {"path": inner_file, "old_str": old, "new_str": new}), *after)
            mark = srv.mark()
            tui.prompt(prompt)
            n = srv.wait_output(r"^diff (\d+) proposed by session", start=mark).group(1)
            srv.wait_output(r"^  edit of hello\.py$", start=mark)
            return n

        # an edit accepted in the IDE
        n = edit_shown_in_serve("return x", "return 42", "Fix hello.py", Turn.say("Accepted edit done."))
        srv.send("accept")
        srv.wait_output(r"^diff %s SAVED \(accepted_via_button\)" % n)
        tui.wait_screen(r"Accepted edit done\.")
        assert H.read(outer_file) == "def hello():\n    return 42\n"

        # an edit rejected in the IDE
        n = edit_shown_in_serve("return 42", "return 0", "Change hello.py again")
        srv.send("reject")
        srv.wait_output(r"^diff %s REJECTED \(rejected_via_button\)" % n)
        tui.wait_screen(r"rejected this tool call|Operation cancelled by user")
        assert H.read(outer_file) == "def hello():\n    return 42\n"

        # `/ide` lists the relayed IDE under the CLI's folder
        tui.prompt("/ide")
        tui.wait_screen(r"Select an IDE workspace to connect to")
        tui.wait_screen(r"1\. %s: %s \(current\)" % (re.escape(lock["ideName"]), re.escape(INNER)))
        tui.tmux.send_keys("Escape")

        # stopping the IDE: the relay's lock goes, the CLI notices, the relay ends
        assert srv.quit() == 0
        H.wait_until(lambda: not _lock_files(cli_locks), timeout=30, message="the relay's lock removed")
        tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=30)
        tui.wait_screen(r"IDE connection lost")
        assert relay.wait(30) == 0, relay.output()
        assert tui.exit() == 0
    finally:
        if relay is not None:
            relay.stop()
        srv.stop()
        left = ns.close() if ns is not None else []
    assert not left, "processes left in the namespace: %s" % left
    assert not _lock_files(cli_locks) and not _lock_files(os.path.join(ide_home, "ide"))
    assert os.listdir(sock_parent) == [], "relay socket folder left: %s" % os.listdir(sock_parent)
    assert not os.path.exists(ide_lock["socketPath"])
