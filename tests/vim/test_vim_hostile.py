"""What a CLI (or the user's own habits) throws at the plugin's diffs: odd tab names,
a proposal window reused for another buffer, paths that are not normalised, a buffer
with unsaved changes, many diffs ended at once."""
from __future__ import annotations

import os
import time
from typing import Any, List

import pytest

from vim_harness import WAIT, StreamClient, VimSession, wait_until

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="tmux and Unix sockets: Linux")

NEW = "héllo wörld 😀 END\nsecond line\nthird\n"


def tab(n: str = "t1") -> str:
    return "[Copilot CLI] - hello.txt (%s)" % n


def diff_tabs(vim: VimSession) -> List[str]:
    return vim.eval("map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, 'copilot_ide_diff', '')})")


def settle(vim: VimSession) -> None:
    """Let the plugin's timer run a few times (ticks enter Python while a diff is pending)."""
    time.sleep(0.5)
    vim.eval("1")


def test_a_tab_name_with_a_nul_and_control_characters_opens_one_tab(vim: VimSession, client: StreamClient,
                                                                    workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    name = "bad\x00name\x1b[31m\x07"
    pending = client.open_diff(path, NEW, name)
    wait_until(lambda: len(diff_tabs(vim)) == 2, what="the diff tab")
    settle(vim)
    settle(vim)
    assert diff_tabs(vim) == ["", "bad^@name^[[31m^G"]  # one tab, its name as Vim shows it
    assert "pending diffs: 1" in vim.eval("execute('CopilotIdeStatus')")
    vim.ex("CopilotIdeAccept")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["tab_name"]) == ("SAVED", name)
    assert diff_tabs(vim) == [""]


def test_bnext_in_the_proposal_window_does_not_reject(vim: VimSession, client: StreamClient,
                                                      workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("other\n")
    vim.ex("badd other.txt")
    pending = client.open_diff(path, NEW, tab())
    wait_until(lambda: tab() in diff_tabs(vim), what="the diff tab")
    vim.ex("2wincmd w | bnext")  # in the proposal's window
    assert vim.eval("bufname('%')") in ("other.txt", "hello.txt")
    settle(vim)
    assert not pending.done()
    # A quickfix jump from the proposal's window: still no answer.
    vim.ex("2wincmd w | buffer %s" % vim.eval("bufnr(%s)" % repr(tab()).replace("[", "\\\\[")))
    vim.ex("call setqflist([{'filename': 'other.txt', 'lnum': 1, 'text': 'x'}]) | 2wincmd w | cc 1")
    settle(vim)
    assert not pending.done()
    assert tab() in diff_tabs(vim)
    vim.ex("CopilotIdeAccept")  # in the diff's tab: the diff is found by its tab
    assert pending.result(WAIT)["result"] == "SAVED"
    assert diff_tabs(vim) == [""]


def test_closing_the_window_after_showing_another_buffer_in_it_rejects(vim: VimSession, client: StreamClient,
                                                                       workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = client.open_diff(path, NEW, tab())
    wait_until(lambda: tab() in diff_tabs(vim), what="the diff tab")
    vim.ex("2wincmd w | enew | quit")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
    wait_until(lambda: diff_tabs(vim) == [""], what="the diff tab closed")


def test_a_path_that_is_not_normalised_still_reloads_the_buffer(vim: VimSession, client: StreamClient,
                                                                workspace: str) -> None:
    odd = os.path.join(workspace, ".", "hello.txt")
    pending = client.open_diff(odd, NEW, tab())
    wait_until(lambda: tab() in diff_tabs(vim), what="the diff tab")
    assert vim.eval("tabpagenr('$')") == 2 and vim.eval("len(getbufinfo({'buflisted': 1}))") == 1
    vim.ex("CopilotIdeAccept")
    assert pending.result(WAIT)["result"] == "SAVED"
    with open(odd, "w", encoding="utf-8") as f:  # the CLI writes the path it named
        f.write(NEW)
    wait_until(lambda: vim.eval("getline(1)") == "héllo wörld 😀 END", what="the buffer reloaded")


def test_a_diff_of_a_buffer_with_unsaved_changes_shows_the_file_on_disk(vim: VimSession, client: StreamClient,
                                                                        workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    vim.keys("O")
    vim.type("my unsaved line")
    vim.keys("Escape")
    assert vim.eval("&modified") == 1
    pending = client.open_diff(path, NEW, tab())
    wait_until(lambda: tab() in diff_tabs(vim), what="the diff tab")
    state = vim.eval("{'left': getbufline(winbufnr(1), 1, '$'), 'right': getbufline(winbufnr(2), 1, '$'),"
                     " 'diff': [getwinvar(1, '&diff'), getwinvar(2, '&diff')]}")
    assert state["left"] == ["héllo wörld 😀 end", "second line", "third"]  # the file the CLI edits
    assert state["right"] == ["héllo wörld 😀 END", "second line", "third"]
    assert state["diff"] == [1, 1]
    assert "has unsaved changes" in vim.eval("execute('messages')")
    vim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"
    assert vim.eval("getline(1)") == "my unsaved line" and vim.eval("&modified") == 1  # nothing lost
    assert vim.eval("len(filter(getbufinfo(), {_, b -> b.name =~# 'on disk'}))") == 0


def test_stop_with_many_pending_diffs_never_waits_for_enter(vim: VimSession, client: StreamClient,
                                                            workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = [client.open_diff(path, NEW, tab("t%d" % n)) for n in range(8)]
    wait_until(lambda: len(diff_tabs(vim)) == 9, what="eight diff tabs")
    vim.ex("CopilotIdeStop")
    vim.wait_screen("Copilot IDE: stopped")
    time.sleep(0.5)
    assert "Press ENTER" not in vim.screen()
    for p in pending:
        assert p.result(WAIT)["trigger"] == "client_disconnected"
    assert diff_tabs(vim) == [""]


def test_many_diffs_closed_in_one_tick_never_wait_for_enter(vim: VimSession, client: StreamClient,
                                                           workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = [client.open_diff(path, NEW, tab("t%d" % n)) for n in range(6)]
    wait_until(lambda: len(diff_tabs(vim)) == 7, what="six diff tabs")
    for n in range(6):  # closed by the CLI, faster than Vim's ticks
        client.start(client.cli.call_tool("close_diff", {"tab_name": tab("t%d" % n)}))
    for p in pending:
        p.result(WAIT)
    wait_until(lambda: "Copilot IDE:" in vim.screen(), what="the closing message")
    time.sleep(0.5)
    assert "Press ENTER" not in vim.screen()
    assert diff_tabs(vim) == [""]
