"""An agent built on the official ACP Python SDK (PyPI `agent-client-protocol`), run in
that SDK's own environment (`make acp-agents`): every message it sends and parses goes
through the SDK's models and connection, not ours. It exercises what the SDK's example
agents do not: permission, fs read and write, a terminal, list and load.

The prompt's first word picks what it does:
  (anything)  three streamed chunks
  slow        one chunk, then waits for session/cancel (answers `cancelled`)
  tools       permission (allow-always offered first), fs read, fs write, a terminal;
              each outcome reported as one chunk line
Sessions are kept in $SDK_AGENT_STORE (JSON), so a later run can list and load them.
"""
import asyncio
import json
import os
import sys
from typing import Any, Dict, List
from uuid import uuid4

from acp import (PROTOCOL_VERSION, Agent, InitializeResponse, LoadSessionResponse, NewSessionResponse,
                 PromptResponse, run_agent, update_agent_message_text, update_user_message_text)
from acp.interfaces import Client
from acp.schema import (AgentCapabilities, Implementation, ListSessionsResponse, PermissionOption,
                        SessionCapabilities, SessionInfo, SessionListCapabilities, ToolCallUpdate)

STORE = os.environ.get("SDK_AGENT_STORE")


def load_store() -> Dict[str, Any]:
    if STORE and os.path.exists(STORE):
        with open(STORE, encoding="utf-8") as handle:
            return json.load(handle)
    return {}


def save_store(sessions: Dict[str, Any]) -> None:
    if STORE:
        with open(STORE, "w", encoding="utf-8") as handle:
            json.dump(sessions, handle)


class ToolsAgent(Agent):
    _conn: Client

    def __init__(self) -> None:
        self.sessions = load_store()
        self.cancelled: Dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True, session_capabilities=SessionCapabilities(list=SessionListCapabilities())),
            agent_info=Implementation(name="sdk-tools-agent", title="SDK tools agent", version="0.1.0"))

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        session_id = uuid4().hex
        self.sessions[session_id] = {"cwd": cwd, "title": None, "history": []}
        save_store(self.sessions)
        return NewSessionResponse(session_id=session_id)

    async def list_sessions(self, cwd: Any = None, cursor: Any = None, **kwargs: Any) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=[
            SessionInfo(session_id=sid, cwd=s["cwd"], title=s["title"], updated_at="2026-01-01T00:00:00Z")
            for sid, s in self.sessions.items() if cwd is None or s["cwd"] == cwd])

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None, **kwargs: Any) -> LoadSessionResponse:
        session = self.sessions.get(session_id)
        if session is None:
            raise ValueError("no session %s" % session_id)
        for role, text in session["history"]:  # replayed before the answer
            update = update_user_message_text(text) if role == "user" else update_agent_message_text(text)
            await self._conn.session_update(session_id=session_id, update=update)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def say(self, session_id: str, text: str) -> None:
        self.sessions[session_id]["history"].append(["agent", text])
        await self._conn.session_update(session_id=session_id, update=update_agent_message_text(text))

    async def prompt(self, session_id: str, prompt: List[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        session = self.sessions[session_id]
        session["title"] = session["title"] or text[:40]
        session["history"].append(["user", text])
        word = (text.split() or [""])[0].lower()
        try:
            if word == "slow":
                event = self.cancelled[session_id] = asyncio.Event()
                await self.say(session_id, "working")
                try:
                    await asyncio.wait_for(event.wait(), 60)
                    return PromptResponse(stop_reason="cancelled")
                except asyncio.TimeoutError:
                    return PromptResponse(stop_reason="end_turn")
            if word == "tools":
                await self.tools(session_id, session["cwd"])
                return PromptResponse(stop_reason="end_turn")
            for piece in ("one ", "two ", "three"):
                await self.say(session_id, piece)
            return PromptResponse(stop_reason="end_turn")
        finally:
            save_store(self.sessions)

    async def tools(self, session_id: str, cwd: str) -> None:
        options = [PermissionOption(option_id="always", name="Always", kind="allow_always"),
                   PermissionOption(option_id="once", name="Once", kind="allow_once"),
                   PermissionOption(option_id="no", name="No", kind="reject_once")]
        answer = await self._conn.request_permission(
            session_id=session_id, options=options,
            tool_call=ToolCallUpdate(tool_call_id="call_1", title="Write out.txt", kind="edit", status="pending"))
        outcome = answer.outcome
        await self.say(session_id, "PERMISSION %s\n" % (getattr(outcome, "option_id", None) or outcome.outcome))
        read = await self._conn.read_text_file(session_id=session_id, path=os.path.join(cwd, "hello.txt"),
                                               line=2, limit=1)
        await self.say(session_id, "READ %s\n" % json.dumps(read.content))
        await self._conn.write_text_file(session_id=session_id, path=os.path.join(cwd, "out.txt"),
                                         content="written by the SDK agent\n")
        await self.say(session_id, "WRITE ok\n")
        try:
            term = await self._conn.create_terminal(session_id=session_id, command=sys.executable,
                                                    args=["-c", "print('from the terminal')"], cwd=cwd)
        except Exception as exc:  # the SDK raises the client's JSON-RPC error
            await self.say(session_id, "TERMINAL refused: %s\n" % exc)
            return
        status = await self._conn.wait_for_terminal_exit(session_id=session_id, terminal_id=term.terminal_id)
        output = await self._conn.terminal_output(session_id=session_id, terminal_id=term.terminal_id)
        await self._conn.release_terminal(session_id=session_id, terminal_id=term.terminal_id)
        await self.say(session_id, "TERMINAL exit=%s output=%s\n" % (status.exit_code, json.dumps(output.output)))


async def main() -> None:
    await run_agent(ToolsAgent())


if __name__ == "__main__":
    asyncio.run(main())
