"""The writers: messages in, bytes out. They refuse (ValueError) what a reader would
refuse: a bad token, a control character in a value, a body where `rules.has_body`
says there is none."""
from __future__ import annotations

import re
from typing import Any, Optional, Sequence, Tuple

from .headers import HeadersLike, pairs_of
from .rules import REASONS, TOKEN, VALUE_BAD, has_body

__all__ = ["LAST_CHUNK", "ChunkedWriter", "encode_chunk", "encode_chunked_body", "write_request", "write_response",
           "write_response_head"]

#: The last chunk with no trailers: the end of every chunked body (RFC 9112 §7.1).
LAST_CHUNK = b"0\r\n\r\n"

_TARGET_BAD = re.compile(r"[\x00-\x20\x7f]")
_REASON_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _request_line(method: str, target: str, http_version: str) -> str:
    if not TOKEN.match(method.encode("latin-1", "replace")):
        raise ValueError("invalid method %r" % (method,))
    if not target or _TARGET_BAD.search(target):
        raise ValueError("invalid request target %r" % (target,))
    if http_version not in ("1.0", "1.1"):
        raise ValueError("unsupported HTTP version %r" % (http_version,))
    return "%s %s HTTP/%s" % (method, target, http_version)


def _status_line(status: int, reason: Optional[str]) -> str:
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 999:
        raise ValueError("invalid status %r" % (status,))
    if reason is None:
        reason = REASONS.get(status, "")
    if _REASON_BAD.search(reason):
        raise ValueError("invalid reason phrase %r" % (reason,))
    return "HTTP/1.1 %d %s" % (status, reason)


def _head(start: str, pairs: Sequence[Tuple[str, Any]]) -> bytes:
    parts = [start, "\r\n"]
    for name, value in pairs:
        value = str(value)
        if not TOKEN.match(name.encode("latin-1", "replace")):
            raise ValueError("invalid header name %r" % name)
        if VALUE_BAD.search(value.encode("latin-1", "replace")):
            raise ValueError("invalid header value for %r" % name)
        parts.append("%s: %s\r\n" % (name, value))
    parts.append("\r\n")
    return "".join(parts).encode("latin-1")


def _with(headers: HeadersLike, name: str, value: str) -> list:
    """The fields, plus `name: value` unless a field of that name is there already."""
    pairs = pairs_of(headers)
    lname = name.lower()
    if not any(k.lower() == lname for k, _ in pairs):
        pairs.append((name, value))
    return pairs


def encode_chunk(data: bytes) -> bytes:
    """One chunk of a chunked body. Empty data gives b"" (an empty chunk would end the body)."""
    if not data:
        return b""
    return b"%x\r\n%s\r\n" % (len(data), data)


def encode_chunked_body(body: bytes, chunk_size: int = 0) -> bytes:
    """A whole body in chunked coding, in pieces of `chunk_size` (0: one chunk)."""
    if not body:
        return LAST_CHUNK
    if chunk_size <= 0 or chunk_size >= len(body):
        return encode_chunk(body) + LAST_CHUNK
    view = memoryview(body)
    parts = [encode_chunk(bytes(view[i:i + chunk_size])) for i in range(0, len(body), chunk_size)]
    parts.append(LAST_CHUNK)
    return b"".join(parts)


def write_request(method: str, target: str, headers: HeadersLike = None, body: Optional[bytes] = None,
                  chunked: bool = False, chunk_size: int = 0, http_version: str = "1.1") -> bytes:
    """A whole request. With `chunked`, the body goes out in chunked coding, as the CLI
    always sends its POSTs (PROTOCOL.md §2); otherwise with `Content-Length`."""
    start = _request_line(method, target, http_version)
    if chunked:
        return _head(start, _with(headers, "Transfer-Encoding", "chunked")) + encode_chunked_body(body or b"", chunk_size)
    if body is None:
        return _head(start, pairs_of(headers))
    return _head(start, _with(headers, "Content-Length", str(len(body)))) + body


def write_response(status: int, headers: HeadersLike = None, body: bytes = b"", reason: Optional[str] = None,
                   *, request_method: Optional[str] = None) -> bytes:
    """A whole response with a `Content-Length` body. A status that has no body (1xx,
    204, 304) gets neither; the answer to a HEAD request (`request_method`) gets the
    length without the body (`rules.has_body`)."""
    start = _status_line(status, reason)
    if not has_body(None, status):
        if body:
            raise ValueError("a %d response cannot have a body" % status)
        return _head(start, pairs_of(headers))
    head = _head(start, _with(headers, "Content-Length", str(len(body))))
    return head + body if has_body(request_method, status) else head


def write_response_head(status: int, headers: HeadersLike = None, reason: Optional[str] = None) -> bytes:
    """The head of a chunked (streamed) response: the body follows as `encode_chunk`
    pieces and ends with `LAST_CHUNK`."""
    if not has_body(None, status):
        raise ValueError("a %d response cannot have a body" % status)
    return _head(_status_line(status, reason), _with(headers, "Transfer-Encoding", "chunked"))


class ChunkedWriter:
    """A streaming body written one chunk at a time; refuses writes after `end()` so a
    stream cannot be corrupted by a late push."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False

    def chunk(self, data: bytes) -> bytes:
        if self.ended:
            raise RuntimeError("chunked body already ended")
        return encode_chunk(data)

    def end(self) -> bytes:
        if self.ended:
            return b""
        self.ended = True
        return LAST_CHUNK
