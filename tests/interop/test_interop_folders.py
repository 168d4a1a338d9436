"""The IDE changes its workspace folders while the real CLI is connected (PROTOCOL.md §1,
"Changing folders"): what Copilot CLI does in each case, observed, not read in its bundle.

Two ways to change the folders a lock lists, and one that looks like the first:

* rewrite the lock in place, the same file (what VS Code does, `lockFile.ts:43-63`, and
  what `IdeServer.set_workspace_folders` does: `serve`'s `folders` command here);
* write a new lock (a new name, the same socket and nonce) and delete the old one (what
  this project did before; written by hand here);
* write a temporary file and rename it over the lock (atomic, but another file).

Each with the CLI's folder still listed or no longer listed, and the CLI connected at
its start-up (its working folder is the lock's) or through `/ide` (started in a
subfolder, it picks the IDE). What is looked at: the CLI's debug log, its screen,
serve's output, whether a selection pushed afterwards reaches the model, and whether
the model's `ide-get_selection` reaches serve.

What the CLI does (1.0.102): it watches the lock it connected through. Deleted, or
another file renamed over it, it takes for the IDE leaving ("IDE disconnected
unexpectedly ... (source: lock file deleted)", "IDE connection lost" on its screen),
then watches the lock folder for a lock that lists the folder it was connected to and
connects again through it within a second ("Connected to Terminal IDE", the same MCP
session id, and the model is told "The Terminal IDE connection is available again"). A
lock that no longer lists that folder leaves it disconnected: the model's IDE tools
answer "IDE not currently available". A rewrite of the same file it does not react to
at all: it stays connected, whatever the new list says. A CLI waiting in a folder the
rewritten lock now lists connects.
"""

import json
import os
import re
import time

import pytest

import copilot_harness as H
from fake_model import Turn
from ide_protocol.common import lockfile

pytestmark = pytest.mark.interop

CONNECTED = r"connected: session (\S+), Copilot CLI %s" % re.escape(H.MCP_CLIENT_VERSION)
LOST = r"IDE connection lost: Terminal IDE\b.* closed"
DELETED = r"IDE disconnected unexpectedly: Terminal IDE \(source: lock file deleted\)"
CONNECTED_AGAIN = r"Connected to IDE MCP server: Terminal IDE"
UNAVAILABLE = "IDE not currently available"
#: How long a CLI that reacts to a change has to show it: it reacts within milliseconds
#: (its watcher's event, then a 200 ms debounce of the lock folder's watcher).
REACTION = 5.0


# --- the ways an IDE changes its folders -------------------------------------------------------

def in_place(srv, folders):
    """`serve`'s `folders` command: `IdeServer.set_workspace_folders`, the lock rewritten
    in place (as VS Code rewrites its lock)."""
    mark = srv.mark()
    srv.send("folders " + " ".join("'%s'" % f for f in folders))
    srv.wait_output(r"^folders: .* \(lock rewritten in place\)$", start=mark, timeout=15)
    return srv.lock_path


def new_lock_then_delete(srv, folders):
    """A new lock (a new name; the same socket, nonce and timestamp), then the old one
    deleted. The test owns the new lock (serve does not know it)."""
    info = lockfile.LockInfo.from_json(_read(srv.lock_path))
    info.workspace_folders = lockfile.workspace_folders(folders)
    new = lockfile.write_lock(info, srv.lock_dir)
    os.unlink(srv.lock_path)
    return new


