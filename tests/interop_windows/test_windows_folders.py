"""The Windows CLI's folder rules, measured: a lock listing ``C:\\ws`` spelled another
way, its pipe live (serve's), the CLI started in ``C:\\ws``. For each spelling the
CLI's verdict (it connects at start-up or not) and `doctor`'s prediction, run from the
Windows CPython in ``C:\\ws``, must be the expected one (`lock_rules.same_folder`,
PROTOCOL.md §1). One serve for all; one CLI start per spelling."""

import json
import os
import re
import time

import pytest

import copilot_harness as H
from ide_protocol.common import lock_rules
from tmux_driver import Tmux
import wine_root as W

pytestmark = pytest.mark.interop

#: (how the lock lists the folder, whether the CLI in C:\ws connects). The Z: spelling
#: is added by the test (Wine's drive Z: is the root's /: the same folder, another drive).
SPELLINGS = [
    ("C:\\ws", True),
    ("c:\\WS", True),
    ("C:/ws", True),
    ("C:\\ws\\", True),
    ("C:\\ws\\sub\\..\\.", True),
    ("\\\\?\\C:\\ws", False),
]
SCANS_QUIET = 3.0


def _cli_verdict(root, tmux, workspace, env, log_dir, timeout=90.0):
    """Start the CLI; True once it connected to an IDE, False once its start-up scans and
    its lock watcher have run and it has not (nothing new logged for SCANS_QUIET s)."""
    tui = W.WinTui(root, tmux, workspace, env, log_dir)
    tui.start(trust=False)
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        log = tui.log_text()
        if "Connected to IDE MCP server" in log:
            verdict = True
            break
        skipped = H.PROBE_SKIPPED.search(log)
        assert not skipped, "inconclusive: the CLI's probe skipped the live pipe %s" % skipped.group(1)
        scans = log.count("Discovered ") + log.count("Started watching for IDE lock files")
        if scans != last:
            last, since = scans, time.monotonic()
        elif "Started watching for IDE lock files" in log and time.monotonic() - since >= SCANS_QUIET:
            verdict = False
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the CLI neither connected nor finished its scans within %.0f s" % timeout)
    tmux.close()
    return verdict


def test_folder_spellings_the_cli_and_doctor_agree_on(root, serve, workspace, fake_model, logdir, tmp_path):
    srv = serve()
    _, lock = srv.wait_lock()
    spellings = SPELLINGS + [(root.drive_z(workspace), False)]
    table = []
    for number, (listed, expected) in enumerate(spellings):
        home = "C:\\homes\\rules-%d" % number
        host_home = root.host(home)
        os.makedirs(os.path.join(host_home, "ide"), exist_ok=True)
        # Trusted by the configuration, so that no trust dialog waits, whatever the lock says.
        with open(os.path.join(host_home, "config.json"), "w", encoding="utf-8") as fh:
            json.dump({"trustedFolders": [workspace]}, fh)
        planted = os.path.join(host_home, "ide", "planted.lock")
        with open(planted, "w", encoding="utf-8") as fh:
            json.dump(dict(lock, workspaceFolders=[listed], timestamp=int(time.time() * 1000)), fh)
        try:
            status, out, err = root.run_python(["-m", "ide_protocol", "doctor"], workspace, {"COPILOT_HOME": home})
            said = re.search(r"=> copilot started in (.*?) (connects to|does NOT connect)", out)
            assert said and said.group(1) == workspace, out + err
            doctor = said.group(2) == "connects to"
            assert status == (0 if doctor else 1), out
            env = {"COPILOT_HOME": home, "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                   "COPILOT_PROVIDER_BASE_URL": fake_model.base_url, "COPILOT_MODEL": H.MODEL,
                   "TERM": "xterm-256color"}
            cli_logs = os.path.join(logdir, "spelling-%d" % number)
            os.makedirs(cli_logs)
            tmux = Tmux(width=200, height=50, log_dir=cli_logs)
            try:
                cli = _cli_verdict(root, tmux, workspace, env, cli_logs)
            finally:
                tmux.close()
        finally:
            os.unlink(planted)
        table.append((listed, expected, cli, doctor, lock_rules.same_folder(listed, workspace, windows=True)))
    report = "\n".join("%-40s expected %-5s CLI %-5s doctor %-5s same_folder %s" % row for row in table)
    with open(os.path.join(logdir, "spellings.txt"), "w", encoding="utf-8") as fh:
        fh.write(report + "\n")
    assert all(expected == cli == doctor == rule for _, expected, cli, doctor, rule in table), report
    assert srv.quit(timeout=30) == 0
