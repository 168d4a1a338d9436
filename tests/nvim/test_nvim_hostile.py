"""What the CLI (through the bridge), a broken bridge or a missing Python throws at the
plugin: each is shown escaped or refused with one clear message, never a stack trace,
and Neovim goes on working."""
from __future__ import annotations

import json
import os
import signal
from typing import Any, List

import pytest

import nvim_harness as N
from nvim_harness import WAIT, NvimSession, StreamClient, locks, tabs, wait_until

NEW = "héllo wörld 😀 END\nsecond line\nthird\n"
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_bridge")


def no_traceback(nvim: NvimSession, expected: str = "") -> str:
    """Neovim's messages, once they hold `expected`: never a stack trace."""
    try:
        messages = wait_until(lambda: expected in nvim.messages() and nvim.messages(), what="the message " + expected)
    except AssertionError:
        raise AssertionError("messages %r; screen:\n%s" % (nvim.messages(), nvim.screen()))
    assert "stack traceback" not in messages and "E5108" not in messages and ".lua:" not in messages, messages
    return messages


def test_a_tab_name_with_control_characters_is_shown_escaped(nvim: NvimSession, client: StreamClient,
                                                              workspace: str) -> None:
    name = "bad\x00name\x1b[31m\x07\u202e\u0085"
    pending = client.open_diff(os.path.join(workspace, "hello.txt"), NEW, name)
    shown = "bad^@name^[[31m^G<U+202E><85>"
    wait_until(lambda: shown in tabs(nvim), what="the diff tab")
    assert nvim.eval("bufname(winbufnr(2))").endswith(shown)
    assert nvim.eval("&l:statusline").startswith("%<Copilot CLI's proposal")   # never the CLI's text
    nvim.ex("CopilotIdeAccept")
    answer = pending.result(WAIT)
    assert (answer["result"], answer["tab_name"]) == ("SAVED", name)
    no_traceback(nvim, "accepted " + shown)


@pytest.mark.parametrize("path", ["scp://example.invalid/x.txt", "term://sh", "relative.txt"])
def test_a_path_that_is_not_local_is_rejected_with_a_reason(nvim: NvimSession, client: StreamClient,
                                                            path: str) -> None:
    pending = client.open_diff(path, "pwned\n", "[Copilot CLI] - x (1)")
    answer = pending.result(WAIT)
    assert answer["result"] == "REJECTED"
    no_traceback(nvim, "it cannot be shown: not a local file path: " + path)
    assert tabs(nvim) == [""]
    assert nvim.eval("len(filter(nvim_list_bufs(), {_, b -> bufname(b) =~# 'term\\|scp\\|relative'}))") == 0


def test_a_path_with_terminal_escapes_is_shown_escaped(nvim: NvimSession, client: StreamClient,
                                                       workspace: str) -> None:
    path = os.path.join(workspace, "a\x1b]0;pwned\x07.txt")
    pending = client.open_diff(path, "x\n", "t")
    wait_until(lambda: "t" in tabs(nvim), what="the diff tab")
    no_traceback(nvim, "edit of a^[]0;pwned^G.txt")
    assert "a^[]0;pwned^G.txt" in nvim.eval("bufname(winbufnr(1))")
    nvim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"


FTPLUGIN = "vim.g.ftplugin_runs = (vim.g.ftplugin_runs or 0) + 1\n"


