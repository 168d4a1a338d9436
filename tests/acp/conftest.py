"""The `transport` fixture: every conversation test runs once over stdio (the fake agent
as a child) and once over TCP (the fake agent listening on 127.0.0.1, as `copilot --acp
--port P` does). A test marked `stdio_only` is about the child process itself (exit
status, signals, reaping) and runs over stdio alone."""
from __future__ import annotations

import pytest

import acp_testlib


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
