"""The Neovim plugin (editors/nvim) in a real Neovim in tmux: its bridge's lock, the
selection and diagnostics it hands over, its commands."""
from __future__ import annotations

import os
import signal
from typing import Any, Dict

import nvim_harness as N
from nvim_harness import NvimSession, StreamClient, locks, read_lock, wait_until


def sel(params: Dict[str, Any]) -> Any:
    r = params["selection"]
    return params["text"], (r["start"]["line"], r["start"]["character"]), (r["end"]["line"], r["end"]["character"])


def test_startup_lock_is_the_bridges_and_qa_bang_leaves_nothing(nvim: NvimSession, workspace: str,
                                                                copilot_home: str) -> None:
    (lock_path,) = locks(copilot_home)
    lock = read_lock(lock_path)
    assert lock["workspaceFolders"] == [workspace]
    assert lock["ideName"] == "Neovim"
    assert lock["isTrusted"] is False
    bridge = nvim.bridge_pid()
    assert lock["pid"] == bridge and bridge in N.children(nvim.pid)   # Neovim's child wrote it
    nvim.ex("edit! %")
    nvim.type("ichanged")                       # a modified buffer: :qa! discards it
    nvim.keys("Escape")
    nvim.quit("qa!")
    assert locks(copilot_home) == []
    assert not os.path.exists(lock["socketPath"])
    wait_until(lambda: not N.pid_alive(bridge), 10, "the bridge's exit")


def test_trusted_setting_marks_the_lock_trusted(nvims: Any, copilot_home: str) -> None:
    nvim = nvims().start(before=["let g:copilot_ide_trusted = 1"])
    assert read_lock(nvim.wait_lock())["isTrusted"] is True
    nvim.quit("qa!")
    assert locks(copilot_home) == []


def test_autostart_off_then_start_stop_start(nvims: Any, workspace: str, copilot_home: str) -> None:
    nvim = nvims().start(before=["let g:copilot_ide_autostart = 0"])
    nvim.wait_screen(r"hello\.txt")
    assert nvim.eval("exists(':CopilotIdeStart')") == 2
    N.settle(0.5)
    assert locks(copilot_home) == [] and N.children(nvim.pid) in ([], N.children(nvim.pid)[:1])
    nvim.ex("CopilotIdeStart")
    first = nvim.wait_lock()
    nvim.wait_screen("Copilot IDE: serving " + workspace)
    first_pid = read_lock(first)["pid"]
    nvim.ex("CopilotIdeStop")
    wait_until(lambda: not os.path.exists(first), what="the lock removed by :CopilotIdeStop")
    nvim.wait_screen(r"Copilot IDE: stopped \(lock file removed\)")
    wait_until(lambda: not N.pid_alive(first_pid), 10, "the stopped bridge's exit")
    nvim.ex("CopilotIdeStatus")
    nvim.wait_screen("Copilot IDE: not running")
    nvim.ex("CopilotIdeStart")
    second = nvim.wait_lock()
    assert second != first and read_lock(second)["pid"] != first_pid
    client = StreamClient(second)
    try:
        assert client.tool_json("get_vscode_info")["appName"] == "Neovim"
    finally:
        client.close()
    nvim.quit("qa")
    assert locks(copilot_home) == []


def test_copilot_home_set_inside_neovim_is_honoured(nvims: Any, copilot_home: str, tmp_path: Any) -> None:
    other = os.path.realpath(str(tmp_path / "other-home"))
    nvim = nvims().start(before=["let $COPILOT_HOME = '%s'" % other])
    wait_until(lambda: locks(other), what="a lock in the other COPILOT_HOME")
    assert locks(copilot_home) == []
    nvim.quit()
    assert locks(other) == []


def test_cd_moves_the_lock_to_the_new_folder(nvim: NvimSession, workspace: str, copilot_home: str) -> None:
    sub = os.path.join(workspace, "sub")
    os.makedirs(sub)
    (first,) = locks(copilot_home)
    nvim.ex("cd sub")
    # The same lock, rewritten in place (PROTOCOL.md §1, "Changing folders").
    wait_until(lambda: N.lock_folders(first) == [sub], what="the lock listing the new folder")
    assert locks(copilot_home) == [first]
    nvim.ex("lcd ..")                               # a window's folder is not Neovim's
    N.settle(0.5)
    assert locks(copilot_home) == [first] and N.lock_folders(first) == [sub]
    nvim.quit()
    assert locks(copilot_home) == []