def test_the_proposal_gets_syntax_only_no_ftplugin_no_modeline(nvims: Any, workspace: str, tmp_path: Any) -> None:
    rt = str(tmp_path / "rt")
    os.makedirs(os.path.join(rt, "ftplugin"))
    with open(os.path.join(rt, "ftplugin", "python.lua"), "w") as f:
        f.write(FTPLUGIN)
    path = os.path.join(workspace, "app.py")
    with open(path, "w") as f:
        f.write("x = 1\n")
    nvim = nvims().start(files=["app.py"], before=["set rtp+=" + rt, "filetype plugin on", "syntax on",
                                                   "set modeline modelines=5",
                                                   "autocmd FileType * let g:filetypes = get(g:, 'filetypes', []) + [expand('<amatch>')]"])
    client = StreamClient(nvim.wait_lock())
    try:
        nvim.wait_ready()
        assert nvim.eval("[&filetype, g:ftplugin_runs]") == ["python", 1]   # the user's own buffer
        # A modeline that would run a command and change options, were modelines read.
        proposal = "x = 2\n# vim: set ts=3 ft=sh foldmethod=expr foldexpr=execute('let\\ g:pwned=1') :\n"
        pending = client.open_diff(path, proposal, "[Copilot CLI] - app.py (p)")
        wait_until(lambda: "[Copilot CLI] - app.py (p)" in tabs(nvim), what="the diff tab")
        state = nvim.eval("[getbufvar(winbufnr(2), '&filetype'), getbufvar(winbufnr(2), '&syntax'),"
                          " getbufvar(winbufnr(2), '&tabstop'), getbufvar(winbufnr(1), '&syntax'),"
                          " getwinvar(2, '&foldmethod'), get(g:, 'pwned', 0), g:ftplugin_runs, g:filetypes]")
        assert state == ["", "python", 8, "python", "diff", 0, 1, ["python"]], state
        nvim.ex("doautocmd BufRead")                # not even a reread of modelines applies
        nvim.ex("CopilotIdeReject")
        assert pending.result(WAIT)["result"] == "REJECTED"
        assert nvim.eval("get(g:, 'pwned', 0)") == 0
    finally:
        client.close()


