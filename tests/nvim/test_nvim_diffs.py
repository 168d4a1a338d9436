"""Proposed edits in a real Neovim: `open_diff` opens a tab of its own (the file as it
is on disk on the left, the proposal on the right, both in diff mode); :CopilotIdeAccept,
:w, :CopilotIdeReject, :q, closing the tab, the CLI's close_diff and :CopilotIdeStop
answer it; the buffer reloads after the CLI writes the file."""
from __future__ import annotations

import os
from typing import Any

import nvim_harness as N
from nvim_harness import WAIT, NvimSession, StreamClient, tabs, wait_until

NEW = "héllo wörld 😀 END\nsecond line\nthird\n"


def tab(n: str = "t1") -> str:
    return "[Copilot CLI] - hello.txt (%s)" % n


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def open_and_wait(nvim: NvimSession, client: StreamClient, path: str, contents: str, name: str) -> Any:
    pending = client.open_diff(path, contents, name)
    wait_until(lambda: name in tabs(nvim), what="the diff tab of " + name)
    return pending


LAYOUT = """
local tab = vim.api.nvim_get_current_tabpage()
local wins = vim.api.nvim_tabpage_list_wins(tab)
local out = {tabs = #vim.api.nvim_list_tabpages(), current = vim.api.nvim_get_current_win() == wins[2], bufs = {}}
for i, w in ipairs(wins) do
  local b = vim.api.nvim_win_get_buf(w)
  out.bufs[i] = {lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), diff = vim.wo[w].diff,
    buftype = vim.bo[b].buftype, modifiable = vim.bo[b].modifiable, modeline = vim.bo[b].modeline,
    filetype = vim.bo[b].filetype, syntax = vim.bo[b].syntax, name = vim.api.nvim_buf_get_name(b)}
end
return out
"""


