"""The plugin's start never holds Vim's thread for the server: the lock appears while
Vim goes on answering keys, a selection made meanwhile reaches the CLI, and `:qa!` at
any point of the start leaves no lock and no process.

To make "while the server starts" last as long as a test needs, Vim's Python is given
a gate (`--cmd`, before the plugin loads): the library's listening step waits for a
file the test creates. Only the test does this; the plugin is run as it ships."""
from __future__ import annotations

import os
import re
from typing import Any, List

import pytest

import vim_harness as V
from vim_harness import WAIT, StreamClient, VimSession, lock_folders, locks, read_lock, wait_until

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="tmux and Unix sockets: Linux")

GATE_MODULE = '''
import asyncio, os
from ide_protocol.server import listener

GATE = %r
_original = listener.Listener.start_unix


async def _held(self, *args, **kwargs):
    while not os.path.exists(GATE):
        await asyncio.sleep(0.02)
    return await _original(self, *args, **kwargs)


listener.Listener.start_unix = _held
'''


def gated(vims: Any, tmp_path: Any, env: Any = None, **kw: Any) -> Any:
    """A Vim whose server's start waits at its listening step until `open_gate()`."""
    folder = str(tmp_path / "gate")
    os.makedirs(folder)
    gate = os.path.join(folder, "open")
    with open(os.path.join(folder, "copilot_ide_gate.py"), "w", encoding="utf-8") as f:
        f.write(GATE_MODULE % gate)
    hook = "py3 import sys; sys.path[:0] = [%r, %r]; import copilot_ide_gate" % (folder, V.REPO)
    vim = vims(env=env).start(before=[hook] + list(kw.pop("before", [])), **kw)

    def open_gate() -> None:
        with open(gate, "w"):
            pass

    return vim, open_gate


def starting(vim: VimSession) -> None:
    """Until the plugin's boot thread has handed the server its start (held at the gate)."""
    wait_until(lambda: vim.eval("py3eval(\"'_copilot_ide_boot' in globals() and _copilot_ide_boot.state()\")")
               == "ok", what="the boot thread done")


def plugin_folders(tmp: str) -> List[str]:
    """What the plugin and Vim made in Vim's $TMPDIR: the plugin's doorbell folder,
    a Vim temporary folder (there must never be one: see test_vim_signals.py)."""
    return sorted(name for name in os.listdir(tmp) if name.startswith("copilot-ide-vim-")
                  or re.match(r"^v[A-Za-z0-9]{6}$", name))


def test_the_lock_appears_without_vim_waiting_and_an_early_selection_reaches_the_cli(
        vims: Any, tmp_path: Any, workspace: str, copilot_home: str) -> None:
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    vim, open_gate = gated(vims, tmp_path, env={"TMPDIR": tmp})
    vim.wait_screen(r"hello\.txt")
    starting(vim)
    (bell,) = plugin_folders(tmp)  # the doorbell, made by the boot thread, private
    assert bell.startswith("copilot-ide-vim-%d-" % vim.pid)
    assert os.stat(os.path.join(tmp, bell)).st_mode & 0o777 == 0o700
    # The server's start is under way (and held): Vim answers keys all the same.
    vim.keys("j", "l", "l")
    assert vim.eval("[line('.'), col('.')]") == [2, 3]
    assert locks(copilot_home) == []
    vim.keys("v", "l", "l")  # a selection made before the server is up: "con" of "second"
    vim.wait_screen("-- VISUAL --")  # read off the screen: an Ex command would end Visual mode
    open_gate()
    lock = read_lock(vim.wait_lock())
    assert lock["workspaceFolders"] == [workspace] and lock["pid"] == vim.pid
    client = StreamClient(vim.wait_lock())
    try:
        params = client.wait_selection(lambda p: p["text"] != "")
        assert params["text"] == "con"
        assert params["selection"]["start"] == {"line": 1, "character": 2}
    finally:
        client.close()
    vim.keys("Escape")
    vim.quit("qa!")
    assert locks(copilot_home) == [] and plugin_folders(tmp) == []


def test_qa_bang_during_the_start_leaves_no_lock_and_no_process(vims: Any, tmp_path: Any,
                                                                copilot_home: str) -> None:
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    vim, open_gate = gated(vims, tmp_path, env={"TMPDIR": tmp})
    vim.wait_screen(r"hello\.txt")
    starting(vim)
    pid = vim.pid
    vim.quit("qa!")
    wait_until(vim.gone, what="Vim's process gone")
    open_gate()  # nothing may be left to go on with it
    assert locks(copilot_home) == []
    assert pid is not None and not os.path.exists("/proc/%d" % pid)
    assert plugin_folders(tmp) == []


