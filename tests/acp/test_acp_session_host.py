"""A `Session` talks to its client only through the small `SessionHost` interface: no
import of the client module, and any object with `request`, `notify`, `close_session`
and `prompt_timeout` can host one (here a recorder, no agent at all)."""
from __future__ import annotations

import ast
import asyncio
import os

from acp_testlib import ROOT
from acp.session import Session, SessionHost


def imported_modules(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_session_module_does_not_import_the_client():
    names = imported_modules(os.path.join(ROOT, "acp", "session.py"))
    assert not any(name.endswith("client") for name in names), names


class Recorder:
    """A host that answers `session/prompt` itself and records what it was asked."""

    prompt_timeout = 5.0

    def __init__(self):
        self.calls = []
        self.session = None

    async def request(self, method, params=None, timeout="the host's default"):
        self.calls.append(("request", method, params, timeout))
        if method == "session/prompt":
            self.session.apply({"sessionUpdate": "agent_message_chunk",
                                "content": {"type": "text", "text": "hi"}})
            return {"stopReason": "end_turn"}
        return {}

    async def notify(self, method, params=None):
        self.calls.append(("notify", method, params))

    async def close_session(self, session_id):
        self.calls.append(("close", session_id))


def test_a_session_runs_on_any_host():
    host: SessionHost = Recorder()

    async def main():
        session = host.session = Session(host, "s1", "/w")
        result = await session.prompt("hello")
        await session.cancel()
        await session.set_mode("m")
        await session.close()
        return result

    result = asyncio.run(main())
    assert result.text == "hi" and result.stop_reason == "end_turn"
    assert host.calls == [
        ("request", "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hello"}]}, 5.0),
        ("notify", "session/cancel", {"sessionId": "s1"}),
        ("request", "session/set_mode", {"sessionId": "s1", "modeId": "m"}, "the host's default"),
        ("close", "s1")]
