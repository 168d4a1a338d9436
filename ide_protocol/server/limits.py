"""The limits on what a client can make the server hold (README "Limits and safety").

Where each limit is enforced:

* the body size: `max_body`, checked by the wire parser (`http11.rules.check_body_size`;
  the one default is `http11.DEFAULT_MAX_BODY`, 64 MiB, which `IdeServer(max_body=...)`
  overrides); the same figure bounds the original file `open_diff` reads
  (`diffs.load_original`);
* the head and trailer size and the field count: the wire parser
  (`http11.rules.check_section_size`, `check_field_count`);
* a request partly received: `REQUEST_TIMEOUT` to complete, else 408 and closed;
  complete requests waiting behind the one answered (a pipelining peer):
  `http11.server.MAX_PENDING`, past which the connection stops reading (both decided
  by `http11.ServerConnection`, the deadline's clock kept by the transport);
* a request refused by its head alone (Origin, nonce, path, method) is answered
  before its body is read and its connection closed: `McpApp.judge_head`, called by
  the transport once for every request as soon as its head arrives;
* open connections: `Listener.max_connections` (the one idle longest makes room, else
  503); connections idle between requests: closed after `connection_idle_timeout`
  (`Listener.close_idle`, from the server's reaper);
* sessions: `McpApp.max_sessions` (the one idle longest makes room, else 503);
  sessions with no stream and no request: ended after `idle_timeout`; sessions whose
  every connection closed (the client vanished): ended `orphan_timeout` later
  (PROTOCOL.md §3, "When a session ends");
* file descriptors running out: the `Listener`'s accept loop pauses and retries,
  logging one line at most every few seconds; nothing is installed in the loop.
"""
from __future__ import annotations

from ..wire import http11

__all__ = ["DEFAULT_CONNECTION_IDLE_TIMEOUT", "DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_BODY", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_MAX_SESSIONS", "DEFAULT_ORPHAN_TIMEOUT", "REQUEST_TIMEOUT"]

DEFAULT_MAX_BODY = http11.DEFAULT_MAX_BODY
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_CONNECTION_IDLE_TIMEOUT = 120.0
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_ORPHAN_TIMEOUT = 1.0
#: A request that has started arriving must finish within this many seconds (a slow
#: or stuck peer must not hold a connection forever with half a request): 408, closed.
REQUEST_TIMEOUT = 60.0
