"""`make nvim-install` on a fresh HOME, then a plain `nvim` in a folder: the plugin
loads from Neovim's package folder (no -u, no runtimepath setting), with its own copy
of the library, and writes a lock for the folder; `:help copilot_ide` finds its tags."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

import nvim_harness as N
from nvim_harness import locks, read_lock, wait_until


@pytest.mark.parametrize("xdg", [False, True], ids=["home", "xdg-data-home"])
def test_make_nvim_install_on_a_fresh_home(nvim_binary: str, tmp_path: Any, xdg: bool) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make")
    home = str(tmp_path / "home")
    os.makedirs(home)
    data = str(tmp_path / "data") if xdg else ""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "COPILOT_HOME"}
    env["HOME"] = home
    if data:
        env["XDG_DATA_HOME"] = data
    build = str(tmp_path / "build" / "copilot_ide")
    proc = subprocess.run(["make", "-s", "-C", N.REPO, "nvim-install", "NVIM_PLUGIN_DIR=" + build,
                           "NVIM=" + nvim_binary], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout.decode()
    pack = os.path.join(data or os.path.join(home, ".local", "share"), "nvim", "site", "pack", "copilot", "start",
                        "copilot_ide")
    assert os.path.isfile(os.path.join(pack, "python", "ide_protocol", "__init__.py"))
    assert os.path.isfile(os.path.join(pack, "doc", "tags"))
    project = os.path.realpath(str(tmp_path / "project"))
    os.makedirs(project)
    with open(os.path.join(project, "hello.txt"), "w") as f:
        f.write("hello\n")
    session = N.NvimSession(project, home, str(tmp_path), nvim_binary)
    try:
        # Neovim's environment: a fresh user's (no COPILOT_HOME, no XDG_ variable but the
        # one this case sets: an empty one would not count as unset for Neovim).
        # (COPILOT_HOME empty counts as unset, for the CLI as for the bridge.)
        session.launch([nvim_binary, "--listen", session.address, "hello.txt"], HOME=home, COPILOT_HOME="",
                       **({"XDG_DATA_HOME": data} if data else {}))
        lock_dir = os.path.join(home, ".copilot")
        lock = wait_until(lambda: locks(lock_dir), N.WAIT, "a lock in ~/.copilot/ide")[0]
        assert read_lock(lock)["workspaceFolders"] == [project]
        wait_until(lambda: os.path.exists(session.address), N.WAIT, "the RPC socket")
        session.rpc = N.Nvim(session.address)
        library = session.lua("return require('copilot_ide').library()")
        assert library == os.path.realpath(os.path.join(pack, "python"))
        session.ex("help copilot_ide")
        wait_until(lambda: session.eval("expand('%:t')") == "copilot_ide.txt", what=":help copilot_ide")
        session.quit("qa!")
        assert locks(lock_dir) == []
    finally:
        session.close()