def test_a_diff_opens_in_a_tab_and_accept_lets_the_cli_write(nvim: NvimSession, client: StreamClient,
                                                             workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    before = read(path)
    pending = open_and_wait(nvim, client, path, NEW, tab())
    wait_until(lambda: "Copilot proposes an edit of hello.txt" in nvim.messages(), what="the message")
    state = nvim.lua(LAYOUT)
    assert state["tabs"] == 2 and state["current"]        # a new tab, the proposal's window current
    left, right = state["bufs"]
    assert left["lines"] == before.splitlines() and right["lines"] == NEW.splitlines()
    assert left["diff"] and right["diff"]
    assert right["buftype"] == "acwrite" and left["buftype"] == "nofile"
    assert not right["modifiable"] and not left["modifiable"]
    assert not right["modeline"] and not left["modeline"]
    assert right["name"].endswith(tab())
    assert not pending.done()
    nvim.ex("CopilotIdeAccept")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("SAVED", "accepted_via_button")
    wait_until(lambda: tabs(nvim) == [""], what="no diff tab left")
    assert read(path) == before                     # Neovim never writes the file ...
    with open(path, "w", encoding="utf-8") as f:    # ... the CLI does, on SAVED
        f.write(NEW)
    wait_until(lambda: nvim.eval("getline(1)") == "héllo wörld 😀 END", what="the buffer reloaded")
    assert nvim.eval("&modified") == 0


def test_w_in_the_proposal_accepts_and_writes_no_file(nvim: NvimSession, client: StreamClient,
                                                      workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    before = read(path)
    files = sorted(os.listdir(workspace))
    pending = open_and_wait(nvim, client, path, NEW, tab())
    nvim.ex("w")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("SAVED", "accepted_via_button")
    wait_until(lambda: tabs(nvim) == [""], what="no diff tab left")
    assert read(path) == before and sorted(os.listdir(workspace)) == files


def test_q_in_the_proposal_rejects_and_closes_the_whole_tab(nvim: NvimSession, client: StreamClient,
                                                            workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(nvim, client, path, NEW, tab())
    nvim.ex("q")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
    wait_until(lambda: tabs(nvim) == [""], what="the whole tab closed")
    assert nvim.eval("tabpagenr('$')") == 1 and nvim.eval("winnr('$')") == 1
    assert nvim.eval("len(filter(nvim_list_bufs(), {_, b -> bufname(b) =~# 'copilot-ide://'}))") == 0
    N.settle(0.3)
    assert read(path) != NEW


def test_reject_and_tabclose_reject(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(nvim, client, path, NEW, tab())
    nvim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"
    wait_until(lambda: tabs(nvim) == [""], what="no diff tab left")
    pending = open_and_wait(nvim, client, path, NEW, tab("t2"))
    nvim.ex("tabclose")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
    wait_until(lambda: tabs(nvim) == [""], what="no diff tab left")


def test_close_diff_from_the_cli_closes_the_tab(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(nvim, client, path, NEW, tab())
    assert client.tool_json("close_diff", {"tab_name": tab()})["already_closed"] is False
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "closed_via_tool")
    wait_until(lambda: tabs(nvim) == [""], what="the diff tab closed")
    assert nvim.eval("len(filter(nvim_list_bufs(), {_, b -> bufname(b) =~# 'copilot-ide://'}))") == 0
    with open(path, "w", encoding="utf-8") as f:    # the CLI may write after its own dialog's yes
        f.write(NEW)
    wait_until(lambda: nvim.eval("getline(1)") == "héllo wörld 😀 END", what="the buffer reloaded")


def test_a_diff_waits_while_neovim_is_in_insert_mode(nvim: NvimSession, client: StreamClient,
                                                     workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    nvim.keys("g", "g", "0", "i")
    nvim.type("abc")
    pending = client.open_diff(path, NEW, tab())
    wait_until(lambda: "waits until you are back in Normal mode" in nvim.messages(), what="the diff received")
    assert nvim.eval("mode()") == "i" and nvim.eval("tabpagenr('$')") == 1
    nvim.type("def")                                # the cursor stays the user's
    wait_until(lambda: nvim.eval("[getline(1)[:5], col('.')]") == ["abcdef", 7], what="the keys typed")
    nvim.keys("Escape")
    wait_until(lambda: tab() in tabs(nvim), what="the diff tab, once back in Normal mode")
    nvim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"


def test_several_diffs_each_have_their_tab(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("one\n")
    first = open_and_wait(nvim, client, path, NEW, tab("t1"))
    second = open_and_wait(nvim, client, other, "one\ntwo\n", "[Copilot CLI] - other.txt (t2)")
    assert tabs(nvim) == ["", tab("t1"), "[Copilot CLI] - other.txt (t2)"]
    nvim.ex("tabfirst")
    nvim.ex("CopilotIdeAccept")                      # not in a diff tab, two pending: which?
    nvim.wait_screen("2 pending diffs: name one")
    nvim.ex("CopilotIdeReject t1")                   # a unique part of the tab name
    assert first.result(WAIT)["result"] == "REJECTED"
    assert not second.done()
    nvim.ex("CopilotIdeAccept [Copilot CLI] - other.txt (t2)")
    assert second.result(WAIT)["result"] == "SAVED"
    wait_until(lambda: tabs(nvim) == [""], what="no diff tab left")


def test_stop_answers_pending_diffs_and_closes_their_tabs(nvim: NvimSession, client: StreamClient,
                                                          workspace: str, copilot_home: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = [open_and_wait(nvim, client, path, NEW, tab("t%d" % n)) for n in range(3)]
    nvim.ex("CopilotIdeStop")
    for p in pending:
        assert p.result(WAIT)["trigger"] == "client_disconnected"
    wait_until(lambda: tabs(nvim) == [""], what="the diff tabs closed")
    nvim.wait_screen(r"stopped \(lock file removed; 3 pending diffs rejected\)")
    wait_until(lambda: not os.listdir(os.path.join(copilot_home, "ide")), what="the lock gone")


def test_many_diffs_closed_at_once_never_wait_for_enter(nvim: NvimSession, client: StreamClient,
                                                        workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = [open_and_wait(nvim, client, path, NEW, tab("t%d" % n)) for n in range(6)]
    for n in range(6):  # closed by the CLI all at once: six messages in one moment
        client.start(client.cli.call_tool("close_diff", {"tab_name": tab("t%d" % n)}))
    for p in pending:
        p.result(WAIT)
    wait_until(lambda: nvim.messages().count("(closed_via_tool)") == 6, what="six messages, each kept")
    wait_until(lambda: tabs(nvim) == [""], what="the diff tabs closed")
    N.settle(0.5)
    assert "Press ENTER" not in nvim.screen()
    nvim.keys("j")                                  # the next key is the user's
    wait_until(lambda: nvim.eval("line('.')") == 2, what="the cursor moved")
