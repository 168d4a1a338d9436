"""Fixtures of the third-party agent suite: ACP agents this project did not write,
installed pinned by `make acp-agents` (tests/acp_agents/install.sh) into .acp-agents/.

Every test here is marked ``interop`` (the unit suite deselects it; `make
interop-acp-agents` runs it) and is skipped, with the installer's reason, when its agent
could not be installed.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AGENTS = os.path.join(ROOT, ".acp-agents")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.interop)


def installed(name):
    """The folder of an installed agent kit, or a skip with the installer's reason."""
    folder = os.path.join(AGENTS, name)
    skipped = os.path.join(folder, "SKIPPED")
    if os.path.exists(skipped):
        with open(skipped, encoding="utf-8") as handle:
            pytest.skip(handle.read().strip())
    if not os.path.exists(os.path.join(folder, "VERSION")):
        pytest.skip("%s is not installed: run `make acp-agents`" % name)
    return folder


@pytest.fixture
def python_sdk():
    """(python, examples folder) of the official Python SDK's own environment."""
    folder = installed("python-sdk")
    return os.path.join(folder, "venv", "bin", "python"), os.path.join(folder, "examples")


@pytest.fixture
def ts_sdk():
    """The TypeScript SDK's package folder (its example agent is dist/examples/agent.js)."""
    folder = installed("ts-sdk")
    return os.path.join(folder, "node_modules", "@agentclientprotocol", "sdk")


@pytest.fixture
def work(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "hello.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    return str(root)