def renamed_over(srv, folders):
    """A temporary file in the same folder, renamed over the lock (`os.replace`)."""
    raw = _read(srv.lock_path)
    raw["workspaceFolders"] = lockfile.workspace_folders(folders)
    tmp = os.path.join(srv.lock_dir, ".renamed-over.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(raw, fh, indent=2)
    os.replace(tmp, srv.lock_path)
    return srv.lock_path


def _read(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


# --- the CLI connected, the folders changed ---------------------------------------------------

@pytest.fixture
def other(workspace):
    """A second folder, beside the workspace (an IDE's user opens it)."""
    path = workspace + "-other"
    os.makedirs(path)
    return path


def _connect(how, serve, tui, workspace):
    """``(serve, tui, how)``: the CLI connected to serve, at its start-up (``"startup"``:
    started in the lock's folder) or through `/ide` (``"ide_picker"``: started in a
    subfolder, which no lock lists)."""
    srv = serve()
    srv.wait_lock()
    if how == "startup":
        tui.start()
        tui.wait_ide_connected()
        srv.wait_output(CONNECTED, timeout=15)
    else:
        sub = os.path.join(workspace, "sub")
        os.makedirs(sub)
        tui.workspace = sub
        tui.start()
        tui.pick_ide("Terminal IDE", workspace)
        srv.wait_output(CONNECTED, timeout=15)
        tui.wait_ide_connected()
    srv.session = re.findall(CONNECTED, srv.output(), re.M)[-1]
    return srv, tui, how


@pytest.fixture(params=["startup", "ide_picker"])
def connected(request, serve, tui, workspace):
    return _connect(request.param, serve, tui, workspace)


@pytest.fixture
def connected_at_startup(serve, tui, workspace):
    return _connect("startup", serve, tui, workspace)


def screen_count(tui, pattern):
    return len(re.findall(pattern, tui.tmux.screen(history=True)))


def wait_screen_more(tui, pattern, before, timeout=REACTION):
    """Wait until ``pattern`` is on the screen (with its scroll-back) more often than
    ``before`` times."""
    H.wait_until(lambda: screen_count(tui, pattern) > before, timeout,
                 message="the CLI's screen showing %r once more" % pattern)


class Observed(object):
    """What the CLI, serve and the model show from a mark on."""

    def __init__(self, srv, tui):
        self.srv, self.tui = srv, tui
        self.serve_mark = srv.mark()
        self.log_mark = len(tui.log_text())

    def log(self):
        return self.tui.log_text()[self.log_mark:]

    def serve_lines(self):
        return self.srv.lines()[self.serve_mark:]

    def wait_log(self, pattern, timeout=REACTION):
        H.wait_until(lambda: re.search(pattern, self.log()), timeout,
                     message="the CLI's log showing %r" % pattern)


def select_and_ask(srv, tui, fake_model, observed):
    """Push a selection, then have the model call ``ide-get_selection``: returns
    ``(the selection reached the CLI, the prompt carried it to the model, the tool's
    result, serve saw the tool call)``."""
    srv.send("select hello.py 1:1-1:13")
    srv.wait_output(r"^selected hello\.py 1:1-1:13", start=observed.serve_mark)
    try:
        observed.wait_log(r"IDE selection changed: .*hello\.py \[0:0-0:12\]", timeout=REACTION)
        pushed = True
    except AssertionError:
        pushed = False
    asked = len(fake_model.chat_requests())
    fake_model.script(Turn.tool("ide-get_selection"), Turn.say("Selection looked at."))
    tui.prompt("What did I select?")
    tui.wait_screen(r"Selection looked at\.", timeout=60)
    first = fake_model.chat_requests()[asked]
    carried = any("<ide_selection>" in text for text in fake_model.user_texts(first))
    (result,) = fake_model.tool_results("ide-get_selection")
    called = any(re.match(r"^tool get_selection\(\) from session %s" % re.escape(srv.session[:8]), line)
                 for line in observed.serve_lines())
    return pushed, carried, result, called


def assert_still_working(srv, tui, fake_model, observed, workspace):
    pushed, carried, result, called = select_and_ask(srv, tui, fake_model, observed)
    assert pushed and carried, "the selection pushed after the change did not reach the model"
    assert json.loads(result)["filePath"] == os.path.join(workspace, "hello.py"), result
    assert called, "\n".join(observed.serve_lines())


@pytest.mark.parametrize("listed", [True, False], ids=["still_listed", "no_longer_listed"])
def test_a_lock_rewritten_in_place_keeps_the_cli_connected(connected, workspace, other, fake_model, listed):
    """The way this project changes folders (VS Code's too): nothing happens to the CLI,
    whatever the new list says; its IDE tools and the selection keep working."""
    srv, tui, _how = connected
    observed = Observed(srv, tui)
    path = in_place(srv, ([workspace] if listed else []) + [other])
    assert _read(path)["workspaceFolders"] == ([workspace] if listed else []) + [other]
    time.sleep(2.0)  # (a CLI that reacts does so within milliseconds; the turn below takes longer)
    assert_still_working(srv, tui, fake_model, observed, workspace)
    assert "IDE disconnected" not in observed.log() and "Connecting to IDE" not in observed.log()
    assert not re.search(LOST, tui.screen())
    assert not [l for l in observed.serve_lines() if l.startswith(("disconnected:", "connected:"))]
    assert tui.exit() == 0


def _disconnects_then_reconnects(srv, tui, how, workspace, other, fake_model, change):
    observed = Observed(srv, tui)
    shown = r"Connected to Terminal IDE" + ("" if how == "startup" else ": " + re.escape(workspace))
    before = screen_count(tui, shown)
    new = change(srv, [workspace, other])
    try:
        observed.wait_log(DELETED)
        tui.wait_screen(LOST, timeout=REACTION)
        observed.wait_log(r"Watching IDE lock file: %s" % re.escape(new))
        observed.wait_log(CONNECTED_AGAIN)
        wait_screen_more(tui, shown, before)
        srv.wait_output(r"^disconnected: session %s \(replaced\)" % re.escape(srv.session[:8]),
                        start=observed.serve_mark)
        srv.wait_output(r"^connected: session %s\b" % re.escape(srv.session[:8]), start=observed.serve_mark)
        assert_still_working(srv, tui, fake_model, observed, workspace)
        # The model is told the IDE came back.
        assert any("connection is available again" in text for text in fake_model.user_texts())
        assert tui.exit() == 0
    finally:
        if new != srv.lock_path:
            lockfile.remove_lock(new)


def test_a_new_lock_that_lists_the_folder_disconnects_then_reconnects(connected, workspace, other, fake_model):
    """The lock the CLI connected through deleted (a new one written first): the CLI
    takes it for the IDE leaving, then connects again through the new lock, which lists
    the folder it was connected to, with the same MCP session id."""
    srv, tui, how = connected
    _disconnects_then_reconnects(srv, tui, how, workspace, other, fake_model, new_lock_then_delete)


def test_a_lock_renamed_over_is_taken_for_a_deleted_one(connected_at_startup, workspace, other, fake_model):
    """Atomic for a reader, but another file: the CLI's watcher of the lock it connected
    through reports it as a deletion ("lock file deleted"), as above."""
    srv, tui, how = connected_at_startup
    _disconnects_then_reconnects(srv, tui, how, workspace, other, fake_model, renamed_over)


def test_a_new_lock_that_no_longer_lists_the_folder_leaves_the_cli_disconnected(
        connected, workspace, other, fake_model):
    srv, tui, _how = connected
    observed = Observed(srv, tui)
    new = new_lock_then_delete(srv, [other])
    try:
        observed.wait_log(DELETED)
        tui.wait_screen(LOST, timeout=REACTION)
        # Its session ends once its connections are gone (PROTOCOL.md §3).
        srv.wait_output(r"^disconnected: session %s \(client gone\)" % re.escape(srv.session[:8]),
                        start=observed.serve_mark)
        pushed, carried, result, called = select_and_ask(srv, tui, fake_model, observed)
        assert not pushed and not carried and not called
        assert UNAVAILABLE in result, result
        assert "Connecting to IDE" not in observed.log()
        assert not [l for l in observed.serve_lines() if l.startswith("connected:")]
        assert tui.exit() == 0
    finally:
        lockfile.remove_lock(new)


def test_a_cli_waiting_in_a_folder_the_rewritten_lock_now_lists_connects(serve, tui, workspace, other):
    """Started where no lock points, the CLI watches the lock folder; the IDE adding its
    folder in place is enough for it to connect (no new lock needed)."""
    srv = serve()
    srv.wait_lock()
    tui.workspace = other
    tui.start()
    tui.wait_scans_over()  # (its watcher is started again once the trust dialog is answered)
    tui.wait_log(r"Started watching for IDE lock files for workspace: %s" % re.escape(other))
    assert not re.search(CONNECTED, srv.output(), re.M)
    observed = Observed(srv, tui)
    in_place(srv, [workspace, other])
    observed.wait_log(r"IDE lock file change detected: %s" % re.escape(os.path.basename(srv.lock_path)))
    observed.wait_log(r"IDE lock file detected for workspace: %s" % re.escape(other))  # (the watcher's)
    observed.wait_log(CONNECTED_AGAIN)
    srv.wait_output(CONNECTED, start=observed.serve_mark, timeout=15)
    tui.wait_screen(r"Connected to Terminal IDE", timeout=REACTION)
    assert tui.exit() == 0
