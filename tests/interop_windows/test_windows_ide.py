"""`/ide` with the real Windows CLI: copilot.exe under Wine 10 against the Windows
CPython's `serve`, over a named pipe (`\\\\.\\pipe\\mcp-*.sock`): the scenario of the
Linux suite (tests/interop/test_interop_ide.py), grouped so that each group starts the
CLI once (a start under Wine costs seconds)."""

import json
import ntpath
import os
import re
import time

import pytest

import copilot_harness as H
from fake_model import Turn
from ide_protocol.common.lock_rules import is_pipe_path

pytestmark = pytest.mark.interop

CONNECTED = r"connected: session (\S+), Copilot CLI %s" % re.escape(H.MCP_CLIENT_VERSION)


def _diff_number(srv, start=0, timeout=60):
    return srv.wait_output(r"^diff (\d+) proposed by session", timeout=timeout, start=start).group(1)


def _propose(fake_model, tui, path, new_str, after):
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": new_str}),
                      Turn.say(after))
    tui.prompt("Fix hello.py")


def _restore(root, path):
    with open(root.host(path), "w", encoding="utf-8") as fh:
        fh.write("def hello():\n    return x\n")


def test_session_over_the_pipe(root, serve, tui, workspace, fake_model):
    """One CLI start: the trust prompt, the connection at start-up and the CLI's
    reconnects, both pushes, both tools the model reads, the session's name, open_diff
    accepted and rejected in serve and answered in the CLI (close_diff), /exit, and
    serve quitting with no lock left."""
    srv = serve()
    lock_path, lock = srv.wait_lock()
    assert lock["scheme"] == "pipe" and is_pipe_path(lock["socketPath"]), lock
    assert lock["workspaceFolders"][0] == workspace and lock.get("isTrusted") is False

    # Not trusted: the CLI asks; it connects over the pipe while asking, and again after.
    assert tui.start(trust=False) == "trust"
    tui.tmux.send_keys("Enter")
    assert tui.wait_ide_connected(timeout=90) >= 2      # connected, and again after trust
    srv.wait_output(CONNECTED, timeout=30)
    session = re.findall(CONNECTED, srv.output(), re.M)[-1]
    tui.wait_screen(r"^\s*❯", timeout=60)               # the input line

    # selection_changed and diagnostics_changed pushes reach the CLI.
    path = ntpath.join(workspace, "hello.py")
    wire_path = "c" + path[1:]                          # PROTOCOL.md §6: lower-case drive
    srv.send("select hello.py 2:5-2:13")
    srv.wait_output(r"^selected hello\.py 2:5-2:13")
    tui.wait_log(r"IDE selection changed: %s \[1:4-1:12\]" % re.escape(wire_path))
    srv.send("diag hello.py 2 error undefined name 'x'")
    srv.wait_output(r"^diagnostic hello\.py 2")
    # (Its count on the screen is not legible under Wine: the CLI's log has the push.)
    tui.wait_log(r'method: \\"diagnostics_changed\\".*\\"uri\\": String\(\\"file:///c%3A/ws/hello\.py\\"\).*'
                 r"undefined name 'x'")

    # The model reads both through the CLI; the first prompt names the session.
    fake_model.script(Turn.tool("ide-get_selection"), Turn.tool("ide-get_diagnostics"),
                      Turn.say("Selection and diagnostics read."))
    tui.prompt("Check my code")
    fake_model.wait_for_chat(3, timeout=90)
    srv.wait_output(r'^session %s is named "Check my code"' % re.escape(session), timeout=30)
    (sel_text,) = fake_model.tool_results("ide-get_selection")
    sel = json.loads(sel_text)
    assert sel["text"] == "return x" and sel["filePath"] == wire_path
    assert sel["fileUrl"] == "file:///c%3A/ws/hello.py"
    assert sel["selection"]["start"] == {"line": 1, "character": 4}
    (diag_text,) = fake_model.tool_results("ide-get_diagnostics")
    diags = json.loads(diag_text)
    assert [d["filePath"] for d in diags] == [wire_path]
    assert diags[0]["diagnostics"][0]["message"] == "undefined name 'x'"
    assert "<ide_selection>" in fake_model.user_texts()[0]
    srv.wait_output(r"^tool get_selection\(\) from session")
    srv.wait_output(r"^tool get_diagnostics\(.*\) from session")

    # open_diff accepted in serve: the CLI writes the file.
    mark = srv.mark()
    _propose(fake_model, tui, path, "return 42", "Accepted edit done.")
    n = _diff_number(srv, mark)
    assert "return x" in H.read(root.host(path))        # serve never writes it itself
    srv.send("accept %s" % n)
    srv.wait_output(r"^diff %s SAVED \(accepted_via_button\)" % n, start=mark)
    H.wait_until(lambda: "return 42" in H.read(root.host(path)), 30, message="the CLI wrote hello.py")
    H.wait_until(lambda: any("updated" in r for r in fake_model.tool_results("edit")), 30,
                 message="the model got the edit's result")
    _restore(root, path)

    # open_diff rejected in serve: the file stays, the turn ends.
    requests = len(fake_model.chat_requests())
    mark = srv.mark()
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 0"}))
    tui.prompt("Fix hello.py")
    n = _diff_number(srv, mark)
    srv.send("reject %s" % n)
    srv.wait_output(r"^diff %s REJECTED \(rejected_via_button\)" % n, start=mark)
    tui.wait_log(r"rejected|cancelled", timeout=30)
    time.sleep(1.0)
    assert H.read(root.host(path)) == "def hello():\n    return x\n"
    assert len(fake_model.chat_requests()) == requests + 1   # the model is not asked again

    # Answered in the CLI's own dialog: it closes the diff it opened in serve.
    mark = srv.mark()
    _propose(fake_model, tui, path, "return 7", "Terminal answer handled.")
    n = _diff_number(srv, mark)
    tui.answer_permission(1, timeout=60)
    srv.wait_output(r'^tool close_diff\(tab_name="\[Copilot CLI\] - hello\.py', start=mark)
    srv.wait_output(r"^diff %s REJECTED \(closed_via_tool\)" % n, start=mark)
    H.wait_until(lambda: "return 7" in H.read(root.host(path)), 30, message="the CLI wrote hello.py")

    # /exit ends the session; quitting serve removes its lock.
    mark = srv.mark()
    assert tui.exit() == 0
    srv.wait_output(r"^disconnected: session %s \(deleted\)" % re.escape(session), start=mark, timeout=30)
    assert srv.quit(timeout=30) == 0
    assert not srv.locks()


def test_ide_picker_from_a_subfolder_and_serve_quitting(root, serve, tui, workspace):
    """One CLI start in ``C:\\ws\\sub``: no auto-connect (no prefix match), `/ide` lists
    serve's folder and connects over the pipe; serve quitting is noticed."""
    sub = ntpath.join(workspace, "sub")
    os.makedirs(root.host(sub))
    srv = serve("--trusted")
    srv.wait_lock()
    tui.workspace = sub
    tui.start()
    tui.wait_log(r"Started watching for IDE lock files", timeout=60)
    time.sleep(2.0)
    assert not re.search(CONNECTED, srv.output(), re.M), srv.output()
    tui.prompt("/ide")
    tui.wait_screen(r"Select an IDE workspace to connect to", timeout=30)
    tui.wait_screen(r"1\. Terminal IDE: %s\b" % re.escape(workspace), timeout=30)
    tui.tmux.send_keys("Enter")
    srv.wait_output(CONNECTED, timeout=30)
    tui.wait_log(r"Connected to IDE MCP server", timeout=30)
    assert srv.quit(timeout=30) == 0
    assert not srv.locks()
    tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=30)
    assert tui.exit() == 0
