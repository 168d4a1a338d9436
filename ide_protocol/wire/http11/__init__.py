"""HTTP/1.1 messages, sans-IO: bytes in, events out; messages in, bytes out.

Copilot CLI speaks MCP's Streamable HTTP over a Unix socket or named pipe (PROTOCOL.md
§2), so the server needs an HTTP/1.1 implementation that the standard library does not
offer in a usable form (`http.server` is blocking and thread-based). In the manner of
h11, nothing here touches a socket or an event loop, which keeps every framing rule
testable byte by byte. By concern:

* `headers` — `Headers`, the ordered fields with case-insensitive lookups; `NO_TRAILERS`.
* `events`  — what the readers emit: `Request` (with `keep_alive` and `body_follows`
  decided), `Response` (with `keep_alive`), `Data`, `EndOfMessage`, `ParseError`,
  `ConnectionClosed`.
* `rules`   — every framing rule, one function each: where a head ends and its size
  limit (one for heads and trailers), start lines and field lines and their count,
  `body_framing`, `body_follows` (a request's body), `has_body` (none for HEAD, 1xx,
  204, 304), `chunk_size` (the chunk-size grammar), `check_body_size` (the body limit,
  one default), `keep_alive` (after a message), `keeps_alive_after` (after an answer)
  and `connection_value` (how an answer says it).
* `readers` — `RequestParser` and `ResponseParser`, one state machine applying them.
* `writers` — `write_request`, `write_response`, `write_response_head` (each spells
  the framing fields, and the `Connection` field given `keep_alive`), `encode_chunk`,
  `LAST_CHUNK`.
* `server`  — `ServerConnection`, one connection of a server as a state machine
  (`State`): requests in order (`Incoming`), the refusals it answers itself
  (`Refused`), the pipelining cap, 408, keep-alive or close after each `Reply`.

The readers never raise on input. A malformed message becomes a `ParseError` event with
the status code the server should answer with (400, 413, 431, 501, 505); after it the
reader is dead and the connection should be closed once the error response is written.
"""
from __future__ import annotations

from .events import ConnectionClosed, Data, EndOfMessage, Event, ParseError, ParserEvent, Request, Response
from .headers import NO_TRAILERS, Headers, HeadersLike
from .readers import ReadState, RequestParser, ResponseParser
from .rules import (DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD, MAX_CHUNK_LINE, MAX_FIELDS, REASONS, connection_value,
                    has_body, keep_alive, keeps_alive_after)
from .server import MAX_PENDING, Incoming, Judge, Refused, Reply, ServerConnection, State
from .writers import (LAST_CHUNK, encode_chunk, encode_chunked_body, write_request, write_response,
                      write_response_head)

__all__ = [
    "ConnectionClosed", "DEFAULT_MAX_BODY", "DEFAULT_MAX_HEAD", "Data", "EndOfMessage", "Event",
    "Headers", "HeadersLike", "Incoming", "Judge", "LAST_CHUNK", "MAX_CHUNK_LINE", "MAX_FIELDS", "MAX_PENDING",
    "NO_TRAILERS", "ParseError", "ParserEvent", "REASONS", "ReadState", "Refused", "Reply", "Request", "RequestParser", "Response",
    "ResponseParser", "ServerConnection", "State", "connection_value",
    "encode_chunk", "encode_chunked_body", "has_body", "keep_alive", "keeps_alive_after", "write_request", "write_response",
    "write_response_head",
]
