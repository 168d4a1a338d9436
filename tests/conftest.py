"""What every test starts from: none of the user's own settings.

The programs read their lock folder from `COPILOT_HOME` (else `~/.copilot`), `doctor`
reads the CLI's XDG folders and settings, `acp-client` takes its agent from `ACP_AGENT`
and `serve` its colours from `NO_COLOR`. A test that inherits one of them from the
shell that runs `make test` tests that shell, not the code: a `COPILOT_HOME` set by the
user sent a child `serve` to one folder and `doctor` to another. So each test starts
without them, and with a HOME of its own (a folder that exists and holds nothing),
unless it sets them itself. The interop and Vim suites set up the real CLI's and Vim's
environment themselves; they keep HOME.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Iterator

import pytest

#: Variables no test may inherit from the shell that runs the suite.
NOT_INHERITED = ("COPILOT_HOME", "COPILOT_ALLOW_ALL", "ACP_AGENT", "NO_COLOR", "FORCE_COLOR",
                 "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")

#: Suites that build their own HOME (the real CLI, a real Vim).
KEEP_HOME = ("interop", "vim")


@pytest.fixture(scope="session")
def home_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The folder that holds each test's HOME. (Not `tmp_path_factory.mktemp` per test:
    to number a folder it reads every name in the session's temporary folder, so with a
    HOME beside each test's own folder the suite spent seconds listing them.)"""
    return str(tmp_path_factory.mktemp("homes"))


@pytest.fixture(autouse=True)
def clean_environment(request: Any, monkeypatch: pytest.MonkeyPatch, home_root: str) -> Iterator[None]:
    for name in NOT_INHERITED:
        monkeypatch.delenv(name, raising=False)
    parts = os.path.normpath(str(request.node.fspath)).split(os.sep)
    if not any(part in KEEP_HOME for part in parts[-3:-1]):
        monkeypatch.setenv("HOME", tempfile.mkdtemp(prefix="home", dir=home_root))
    yield
