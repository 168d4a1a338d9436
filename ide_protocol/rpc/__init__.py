"""JSON-RPC on asyncio: the dispatcher and the two-way peer, built on `wire.jsonrpc`.

One core for both transports: the MCP server (HTTP) uses the dispatcher, the ACP client
(NDJSON over stdio or TCP) the whole peer. Id matching and error codes live here and in
`wire.jsonrpc` only.
"""
from __future__ import annotations

from .dispatch import Deferred, Dispatcher, Handler, Route, discard, is_async
from .peer import NO_ROOM_MESSAGE, Outgoing, Peer, Started

__all__ = ["NO_ROOM_MESSAGE", "Deferred", "Dispatcher", "Handler", "Outgoing", "Peer", "Route", "Started", "discard",
           "is_async"]
