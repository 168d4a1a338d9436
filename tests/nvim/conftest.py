"""Fixtures of the Neovim plugin's tests: a workspace, a private COPILOT_HOME, a real
Neovim in tmux on each Neovim tested (Debian's 0.7 and a newer release: `nvim_version`
is parametrized; each is installed by install_deps.sh when missing, else its tests are
skipped with the reason), and a CLI-like client of the bridge the plugin started."""
from __future__ import annotations

import os
import sys
from typing import Any, List

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nvim_harness as N  # noqa: E402
from editor_fixtures import copilot_home, workspace  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="session", autouse=True)
def _not_on_windows() -> None:
    if sys.platform == "win32" or not os.path.isdir("/proc"):
        pytest.skip("drives a terminal Neovim in tmux and reads /proc: Linux only")


@pytest.fixture(params=sorted(N.VERSIONS), ids=lambda v: "nvim" + v)
def nvim_binary(request: Any) -> str:
    path, reason = N.binary(request.param)
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture
def nvims(nvim_binary: str, workspace: str, copilot_home: str, tmp_path: Any) -> Any:
    """A factory of Neovim sessions; all are closed after the test."""
    made: List[N.NvimSession] = []
    logs = str(tmp_path / "logs")
    os.makedirs(logs, exist_ok=True)

    def make(**kw: Any) -> N.NvimSession:
        session = N.NvimSession(workspace, copilot_home, logs, nvim_binary, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


@pytest.fixture
def nvim(nvims: Any) -> N.NvimSession:
    """Neovim started on hello.txt with the plugin, the bridge ready."""
    session = nvims().start()
    session.wait_ready()
    return session


@pytest.fixture
def client(nvim: N.NvimSession) -> Any:
    c = N.StreamClient(nvim.wait_lock())
    yield c
    c.close()
