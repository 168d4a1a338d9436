"""The writers: messages in, bytes out. They refuse (ValueError) what a reader would
refuse, by the readers' own rules (`rules.check_field`, `check_target`,
`check_reason`, `has_body`), and they spell the framing fields: `Content-Length`,
`Transfer-Encoding: chunked` and, given `keep_alive`, the `Connection` field
(`rules.connection_value`), so that no layer above writes a framing token."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .headers import HeadersLike, pairs_of
from .rules import REASONS, check_field, check_method, check_reason, check_target, connection_value, has_body

__all__ = ["LAST_CHUNK", "encode_chunk", "encode_chunked_body", "write_request", "write_response",
           "write_response_head"]

#: The last chunk with no trailers: the end of every chunked body (RFC 9112 §7.1).
LAST_CHUNK = b"0\r\n\r\n"



def _request_line(method: str, target: str, http_version: str) -> str:
    check_method(method.encode("latin-1", "replace"))
    check_target(target.encode("latin-1", "replace"))
    if http_version not in ("1.0", "1.1"):
        raise ValueError("unsupported HTTP version %r" % (http_version,))
    return "%s %s HTTP/%s" % (method, target, http_version)


def _status_line(status: int, reason: Optional[str]) -> str:
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 999:
        raise ValueError("invalid status %r" % (status,))
    if reason is None:
        reason = REASONS.get(status, "")
    check_reason(reason.encode("latin-1", "replace"))
    return "HTTP/1.1 %d %s" % (status, reason)


def _head(start: str, pairs: Sequence[Tuple[str, Any]]) -> bytes:
    parts = [start, "\r\n"]
    for name, value in pairs:
        value = str(value)
        check_field(name.encode("latin-1", "replace"), value.encode("latin-1", "replace"))
        parts.append("%s: %s\r\n" % (name, value))
    parts.append("\r\n")
    return "".join(parts).encode("latin-1")


def _with(headers: HeadersLike, name: str, value: str) -> List[Tuple[str, Any]]:
    """The fields, plus `name: value` unless a field of that name is there already."""
    pairs = pairs_of(headers)
    lname = name.lower()
    if not any(k.lower() == lname for k, _ in pairs):
        pairs.append((name, value))
    return pairs


def _with_connection(pairs: List[Tuple[str, Any]], keep_alive: Optional[bool]) -> List[Tuple[str, Any]]:
    """The fields with the `Connection` field the writer spells for `keep_alive` (None:
    the caller's fields as they are). A caller that passes `keep_alive` leaves the
    field to the writer: one of its own is refused."""
    if keep_alive is None:
        return pairs
    if any(k.lower() == "connection" for k, _ in pairs):
        raise ValueError("the Connection field is the writer's (pass keep_alive)")
    pairs.append(("Connection", connection_value(keep_alive)))
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
                  chunked: bool = False, chunk_size: int = 0, http_version: str = "1.1",
                  *, keep_alive: Optional[bool] = None) -> bytes:
    """A whole request. With `chunked`, the body goes out in chunked coding, as the CLI
    always sends its POSTs (PROTOCOL.md §2); otherwise with `Content-Length`.
    `keep_alive` (True or False) adds the `Connection` field after the caller's fields,
    where the CLI writes it (PROTOCOL.md §2)."""
    start = _request_line(method, target, http_version)
    pairs = _with_connection(pairs_of(headers), keep_alive)
    if chunked:
        return _head(start, _with(pairs, "Transfer-Encoding", "chunked")) + encode_chunked_body(body or b"", chunk_size)
    if body is None:
        return _head(start, pairs)
    return _head(start, _with(pairs, "Content-Length", str(len(body)))) + body


def write_response(status: int, headers: HeadersLike = None, body: bytes = b"", reason: Optional[str] = None,
                   *, request_method: Optional[str] = None, keep_alive: Optional[bool] = None) -> bytes:
    """A whole response with a `Content-Length` body. A status that has no body (1xx,
    204, 304) gets neither; the answer to a HEAD request (`request_method`) gets the
    length without the body (`rules.has_body`). `keep_alive`: see `write_response_head`."""
    start = _status_line(status, reason)
    pairs = _with_connection(pairs_of(headers), keep_alive)
    if not has_body(None, status):
        if body:
            raise ValueError("a %d response cannot have a body" % status)
        return _head(start, pairs)
    head = _head(start, _with(pairs, "Content-Length", str(len(body))))
    return head + body if has_body(request_method, status) else head


#: Heads `write_response_head` encoded, by its arguments: a pure function of them,
#: remembered because a server writes the same few again and again (a session's SSE
#: answer, PROTOCOL.md §2): a `tools/call` costs the server 167 000 instructions with
#: it, 227 000 without (`tools/bench_cost.py`, 2026-12-06). Only heads whose fields are a tuple of text pairs are kept
#: (hashable, and equal keys are the same bytes); bounded.
_HEADS: Dict[Tuple[Any, ...], bytes] = {}


def write_response_head(status: int, headers: HeadersLike = None, reason: Optional[str] = None,
                        *, keep_alive: Optional[bool] = None) -> bytes:
    """The head of a chunked (streamed) response: the body follows as `encode_chunk`
    pieces and ends with `LAST_CHUNK`. `keep_alive` (True or False): the writer adds
    the `Connection` field that says whether the connection stays open after this
    response (`rules.connection_value`); the caller then sets none of its own."""
    key: Optional[Tuple[Any, ...]] = None
    if type(headers) is tuple:
        key = (status, headers, reason, keep_alive)
        try:
            known = _HEADS.get(key)
        except TypeError:  # (an unhashable value)
            known = key = None
        if known is not None:
            return known
    if not has_body(None, status):
        raise ValueError("a %d response cannot have a body" % status)
    pairs = _with_connection(pairs_of(headers), keep_alive)
    head = _head(_status_line(status, reason), _with(pairs, "Transfer-Encoding", "chunked"))
    if key is not None and all(type(v) is str for _, v in pairs_of(headers)):
        # (Text values only: True, 1 and 1.0 are equal keys but not the same field.)
        if len(_HEADS) >= 256:
            _HEADS.clear()
        _HEADS[key] = head
    return head