def test_the_folder_served_is_the_real_path(nvims: Any, workspace: str, copilot_home: str, tmp_path: Any) -> None:
    link = str(tmp_path / "link")
    os.symlink(workspace, link)
    nvim = nvims().start(before=["cd " + link])
    assert read_lock(nvim.wait_lock())["workspaceFolders"] == [workspace]
    nvim.wait_ready()
    client = StreamClient(nvim.wait_lock())
    try:
        nvim.ex("CopilotIdeStatus")
        nvim.wait_screen(r"Press ENTER")
        nvim.keys("Enter")
        status = nvim.messages()
        assert "Copilot IDE: serving " + workspace in status
        assert "sessions connected: 1" in status and "(the bridge did not answer)" not in status
        # A bridge that does not answer (stopped): the status comes all the same, and says so.
        os.kill(nvim.bridge_pid(), signal.SIGSTOP)
        try:
            nvim.ex("CopilotIdeStatus")
            nvim.wait_screen(r"the bridge did not answer")
            nvim.keys("Enter")
        finally:
            os.kill(nvim.bridge_pid(), signal.SIGCONT)
    finally:
        client.close()
    nvim.quit("qa!")


# --------------------------------------------------------------------------- selection

def test_cursor_moves_reach_the_stream_in_utf16(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    nvim.keys("g", "g", "0")
    p = client.wait_selection(lambda p: sel(p) == ("", (0, 0), (0, 0)))
    assert p["filePath"] == path
    nvim.keys("w")                                  # "wörld": after h, é (2 bytes), llo, space
    client.wait_selection(lambda p: sel(p) == ("", (0, 6), (0, 6)))
    nvim.keys("w")                                  # the emoji: one character, 4 bytes
    client.wait_selection(lambda p: sel(p) == ("", (0, 12), (0, 12)))
    nvim.keys("w")                                  # "end": after the emoji's 2 UTF-16 units
    client.wait_selection(lambda p: sel(p) == ("", (0, 15), (0, 15)))
    nvim.keys("j")
    client.wait_selection(lambda p: sel(p) == ("", (1, 10), (1, 10)))
    got = client.tool_json("get_selection")
    assert (got["text"], got["current"]) == ("", True)


def test_visual_selections_are_pushed_while_in_visual_mode(nvim: NvimSession, client: StreamClient) -> None:
    nvim.keys("g", "g", "0", "w", "v", "w", "w")    # charwise, across the emoji, exclusive end
    client.wait_selection(lambda p: sel(p) == ("wörld 😀 e", (0, 6), (0, 16)))
    assert nvim.eval("mode()") == "v"               # pushed while still in Visual mode
    nvim.keys("Escape", "g", "g", "0", "w", "v", "j")  # two lines
    client.wait_selection(lambda p: sel(p) == ("wörld 😀 end\nsecond ", (0, 6), (1, 7)))
    nvim.keys("Escape", "g", "g", "V", "j")         # linewise
    client.wait_selection(lambda p: sel(p) == ("héllo wörld 😀 end\nsecond line", (0, 0), (1, 11)))
    assert nvim.eval("mode()") == "V"
    assert client.tool_json("get_selection")["text"] == "héllo wörld 😀 end\nsecond line"
    nvim.keys("Escape", "g", "g", "0", "l", "C-v", "j", "l")  # blockwise: columns 1-2 of lines 1-2
    client.wait_selection(lambda p: sel(p) == ("él\nec", (0, 1), (1, 3)))
    nvim.keys("Escape")
    client.wait_selection(lambda p: sel(p)[0] == "" and sel(p)[1] == sel(p)[2])


def test_a_block_across_a_wide_character(nvim: NvimSession, client: StreamClient) -> None:
    nvim.keys("g", "g", "0", "w", "w", "h", "C-v", "l", "l")
    client.wait_selection(lambda p: sel(p) == (" 😀 ", (0, 11), (0, 15)))


def test_selection_follows_every_window(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    other = os.path.join(workspace, "other.txt")
    with open(other, "w", encoding="utf-8") as f:
        f.write("ab\ncd\n")
    nvim.ex("vsplit other.txt")
    nvim.keys("j", "l")
    p = client.wait_selection(lambda p: p["filePath"] == other and sel(p)[1] == (1, 1))
    assert p["text"] == ""
    nvim.keys("C-w", "w")
    client.wait_selection(lambda p: p["filePath"] == os.path.join(workspace, "hello.txt"))
    nvim.ex("help")                                 # not a file: the last file's selection stays
    N.settle(0.5)
    assert client.tool_json("get_selection")["filePath"] == os.path.join(workspace, "hello.txt")


def _next(client: StreamClient, method: str) -> Any:
    try:
        while True:
            message = client.notifications.get(timeout=0.2)
            if message.get("method") == method:
                return message
    except Exception:
        return None


def test_send_file_and_send_selection(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    nvim.ex("CopilotIdeSendFile")
    msg = wait_until(lambda: _next(client, "add_file_reference"), what="add_file_reference")
    assert msg["params"]["filePath"] == path
    nvim.wait_screen("Copilot IDE: sent hello.txt to 1 Copilot CLI session")
    nvim.keys("g", "g", "0", "w", "v", "e")
    nvim.type(":")                                  # gives :'<,'>
    nvim.type("CopilotIdeSendSelection")
    nvim.keys("Enter")
    p = wait_until(lambda: _next(client, "add_selection"), what="add_selection")["params"]
    assert p["filePath"] == path
    assert p["selection"]["start"] == {"line": 0, "character": 6}
    assert p["selection"]["end"] == {"line": 0, "character": 11}
    nvim.ex("2,3CopilotIdeSendSelection")           # a line range
    p = wait_until(lambda: _next(client, "add_selection"), what="add_selection of lines")["params"]
    assert p["selection"]["start"] == {"line": 1, "character": 0}
    assert p["selection"]["end"] == {"line": 2, "character": 5}


# ------------------------------------------------------------------------ diagnostics

def diagnostics(client: StreamClient) -> Dict[str, Any]:
    return {entry["filePath"]: entry["diagnostics"] for entry in client.tool_json("get_diagnostics")}


SET_DIAGNOSTICS = """
local ns = vim.api.nvim_create_namespace('test')
vim.diagnostic.set(ns, 0, {
  {lnum = 0, col = 7, end_lnum = 0, end_col = 13, severity = vim.diagnostic.severity.WARN,
   message = 'bad \\226\\128\\174 "wörld"\\n  twice', source = 'tester', code = 'W42'},
  {lnum = 0, col = 19, end_lnum = 0, end_col = 22, severity = vim.diagnostic.severity.INFO, message = 'the end'},
  {lnum = 1, col = 0, end_lnum = 1, end_col = 6, severity = vim.diagnostic.severity.HINT, message = 'hint', code = 7},
  {lnum = 2, col = 0, severity = vim.diagnostic.severity.ERROR, message = 'error'},
})
"""


def test_vim_diagnostic_reaches_get_diagnostics(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    nvim.lua(SET_DIAGNOSTICS)
    got = wait_until(lambda: diagnostics(client).get(path), what="diagnostics in get_diagnostics")
    by_message = {d["message"]: d for d in got}
    assert set(by_message) == {'bad \u202e "wörld"\n  twice', "the end", "hint", "error"}   # unchanged
    warn = by_message['bad \u202e "wörld"\n  twice']
    assert warn["severity"] == "Warning" and warn.get("source") == "tester" and warn.get("code") == "W42"
    # Byte columns 7-13 of line 0 are "wörld" (ö is two bytes): UTF-16 6-11.
    assert warn["range"] == {"start": {"line": 0, "character": 6}, "end": {"line": 0, "character": 11}}
    assert by_message["the end"]["severity"] == "Information"
    assert by_message["the end"]["range"]["start"] == {"line": 0, "character": 15}   # after the emoji
    assert by_message["hint"]["severity"] == "Hint" and by_message["hint"].get("code") == 7
    assert by_message["error"]["severity"] == "Error"
    seen = wait_until(lambda: _next(client, "diagnostics_changed"), what="diagnostics_changed pushed")
    assert seen["params"]["uris"]
    nvim.lua("vim.diagnostic.reset()")
    wait_until(lambda: diagnostics(client) == {}, what="diagnostics cleared")


def test_checkhealth(nvim: NvimSession, workspace: str, copilot_home: str) -> None:
    nvim.ex("checkhealth copilot_ide")
    text = wait_until(lambda: "\n".join(nvim.eval("getline(1, '$')")) if "doctor" in "\n".join(
        nvim.eval("getline(1, '$')")) and "connects" in "\n".join(nvim.eval("getline(1, '$')")) else None,
        what="the health report")
    assert "ERROR" not in text, text
    assert "is Python %d.%d" % (__import__("sys").version_info[:2]) in text
    assert "the bridge starts, writes its lock and stops" in text
    assert "%s/ide: mode 700" % copilot_home in text
    assert "serves %s: lock %s" % (workspace, locks(copilot_home)[0]) in text
    assert "copilot started in %s connects to Neovim at start-up" % workspace in text
