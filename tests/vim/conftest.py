"""Fixtures of the Vim plugin's tests: a workspace, a private COPILOT_HOME, a real Vim
(`vim-nox`, installed by tests/vim/install_deps.sh when missing; the tests are skipped
with the reason where it cannot be) in tmux, and a CLI-like client."""
from __future__ import annotations

import os
import sys
from typing import Any, List

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vim_harness as V  # noqa: E402
from editor_fixtures import copilot_home, workspace  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="session", autouse=True)  # before vim_ready, which would install Vim
def _not_on_windows() -> None:
    if sys.platform == "win32":
        pytest.skip("drives a terminal Vim in tmux, which is POSIX only (Vim on Windows is not tested)")


@pytest.fixture(scope="session")
def vim_ready() -> None:
    reason = V.missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def vims(vim_ready: None, workspace: str, copilot_home: str, tmp_path: Any) -> Any:
    """A factory of Vim sessions; all are closed (and checked for leftovers) after."""
    made: List[V.VimSession] = []
    logs = str(tmp_path / "logs")
    os.makedirs(logs, exist_ok=True)

    def make(**kw: Any) -> V.VimSession:
        session = V.VimSession(workspace, copilot_home, logs, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


@pytest.fixture
def vim(vims: Any) -> V.VimSession:
    """Vim started on hello.txt with the plugin, its lock file written."""
    session = vims().start()
    session.wait_lock()
    return session


@pytest.fixture
def client(vim: V.VimSession) -> Any:
    c = V.StreamClient(vim.wait_lock())
    yield c
    c.close()
