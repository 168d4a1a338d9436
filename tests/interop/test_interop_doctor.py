"""`doctor` against the real CLI: what doctor predicts is what Copilot CLI does.

Each test sets up lock files, asks ``python3 -m ide_protocol doctor FOLDER --json`` what
a CLI started in FOLDER would do, then starts the real CLI there (TUI in tmux) and
checks its debug log. Where a test needs a lock it controls, ``serve`` writes its own
lock to a private directory (``--lock-dir``) and the test writes the lock the CLI sees.
doctor's own handshake makes serve print a "connected" line too (naming `copilot-ide
doctor`, not the CLI); the CLI's side is judged from the CLI's log all the same.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest

import copilot_harness as H

pytestmark = pytest.mark.interop

CONNECTING = "Connecting to IDE MCP server"
#: How long a CLI that would auto-connect needs at most here to log "Connecting ..."
#: after the start-up scan (it is well under a second; generous on a loaded machine).
QUIET = 4.0


def run_doctor(folder, copilot_home, cli_env, logdir):
    """``doctor FOLDER --json`` with the CLI's environment; (exit status, report)."""
    env = H.python_env(cli_env, copilot_home)
    done = subprocess.run([sys.executable, "-m", "ide_protocol", "doctor", folder, "--json"],
                          cwd=H.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60)
    with open(os.path.join(logdir, "doctor.json"), "ab") as fh:
        fh.write(done.stdout + done.stderr)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def codes(report, path):
    for lock in report["locks"]:
        if lock["path"] == path:
            return [f["code"] for f in lock["findings"]]
    raise AssertionError("lock %s not in %s" % (path, report))


def private_serve(serve, tmp_path, name=None):
    """``serve`` with its own lock out of the CLI's sight; returns (serve, its lock)."""
    args = ["--lock-dir", str(tmp_path / "serve-locks")]
    if name:
        args += ["--name", name]
    srv = serve(*args)
    m = srv.wait_output(r"^serving .+ on .+, lock (.+)$", timeout=30)
    with open(m.group(1), encoding="utf-8") as fh:
        lock = json.load(fh)
    lock.pop("_writer", None)
    return srv, lock


class Locks(object):
    """Lock files this test writes into the CLI's lock dir (atomically), removed at the end."""

    def __init__(self, copilot_home):
        self.dir = os.path.join(copilot_home, "ide")
        os.makedirs(self.dir, exist_ok=True)
        self.paths = []

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(content, fh)
        os.replace(tmp, path)
        self.paths.append(path)
        return path

    def remove(self):
        for path in self.paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


@pytest.fixture
def locks(copilot_home):
    written = Locks(copilot_home)
    yield written
    written.remove()


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def assert_no_connection(tui):
    time.sleep(QUIET)
    log = tui.log_text()
    assert CONNECTING not in log, "\n".join(l for l in log.splitlines() if "IDE" in l)[-3000:]


def test_exact_folder_doctor_predicts_the_connection(serve, tui, workspace, copilot_home, cli_env,
                                                     logdir):
    srv = serve()
    lock_path, _ = srv.wait_lock()
    rc, report = run_doctor(workspace, copilot_home, cli_env, logdir)
    assert rc == 0 and report["would_connect"] is True and report["ide"] == "Terminal IDE", report
    assert report["folder"] == workspace
    assert codes(report, lock_path) == ["not-trusted"]
    assert tui.start(trust=False) == "trust"     # the trust prompt doctor announced
    tui.tmux.send_keys("Enter")
    tui.wait_screen(tui.READY, timeout=60)
    tui.wait_ide_connected()
    tui.wait_log(r"%s: Terminal IDE \(%s\)" % (CONNECTING, re.escape(workspace)))
    assert tui.exit() == 0


def test_trusted_lock_doctor_predicts_no_trust_prompt(serve, tui, workspace, copilot_home, cli_env,
                                                      logdir):
    srv = serve("--trusted")
    lock_path, _ = srv.wait_lock()
    rc, report = run_doctor(workspace, copilot_home, cli_env, logdir)
    assert rc == 0 and report["ide"] == "Terminal IDE", report
    assert codes(report, lock_path) == []
    assert tui.start(trust=False) == "ready"     # no trust prompt
    tui.wait_ide_connected()
    assert tui.exit() == 0


