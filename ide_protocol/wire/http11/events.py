"""The events the readers emit: a message is a head (`Request` or `Response`), zero or
more `Data`, then `EndOfMessage`; `ParseError` ends the input, `ConnectionClosed`
notes a clean close between messages."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from .headers import NO_TRAILERS, Headers, HeadersLike
from .rules import CHUNKED, Refusal, body_follows, body_framing, keep_alive


class Event:
    """Base for parser events: equality and repr by fields, for tests and traces."""

    __slots__ = ()
    _fields: Tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, f) == getattr(other, f) for f in self._fields)

    def __repr__(self) -> str:
        parts = []
        for f in self._fields:
            value = getattr(self, f)
            if isinstance(value, (bytes, bytearray)) and len(value) > 60:
                value = "<%d bytes>" % len(value)
            parts.append("%s=%r" % (f, value))
        return "%s(%s)" % (type(self).__name__, ", ".join(parts))


class Request(Event):
    """A request head, with what the reader decided from it, once: `keep_alive`,
    whether the connection stays open after this request (`rules.keep_alive`), and
    `body_follows`, whether a body follows the head (`rules.body_follows`). The layers
    above read these two; they never look at the framing fields themselves."""

    __slots__ = ("method", "target", "headers", "http_version", "keep_alive", "body_follows")
    _fields = ("method", "target", "headers", "http_version")

    def __init__(self, method: str, target: str, headers: HeadersLike = None, http_version: str = "1.1",
                 keep_alive: Optional[bool] = None, body_follows: Optional[bool] = None) -> None:
        self.method = method
        self.target = target
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self.http_version = http_version
        # (A reader passes what it decided from the same fields; made by hand, the
        # request is judged by the same rules here.)
        if keep_alive is None:
            keep_alive = _keep_alive_of(http_version, self.headers)
        self.keep_alive = keep_alive
        if body_follows is None:
            body_follows = _body_follows_of(self.headers)
        self.body_follows = body_follows

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]


class Response(Event):
    """A response head."""

    __slots__ = ("status", "reason", "headers", "http_version")
    _fields = ("status", "reason", "headers", "http_version")

    def __init__(self, status: int, reason: str = "", headers: HeadersLike = None, http_version: str = "1.1") -> None:
        self.status = status
        self.reason = reason
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self.http_version = http_version

    @property
    def keep_alive(self) -> bool:
        """Whether the connection stays open after this response (`rules.keep_alive`)."""
        return _keep_alive_of(self.http_version, self.headers)

    @property
    def chunked(self) -> bool:
        """Whether its body comes in chunked coding (`rules.body_framing`; a checker
        asks, PROTOCOL.md §2: the CLI's peers answer POSTs chunked)."""
        try:
            return body_framing(self.headers) is CHUNKED
        except Refusal:
            return False


def _keep_alive_of(http_version: str, headers: Headers) -> bool:
    return keep_alive(http_version, headers.tokens("connection"))


def _body_follows_of(headers: Headers) -> bool:
    try:
        return body_follows(body_framing(headers))
    except Refusal:
        return True  # (framing a reader refuses: something follows that is not read)


class Data(Event):
    """Part of a body. For chunked bodies, data never spans two chunks, but one chunk
    may arrive as several `Data` events (an endless SSE stream is delivered as it comes)."""

    __slots__ = ("data",)
    _fields = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class EndOfMessage(Event):
    """The end of a message; `trailers` is `NO_TRAILERS` when there are none."""

    __slots__ = ("trailers",)
    _fields = ("trailers",)

    def __init__(self, trailers: HeadersLike = None) -> None:
        self.trailers = trailers if isinstance(trailers, Headers) else (
            NO_TRAILERS if trailers is None else Headers(trailers))


#: The end of a message that has no trailers (most of them): one value, emitted by the
#: readers for every such message, as `NO_TRAILERS` is their one empty field set.
END_OF_MESSAGE = EndOfMessage()


class ParseError(Event):
    """The message is malformed; `status` is the response a server should send."""

    __slots__ = ("status", "message")
    _fields = ("status", "message")

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


class ConnectionClosed(Event):
    """The peer closed the connection cleanly between messages."""

    __slots__ = ()


ParserEvent = Union[Request, Response, Data, EndOfMessage, ParseError, ConnectionClosed]
