"""The CLI's side of the `/ide` protocol, as Copilot CLI speaks it.

One job per module, from the bottom up:

* `errors` — the exceptions (`ClientError` and its kinds);
* `identity` — how the CLI presents itself: names, versions, headers in its order (§2, §3);
* `discovery` — which lock file the CLI would connect to (PROTOCOL.md §1);
* `connection` — one HTTP/1.1 connection and one response read from it (§2);
* `pushes` — the GET stream's reader and who receives its pushes (§5);
* `session` — `IdeClient`: the MCP session, handshake (§3), tools (§4), pushes (§5).

Import the public names from here (`from ide_protocol.client import IdeClient`); the
modules behind them may move.
"""
from __future__ import annotations

from .connection import (DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, READ_SIZE, ClientConnection, ClientResponse,
                         WireHook, open_socket)
from .discovery import discover
from .errors import ClientError, HttpStatusError, IdeTimeout, NoIdeFound, ProtocolViolation, ServerGone
from .identity import (CLIENT_NAME, CLIENT_VERSION, DRAFT_PROTOCOL_VERSION, POST_ACCEPT, PROTOCOL_VERSION,
                       STREAM_ACCEPT, cli_headers, describe_client, program_client_info)
from .pushes import PUSH_METHODS, Push, PushFeed, PushQueue
from .session import IdeClient

__all__ = [
    "ClientError", "ServerGone", "IdeTimeout", "HttpStatusError", "NoIdeFound", "ProtocolViolation",
    "ClientConnection", "ClientResponse", "Push", "PushFeed", "PushQueue", "IdeClient", "discover", "open_socket",
    "cli_headers", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "READ_SIZE", "PUSH_METHODS", "WireHook",
    "CLIENT_NAME", "CLIENT_VERSION", "PROTOCOL_VERSION", "DRAFT_PROTOCOL_VERSION",
    "POST_ACCEPT", "STREAM_ACCEPT", "describe_client", "program_client_info",
]
