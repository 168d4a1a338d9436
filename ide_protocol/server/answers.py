"""What an HTTP application gives back: the answer to one request, as a value.

The server is two layers. `mcp.McpApp` decides what to answer (status, header
fields, a body or a stream); `transport.HttpConnection` writes it on the socket. This
module is the whole interface between them, so that a reader can follow a request down
and its answer back without either layer reaching into the other:

    answer = app(request, body, connection)      # called by the transport, once
    # answer is a Reply, a Stream or a PendingReply:

* `Reply` — a complete response, known now. The transport writes it at once (one
  write: head, body and, when `chunked`, the last chunk).
* `Stream` — a response whose head is known now and whose body comes later: the
  transport writes the head at once, then each chunk the async iterator `chunks` gives
  (one SSE event per chunk, PROTOCOL.md §2), then the last chunk.
* `PendingReply` — a response that waits for something (a method handler that has to
  wait): the transport awaits `run()` and writes the `Reply` it gives.

The transport calls `close()` of a `Stream` or a `PendingReply` exactly once when it is
done with it, whatever happened: the body ended, the peer went away first (then the
awaiting is cancelled) or the connection dropped before the answer was started. That is
where the application lets go of what the request holds (a session's stream, a running
request's place).

Every request is first judged by its head alone, before its body is read, by the judge
the listener was given with the application (`Judge`):

    refusal = judge(request)                     # a Reply, or None: once per request

The transport calls it exactly once for every request, as soon as its head arrives
(`McpApp.judge_head`: Origin, nonce, path, method). A judge is a pure function of the
head: it remembers nothing between calls. A refused request is answered with the
refusal, its body never buffered, and `app(...)` is never called for it; `app(...)` is
called only for a request its judge passed.

The framing fields (`Content-Length`, `Transfer-Encoding`) and the `Connection` field
belong to the wire layer's writers: an application sets none of them. An answer that
must be the last one on its connection says so (`Reply(close_after=True)`,
`Stream(close_after=True)`); the connection's state machine (`http11.ServerConnection`)
decides from that and from the request (`http11.keeps_alive_after`) and the writer
spells the field. Nothing here knows sockets or event loops. (`Reply` is the wire
layer's own answer value, `http11.Reply`, which the relay writes too.)
"""
from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable, Optional, Tuple, Union

from ..wire import http11
from ..wire.http11.server import Fields, Judge, Reply

__all__ = ["Answer", "App", "Fields", "Judge", "PendingReply", "Reply", "Stream", "plain"]


class Stream:
    """A chunked response whose body comes later: the head now, then each piece that
    `chunks` gives, then the last chunk; `close()` when the transport is done with it.
    `close_after`: the connection closes after this answer (as `Reply.close_after`)."""

    __slots__ = ("status", "headers", "chunks", "_close", "close_after")

    def __init__(self, status: int, headers: Fields, chunks: AsyncIterator[bytes],
                 close: Optional[Callable[[], None]] = None, *, close_after: bool = False) -> None:
        self.status = status
        self.headers = headers
        self.chunks = chunks
        self._close = close
        self.close_after = close_after

    def close(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            close()


class PendingReply:
    """A response that has to wait: `run()` gives the awaitable of its `Reply`;
    `close()` when the transport is done with it (before `run()`, if it never ran)."""

    __slots__ = ("_run", "_close")

    def __init__(self, run: Callable[[], Awaitable[Reply]], close: Optional[Callable[[], None]] = None) -> None:
        self._run = run
        self._close = close

    def run(self) -> Awaitable[Reply]:
        return self._run()

    def close(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            close()


Answer = Union[Reply, Stream, PendingReply]

#: The application: `app(request, body, connection) -> Answer`, where `connection` is
#: the number of the connection the request came on (for logs and traces). Called once
#: per request, in request order on each connection; it must not raise (if it does,
#: the transport answers 500).
App = Callable[[http11.Request, bytes, int], Answer]

def plain(status: int, text: str, *extra: Tuple[str, str], close_after: bool = False) -> Reply:
    """A short `text/plain` answer (the errors of PROTOCOL.md §2: 401, 403, 404, ...)."""
    return Reply(status, (("Content-Type", "text/plain"),) + extra, text.encode("utf-8"), close_after=close_after)
