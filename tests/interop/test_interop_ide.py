"""`/ide`: the real Copilot CLI TUI (in tmux) against `python3 -m ide_protocol serve`."""

import json
import os
import re
import time

import pytest

import copilot_harness as H
from fake_model import Turn

pytestmark = pytest.mark.interop

CONNECTED = r"connected: session (\S+), Copilot CLI %s" % re.escape(H.MCP_CLIENT_VERSION)


@pytest.fixture
def ide(serve, tui):
    """``serve`` running on the workspace and the CLI started there, connected to it."""
    srv = serve()
    lock_path, lock = srv.wait_lock()
    tui.start()
    tui.wait_ide_connected()
    srv.wait_output(CONNECTED, timeout=15)
    # The last session: a CLI started again by the harness (CopilotTui, PROBE_SKIPPED)
    # may have connected before it was stopped.
    srv.session = re.findall(CONNECTED, srv.output(), re.M)[-1]
    srv.lock_path, srv.lock = lock_path, lock
    return srv, tui


def _diff_number(srv, start=0, timeout=30):
    return srv.wait_output(r"^diff (\d+) proposed by session", timeout=timeout,
                           start=start).group(1)


def test_connects_at_startup_and_receives_pushed_selection(ide, workspace, fake_model):
    srv, tui = ide
    assert srv.lock["workspaceFolders"][0] == workspace
    assert srv.lock["pid"] == srv.pid
    # The CLI connected on its own at start-up (its cwd is the lock's folder).
    tui.wait_log(r"Connected to IDE MCP server")
    srv.send("select hello.py 1:1-1:13")
    srv.wait_output(r"^selected hello\.py 1:1-1:13")
    path = os.path.join(workspace, "hello.py")
    tui.wait_log(r"IDE selection changed: %s \[0:0-0:12\]" % re.escape(path))
    if H.at_least(H.SELECTION_INDICATOR_SINCE):
        tui.wait_screen(r"@hello\.py:1\b")
    # The pushed selection goes with the next prompt to the model.
    fake_model.script(Turn.say("I see your selection."))
    tui.prompt("What did I select?")
    tui.wait_screen(r"I see your selection\.")
    user = fake_model.user_texts()[-1]
    assert "<ide_selection>" in user and "def hello():" in user, user
    assert {"ide-get_selection", "ide-get_diagnostics"} <= set(fake_model.offered_tools())
    # Only those two of our six tools are offered to the model.
    assert not [t for t in fake_model.offered_tools()
                if t.startswith("ide-") and t not in ("ide-get_selection", "ide-get_diagnostics")]


def test_model_reads_selection_and_diagnostics(ide, workspace, fake_model):
    srv, tui = ide
    srv.send("select hello.py 2:5-2:13")
    srv.wait_output(r"^selected hello\.py 2:5-2:13")
    srv.send("diag hello.py 2 error undefined name 'x'")
    srv.wait_output(r"^diagnostic hello\.py 2")
    fake_model.script(Turn.tool("ide-get_selection"), Turn.tool("ide-get_diagnostics"),
                      Turn.say("Selection and diagnostics read."))
    tui.prompt("Check my code")
    tui.wait_screen(r"Selection and diagnostics read\.")
    path = os.path.join(workspace, "hello.py")

    (sel_text,) = fake_model.tool_results("ide-get_selection")
    sel = json.loads(sel_text)
    assert sel["text"] == "return x"
    assert sel["filePath"] == path
    assert sel["fileUrl"] == "file://" + path
    assert sel["selection"]["start"] == {"line": 1, "character": 4}
    assert sel["selection"]["end"] == {"line": 1, "character": 12}
    assert sel["selection"]["isEmpty"] is False
    assert sel["current"] is True

    (diag_text,) = fake_model.tool_results("ide-get_diagnostics")
    diags = json.loads(diag_text)
    assert [d["filePath"] for d in diags] == [path]
    (d,) = diags[0]["diagnostics"]
    assert d["message"] == "undefined name 'x'"
    assert d["severity"] == "Error"
    assert d["range"]["start"]["line"] == 1

    srv.wait_output(r"^tool get_selection\(\) from session")
    srv.wait_output(r"^tool get_diagnostics\(.*\) from session")
    # The CLI counts only capitalised severities in its own display.
    tui.wait_screen(r"1 error")


