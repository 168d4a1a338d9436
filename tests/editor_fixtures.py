"""What the real-editor suites (tests/vim, tests/nvim) share: the workspace a test's
editor starts in, with one file of sample text (multi-byte characters: the byte,
character and UTF-16 columns all differ), and the CLI's home, where its lock goes.
Their conftest files import these fixtures."""
from __future__ import annotations

import os
from typing import Any

import pytest

SAMPLE = "héllo wörld 😀 end\nsecond line\nthird\n"


@pytest.fixture
def workspace(tmp_path: Any) -> str:
    ws = os.path.realpath(str(tmp_path / "ws"))
    os.makedirs(ws)
    with open(os.path.join(ws, "hello.txt"), "w", encoding="utf-8") as f:
        f.write(SAMPLE)
    return ws


@pytest.fixture
def copilot_home(tmp_path: Any) -> str:
    home = os.path.realpath(str(tmp_path / "copilot-home"))
    os.makedirs(home)
    return home
