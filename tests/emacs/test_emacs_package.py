"""The Emacs package (editors/emacs/copilot-ide.el) in a real Emacs, in batch.

Emacs comes from tests/emacs/install_deps.sh (`make emacs-deps`: Debian's emacs-nox);
where it cannot be installed every test here is skipped with the reason. The bridge the
package starts runs on the Python running these tests (`copilot-ide-python`), so the
suite under each CPython checks the bridge on it too.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emacs_harness import FLYCHECK, missing, pid_gone, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(REPO, "editors", "emacs", "copilot-ide.el")

@pytest.fixture(scope="module", autouse=True)
def emacs_ready() -> None:
    if sys.platform == "win32":
        pytest.skip("the Emacs tests run on POSIX (Unix sockets, emacs-nox)")
    reason = missing()
    if reason:
        pytest.skip(reason)


def emacs(*args: str, cwd: str = REPO, env: Optional[Dict[str, str]] = None,
          timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(["emacs", "-Q", "--batch", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout,
                          universal_newlines=True, encoding="utf-8", errors="replace")


def python_setting() -> List[str]:
    return ["--eval", "(setq copilot-ide-python %s)" % json.dumps(sys.executable)]


def test_byte_compiles_without_warnings(tmp_path: Any) -> None:
    copy = str(tmp_path / "copilot-ide.el")
    shutil.copy(PACKAGE, copy)
    out = emacs("--eval", "(setq byte-compile-error-on-warn t)", "-f", "batch-byte-compile", copy)
    assert out.returncode == 0 and "Warning" not in out.stdout and "Error" not in out.stdout, out.stdout
    assert os.path.isfile(copy + "c")


def test_checkdoc_is_clean() -> None:
    out = emacs("--eval", "(progn (require 'checkdoc) (checkdoc-file %s))" % json.dumps(PACKAGE))
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout


def test_ert_suite(tmp_path: Any) -> None:
    """tests/emacs/copilot-ide-tests.el: the package with the real bridge and a
    CLI-like client (tests/emacs/fake_cli.py)."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = emacs("-L", os.path.dirname(PACKAGE), "-l", os.path.join(HERE, "copilot-ide-tests.el"),
                *python_setting(), "-f", "ert-run-tests-batch-and-exit", env=env)
    assert out.returncode == 0, out.stdout[-6000:]
    assert "unexpected" in out.stdout and " 0 unexpected" in out.stdout, out.stdout[-3000:]
    if glob.glob(FLYCHECK):   # installed: its test must have run
        assert " skipped" not in out.stdout, out.stdout[-3000:]
    # Nothing left behind: no bridge, no lock, no socket folder in this TMPDIR.
    assert not glob.glob(str(tmp_path / "copilot-ide-home*" / "ide" / "*.lock"))


def test_a_bridge_that_cannot_start_with_the_package_installed_too(tmp_path: Any) -> None:
    """The ERT test "a bridge that cannot start turns the mode off" gave the package an
    empty library folder, and counted on the bridge then failing to import; with the
    package installed where that Python looks (a newcomer's `pip install .`, then the
    suite from the unpacked sdist) the bridge started, and the test failed. Here the
    package is "installed" in a venv of the test's own (a .pth file naming the
    checkout: nothing downloaded), and that venv's Python runs the bridge."""
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = os.path.join(venv, "bin", "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True, timeout=60).stdout.strip()
    with open(os.path.join(site, "ide_protocol_checkout.pth"), "w") as f:
        f.write(REPO + "\n")
    found = subprocess.run([python, "-I", "-c", "import ide_protocol.__main__; print(ide_protocol.__file__)"],
                           cwd=str(tmp_path), stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert found.stdout.startswith(REPO), found.stdout   # installed: importable from anywhere
    out = emacs("-L", os.path.dirname(PACKAGE), "-l", os.path.join(HERE, "copilot-ide-tests.el"),
                "--eval", "(setq copilot-ide-python %s)" % json.dumps(python),
                "--eval", '(ert-run-tests-batch-and-exit "a-bridge-that-cannot-start")',
                env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert out.returncode == 0 and "1 results as expected, 0 unexpected" in out.stdout, out.stdout[-3000:]


def test_make_emacs_package_builds_a_package_with_autoloads(tmp_path: Any) -> None:
    folder = str(tmp_path / "copilot-ide")
    subprocess.run(["make", "-s", "emacs-package", "EMACS_PACKAGE_DIR=" + folder], cwd=REPO, check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert os.path.isfile(os.path.join(folder, "copilot-ide.elc"))
    assert os.path.isfile(os.path.join(folder, "ide_protocol", "programs", "bridge.py"))
    assert not [d for d, _, _ in os.walk(folder) if d.endswith("__pycache__")]
    workspace = os.path.realpath(str(tmp_path / "ws"))
    home = str(tmp_path / "home")
    os.makedirs(workspace)
    # Only the autoloads are loaded: the mode is an autoload until first used, and the
    # package finds the library copied beside it (no PYTHONPATH, no checkout).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["COPILOT_HOME"] = home
    script = """
(progn
  (add-to-list 'load-path %(folder)s)
  (require 'copilot-ide-autoloads)
  (princ (format "autoload:%%s\\n" (autoloadp (symbol-function 'copilot-ide-mode))))
  (setq copilot-ide-python %(python)s)
  (copilot-ide-mode 1)
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (copilot-ide--live-p)) (< (float-time) deadline))
      (accept-process-output nil 0.05)))
  (princ (format "library:%%s\\n" copilot-ide-library-path))
  (princ (format "lock:%%s\\n" (alist-get 'lock copilot-ide--ready)))
  (princ (format "folders:%%s\\n" (alist-get 'folders copilot-ide--ready)))
  (princ (format "bridge:%%s\\n" (alist-get 'pid copilot-ide--ready)))
  (let ((lock (alist-get 'lock copilot-ide--ready)))
    (run-hooks 'kill-emacs-hook)
    (princ (format "after-exit-hook:%%s\\n" (file-exists-p lock)))))
""" % {"folder": json.dumps(folder), "python": json.dumps(sys.executable)}
    out = emacs("--eval", script, cwd=workspace, env=env)
    assert out.returncode == 0, out.stdout
    lines = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
    assert lines.get("autoload") == "t", out.stdout
    assert os.path.normpath(lines["library"]) == os.path.normpath(folder), out.stdout
    assert lines["lock"].startswith(os.path.join(home, "ide")), out.stdout
    assert lines["folders"] == "(%s)" % workspace, out.stdout
    assert lines["after-exit-hook"] == "nil", out.stdout   # the lock was gone before Emacs exited
    assert glob.glob(os.path.join(home, "ide", "*.lock")) == []
    wait_until(lambda: pid_gone(int(lines["bridge"])), 30, message="the bridge's exit after Emacs's")
