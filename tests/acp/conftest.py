"""The `transport` fixture: every conversation test runs once over stdio (the fake agent
as a child) and once over TCP (the fake agent listening on 127.0.0.1, as `copilot --acp
--port P` does). A test marked `stdio_only` is about the child process itself (exit
status, signals, reaping) and runs over stdio alone."""
from __future__ import annotations

import sys

import pytest

import acp_testlib

#: Why the ACP tests do not run on Windows (`make test-windows`).
WINDOWS_REASON = ("not yet tried under Windows since the fake ACP agent (tests/acp/fake_agent.py) became plain "
                  "threads (it read its stdin with loop.connect_read_pipe, which the Windows Proactor loop cannot "
                  "do on the synchronous pipe a parent gives its child); the ACP client on Windows is untested")


@pytest.fixture(autouse=True)
def _not_on_windows():
    if sys.platform == "win32":
        pytest.skip(WINDOWS_REASON)


def pytest_configure(config):
    config.addinivalue_line("markers", "stdio_only: the test is about the agent as a child process")


def pytest_generate_tests(metafunc):
    if "transport" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("stdio_only")
        metafunc.parametrize("transport", ["stdio"] if only else ["stdio", "tcp"], indirect=True)


@pytest.fixture
def transport(request):
    acp_testlib.TRANSPORT = request.param
    try:
        yield request.param
    finally:
        acp_testlib.TRANSPORT = "stdio"
        acp_testlib.stop_tcp_agents()
