"""How Copilot CLI presents itself on the `/ide` wire: its name and version, the MCP
protocol versions it asks for, and its request headers in the order and case it sends
them (PROTOCOL.md §2, §3; tests/captures/copilot-cli-1.0.102-ide-session.log).

Kept apart so the session, the checker and the tracer send byte for byte the same
headers as the real client.

One field differs on purpose: our own programs (`doctor`, `check`, `client`) name
themselves in `clientInfo` (`copilot-ide-doctor`, ...), so that an IDE that logs its
peers, such as `serve`, does not show a `doctor` run as Copilot CLI connecting.
Everything else they send is what the CLI sends.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

__all__ = ["CLIENT_NAME", "CLIENT_VERSION", "PROTOCOL_VERSION", "DRAFT_PROTOCOL_VERSION",
           "POST_ACCEPT", "STREAM_ACCEPT", "PROGRAM_PREFIX", "cli_headers", "program_client_info",
           "describe_client"]

CLIENT_NAME = "copilot-cli"
CLIENT_VERSION = "1.0.102"
#: The version `initialize` asks for (PROTOCOL.md §3).
PROTOCOL_VERSION = "2025-11-25"
#: The draft protocol `server/discover` names in its `_meta` (PROTOCOL.md §3).
DRAFT_PROTOCOL_VERSION = "2026-07-28"

#: `clientInfo.name` of our own programs: this prefix and the command (`copilot-ide-doctor`).
PROGRAM_PREFIX = "copilot-ide-"

#: `accept` of a POST and of the GET stream (PROTOCOL.md §2).
POST_ACCEPT = "application/json, text/event-stream"
STREAM_ACCEPT = "text/event-stream"


def cli_headers(lock_headers: Dict[str, str], session_id: str, *, accept: Optional[str] = POST_ACCEPT,
                content_type: Optional[str] = "application/json", mcp_session_id: Optional[str] = None,
                pid: Optional[int] = None, parent_pid: Optional[int] = None) -> List[Tuple[str, str]]:
    """Request headers in the CLI's order and case (PROTOCOL.md §2; the capture):
    `X-Copilot-Session-Id`, `X-Copilot-PID`, `X-Copilot-Parent-PID`, the lock's headers
    verbatim, `accept`, `content-type`, `mcp-session-id`, `Host` (the writer adds `Connection`).
    (`Transfer-Encoding: chunked` is appended by the writer for bodies.)"""
    headers = [("X-Copilot-Session-Id", session_id),
               ("X-Copilot-PID", str(os.getpid() if pid is None else pid)),
               ("X-Copilot-Parent-PID", str(_parent_pid() if parent_pid is None else parent_pid))]
    headers.extend(lock_headers.items())
    if accept is not None:
        headers.append(("accept", accept))
    if content_type is not None:
        headers.append(("content-type", content_type))
    if mcp_session_id is not None:
        headers.append(("mcp-session-id", mcp_session_id))
    headers.append(("Host", "localhost"))
    return headers  # (`Connection: keep-alive` follows: the writer spells it, `keep_alive=True`)


def _parent_pid() -> int:
    getppid = getattr(os, "getppid", None)
    return getppid() if getppid is not None else 0


def program_client_info(command: str) -> Dict[str, str]:
    """The `clientInfo` one of our programs sends: `{"name": "copilot-ide-doctor",
    "version": <the package version>}` for `command` "doctor"."""
    from .. import __version__
    return {"name": PROGRAM_PREFIX + command, "version": __version__}


def describe_client(name: object, version: object = None) -> str:
    """Who a `clientInfo` says it is, for a person: "Copilot CLI 1.0.102",
    "copilot-ide doctor", or the name and version as sent (unknown clients)."""
    if name == CLIENT_NAME:
        return "Copilot CLI %s" % version if version else "Copilot CLI"
    if isinstance(name, str) and name.startswith(PROGRAM_PREFIX) and len(name) > len(PROGRAM_PREFIX):
        return "copilot-ide %s" % name[len(PROGRAM_PREFIX):]
    shown = " ".join(str(x) for x in (name, version) if x)
    return shown or "a client that did not say who it is"