def test_subfolder_doctor_predicts_no_auto_connect(serve, tui, workspace, copilot_home, cli_env,
                                                   logdir):
    sub = os.path.join(workspace, "sub")
    os.makedirs(sub)
    srv = serve()
    lock_path, _ = srv.wait_lock()
    rc, report = run_doctor(sub, copilot_home, cli_env, logdir)
    assert rc == 1 and report["would_connect"] is False and report["ide"] is None, report
    assert "folder-is-parent" in codes(report, lock_path)
    tui.workspace = sub
    tui.start()
    # The CLI scanned the lock and found it valid (doctor: usable) ...
    tui.wait_log(r"Valid IDE lock file: Terminal IDE \(PID %d\), workspaces: %s"
                 % (srv.pid, re.escape(workspace)))
    # ... and did not connect to it.
    assert_no_connection(tui)
    assert tui.exit() == 0


def test_symlinked_lock_folder_doctor_predicts_no_auto_connect(serve, tui, workspace, copilot_home,
                                                               cli_env, logdir, locks, tmp_path):
    link = os.path.join(str(tmp_path), "ws-link")
    os.symlink(workspace, link)
    srv, lock = private_serve(serve, tmp_path)
    lock["workspaceFolders"] = [link]           # only the path through the symlink
    path = locks.write("doctor-symlink.lock", lock)
    rc, report = run_doctor(link, copilot_home, cli_env, logdir)
    assert rc == 1 and report["would_connect"] is False, report
    assert report["folder"] == workspace         # the CLI's physical working folder
    assert "symlinked-folder" in codes(report, path)
    tui.workspace = link                         # started through the link, as a user would
    tui.start()
    tui.wait_log(r"Valid IDE lock file: Terminal IDE \(PID %d\), workspaces: %s"
                 % (srv.pid, re.escape(link)))
    assert_no_connection(tui)
    assert tui.exit() == 0


def test_dead_pid_doctor_predicts_the_lock_is_skipped(serve, tui, workspace, copilot_home, cli_env,
                                                      logdir, locks, tmp_path):
    _srv, lock = private_serve(serve, tmp_path)
    lock["pid"] = pid = dead_pid()               # socket alive, pid gone
    path = locks.write("doctor-dead.lock", lock)
    rc, report = run_doctor(workspace, copilot_home, cli_env, logdir)
    assert rc == 1 and report["would_connect"] is False, report
    # a live socket behind a pid unseen here: doctor tells it from a stale lock (an
    # IDE in another PID namespace); the CLI skips it all the same
    assert codes(report, path) == ["pid-not-visible"]
    tui.start()
    tui.wait_log(r"Skipping stale lock file \(PID %d not running\): doctor-dead\.lock" % pid)
    assert_no_connection(tui)
    assert tui.exit() == 0


def test_several_ides_doctor_predicts_which_one(serve, tui, workspace, copilot_home, cli_env,
                                                logdir, locks, tmp_path):
    _srv, lock = private_serve(serve, tmp_path)
    # Written in reverse order: the CLI takes the first by file name, not the newest.
    second = locks.write("b-doctor.lock", dict(lock, ideName="Beta IDE"))
    first = locks.write("a-doctor.lock", dict(lock, ideName="Alpha IDE"))
    rc, report = run_doctor(workspace, copilot_home, cli_env, logdir)
    assert rc == 0 and report["ide"] == "Alpha IDE", report
    assert "several-ides" in codes(report, first) and "several-ides" in codes(report, second)
    tui.start()
    tui.wait_ide_connected()
    tui.wait_log(r"%s: Alpha IDE \(%s\)" % (CONNECTING, re.escape(workspace)))
    assert "%s: Beta IDE" % CONNECTING not in tui.log_text()
    assert tui.exit() == 0
