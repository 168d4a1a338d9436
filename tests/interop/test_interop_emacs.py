"""`/ide`: the real Copilot CLI TUI (one tmux server) against a real Emacs running
editors/emacs/copilot-ide.el over the bridge (a second tmux server), fully offline."""

import json
import os
import re
import sys
import time

import pytest

import copilot_harness as H
from fake_model import Turn

sys.path.insert(0, os.path.join(H.REPO, "tests", "emacs"))
import emacs_harness as E  # noqa: E402

pytestmark = pytest.mark.interop

NEW_42 = "def hello():\n    return 42\n"
EMOJI = "s = '😀é'  # 😀 x\n"
DIFF_BUFFER = "*copilot-ide diff: hello.py*"


@pytest.fixture
def emacs(copilot_bin, workspace, copilot_home, logdir):
    reason = E.missing()
    if reason:
        pytest.skip(reason)
    with open(os.path.join(workspace, "emoji.py"), "w", encoding="utf-8") as f:
        f.write(EMOJI)
    session = E.EmacsSession(workspace, copilot_home, logdir)
    try:
        session.start(["hello.py"])
        session.wait_lock()
        yield session
    finally:
        bridge = None
        try:
            if not session.exited():
                bridge = session.eval_json("(alist-get 'pid copilot-ide--ready)")
                session.keys("C-x", "C-c")
                H.wait_until(session.exited, 30, message="Emacs exiting")
        finally:
            session.close()
        if bridge:
            H.wait_until(lambda: E.pid_gone(bridge), 30, message="the bridge's exit")


@pytest.fixture
def ide(emacs, tui):
    """Emacs serving the workspace, and the CLI started there, connected to it."""
    tui.start()
    tui.wait_ide_connected()
    H.wait_until(lambda: emacs.eval_json("copilot-ide--sessions") >= 1, message="Emacs seeing the CLI")
    return emacs, tui


def diff_buffer(emacs):
    return emacs.eval_json('(and (get-buffer "%s") t)' % DIFF_BUFFER)


def wait_diff_buffer(emacs, timeout=60):
    H.wait_until(lambda: diff_buffer(emacs), timeout, message="Emacs's diff buffer")
    H.wait_until(lambda: emacs.eval_json('(and (get-buffer-window "%s" t) t)' % DIFF_BUFFER), 10,
                 message="the diff buffer shown")
    # Shown, never selected: the user's window keeps hello.py and its point.
    assert emacs.eval_json("(buffer-name (window-buffer (selected-window)))") == "hello.py"
    assert emacs.eval_json('(and (get-buffer-window "%s" t) t)' % DIFF_BUFFER), emacs.eval_json(
        "(vector (vconcat (mapcar (lambda (w) (format \"%s %sx%s\" (buffer-name (window-buffer w)) "
        "(window-width w) (window-height w))) (window-list nil nil))) (frame-width) (frame-height) "
        "(format \"%S\" (frame-list)) (format \"%S\" (buffer-list)))")


def hello_text(emacs):
    return emacs.eval_json('(with-current-buffer "hello.py" (buffer-string))')


def test_cli_connects_and_reads_the_region_and_diagnostics(ide, workspace, copilot_home, fake_model):
    emacs, tui = ide
    (lock_path,) = E.locks(copilot_home)
    lock = E.read_lock(lock_path)
    assert lock["ideName"] == "Emacs" and lock["workspaceFolders"] == [workspace]
    assert lock["pid"] == emacs.eval_json("(alist-get 'pid copilot-ide--ready)")
    tui.wait_log(r"Connected to IDE MCP server")
    assert "CLI sessions connected: 1" in emacs.eval_json("(copilot-ide-status)")
    assert emacs.eval_json("(format-mode-line mode-line-modes)").find("Copilot[1]") >= 0

    # A region with a non-BMP character before and inside it, made with keys.
    emacs.keys("C-x", "C-f")
    emacs.type("emoji.py")
    emacs.keys("Enter")
    H.wait_until(lambda: emacs.eval_json("(buffer-name (window-buffer (selected-window)))") == "emoji.py",
                 message="emoji.py visited")
    emacs.keys("M-<", "C-u")
    emacs.type("12")
    emacs.keys("C-f", "C-Space", "C-e")
    path = os.path.join(workspace, "emoji.py")
    # Code points 12-15 of the line; in UTF-16 units (the wire's) 13-17.
    tui.wait_log(r"IDE selection changed: %s \[0:13-0:17\]" % re.escape(path))

    # Diagnostics of flymake, from a backend of the test's own.
    emacs.eval_json("""(with-current-buffer "emoji.py"
      (setq-local flymake-diagnostic-functions
                  (list (lambda (report &rest _)
                          (funcall report (list (flymake-make-diagnostic
                                                 (current-buffer) 15 16 :error "undefined name 'x'"))))))
      (flymake-mode 1) (flymake-start) t)""")
    fake_model.script(Turn.tool("ide-get_selection"), Turn.tool("ide-get_diagnostics"),
                      Turn.say("Selection and diagnostics read."))
    H.wait_until(lambda: emacs.eval_json('(with-current-buffer "emoji.py" (length (flymake-diagnostics)))') == 1,
                 message="flymake's diagnostic")
    time.sleep(2.0)   # the diagnostics poll (1 s) and the push debounce
    tui.prompt("What did I select?")
    tui.wait_screen(r"Selection and diagnostics read\.")
    (text,) = fake_model.tool_results("ide-get_selection")
    sel = json.loads(text)
    assert sel["text"] == "😀 x" and sel["filePath"] == path and sel["current"] is True
    assert sel["selection"]["start"] == {"line": 0, "character": 13}
    assert sel["selection"]["end"] == {"line": 0, "character": 17}
    (text,) = fake_model.tool_results("ide-get_diagnostics")
    diags = json.loads(text)
    assert [d["filePath"] for d in diags] == [path]
    (d,) = diags[0]["diagnostics"]
    assert d["message"] == "undefined name 'x'" and d["severity"] == "Error"
    # Buffer positions 15-16 (the "x") are code points 14-15, after two emoji: UTF-16 16-17.
    assert d["range"] == {"start": {"line": 0, "character": 16}, "end": {"line": 0, "character": 17}}
    # (No /exit here: after this turn the CLI once kept /exit queued for over a minute,
    # with nothing left to do on the wire; the other tests end the CLI that way.)


