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

An application may also judge a request by its head alone, before the body is read:

    refusal = app.judge_head(request)           # optional: a Reply, or None

The transport asks as soon as a head arrives (`McpApp.judge_head`: Origin, nonce, path,
method), so a refused request is answered without its body ever being buffered; a
request it passes is then given to `app(...)` as above, which must still make every
check itself when called without that step (`McpApp` does).

The `Connection` field and the framing fields (`Content-Length`, `Transfer-Encoding`)
belong to the transport and the wire layer: an application sets neither, except
`Connection: close` to ask that the connection close after this answer. Nothing here
knows sockets or event loops.
"""
from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable, Optional, Sequence, Tuple, Union

from ..wire import http11

#: Header fields of an answer: (name, value) pairs. A tuple that does not change (a
#: session's SSE fields) lets the wire layer reuse the head it encoded for it.
Fields = Sequence[Tuple[str, str]]


class Reply:
    """A complete response. `chunked`: send the body as one chunk of a chunked body (the
    SSE answers of PROTOCOL.md §2), else with `Content-Length`."""

    __slots__ = ("status", "headers", "body", "chunked")

    def __init__(self, status: int, headers: Fields = (), body: bytes = b"", chunked: bool = False) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.chunked = chunked

    def __repr__(self) -> str:
        return "Reply(%d, %r, <%d bytes>%s)" % (self.status, self.headers, len(self.body),
                                                 ", chunked" if self.chunked else "")


class Stream:
    """A chunked response whose body comes later: the head now, then each piece that
    `chunks` gives, then the last chunk; `close()` when the transport is done with it."""

    __slots__ = ("status", "headers", "chunks", "_close")

    def __init__(self, status: int, headers: Fields, chunks: AsyncIterator[bytes],
                 close: Optional[Callable[[], None]] = None) -> None:
        self.status = status
        self.headers = headers
        self.chunks = chunks
        self._close = close

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


def plain(status: int, text: str, *extra: Tuple[str, str]) -> Reply:
    """A short `text/plain` answer (the errors of PROTOCOL.md §2: 401, 403, 404, ...)."""
    return Reply(status, (("Content-Type", "text/plain"),) + extra, text.encode("utf-8"))