def test_edit_accepted_in_serve(ide, workspace, fake_model):
    srv, tui = ide
    path = os.path.join(workspace, "hello.py")
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x",
                                         "new_str": "return 42"}),
                      Turn.say("Accepted edit done."))
    tui.prompt("Fix hello.py")
    n = _diff_number(srv)
    tui.wait_screen(tui.PERMISSION)     # the terminal asks too, while the diff is open
    assert "return x" in H.read(path)   # the IDE side never writes the file itself
    srv.send("accept")
    srv.wait_output(r"^diff %s SAVED \(accepted_via_button\)" % n)
    tui.wait_screen(r"Accepted edit done\.")
    assert H.read(path) == "def hello():\n    return 42\n"
    assert any("updated" in r for r in fake_model.tool_results("edit")), \
        fake_model.tool_results("edit")


def test_edit_rejected_in_serve(ide, workspace, fake_model):
    srv, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x",
                                         "new_str": "return 0"}))
    tui.prompt("Fix hello.py")
    n = _diff_number(srv)
    srv.send("reject")
    srv.wait_output(r"^diff %s REJECTED \(rejected_via_button\)" % n)
    tui.wait_screen(r"rejected this tool call|Operation cancelled by user")
    time.sleep(1.0)
    assert H.read(path) == before
    # A rejection ends the turn: the model is not asked again.
    assert len(fake_model.chat_requests()) == 1


@pytest.mark.parametrize("answer", ["yes", "no"])
def test_edit_answered_in_the_terminal_closes_the_diff(ide, workspace, fake_model, answer):
    srv, tui = ide
    path = os.path.join(workspace, "hello.py")
    before = H.read(path)
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x",
                                         "new_str": "return 7"}),
                      Turn.say("Terminal answer handled."))
    tui.prompt("Fix hello.py")
    n = _diff_number(srv)
    tui.answer_permission(1 if answer == "yes" else 3)
    # The CLI closes the diff it opened in the IDE ...
    srv.wait_output(r'^tool close_diff\(tab_name="\[Copilot CLI\] - hello\.py')
    # ... and serve resolves the pending open_diff with closed_via_tool.
    srv.wait_output(r"^diff %s REJECTED \(closed_via_tool\)" % n)
    if answer == "yes":
        tui.wait_screen(r"Terminal answer handled\.")
        assert H.read(path) == "def hello():\n    return 7\n"
    else:
        tui.wait_screen(r"Operation cancelled by user|Operation aborted by user")
        time.sleep(0.5)
        assert H.read(path) == before
    # serve closed the diff: nothing pending any more.
    mark = srv.mark()
    srv.send("status")
    srv.wait_output(r"^pending diffs: 0$", start=mark, timeout=10)


def test_create_of_a_new_file_through_the_ide(ide, workspace, fake_model):
    srv, tui = ide
    path = os.path.join(workspace, "pkg", "new_module.py")
    os.makedirs(os.path.dirname(path))
    fake_model.script(Turn.tool("create", {"path": path, "file_text": "VALUE = 1\n"}),
                      Turn.say("Created the module."))
    tui.prompt("Create a module")
    n = _diff_number(srv)
    assert not os.path.exists(path)
    srv.send("accept %s" % n)
    srv.wait_output(r"^diff %s SAVED" % n)
    tui.wait_screen(r"Created the module\.")
    assert H.read(path) == "VALUE = 1\n"


def test_exit_deletes_the_session_and_quit_leaves_no_lock(ide):
    srv, tui = ide
    socket_dir = os.path.dirname(srv.lock["socketPath"])
    mark = srv.mark()
    assert tui.exit() == 0
    srv.wait_output(r"^disconnected: session %s \(deleted\)" % re.escape(srv.session),
                    start=mark, timeout=15)
    assert os.path.exists(srv.lock_path)
    assert srv.quit() == 0
    assert not os.path.exists(srv.lock_path)
    assert not srv.locks()
    assert not os.path.exists(srv.lock["socketPath"])
    assert not os.path.exists(socket_dir)


def test_stopping_serve_disconnects_the_cli(ide):
    srv, tui = ide
    assert srv.quit() == 0
    assert not srv.locks()
    # Deleting the lock is the signal the CLI notices.
    tui.wait_log(H.IDE_DISCONNECTED_LOG, timeout=15)
    if H.at_least(H.DISCONNECT_NOTICE_SINCE):
        tui.wait_screen(r"IDE connection lost")
    assert tui.exit() == 0


def test_trusted_lock_skips_the_trust_prompt(serve, tui, fake_model):
    srv = serve("--trusted")
    _, lock = srv.wait_lock()
    assert lock["isTrusted"] is True
    assert tui.start(trust=False) == "ready"
    tui.wait_ide_connected()
    srv.wait_output(CONNECTED)
    assert tui.exit() == 0