def test_edit_shown_in_emacs_and_accepted_there(ide, workspace, fake_model):
    emacs, tui = ide
    path = os.path.join(workspace, "hello.py")
    H.propose_edit(fake_model, tui, path, "return 42", after="Accepted edit done.")
    wait_diff_buffer(emacs)
    assert "+    return 42" in emacs.eval_json('(with-current-buffer "%s" (buffer-string))' % DIFF_BUFFER)
    tui.wait_screen(tui.PERMISSION)               # the terminal asks too
    assert H.read(path) == "def hello():\n    return x\n"
    emacs.keys("C-x", "o", "C-c", "C-c")          # to the diff's window, accept
    tui.wait_screen(r"Accepted edit done\.")
    assert H.read(path) == NEW_42                  # written by the CLI
    H.wait_until(lambda: not diff_buffer(emacs), message="the diff buffer killed")
    H.wait_until(lambda: hello_text(emacs) == NEW_42, message="Emacs's buffer reverted")
    assert tui.exit() == 0


def test_edit_rejected_in_emacs_leaves_the_file(ide, workspace, fake_model):
    emacs, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    H.propose_edit(fake_model, tui, path, "return 0")
    wait_diff_buffer(emacs)
    emacs.keys("C-x", "o", "C-c", "C-k")
    tui.wait_screen(r"rejected this tool call|Operation cancelled by user")
    H.wait_until(lambda: not diff_buffer(emacs), message="the diff buffer killed")
    time.sleep(1.0)
    assert H.read(path) == before and hello_text(emacs) == before
    assert len(fake_model.chat_requests()) == 1     # a rejection ends the turn
    assert tui.exit() == 0


def test_edit_answered_in_the_terminal_closes_the_diff_buffer(ide, workspace, fake_model):
    emacs, tui = ide
    path = os.path.join(workspace, "hello.py")
    H.propose_edit(fake_model, tui, path, "return 7", after="Terminal answer handled.")
    wait_diff_buffer(emacs)
    tui.answer_permission(1)
    H.wait_until(lambda: not diff_buffer(emacs), message="the diff buffer killed by close_diff")
    assert emacs.eval_json("(hash-table-count copilot-ide--diffs)") == 0
    tui.wait_screen(r"Terminal answer handled\.")
    assert H.read(path) == "def hello():\n    return 7\n"
    # The CLI wrote the file after a diff closed as REJECTED/closed_via_tool (§4).
    H.wait_until(lambda: hello_text(emacs) == "def hello():\n    return 7\n", message="Emacs's buffer reverted")
    assert tui.exit() == 0


def test_mode_off_and_on_then_exit_with_the_cli_running(ide, copilot_home):
    emacs, tui = ide
    (first,) = E.locks(copilot_home)
    emacs.command("copilot-ide-mode")             # off
    H.wait_until(lambda: E.locks(copilot_home) == [], message="the lock removed")
    tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=30)
    assert emacs.eval_json("copilot-ide-mode") is None
    emacs.command("copilot-ide-mode")             # on again
    (second,) = H.wait_until(lambda: E.locks(copilot_home), message="a new lock")
    assert second != first
    # The lock is written before Emacs reads the bridge's ready message: wait for it.
    bridge = H.wait_until(lambda: emacs.eval_json("(alist-get 'pid copilot-ide--ready)"),
                          message="Emacs reading the new bridge's ready")
    assert E.read_lock(second)["pid"] == bridge
    # C-x C-c with the CLI still running: no question, Emacs exits, the lock goes.
    emacs.keys("C-x", "C-c")
    H.wait_until(emacs.exited, 15, message="Emacs exiting on C-x C-c")
    assert E.locks(copilot_home) == []
    H.wait_until(lambda: E.pid_gone(bridge), 15, message="the bridge's exit")
    assert tui.exit() == 0
