"""`/ide`: the real Copilot CLI TUI (one tmux server) against a real Neovim running the
Lua plugin of editors/nvim over the bridge (a second tmux server), fully offline (fake
model), on each Neovim the plugin is tested on: Debian's 0.7 and a newer release
(tests/nvim/install_deps.sh; a Neovim that cannot be had is skipped with the reason)."""

import json
import os
import re
import sys
import time

import pytest

import copilot_harness as H
from fake_model import Turn

sys.path.insert(0, os.path.join(H.REPO, "tests", "nvim"))
import nvim_harness as N  # noqa: E402

pytestmark = pytest.mark.interop

NEW_42 = "def hello():\n    return 42\n"


@pytest.fixture(params=sorted(N.VERSIONS), ids=lambda v: "nvim" + v)
def nvim(request, copilot_bin, workspace, copilot_home, logdir):
    path, reason = N.binary(request.param)
    if path is None:
        pytest.skip(reason)
    session = N.NvimSession(workspace, copilot_home, logdir, path)
    bridges = []
    try:
        session.start(files=["hello.py"])
        bridges.append(session.wait_ready()["pid"])
        yield session
        if not session.exited():
            bridges.append(session.bridge_pid())
            session.quit("qa!")
    finally:
        session.close()
        for pid in bridges:
            if pid:
                H.wait_until(lambda: not N.pid_alive(pid), 15, message="the bridge's exit")


@pytest.fixture
def ide(nvim, tui):
    """Neovim serving the workspace, and the CLI started there, connected to it."""
    tui.start()
    tui.wait_ide_connected()
    H.wait_until(lambda: nvim.lua("return require('copilot_ide').state().sessions") >= 1,
                 message="Neovim seeing the CLI")
    return nvim, tui


def wait_diff_tab(nvim, timeout=60):
    return H.wait_until(lambda: [t for t in N.tabs(nvim) if t.startswith("[Copilot CLI] - hello.py")],
                        timeout, message="Neovim's diff tab")[0]


def test_cli_connects_and_reads_the_visual_selection_and_a_diagnostic(ide, workspace, copilot_home, fake_model):
    nvim, tui = ide
    (lock_path,) = N.locks(copilot_home)
    lock = N.read_lock(lock_path)
    assert lock["ideName"] == "Neovim" and lock["workspaceFolders"] == [workspace]
    assert lock["pid"] == nvim.bridge_pid()        # the bridge Neovim started wrote it
    tui.wait_log(r"Connected to IDE MCP server")
    path = os.path.join(workspace, "hello.py")
    nvim.keys("2", "G", "^", "v", "g", "_")        # "return x", characterwise, still in Visual mode
    tui.wait_log(r"IDE selection changed: %s \[1:4-1:12\]" % re.escape(path))
    assert nvim.eval("mode()") == "v"
    nvim.lua("vim.diagnostic.set(vim.api.nvim_create_namespace('t'), vim.fn.bufnr('hello.py'), "
             "{{lnum = 1, col = 11, end_col = 12, severity = vim.diagnostic.severity.ERROR, "
             "message = \"undefined name 'x' — 😀\", source = 'pyflakes'}})")
    # Handed over (the plugin's 100 ms, then the bridge): seen by a client of our own.
    watcher = N.StreamClient(lock_path)
    try:
        H.wait_until(lambda: watcher.tool_json("get_diagnostics"), message="the diagnostic at the bridge")
    finally:
        watcher.close()
    fake_model.script(Turn.tool("ide-get_selection"), Turn.tool("ide-get_diagnostics"),
                      Turn.say("Selection and diagnostics read."))
    tui.prompt("What did I select?")
    tui.wait_screen(r"Selection and diagnostics read\.")
    (text,) = fake_model.tool_results("ide-get_selection")
    sel = json.loads(text)
    assert sel["text"] == "return x" and sel["filePath"] == path and sel["current"] is True
    assert sel["selection"]["start"] == {"line": 1, "character": 4}
    assert sel["selection"]["end"] == {"line": 1, "character": 12}
    (text,) = fake_model.tool_results("ide-get_diagnostics")
    diags = json.loads(text)
    assert [d["filePath"] for d in diags] == [path]
    (d,) = diags[0]["diagnostics"]
    assert d["message"] == "undefined name 'x' — 😀" and d["severity"] == "Error"
    assert d["range"] == {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 12}}
    nvim.keys("Escape")