def test_ide_picker_connects_from_another_folder(serve, tui, workspace):
    """No prefix match: started in a subfolder the CLI does not auto-connect; its `/ide`
    picker lists serve's workspace and connects to it."""
    sub = os.path.join(workspace, "sub")
    os.makedirs(sub)
    srv = serve()
    srv.wait_lock()
    tui.workspace = sub
    tui.start()
    time.sleep(2.0)
    assert not re.search(CONNECTED, srv.output(), re.M), srv.output()
    tui.pick_ide("Terminal IDE", workspace)
    srv.wait_output(CONNECTED, timeout=15)
    assert tui.exit() == 0
    srv.wait_output(r"^disconnected: session \S+ \(deleted\)")


def test_selection_made_before_the_cli_starts_is_pushed_on_connect(serve, tui, workspace):
    srv = serve()
    srv.wait_lock()
    srv.send("select hello.py 1:1-1:13")
    srv.wait_output(r"^selected hello\.py")
    tui.start()
    tui.wait_ide_connected()
    # serve sends the current selection as soon as the CLI's GET stream opens.
    tui.wait_log(r"IDE selection changed: %s \[0:0-0:12\]"
                 % re.escape(os.path.join(workspace, "hello.py")))
    if H.at_least(H.SELECTION_INDICATOR_SINCE):
        tui.wait_screen(r"@hello\.py:1\b")
    assert tui.exit() == 0


def test_file_reference_and_selection_are_inserted_into_the_input(ide, workspace, fake_model):
    srv, tui = ide
    srv.send("ref hello.py 1-2")
    tui.wait_screen(r"^❯ @hello\.py:1-2\s*$")
    srv.send("addsel hello.py 2:5-2:13")
    tui.wait_screen(r"^❯ @hello\.py:1-2 @hello\.py:2\s*$")
    fake_model.script(Turn.say("Got the references."))
    tui.tmux.send_keys("Enter")
    tui.wait_screen(r"Got the references\.")
    user = fake_model.user_texts()[-1]
    path = os.path.join(workspace, "hello.py")
    assert "<tagged_files>" in user, user
    assert "%s (lines 1-2 of" % path in user and "%s (line 2 of" % path in user, user


# The harness's answer to the CLI's start-up probe race (copilot_harness.PROBE_SKIPPED):
# started again only when the CLI skipped a socket that accepts a connection. A socket
# moved away from its path while the CLI scans, then put back, is that case made on
# purpose; a socket that stays away is the case it must not paper over.

def _hide_socket_while_the_cli_scans(srv, tui):
    if not H.at_least(H.SOCKET_PROBE_SINCE):
        pytest.skip("Copilot CLI %s lists a lock without probing its socket (the probe "
                    "is there by %s)" % (H.CLI_VERSION, H.SOCKET_PROBE_SINCE))
    _, lock = srv.wait_lock()
    sock = lock["socketPath"]
    away = sock + ".away"
    os.rename(sock, away)
    try:
        tui.start()
        tui.wait_log(r"Skipping IDE lock file with unreachable socket \(%s\)" % re.escape(sock))
        # Its scans are over (1.0.102 scans again once the trust dialog is answered).
        tui.wait_scans_over()
    except BaseException:
        os.rename(away, sock)
        raise
    return sock, away


def test_harness_starts_the_cli_again_when_it_skipped_a_live_socket(serve, tui):
    srv = serve()
    sock, away = _hide_socket_while_the_cli_scans(srv, tui)
    os.rename(away, sock)            # live again: what a busy CLI's timed-out probe missed
    with pytest.warns(H.ProbeRaceRestart, match=re.escape(sock)):
        tui.wait_ide_connected()
    assert tui.attempt == 2 and len(tui.restarts) == 1, tui.restarts
    srv.wait_output(CONNECTED, timeout=15)
    assert tui.exit() == 0


def test_harness_does_not_restart_for_a_socket_that_refuses(serve, tui):
    srv = serve()
    sock, away = _hide_socket_while_the_cli_scans(srv, tui)
    try:
        with pytest.raises(AssertionError, match=r"skipped as unreachable: .*%s" % re.escape(sock)):
            tui.wait_ide_connected(timeout=8)
        assert tui.attempt == 1 and tui.restarts == []
    finally:
        os.rename(away, sock)
    assert not re.search(CONNECTED, srv.output(), re.M), srv.output()
    assert tui.exit() == 0
