"""A real Emacs (`emacs -nw -Q`, copilot-ide.el loaded, `copilot-ide-mode` on) in a
private tmux server, for the interop tests with the real Copilot CLI.

Keys go in through tmux (`keys`, `type`), as a user types them; Emacs's state comes
back through `emacsclient --eval` on a server socket of the test's own (`eval_json`:
Emacs writes the JSON of a value to a file the test reads).
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
PACKAGE_DIR = os.path.join(REPO, "editors", "emacs")
for _path in (os.path.join(TESTS, "interop"), os.path.join(TESTS, "vim")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from copilot_harness import wait_until  # noqa: E402
from tmux_driver import EditorInTmux  # noqa: E402
from vim_harness import locks, read_lock  # noqa: E402,F401  (the same lock folder rules)

WAIT = 30.0
#: Where Debian's elpa-flycheck puts flycheck (the ERT suite's flycheck test loads it).
FLYCHECK = "/usr/share/emacs/site-lisp/elpa/flycheck-*"


_checked: Dict[str, Optional[str]] = {}


def missing() -> Optional[str]:
    """Why Emacs cannot run here (after trying to install it, tmux and flycheck), or
    None. Flycheck missing skips only the flycheck test (it says so itself)."""
    if "reason" not in _checked:
        reason = None
        if shutil.which("emacs") is None or shutil.which("tmux") is None or not glob.glob(FLYCHECK):
            proc = subprocess.run(["bash", os.path.join(HERE, "install_deps.sh")], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=900)
            if shutil.which("emacs") is None or shutil.which("tmux") is None:
                lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
                reason = "no Emacs: " + (lines[-1] if lines else "install failed")
        _checked["reason"] = reason
    return _checked["reason"]


def pid_gone(pid: int) -> bool:
    """Whether `pid` has ended; reaped here when it became our child (the interop
    suite makes pytest a subreaper, so an orphaned bridge is re-parented to it)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return True
    except ChildProcessError:
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


class EmacsSession(EditorInTmux):
    """`emacs -nw -Q FILE...` in tmux with copilot-ide-mode on, started in `workspace`."""

    def __init__(self, workspace: str, copilot_home: str, log_dir: str) -> None:
        super().__init__(workspace, copilot_home, log_dir, width=160, height=45)
        # A short folder: a Unix socket path has ~100 bytes at most.
        self.server_dir = tempfile.mkdtemp(prefix="emx")
        self._evals = 0

    def start(self, files: List[str]) -> "EmacsSession":
        setup = ("(progn (setq server-socket-dir %s) (server-start)"
                 " (require 'copilot-ide) (setq copilot-ide-python %s) (copilot-ide-mode 1))"
                 % (json.dumps(self.server_dir), json.dumps(sys.executable)))
        self.launch(["emacs", "-nw", "-Q", "-L", PACKAGE_DIR, "--eval", setup] + list(files))
        wait_until(lambda: os.path.exists(os.path.join(self.server_dir, "server")), WAIT,
                   message="Emacs's server socket")
        return self

    def command(self, name: str) -> None:
        """`M-x NAME RET`, as a user runs a command."""
        self.keys("M-x")
        self.type(name)
        self.keys("Enter")

    def eval_json(self, expr: str, timeout: float = WAIT) -> Any:
        """The value of Lisp `expr` (nil is null, t is true, vectors are lists)."""
        self._evals += 1
        out = os.path.join(self.log_dir, "emacs-eval-%d.json" % self._evals)
        lisp = ("(let ((coding-system-for-write 'utf-8-unix)) (with-temp-file %s (insert (json-serialize"
                " (vector %s) :null-object nil :false-object :false))) nil)" % (json.dumps(out), expr))
        proc = subprocess.run(["emacsclient", "--socket-name", os.path.join(self.server_dir, "server"),
                               "--eval", lisp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError("emacsclient --eval %s: %s" % (expr, proc.stdout.decode("utf-8", "replace")))
        with open(out, encoding="utf-8") as f:
            return json.load(f)[0]

    def wait_lock(self, timeout: float = WAIT) -> str:
        return wait_until(lambda: (locks(self.copilot_home) or [None])[-1], timeout, message="a lock file")

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.server_dir, ignore_errors=True)
