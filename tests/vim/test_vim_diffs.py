"""Diffs and diagnostics in a real Vim: `open_diff` opens a diff tab, the user's
commands (or the CLI's `close_diff`, or closing the tab) answer it; quickfix and location
lists reach `get_diagnostics`."""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List

from vim_harness import WAIT, StreamClient, VimSession, wait_until

NEW = "héllo wörld 😀 END\nsecond line\nthird\n"


def tab(n: str = "t1") -> str:
    return "[Copilot CLI] - hello.txt (%s)" % n


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def diff_tabs(vim: VimSession) -> List[str]:
    return vim.eval("map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, 'copilot_ide_diff', '')})")


def open_and_wait(vim: VimSession, client: StreamClient, path: str, contents: str, name: str) -> Any:
    pending = client.open_diff(path, contents, name)
    wait_until(lambda: name in diff_tabs(vim), what="the diff tab of " + name)
    return pending


def test_open_diff_shows_a_diff_tab_and_accept_answers_saved(vim: VimSession, client: StreamClient,
                                                            workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    before = read(path)
    pending = open_and_wait(vim, client, path, NEW, tab())
    assert "Copilot proposes an edit of hello.txt: :CopilotIdeAccept or :CopilotIdeReject" \
        in vim.eval("execute('messages')")
    state = vim.eval("{'tabs': tabpagenr('$'), 'tab': tabpagenr(), 'windows': winnr('$'),"
                     " 'left': fnamemodify(bufname(winbufnr(1)), ':p'), 'right': bufname(winbufnr(2)),"
                     " 'diff': [getwinvar(1, '&diff'), getwinvar(2, '&diff')],"
                     " 'proposal': getbufline(winbufnr(2), 1, '$'),"
                     " 'modifiable': getbufvar(winbufnr(2), '&modifiable'),"
                     " 'readonly': getbufvar(winbufnr(2), '&readonly'),"
                     " 'buftype': getbufvar(winbufnr(2), '&buftype')}")
    assert state["tabs"] == 2 and state["tab"] == 2 and state["windows"] == 2
    assert state["left"] == path
    assert state["right"] == tab()
    assert state["diff"] == [1, 1]
    assert state["proposal"] == ["héllo wörld 😀 END", "second line", "third"]
    assert (state["modifiable"], state["readonly"], state["buftype"]) == (0, 1, "nofile")
    assert not pending.done()
    vim.ex("CopilotIdeAccept")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("SAVED", "accepted_via_button")
    assert diff_tabs(vim) == [""] and vim.eval("tabpagenr('$')") == 1
    assert read(path) == before                     # the IDE never writes the file ...
    with open(path, "w", encoding="utf-8") as f:    # ... the CLI does, on SAVED
        f.write(NEW)
    wait_until(lambda: vim.eval("getline(1)") == "héllo wörld 😀 END", what="the buffer reloaded")
    assert vim.eval("&modified") == 0


def test_a_file_the_cli_writes_in_steps_is_reloaded_whole(vim: VimSession, client: StreamClient,
                                                           workspace: str) -> None:
    """The CLI may empty the file, then write the text (seen with 1.0.60): a tick that
    reloads the empty file must not be the last look, the buffer ends with the text."""
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(vim, client, path, NEW, tab())
    vim.ex("CopilotIdeAccept")
    assert pending.result(WAIT)["result"] == "SAVED"
    open(path, "w").close()                          # step 1: emptied ...
    wait_until(lambda: vim.eval("[line('$'), getline(1)]") == [1, ""], what="the empty file reloaded")
    with open(path, "w", encoding="utf-8") as f:    # ... step 2: the text
        f.write(NEW)
    wait_until(lambda: vim.eval("getline(1, '$')") == NEW.splitlines(), what="the text reloaded")
    assert vim.eval("&modified") == 0


def test_a_diff_opens_while_vim_idles(vim: VimSession, client: StreamClient, workspace: str) -> None:
    """No key reaches Vim (a key would wake the plugin's timer on its own): the diff
    the server queued is shown by an idle tick, read off the screen."""
    vim.eval("1")    # start-up's ticks done; then the ticks that Ex command woke go by,
    time.sleep(0.5)  # so that the diff arrives at a Vim whose ticks skip Python
    pending = client.open_diff(os.path.join(workspace, "hello.txt"), NEW, tab())
    vim.wait_screen(r"Copilot proposes an edit of hello\.txt")
    vim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"


def test_reject_answers_rejected_and_leaves_the_file(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    before = read(path)
    pending = open_and_wait(vim, client, path, NEW, tab())
    vim.ex("CopilotIdeReject")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
    assert diff_tabs(vim) == [""]
    time.sleep(0.5)
    assert read(path) == before
    assert vim.eval("getline(1)") == before.splitlines()[0]


def test_close_diff_from_the_cli_closes_the_tab(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(vim, client, path, NEW, tab())
    closed = client.tool_json("close_diff", {"tab_name": tab()})
    assert closed["already_closed"] is False
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "closed_via_tool")
    wait_until(lambda: diff_tabs(vim) == [""], what="the diff tab closed")
    assert vim.eval("bufexists('%s')" % tab().replace("'", "''").replace("[", "\\\\[")) == 0


def test_closing_the_tab_rejects(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(vim, client, path, NEW, tab())
    vim.ex("tabclose")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
    pending = open_and_wait(vim, client, path, NEW, tab("t2"))
    vim.ex("2wincmd w | quit")                      # :q in the proposal's window
    answer = pending.result(WAIT)
    assert answer["result"] == "REJECTED"
    wait_until(lambda: diff_tabs(vim) == [""], what="the rest of the diff tab closed")


def test_several_pending_diffs_each_have_their_tab(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("one\n")
    first = open_and_wait(vim, client, path, NEW, tab("t1"))
    second = open_and_wait(vim, client, other, "one\ntwo\n", "[Copilot CLI] - other.txt (t2)")
    assert diff_tabs(vim) == ["", tab("t1"), "[Copilot CLI] - other.txt (t2)"]
    vim.ex("tabfirst")
    vim.ex("CopilotIdeAccept")                       # not in a diff tab, two pending: which?
    assert "2 pending diffs: name one" in vim.eval("execute('messages')")
    assert "pending diffs: 2" in vim.eval("execute('CopilotIdeStatus')")
    vim.ex("CopilotIdeReject t1")                    # a unique part of the tab name
    answer = first.result(WAIT)
    assert (answer["result"], answer["tab_name"]) == ("REJECTED", tab("t1"))
    assert not second.done()
    assert diff_tabs(vim) == ["", "[Copilot CLI] - other.txt (t2)"]
    vim.ex("CopilotIdeAccept [Copilot CLI] - other.txt (t2)")
    assert second.result(WAIT)["result"] == "SAVED"
    assert diff_tabs(vim) == [""]


def test_two_diffs_of_one_tab_name_are_answered_each_in_its_own_tab(vim: VimSession, client: StreamClient,
                                                                    workspace: str) -> None:
    """Two `open_diff` with one tab name both wait, each in its own tab (PROTOCOL.md §4):
    an answer given in a diff's tab is that diff's, never the other one's (which would
    save a file the person did not review there), and the other stays reachable. The
    CLI's `close_diff` of that name closes the oldest of them."""
    path = os.path.join(workspace, "hello.txt")
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("other\n")
    first = client.open_diff(path, "FIRST reviewed\n", "X")
    wait_until(lambda: diff_tabs(vim) == ["", "X"], what="the first diff's tab")
    second = client.open_diff(other, "SECOND unseen\n", "X")
    wait_until(lambda: diff_tabs(vim) == ["", "X", "X"], what="the second diff's tab")
    assert "pending diffs: 2" in vim.eval("execute('CopilotIdeStatus')")
    vim.ex("2tabnext")                               # the first diff's tab
    assert vim.eval("getbufline(winbufnr(2), 1, '$')") == ["FIRST reviewed"]
    vim.ex("CopilotIdeAccept")
    answer = first.result(WAIT)
    assert (answer["result"], answer["message"]) == ("SAVED", "User accepted changes for %s" % path)
    assert not second.done()
    assert diff_tabs(vim) == ["", "X"]
    assert "pending diffs: 1" in vim.eval("execute('CopilotIdeStatus')")
    vim.ex("2tabnext")                               # the second diff's tab, closed: its no
    assert vim.eval("getbufline(winbufnr(2), 1, '$')") == ["SECOND unseen"]
    vim.ex("tabclose")
    answer = second.result(WAIT)
    assert (answer["result"], answer["message"]) == ("REJECTED", "User rejected changes for %s" % other)
    assert diff_tabs(vim) == [""]
    # The CLI's close_diff by that name: the oldest goes, the newer one stays pending.
    third = open_and_wait(vim, client, path, "THIRD\n", "X")
    fourth = client.open_diff(other, "FOURTH\n", "X")
    wait_until(lambda: diff_tabs(vim) == ["", "X", "X"], what="two diff tabs again")
    assert client.tool_json("close_diff", {"tab_name": "X"})["already_closed"] is False
    assert third.result(WAIT)["trigger"] == "closed_via_tool"
    wait_until(lambda: diff_tabs(vim) == ["", "X"], what="the oldest diff's tab closed")
    assert not fourth.done()
    vim.ex("2tabnext")
    assert vim.eval("getbufline(winbufnr(2), 1, '$')") == ["FOURTH"]
    vim.ex("CopilotIdeReject")
    assert fourth.result(WAIT)["message"] == "User rejected changes for %s" % other
    assert diff_tabs(vim) == [""]


def test_a_diff_waits_while_vim_is_in_insert_mode(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    vim.keys("i")
    pending = client.open_diff(path, NEW, tab())
    # Vim's state read without leaving Insert mode (`vim.eval` would): the expression
    # register evaluates it and inserts nothing; its prompt is not Normal mode either.
    seen: List[Any] = []

    def waiting_in_insert_mode() -> bool:
        marker = os.path.join(vim.log_dir, "insert-eval-%d.json" % len(seen))
        vim.keys("C-r", "=")
        vim.type("writefile([json_encode([py3eval('[v.state for v in _copilot_ide.views.values()]'),"
                 " tabpagenr('$')])], '%s') ? '' : ''" % marker)
        vim.keys("Enter")
        wait_until(lambda: os.path.exists(marker) and os.path.getsize(marker) > 0, what="Vim evaluating")
        seen.append(json.loads(read(marker)))
        return seen[-1][0] == ["waiting"]

    wait_until(waiting_in_insert_mode, what="the diff received and waiting")
    assert seen[-1] == [["waiting"], 1], seen      # no tab opened in Insert mode
    assert "-- INSERT --" in vim.screen()
    # Nothing typed into the file's buffer (read by its name: leaving Insert mode, as
    # `vim.eval` does, lets the diff's tab open at once, and the current line may be
    # the proposal's by the time the expression runs).
    assert vim.eval("getbufline(bufnr('^' . %s . '$'), 1)" % json.dumps(path)) == [read(path).splitlines()[0]]
    wait_until(lambda: tab() in diff_tabs(vim), what="the diff tab, once back in Normal mode")
    vim.ex("CopilotIdeAccept")
    assert pending.result(WAIT)["result"] == "SAVED"


def test_a_new_file_proposal(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "brand_new.py")
    pending = open_and_wait(vim, client, path, "VALUE = 1\n", "[Copilot CLI] - brand_new.py (n1)")
    assert vim.eval("getbufline(winbufnr(1), 1, '$')") == [""]
    assert vim.eval("getbufline(winbufnr(2), 1, '$')") == ["VALUE = 1"]
    vim.ex("CopilotIdeAccept")
    assert pending.result(WAIT)["result"] == "SAVED"
    assert not os.path.exists(path)                 # the CLI creates it, not Vim


# ------------------------------------------------------------------------ diagnostics

def diagnostics(client: StreamClient) -> Dict[str, Any]:
    return {entry["filePath"]: entry["diagnostics"] for entry in client.tool_json("get_diagnostics")}


def test_quickfix_and_location_lists_reach_get_diagnostics(vim: VimSession, client: StreamClient,
                                                           workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    vim.ex("call setqflist([{'filename': 'hello.txt', 'lnum': 1, 'col': 8, 'text': 'bad ö', 'type': 'W'},"
           " {'filename': 'hello.txt', 'lnum': 2, 'text': 'whole line', 'type': 'E', 'nr': 7}])")
    got = wait_until(lambda: diagnostics(client).get(path), what="quickfix entries in get_diagnostics")
    assert len(got) == 2
    first, second = got
    assert first["message"] == "bad ö" and first["severity"] == "Warning"
    # byte column 8 is "w" of "wörld": after h, é (two bytes), l, l, o, space.
    assert first["range"]["start"] == {"line": 0, "character": 6}
    assert first["range"]["end"] == {"line": 0, "character": 7}
    assert second["severity"] == "Error" and second["code"] == 7
    assert second["range"] == {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 11}}
    # A location list too; its own entry, with an end column after the emoji.
    vim.ex("call setloclist(0, [{'filename': 'hello.txt', 'lnum': 1, 'col': 20, 'end_col': 24,"
           " 'text': 'the end', 'type': 'I'}])")
    got = wait_until(lambda: len(diagnostics(client).get(path, [])) == 3 and diagnostics(client)[path],
                     what="the location list's entry")
    (info,) = [d for d in got if d["message"] == "the end"]
    assert info["severity"] == "Information"
    assert info["range"]["start"] == {"line": 0, "character": 15}
    assert info["range"]["end"] == {"line": 0, "character": 18}
    # Pushed when they change: the stream carries diagnostics_changed.
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        message = client.notifications.get(timeout=WAIT)
        if message.get("method") == "diagnostics_changed":
            break
    else:
        raise AssertionError("no diagnostics_changed pushed")
    # Emptied lists clear them.
    vim.ex("call setqflist([]) | call setloclist(0, [])")
    wait_until(lambda: diagnostics(client) == {}, what="diagnostics cleared")


def test_grep_results_are_not_diagnostics(vim: VimSession, client: StreamClient, workspace: str) -> None:
    vim.ex("silent vimgrep /second/j hello.txt")
    assert vim.eval("len(getqflist())") == 1
    # Then a location list of diagnostics: once its entry is there, the plugin has looked
    # at every list as it is now (the grep's too) and handed over what it found.
    vim.ex("call setloclist(0, [{'filename': 'hello.txt', 'lnum': 1, 'text': 'a real one', 'type': 'E'}])")
    got = wait_until(lambda: diagnostics(client).get(os.path.join(workspace, "hello.txt")),
                     what="the location list's entry")
    assert [d["message"] for d in got] == ["a real one"]
    assert list(diagnostics(client)) == [os.path.join(workspace, "hello.txt")]


def test_stop_with_a_pending_diff_answers_it_and_closes_its_tab(vim: VimSession, client: StreamClient,
                                                                 workspace: str, copilot_home: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = open_and_wait(vim, client, path, NEW, tab())
    vim.ex("CopilotIdeStop")
    # The server lets the answer out before it closes the connection (PROTOCOL.md §4).
    answer = pending.result(WAIT)
    assert (answer["result"], answer["trigger"]) == ("REJECTED", "client_disconnected")
    wait_until(lambda: diff_tabs(vim) == [""], what="the diff tab closed by :CopilotIdeStop")
    assert vim.eval("tabpagenr('$')") == 1
    assert not os.listdir(os.path.join(copilot_home, "ide"))
