"""The CLI's side of the `/ide` protocol, as Copilot CLI speaks it: find an IDE from its
lock file (PROTOCOL.md §1), talk HTTP/1.1 to its socket (§2), run the MCP session
(handshake §3, tools §4, pushes §5).

Import the public names from here (`from ide_protocol.client import IdeClient`); the
modules behind them are an implementation detail and may move.
"""
from __future__ import annotations

from .ide_client import (CLIENT_NAME, CLIENT_VERSION, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT,
                         DRAFT_PROTOCOL_VERSION, POST_ACCEPT, PROTOCOL_VERSION, PUSH_METHODS,
                         STREAM_ACCEPT, ClientConnection, ClientError, ClientResponse,
                         HttpStatusError, IdeClient, IdeTimeout, NoIdeFound, ProtocolViolation,
                         Push, ServerGone, cli_headers, discover, open_socket)

__all__ = [
    "ClientError", "ServerGone", "IdeTimeout", "HttpStatusError", "NoIdeFound", "ProtocolViolation",
    "ClientConnection", "ClientResponse", "Push", "IdeClient", "discover", "open_socket",
    "cli_headers", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "PUSH_METHODS",
    "CLIENT_NAME", "CLIENT_VERSION", "PROTOCOL_VERSION", "DRAFT_PROTOCOL_VERSION",
    "POST_ACCEPT", "STREAM_ACCEPT",
]
