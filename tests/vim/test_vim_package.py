"""`make vim-plugin`: the installable folder (library vendored inside, help tags),
loaded by a real Vim from its 'packpath' as ~/.vim/pack/copilot/start/ would be."""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from vim_harness import REPO, locks, read_lock, wait_until


def test_make_vim_plugin_builds_a_package_vim_loads(vims: Any, tmp_path: Any, workspace: str,
                                                    copilot_home: str) -> None:
    pack = str(tmp_path / "vimfiles")
    folder = os.path.join(pack, "pack", "copilot", "start", "copilot_ide")
    subprocess.run(["make", "-s", "vim-plugin", "VIM_PLUGIN_DIR=" + folder], cwd=REPO, check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    vendored = os.path.join(folder, "python3", "copilot_ide_vim", "ide_protocol")
    assert os.path.isfile(os.path.join(vendored, "server", "threaded.py"))
    assert not [d for d, _, _ in os.walk(folder) if d.endswith("__pycache__")]
    with open(os.path.join(folder, "doc", "tags"), encoding="utf-8") as f:
        tags = f.read()
    assert ":CopilotIdeAccept\tcopilot_ide.txt" in tags
    # -u NORC: plugins and packages load; the package is found through 'packpath'.
    vim = vims().start(plugin="", rc="NORC", before=["set packpath^=" + pack, "set rtp-=" + REPO])
    lock = read_lock(vim.wait_lock())
    assert lock["workspaceFolders"] == [workspace]
    assert vim.eval("py3eval('_copilot_ide.lib.origin')") == "vendored"
    assert vim.eval("py3eval('_copilot_ide.lib.path')") == vendored
    vim.ex("help :CopilotIdeSendSelection")
    assert vim.eval("expand('%:t')") == "copilot_ide.txt"
    vim.quit()
    assert locks(copilot_home) == []


def test_sighup_and_sigterm_remove_the_lock(vims: Any, copilot_home: str) -> None:
    for sig in (signal.SIGHUP, signal.SIGTERM):
        vim = vims().start()
        # (Started in full first: a signal that lands while Vim's thread waits for
        # Python's lock can hang Vim itself, see tests/vim/test_vim_signals.py.)
        lock = vim.wait_started()
        os.kill(vim.pid, sig)
        wait_until(vim.exited, what="Vim exiting on %s" % sig.name)
        wait_until(lambda: not os.path.exists(lock), what="the lock removed on %s" % sig.name)
        assert locks(copilot_home) == []
