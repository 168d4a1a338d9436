"""The Vim plugin (editors/vim) in a real Vim with +python3, driven through tmux, its
`/ide` server met by a CLI-like client over the lock file's socket."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Dict

import pytest

import vim_harness as V
from vim_harness import StreamClient, VimSession, locks, read_lock, wait_until

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="tmux and Unix sockets: Linux")


def sel(params: Dict[str, Any]) -> Any:
    r = params["selection"]
    return params["text"], (r["start"]["line"], r["start"]["character"]), (r["end"]["line"], r["end"]["character"])


def hello(workspace: str) -> str:
    return os.path.join(workspace, "hello.txt")


# ------------------------------------------------------------------ loading and the lock

def test_startup_writes_the_lock_and_qa_removes_it(vim: VimSession, workspace: str, copilot_home: str) -> None:
    (lock_path,) = locks(copilot_home)
    lock = read_lock(lock_path)
    assert lock["workspaceFolders"] == [workspace]
    assert lock["ideName"] == "Vim"
    assert lock["pid"] == vim.pid
    assert lock["isTrusted"] is False
    socket_path = lock["socketPath"]
    assert os.path.exists(socket_path)
    vim.quit("qa")
    assert locks(copilot_home) == []
    assert not os.path.exists(os.path.dirname(socket_path))


def test_trusted_setting_marks_the_lock_trusted(vims: Any, copilot_home: str) -> None:
    """`let g:copilot_ide_trusted = 1` before the plugin loads: the lock says isTrusted
    (the setting doctor names for Vim)."""
    vim = vims().start(before=["let g:copilot_ide_trusted = 1"])
    wait_until(lambda: len(locks(copilot_home)) == 1, what="the lock")
    (lock_path,) = locks(copilot_home)
    assert read_lock(lock_path)["isTrusted"] is True
    vim.quit("qa!")
    assert locks(copilot_home) == []


def test_qa_bang_with_a_client_connected_leaves_no_lock(vim: VimSession, client: StreamClient,
                                                        copilot_home: str) -> None:
    vim.ex("edit! %")
    vim.type("ichanged")                       # a modified buffer: :qa! discards it
    vim.keys("Escape")
    vim.quit("qa!")
    assert locks(copilot_home) == []
    assert not os.path.exists(client.lock["socketPath"])


def test_sourced_after_start_up_starts_at_once(vims: Any, workspace: str, copilot_home: str) -> None:
    vim = vims().start(plugin="")
    vim.wait_screen(r"hello\.txt")
    time.sleep(0.5)
    assert locks(copilot_home) == []
    vim.ex("set rtp^=%s | runtime plugin/copilot_ide.vim" % V.PLUGIN)
    lock = read_lock(vim.wait_lock())
    assert lock["workspaceFolders"] == [workspace]
    vim.quit()
    assert locks(copilot_home) == []


def test_loaded_from_the_runtime_path_at_start_up(vims: Any, workspace: str, copilot_home: str) -> None:
    # -u NORC: no vimrc, but plugins load from 'runtimepath' (set with --cmd before that).
    vim = vims().start(plugin="", rc="NORC", before=["set rtp^=" + V.PLUGIN])
    assert read_lock(vim.wait_lock())["workspaceFolders"] == [workspace]
    assert vim.eval("exists(':CopilotIdeSendSelection')") == 2
    vim.quit()
    assert locks(copilot_home) == []


def test_autostart_off_then_start_stop_start(vims: Any, workspace: str, copilot_home: str) -> None:
    vim = vims().start(before=["let g:copilot_ide_autostart = 0"])
    vim.wait_screen(r"hello\.txt")
    assert vim.eval("exists(':CopilotIdeStart')") == 2
    assert locks(copilot_home) == []
    vim.ex("CopilotIdeStart")
    first = vim.wait_lock()
    vim.ex("CopilotIdeStop")
    wait_until(lambda: not os.path.exists(first), what="the lock removed by :CopilotIdeStop")
    vim.ex("CopilotIdeStart")                      # the same server object, started again
    second = vim.wait_lock()
    assert second != first
    client = StreamClient(second)
    try:
        assert client.tool_json("get_vscode_info")["appName"] == "Vim"
    finally:
        client.close()
    vim.ex("CopilotIdeStop")
    wait_until(lambda: not os.path.exists(second), timeout=8, what="the second stop removing the lock")
    vim.ex("CopilotIdeStatus")
    vim.wait_screen(r"Copilot IDE: not running")
    vim.quit()
    assert locks(copilot_home) == []


def test_honours_copilot_home_set_inside_vim(vims: Any, copilot_home: str, tmp_path: Any) -> None:
    other = os.path.realpath(str(tmp_path / "other-home"))
    vim = vims().start(before=["let $COPILOT_HOME = '%s'" % other])
    wait_until(lambda: locks(other), what="a lock in the other COPILOT_HOME")
    assert locks(copilot_home) == []
    vim.quit()
    assert locks(other) == []


def test_a_killed_vim_s_lock_is_cleaned_at_the_next_start(vims: Any, copilot_home: str) -> None:
    first = vims().start()
    stale = first.wait_lock()
    os.kill(first.pid, signal.SIGKILL)
    wait_until(first.gone, what="the killed Vim gone (reaped)")
    assert os.path.exists(stale)                    # nobody could remove it ...
    second = vims().start()
    try:
        wait_until(lambda: locks(copilot_home) and stale not in locks(copilot_home),
                   what="the stale lock cleaned")  # ... until the next start
    except AssertionError:
        raise AssertionError("the stale lock %s stays; locks %s; the new Vim shows:\n%s"
                             % (stale, locks(copilot_home), second.screen()))
    assert len(locks(copilot_home)) == 1
    second.quit()
    assert locks(copilot_home) == []


def test_without_python3_it_says_so_once_and_does_nothing(workspace: str, tmp_path: Any) -> None:
    basic = "/usr/bin/vim.basic"
    if not os.path.exists(basic) or b"-python3" not in subprocess.run(
            [basic, "--version"], stdout=subprocess.PIPE, timeout=20).stdout:
        pytest.skip("no Vim without +python3 here (/usr/bin/vim.basic)")
    out = str(tmp_path / "messages.txt")
    home = str(tmp_path / "home")
    subprocess.run([basic, "-N", "-u", "NONE", "-i", "NONE", "-n", "-es",
                    "-c", "set rtp^=" + V.PLUGIN, "-c", "runtime plugin/copilot_ide.vim",
                    "-c", "runtime plugin/copilot_ide.vim",
                    "-c", "redir! > %s | silent messages | echo exists(':CopilotIdeStart') | redir END" % out,
                    "-c", "qa!"], cwd=workspace, env=dict(os.environ, COPILOT_HOME=home),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    with open(out, encoding="utf-8") as f:
        text = f.read()
    assert text.count("no +python3") == 1, text
    assert text.strip().endswith("0"), text       # no commands defined
    assert not os.path.exists(os.path.join(home, "ide")) or not os.listdir(os.path.join(home, "ide"))


# --------------------------------------------------------------------------- selection

def test_cursor_moves_reach_the_stream_in_utf16(vim: VimSession, client: StreamClient, workspace: str) -> None:
    path = hello(workspace)
    vim.keys("g", "g", "0")
    p = client.wait_selection(lambda p: sel(p) == ("", (0, 0), (0, 0)))
    assert p["filePath"] == path and p["fileUrl"] == "file://" + path
    vim.keys("w")                                   # "wörld": after h, é (2 bytes), llo, space
    client.wait_selection(lambda p: sel(p) == ("", (0, 6), (0, 6)))
    vim.keys("w")                                   # the emoji: one character, 4 bytes
    client.wait_selection(lambda p: sel(p) == ("", (0, 12), (0, 12)))
    vim.keys("w")                                   # "end": after the emoji's 2 UTF-16 units
    client.wait_selection(lambda p: sel(p) == ("", (0, 15), (0, 15)))
    vim.keys("j")
    client.wait_selection(lambda p: sel(p) == ("", (1, 10), (1, 10)))
    got = client.tool_json("get_selection")
    assert (got["text"], got["current"]) == ("", True)
    assert got["selection"]["start"] == {"line": 1, "character": 10}


def test_visual_selections_reach_the_stream_exactly(vim: VimSession, client: StreamClient) -> None:
    vim.keys("g", "g", "0", "w", "v", "w", "w")     # charwise, across the emoji, inclusive
    client.wait_selection(lambda p: sel(p) == ("wörld 😀 e", (0, 6), (0, 16)))
    vim.keys("Escape", "g", "g", "0", "w", "v", "j")  # two lines
    client.wait_selection(lambda p: sel(p) == ("wörld 😀 end\nsecond ", (0, 6), (1, 7)))
    vim.keys("Escape", "g", "g", "V", "j")          # linewise
    client.wait_selection(lambda p: sel(p) == ("héllo wörld 😀 end\nsecond line", (0, 0), (1, 11)))
    got = client.tool_json("get_selection")
    assert got["text"] == "héllo wörld 😀 end\nsecond line"
    vim.keys("Escape", "g", "g", "l", "C-v", "j", "l")  # blockwise: columns 1-2 of lines 1-2
    client.wait_selection(lambda p: sel(p) == ("él\nec", (0, 1), (1, 3)))
    vim.keys("Escape")
    client.wait_selection(lambda p: sel(p)[0] == "" and sel(p)[1] == sel(p)[2])


def test_selection_follows_every_window(vim: VimSession, client: StreamClient, workspace: str) -> None:
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("ab\ncd\n")
    vim.ex("vsplit other.txt")
    vim.keys("j", "l")
    p = client.wait_selection(lambda p: p["filePath"] == other and sel(p)[1] == (1, 1))
    assert p["text"] == ""
    vim.keys("C-w", "w")                            # back to hello.txt's window
    client.wait_selection(lambda p: p["filePath"] == hello(workspace))


def test_send_file_and_send_selection(vim: VimSession, client: StreamClient, workspace: str) -> None:
    vim.ex("CopilotIdeSendFile")
    msg = wait_until(lambda: _next(client, "add_file_reference"), what="add_file_reference")
    assert msg["params"]["filePath"] == hello(workspace)
    vim.keys("g", "g", "0", "w", "v", "e")
    vim.type(":")                                   # gives :'<,'>
    vim.type("CopilotIdeSendSelection")
    vim.keys("Enter")
    msg = wait_until(lambda: _next(client, "add_selection"), what="add_selection")
    p = msg["params"]
    assert p["filePath"] == hello(workspace)
    assert p["selection"]["start"] == {"line": 0, "character": 6}
    assert p["selection"]["end"] == {"line": 0, "character": 11}
    assert p.get("text", p.get("selectedText")) in (None, "wörld")
    vim.ex("2,3CopilotIdeSendSelection")            # a line range
    p = wait_until(lambda: _next(client, "add_selection"), what="add_selection of lines")["params"]
    assert p["selection"]["start"] == {"line": 1, "character": 0}
    assert p["selection"]["end"] == {"line": 2, "character": 5}


def _next(client: StreamClient, method: str) -> Any:
    try:
        while True:
            message = client.notifications.get(timeout=0.2)
            if message.get("method") == method:
                return message
    except Exception:
        return None


def test_cd_moves_the_lock_to_the_new_folder(vim: VimSession, workspace: str, copilot_home: str) -> None:
    sub = os.path.join(workspace, "sub")
    os.makedirs(sub)
    (first,) = locks(copilot_home)
    vim.ex("cd sub")
    # The same lock, rewritten in place (PROTOCOL.md §1, "Changing folders").
    wait_until(lambda: V.lock_folders(first) == [sub], what="the lock listing the new folder")
    assert locks(copilot_home) == [first]
    vim.quit()
    assert locks(copilot_home) == []


def test_a_block_across_a_wide_character(vim: VimSession, client: StreamClient) -> None:
    # Screen cells 12-15 of line 1: a space, the emoji (two cells), a space.
    vim.keys("g", "g", "0", "w", "w", "h", "C-v", "l", "l")
    client.wait_selection(lambda p: sel(p) == (" 😀 ", (0, 11), (0, 15)))


# ------------------------------------------------------------------ the timer

COUNT_TICKS = ("py3 _ticks = []; _tick = _copilot_ide.tick; "
               "_copilot_ide.tick = lambda *a: (_ticks.append([int(x) for x in a]), _tick(*a))[1]")


def test_an_idle_vim_never_enters_python_and_a_ring_a_list_or_a_move_does(vim: VimSession, client: StreamClient,
                                                                         workspace: str) -> None:
    """Each tick of the plugin's timer that enters Python is counted (`_copilot_ide.tick`
    wrapped). Idle (nothing moves, nothing queued, the lists as they were: the Ex
    commands that read Vim's state only pass through Command-line mode), none does; a
    diff the server queued rings the bell, a new quickfix list and a cursor move each
    make one tick enter Python, with what it has to do. (A second of idling: ~1 s.)"""
    wait_until(lambda: vim.eval("exists('#copilot_ide#CursorMoved')"), what="the server's start taken up")
    vim.ex(COUNT_TICKS)
    time.sleep(1.0)  # twenty ticks, four of them fifth ones
    assert vim.eval("py3eval('_ticks')") == []
    vim.ex("call setqflist([{'filename': 'hello.txt', 'lnum': 1, 'text': 'bad', 'type': 'E'}])")
    wait_until(lambda: vim.eval("py3eval('_ticks')"), what="a tick for the new list")
    assert vim.eval("py3eval('_ticks')") == [[0, 1, 0]]  # (moved, lists changed, rung)
    wait_until(lambda: diagnostics_of(client), what="the list's diagnostics")
    pending = client.open_diff(hello(workspace), "new text\n", "rung")
    vim.wait_screen(r"Copilot proposes an edit of hello\.txt")
    assert [0, 0, 1] in vim.eval("py3eval('_ticks')")
    vim.ex("CopilotIdeReject")
    assert pending.result(V.WAIT)["result"] == "REJECTED"
    vim.ex("tabonly | py3 _ticks.clear()")
    time.sleep(1.0)  # what the diff left pending is done
    vim.ex("py3 _ticks.clear()")
    vim.keys("j")
    wait_until(lambda: [1, 0, 0] in vim.eval("py3eval('_ticks')"), what="a tick for the move")
    vim.quit("qa!")


def diagnostics_of(client: StreamClient) -> Any:
    return client.tool_json("get_diagnostics")
