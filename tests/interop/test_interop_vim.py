"""`/ide`: the real Copilot CLI TUI (one tmux server) against a real Vim running the
plugin of editors/vim (a second tmux server), fully offline (fake model)."""

import json
import os
import re
import sys
import time

import pytest

import copilot_harness as H
from fake_model import Turn

sys.path.insert(0, os.path.join(H.REPO, "tests", "vim"))
import vim_harness as V  # noqa: E402

pytestmark = pytest.mark.interop

NEW_42 = "def hello():\n    return 42\n"


@pytest.fixture
def vim(copilot_bin, workspace, copilot_home, logdir):
    reason = V.missing()
    if reason:
        pytest.skip(reason)
    session = V.VimSession(workspace, copilot_home, logdir)
    session.start(files=["hello.py"])
    session.wait_lock()
    yield session
    try:
        if not session.exited():
            session.quit("qa!")
    finally:
        session.close()


@pytest.fixture
def ide(vim, tui):
    """Vim serving the workspace, and the CLI started there, connected to it."""
    tui.start()
    tui.wait_ide_connected()
    return vim, tui


def diff_tabs(vim):
    return vim.eval("map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, 'copilot_ide_diff', '')})")


def wait_diff_tab(vim, timeout=60):
    return V.wait_until(lambda: [t for t in diff_tabs(vim) if t.startswith("[Copilot CLI] - hello.py")],
                        timeout, "Vim's diff tab")[0]


def test_cli_connects_at_startup_and_reads_vims_selection(ide, workspace, copilot_home, fake_model):
    vim, tui = ide
    (lock_path,) = V.locks(copilot_home)
    lock = V.read_lock(lock_path)
    assert lock["ideName"] == "Vim" and lock["pid"] == vim.pid
    assert lock["workspaceFolders"] == [workspace]
    tui.wait_log(r"Connected to IDE MCP server")
    assert "sessions connected: 1" in vim.eval("execute('CopilotIdeStatus')")
    path = os.path.join(workspace, "hello.py")
    vim.keys("2", "G", "^", "v", "g", "_")        # "return x", characterwise
    tui.wait_log(r"IDE selection changed: %s \[1:4-1:12\]" % re.escape(path))
    if H.at_least(H.SELECTION_INDICATOR_SINCE):
        tui.wait_screen(r"@hello\.py:2\b")
    fake_model.script(Turn.tool("ide-get_selection"), Turn.say("Selection read."))
    tui.prompt("What did I select?")
    tui.wait_screen(r"Selection read\.")
    (text,) = fake_model.tool_results("ide-get_selection")
    sel = json.loads(text)
    assert sel["text"] == "return x" and sel["filePath"] == path
    assert sel["selection"]["start"] == {"line": 1, "character": 4}
    assert sel["selection"]["end"] == {"line": 1, "character": 12}
    vim.keys("Escape")
    vim.quit("qa")
    assert V.locks(copilot_home) == []
    tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=15)
    assert tui.exit() == 0


def test_edit_opens_in_vim_and_accept_lets_the_cli_write_it(ide, workspace, fake_model):
    vim, tui = ide
    path = os.path.join(workspace, "hello.py")
    H.propose_edit(fake_model, tui, path, "return 42", after="Accepted edit done.")
    tab = wait_diff_tab(vim)
    assert vim.eval("getbufline(winbufnr(2), 1, '$')") == ["def hello():", "    return 42"]
    assert vim.eval("bufname(winbufnr(2))") == tab
    tui.wait_screen(tui.PERMISSION)               # the terminal asks too
    assert H.read(path) == "def hello():\n    return x\n"
    vim.ex("CopilotIdeAccept")
    tui.wait_screen(r"Accepted edit done\.")
    assert H.read(path) == NEW_42                  # written by the CLI
    V.wait_until(lambda: diff_tabs(vim) == [""], what="the diff tab closed")
    V.wait_until(lambda: vim.eval("getline(2)") == "    return 42", what="Vim's buffer reloaded")
    assert tui.exit() == 0


def test_reject_in_vim_leaves_the_file(ide, workspace, fake_model):
    vim, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    H.propose_edit(fake_model, tui, path, "return 0")
    wait_diff_tab(vim)
    vim.ex("CopilotIdeReject")
    tui.wait_screen(r"rejected this tool call|Operation cancelled by user")
    time.sleep(1.0)
    assert H.read(path) == before
    assert diff_tabs(vim) == [""]
    assert len(fake_model.chat_requests()) == 1     # a rejection ends the turn
    assert tui.exit() == 0


@pytest.mark.parametrize("answer", ["yes", "no"])
def test_answer_in_the_cli_closes_vims_diff_tab(ide, workspace, fake_model, answer):
    vim, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    H.propose_edit(fake_model, tui, path, "return 7", after="Terminal answer handled.")
    wait_diff_tab(vim)
    tui.answer_permission(1 if answer == "yes" else 3)
    V.wait_until(lambda: diff_tabs(vim) == [""], what="Vim's diff tab closed by close_diff")
    assert "pending diffs: 0" in vim.eval("execute('CopilotIdeStatus')")
    if answer == "yes":
        tui.wait_screen(r"Terminal answer handled\.")
        assert H.read(path) == "def hello():\n    return 7\n"
        V.wait_until(lambda: vim.eval("getline(2)") == "    return 7", what="Vim's buffer reloaded")
    else:
        tui.wait_screen(r"Operation cancelled by user|Operation aborted by user")
        time.sleep(0.5)
        assert H.read(path) == before
    assert tui.exit() == 0