def test_edit_accepted_with_copilotideaccept(ide, workspace, fake_model):
    nvim, tui = ide
    path = os.path.join(workspace, "hello.py")
    H.propose_edit(fake_model, tui, path, "return 42", after="Accepted edit done.")
    wait_diff_tab(nvim)
    assert nvim.eval("getbufline(winbufnr(1), 1, '$')") == ["def hello():", "    return x"]
    assert nvim.eval("getbufline(winbufnr(2), 1, '$')") == ["def hello():", "    return 42"]
    tui.wait_screen(tui.PERMISSION)               # the terminal asks too
    assert H.read(path) == "def hello():\n    return x\n"
    nvim.ex("CopilotIdeAccept")
    tui.wait_screen(r"Accepted edit done\.")
    assert H.read(path) == NEW_42                  # written by the CLI
    H.wait_until(lambda: N.tabs(nvim) == [""], message="no diff tab left")
    H.wait_until(lambda: nvim.eval("getline(2)") == "    return 42", message="Neovim's buffer reloaded")
    assert tui.exit() == 0


def test_edit_rejected_with_q_in_the_proposal(ide, workspace, fake_model):
    nvim, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    H.propose_edit(fake_model, tui, path, "return 0")
    wait_diff_tab(nvim)
    nvim.ex("q")                                   # the proposal's window is the current one
    tui.wait_screen(r"rejected this tool call|Operation cancelled by user")
    H.wait_until(lambda: N.tabs(nvim) == [""] and nvim.eval("tabpagenr('$')") == 1, message="the diff tab closed")
    time.sleep(1.0)
    assert H.read(path) == before
    assert len(fake_model.chat_requests()) == 1     # a rejection ends the turn
    assert tui.exit() == 0


def test_edit_answered_in_the_cli_closes_the_diff_tab(ide, workspace, fake_model):
    nvim, tui = ide
    path = os.path.join(workspace, "hello.py")
    H.propose_edit(fake_model, tui, path, "return 7", after="Terminal answer handled.")
    wait_diff_tab(nvim)
    tui.answer_permission(1)
    H.wait_until(lambda: N.tabs(nvim) == [""], message="the diff tab closed by close_diff")
    tui.wait_screen(r"Terminal answer handled\.")
    assert H.read(path) == "def hello():\n    return 7\n"
    H.wait_until(lambda: nvim.eval("getline(2)") == "    return 7", message="Neovim's buffer reloaded")
    assert tui.exit() == 0


def test_stop_start_then_qa_bang_leaves_no_lock_and_no_process(ide, copilot_home):
    nvim, tui = ide
    (first,) = N.locks(copilot_home)
    first_pid = nvim.bridge_pid()
    nvim.ex("CopilotIdeStop")
    H.wait_until(lambda: N.locks(copilot_home) == [], message="the lock removed")
    tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=30)
    H.wait_until(lambda: not N.pid_alive(first_pid), 15, message="the stopped bridge's exit")
    nvim.ex("CopilotIdeStart")
    (second,) = H.wait_until(lambda: N.locks(copilot_home), message="a new lock")
    second_pid = nvim.wait_ready()["pid"]
    assert second != first and N.read_lock(second)["pid"] == second_pid != first_pid
    nvim_pids = [nvim.pid] + N.children(nvim.pid)
    nvim.quit("qa!")                               # with the CLI still running
    assert N.locks(copilot_home) == []
    H.wait_until(lambda: not any(N.pid_alive(p) for p in nvim_pids), 15, message="no process of Neovim's left")
    assert tui.exit() == 0