def test_w_to_another_file_writes_nothing(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    pending = client.open_diff(path, NEW, "t")
    wait_until(lambda: "t" in tabs(nvim), what="the diff tab")
    for command in ("w elsewhere.txt", "w! " + path, "saveas other.txt", "1,2w part.txt", "wall"):
        nvim.ex(command)
        N.settle(0.2)
    assert sorted(os.listdir(workspace)) == ["hello.txt"]
    assert not pending.done()
    assert "a proposal is never written to a file" in nvim.messages()
    nvim.ex("CopilotIdeReject")
    assert pending.result(WAIT)["result"] == "REJECTED"


def test_a_bridge_that_dies_gives_one_message(nvim: NvimSession, client: StreamClient, workspace: str) -> None:
    pending = client.open_diff(os.path.join(workspace, "hello.txt"), NEW, "t")
    wait_until(lambda: "t" in tabs(nvim), what="the diff tab")
    os.kill(nvim.bridge_pid(), signal.SIGKILL)
    wait_until(lambda: "the bridge ended" in nvim.messages(), what="the message")
    messages = no_traceback(nvim)
    assert messages.count("copilot_ide:") == 1, messages
    assert "the bridge ended (exit 137); :CopilotIdeStart starts it again" in messages
    wait_until(lambda: tabs(nvim) == [""], what="the diff tab closed")
    nvim.keys("j")                                  # Neovim goes on
    wait_until(lambda: nvim.eval("line('.')") == 2, what="the cursor moved")
    nvim.ex("CopilotIdeStatus")
    nvim.wait_screen("Copilot IDE: not running")
    with pytest.raises(Exception):
        pending.result(5)  # (the CLI's call ends with its connection; no answer came)


def test_a_missing_python_gives_one_message(nvims: Any, copilot_home: str) -> None:
    nvim = nvims().start(python="/nonexistent/python3")
    wait_until(lambda: "cannot start" in nvim.messages(), what="the message")
    messages = no_traceback(nvim)
    assert "copilot_ide: cannot start: no Python here: /nonexistent/python3 is not an executable" in messages
    assert messages.count("copilot_ide:") == 1
    nvim.keys("j")
    wait_until(lambda: nvim.eval("line('.')") == 2, what="the cursor moved")
    nvim.ex("CopilotIdeSendFile")
    nvim.wait_screen(r"copilot_ide: not running \(:CopilotIdeStart\)")
    assert locks(copilot_home) == []


def fake(nvims: Any, tmp_path: Any, script: List[Any]) -> Any:
    log = str(tmp_path / "fake-bridge.log")
    script_file = str(tmp_path / "fake-bridge.json")
    with open(script_file, "w", encoding="utf-8") as f:
        json.dump(script, f)
    nvim = nvims(env={"FAKE_BRIDGE_LOG": log, "FAKE_BRIDGE_SCRIPT": script_file}).start(
        before=["let g:copilot_ide_library = '%s'" % FAKE])
    nvim.wait_ready()

    def lines() -> List[Any]:
        try:
            with open(log, encoding="utf-8") as f:
                return [json.loads(line) for line in f]
        except OSError:
            return []
    return nvim, lines


def test_a_bridge_that_writes_garbage_or_malformed_diffs(nvims: Any, tmp_path: Any, workspace: str) -> None:
    path = os.path.join(workspace, "hello.txt")
    big = "line of a large proposal\n" * 200000   # ~5 MB: read in many chunks
    script = [
        "this is not JSON",
        "[1, 2, 3]",
        {"type": "no such type"},
        {"type": "diff", "id": 1, "tab": 5, "path": path, "original": "", "new": "x", "new_file": False},
        {"type": "diff", "id": 2, "tab": "t2", "path": path, "original": None, "new": "x", "new_file": False},
        {"type": "diff", "id": 3, "tab": "big", "path": path, "original": "", "new": big, "new_file": True},
    ]
    nvim, lines = fake(nvims, tmp_path, script)
    wait_until(lambda: "big" in tabs(nvim), what="the large diff's tab")
    answers = wait_until(lambda: [m for m in lines() if m.get("type") == "diff_answer"] or None,
                         what="the malformed diffs answered")
    wait_until(lambda: len([m for m in lines() if m.get("type") == "diff_answer"]) == 2, what="both answered")
    answers = [m for m in lines() if m.get("type") == "diff_answer"]
    assert sorted((m["diff"], m["accept"]) for m in answers) == [(1, False), (2, False)]
    messages = no_traceback(nvim, 'rejected t2 (it cannot be shown: its "original" is not a string)')
    assert "copilot_ide: the bridge wrote a line that is not a message: this is not JSON" in messages
    assert "copilot_ide: the bridge wrote a line that is not a message: [1, 2, 3]" in messages
    assert 'rejected diff 1 (it cannot be shown: its "tab" is not a string)' in messages
    assert nvim.eval("line('$')") == 200000
    nvim.ex("w")                                    # accepted by :w in the proposal
    wait_until(lambda: [m for m in lines() if m.get("type") == "diff_answer" and m["diff"] == 3] or None,
               what="the large diff's answer")
    assert [m["accept"] for m in lines() if m.get("type") == "diff_answer" and m["diff"] == 3] == [True]


def test_a_line_that_is_not_utf8_keeps_its_columns(nvims: Any, workspace: str) -> None:
    """A file read with ++bad=keep holds bytes that are not UTF-8, which the bridge (a
    strict decoder) would refuse: each goes as "?", one byte for one, so the columns
    after it stay right and no line is refused."""
    with open(os.path.join(workspace, "bad.txt"), "wb") as f:
        f.write(b"caf\xe9 x\xff\xfe y\n")
    nvim = nvims().start(files=[], after=["edit ++enc=utf-8 ++bad=keep bad.txt"])
    client = StreamClient(nvim.wait_lock())
    try:
        nvim.wait_ready()
        nvim.keys("g", "g", "0", "f", "x")
        p = client.wait_selection(lambda p: p["selection"]["start"]["character"] == 5)
        assert p["filePath"] == os.path.join(workspace, "bad.txt")
        nvim.keys("v", "f", "y")                      # across the two bad bytes
        p = client.wait_selection(lambda p: p["text"] != "")
        assert p["text"] == "x?? y"
        assert (p["selection"]["start"]["character"], p["selection"]["end"]["character"]) == (5, 10)
        nvim.keys("Escape")
        N.settle(0.3)
        assert "refused" not in nvim.messages()
    finally:
        client.close()


def test_a_bridge_that_cannot_serve_says_why_and_ends(nvims: Any, tmp_path: Any) -> None:
    """$COPILOT_HOME is a file: no lock folder can be made there. The bridge refuses the
    hello; the plugin says why, once, and ends the bridge."""
    home = str(tmp_path / "a-file")
    with open(home, "w"):
        pass
    nvim = nvims().start(before=["let $COPILOT_HOME = '%s'" % home])
    messages = no_traceback(nvim, "copilot_ide: cannot start: hello: cannot start the server")
    assert messages.count("copilot_ide:") == 1, messages
    def bridges() -> List[str]:
        found = []
        for pid in N.children(nvim.pid):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"bridge" in argv and N.pid_alive(pid):
                found.append("%d %r" % (pid, argv))
        return found
    try:
        wait_until(lambda: not bridges(), what="the bridge's exit")
    except AssertionError:
        raise AssertionError("left: %s" % bridges())
    assert nvim.lua("return require('copilot_ide').running()") is False
