"""The limits on what a client can make the server hold, and surviving file descriptors
running out (README "Limits and safety").

Where each limit is enforced:

* the body size and the original file `open_diff` reads: `max_body` (the wire parser;
  `diffs.check_original`);
* a request refused by its head alone (Origin, nonce, path, method) is answered
  before its body is read and its connection closed: `McpApp.judge_head`, called by
  the transport as soon as a head arrives;
* open connections: `Listener.max_connections` (the one idle longest makes room, else
  503); connections idle between requests: closed after `connection_idle_timeout`
  (`Listener.close_idle`, from the server's reaper);
* sessions: `McpApp.max_sessions` (the one idle longest makes room, else 503);
  sessions with no stream and no request: ended after `idle_timeout`.

When the process runs out of file descriptors, asyncio's accept loop reports every
failed `accept()` to the loop's exception handler with a traceback (up to 100 per loop
pass, each scheduling a retry a second later; retries still pending when the server
closes fail again, with a traceback each). `AcceptErrorFilter` turns those into one
warning line per `interval` and passes every other report on unchanged; the loop
retries accepting on its own, so service comes back once descriptors are free.
(`open_diff` meanwhile answers an error: see `diffs`.)
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Dict, Optional

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_CONNECTION_IDLE_TIMEOUT = 120.0
DEFAULT_IDLE_TIMEOUT = 300.0

_ACCEPT_FAILED = "socket.accept() out of system resource"

Handler = Callable[[asyncio.AbstractEventLoop, Dict[str, Any]], Any]


class AcceptErrorFilter:
    """A loop exception handler that rate-limits asyncio's accept failures (EMFILE,
    ENFILE, ENOBUFS) and hands everything else to the handler it replaced."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = 10.0) -> None:
        self.loop = loop
        self.interval = interval
        self.suppressed = 0
        self._last = -interval
        self._failed = -interval  # when accept() last failed
        self._previous: Optional[Handler] = None
        self._installed = False

    def install(self) -> None:
        self._previous = self.loop.get_exception_handler()
        self.loop.set_exception_handler(self)
        self._installed = True

    def remove(self) -> None:
        """Put the previous handler back, unless someone replaced ours meanwhile; after
        the accept retries still pending have run, when there was a failure lately."""
        if time.monotonic() - self._failed < 2.0:
            self.loop.call_later(2.0, self._remove_now)
        else:
            self._remove_now()

    def _remove_now(self) -> None:
        if self._installed and self.loop.get_exception_handler() is self:
            self.loop.set_exception_handler(self._previous)
        self._installed = False

    def __call__(self, loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
        if "_start_serving" in repr(context.get("handle")) and isinstance(context.get("exception"),
                                                                          (OSError, ValueError)):
            self.suppressed += 1  # an accept retry of a server closed meanwhile
            return
        if context.get("message") == _ACCEPT_FAILED:
            now = self._failed = time.monotonic()
            if now - self._last >= self.interval:
                self._last = now
                log.warning("cannot accept connections: %s (retried every second; %d more such errors not "
                            "shown)", context.get("exception"), self.suppressed)
                self.suppressed = 0
            else:
                self.suppressed += 1
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)