def test_qa_bang_right_after_start_leaves_no_lock_and_no_process(vims: Any, tmp_path: Any,
                                                                 copilot_home: str) -> None:
    tmp = str(tmp_path / "tmp")  # Vim's and its Python's temporary folder: the socket's too
    os.makedirs(tmp)
    for n in range(3):
        vim = vims(env={"TMPDIR": tmp}).start()
        vim.wait_screen(r"hello\.txt")
        if n == 2:
            vim.wait_lock()  # and once with the server up
        pid = vim.pid
        vim.quit("qa!")
        wait_until(vim.gone, what="Vim's process gone")
        assert pid is not None and not os.path.exists("/proc/%d" % pid)
        assert locks(copilot_home) == []
        left: List[str] = [p for p in os.listdir(tmp) if p.startswith("mcp-")]
        assert left == [] and plugin_folders(tmp) == []


def test_without_a_folder_of_its_own_the_start_still_ends(vims: Any, tmp_path: Any, copilot_home: str,
                                                          workspace: str) -> None:
    """Vim's $TMPDIR does not exist, so the plugin cannot make its doorbell's folder
    (mkdir fails, as it does when the name exists already): the timer asks Python at
    its ticks instead (the boot's end, then every fifth tick: a diff still opens while
    Vim idles), and nothing is created where $TMPDIR points."""
    missing = str(tmp_path / "missing")
    vim = vims(env={"TMPDIR": missing}).start()
    client = StreamClient(vim.wait_lock())
    try:
        wait_until(lambda: vim.eval("exists('#copilot_ide#CursorMoved')"), what="the server's start taken up")
        assert vim.eval("py3eval('_copilot_ide.bell.made')") in (0, False)
        pending = client.open_diff(os.path.join(workspace, "hello.txt"), "new text\n", "bell-less")
        vim.wait_screen(r"Copilot proposes an edit of hello\.txt")
        vim.ex("CopilotIdeReject")
        assert pending.result(WAIT)["result"] == "REJECTED"
    finally:
        client.close()
    vim.quit("qa!")
    assert locks(copilot_home) == [] and not os.path.exists(missing)


def test_stop_during_the_start_then_start_again(vims: Any, tmp_path: Any, copilot_home: str) -> None:
    vim, open_gate = gated(vims, tmp_path)
    vim.wait_screen(r"hello\.txt")
    starting(vim)
    vim.ex("CopilotIdeStop")
    assert vim.eval("py3eval('_copilot_ide.server.thread is None')") in (1, True)  # no loop thread left
    open_gate()
    vim.ex("CopilotIdeStart")
    vim.wait_lock()
    vim.quit("qa!")
    assert locks(copilot_home) == []


def test_the_trust_setting_reaches_the_lock(vims: Any, copilot_home: str) -> None:
    vim = vims().start(before=["let g:copilot_ide_trusted = 1"])
    assert read_lock(vim.wait_lock())["isTrusted"] is True
    vim.quit()
    assert locks(copilot_home) == []


def test_a_cd_during_the_start_moves_the_lock_once_it_is_up(vims: Any, tmp_path: Any, workspace: str,
                                                            copilot_home: str) -> None:
    sub = os.path.join(workspace, "sub")
    os.makedirs(sub)
    vim, open_gate = gated(vims, tmp_path)
    vim.wait_screen(r"hello\.txt")
    starting(vim)
    vim.ex("cd sub")
    open_gate()
    # (the lock is rewritten in place: read meanwhile it is empty, and read again)
    wait_until(lambda: [lock_folders(p) for p in locks(copilot_home)] == [[sub]],
               what="one lock, for the folder Vim is in now")
    vim.quit("qa!")
    assert locks(copilot_home) == []


def test_a_start_that_fails_before_it_serves_says_so_and_leaves_no_folder(vims: Any, tmp_path: Any,
                                                                          copilot_home: str) -> None:
    """The boot thread cannot import the plugin (Vim's Python is told, before the plugin
    loads, that the module is missing): the error is shown, and the doorbell folder the
    thread made is gone once Vim has seen it (not only when Vim quits)."""
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    hook = "py3 import sys; sys.modules['copilot_ide_vim.plugin'] = None"
    vim = vims(env={"TMPDIR": tmp}).start(before=[hook])
    vim.wait_screen(r"could not start: ModuleNotFoundError")
    wait_until(lambda: plugin_folders(tmp) == [], what="the doorbell folder removed")
    assert locks(copilot_home) == []
    vim.quit("qa!")
    assert plugin_folders(tmp) == [] and locks(copilot_home) == []
