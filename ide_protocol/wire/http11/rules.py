"""The framing rules of HTTP/1.1, one function each, used by the readers and writers.

Every rule a message is read or written by is here, once: where a head ends, what a
start line and a field line may hold, how the body is framed (`body_framing`), whether
there is a body at all (`has_body`), the chunk-size grammar (`chunk_size`), the body
limit (`check_body_size`) and whether the connection stays open (`keep_alive`). The
readers and writers only apply them. RFC 9112 is the grammar; PROTOCOL.md §2 says what
Copilot CLI sends (chunked POSTs, keep-alive, large bodies).

A rule that refuses input raises `Refusal`, carrying the status a server should answer
with; the readers turn it into a `ParseError` event.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .headers import Headers

DEFAULT_MAX_HEAD = 64 * 1024
#: PROTOCOL.md §2: bodies can be large (`open_diff` carries a whole file).
DEFAULT_MAX_BODY = 32 * 1024 * 1024
MAX_CHUNK_LINE = 4096

REASONS: Dict[int, str] = {
    100: "Continue", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
    304: "Not Modified", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
    409: "Conflict", 411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
    503: "Service Unavailable", 505: "HTTP Version Not Supported",
}


class Refusal(Exception):
    """Input that breaks a rule; `status` is the response a server should send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ------------------------------------------------------------------ tokens and fields

TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
#: Control characters other than HTAB are never allowed in a field value (RFC 9110 §5.5).
VALUE_BAD = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def head_end(buf: bytes, start: int) -> Optional[Tuple[int, int]]:
    """Where a head (or a trailer section) ends, searching from `start`: (the LF that
    ends its last line, the first byte after the empty line), or None when it is not
    complete yet. Lines end in CRLF or a bare LF (RFC 9112 §2.2), so the head ends at
    the first LF followed by an empty line."""
    crlf = buf.find(b"\n\r\n", start)
    lf = buf.find(b"\n\n", start, crlf + 1 if crlf >= 0 else len(buf))
    if lf >= 0:
        return lf, lf + 2
    if crlf >= 0:
        return crlf, crlf + 3
    return None


def parse_fields(lines: Sequence[bytes]) -> Headers:
    """Field lines (without their line ends) -> Headers (RFC 9112 §5)."""
    headers = Headers()
    raw = headers.raw
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):
            raise Refusal(400, "obsolete header line folding is not accepted")
        colon = line.find(b":")
        if colon <= 0:
            raise Refusal(400, "malformed header line %r" % line[:40])
        name = line[:colon]
        if not TOKEN.match(name):
            raise Refusal(400, "invalid header name %r" % name[:40])
        value = line[colon + 1:].strip(b" \t")
        if VALUE_BAD.search(value):
            raise Refusal(400, "invalid character in header %r" % name[:40])
        raw.append((name.decode("ascii"), value.decode("latin-1")))
    return headers


# ----------------------------------------------------------------------- start lines

_REQUEST_LINE = re.compile(rb"([^ ]+) ([^ ]+) HTTP/(\d)\.(\d)\Z")
_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) (\d{3})(?: (.*))?\Z")


class RequestLine(NamedTuple):
    method: str
    target: str
    http_version: str


def parse_request_line(line: bytes) -> RequestLine:
    """`method SP target SP HTTP/1.x` (RFC 9112 §3); HTTP/1.0 and 1.1 only."""
    m = _REQUEST_LINE.match(line)
    if m is None:
        if re.match(rb"[^ ]+ [^ ]+ HTTP/", line) or line.startswith(b"PRI * HTTP/2"):
            raise Refusal(505, "unsupported HTTP version")
        raise Refusal(400, "malformed request line %r" % line[:60])
    method, target, major, minor = m.groups()
    if not TOKEN.match(method):
        raise Refusal(400, "invalid method %r" % method[:20])
    if (major, minor) not in ((b"1", b"1"), (b"1", b"0")):
        raise Refusal(505, "unsupported HTTP version %s.%s" % (major.decode(), minor.decode()))
    if VALUE_BAD.search(target) or b"\t" in target:
        raise Refusal(400, "invalid request target")
    return RequestLine(method.decode("ascii"), target.decode("latin-1"), "1.1" if minor == b"1" else "1.0")


class StatusLine(NamedTuple):
    http_version: str
    status: int
    reason: str


def parse_status_line(line: bytes) -> StatusLine:
    """`HTTP/1.x SP status [SP reason]` (RFC 9112 §4)."""
    m = _STATUS_LINE.match(line)
    if m is None:
        raise Refusal(400, "malformed status line %r" % line[:60])
    major, minor, status, reason = m.groups()
    if major != b"1":
        raise Refusal(505, "unsupported HTTP version %s.%s" % (major.decode(), minor.decode()))
    return StatusLine("1.1" if minor == b"1" else "1.0", int(status), (reason or b"").decode("latin-1"))


def check_request_fields(http_version: str, headers: Headers) -> None:
    """RFC 9112 §3.2: an HTTP/1.1 request has one Host field (its absence is tolerated:
    nothing on a local socket routes by it)."""
    if http_version == "1.1" and len(headers.get_all("host")) > 1:
        raise Refusal(400, "more than one Host header")


# ---------------------------------------------------------------------- body framing

class Framing(NamedTuple):
    """How a body is delimited: `kind` is "chunked", "length" (then `length` bytes) or
    "none" (no body for a request; read until the connection closes for a response)."""
    kind: str
    length: int = 0


CHUNKED = Framing("chunked")
NO_FRAMING = Framing("none")


def body_framing(headers: Headers) -> Framing:
    """RFC 9112 §6: Transfer-Encoding (chunked, the last and only coding) wins; else
    Content-Length; both at once is refused (request smuggling). The CLI always sends
    chunked POSTs, other clients Content-Length (PROTOCOL.md §2)."""
    te = headers.tokens("transfer-encoding")
    if not te and headers.get("transfer-encoding") is not None:
        raise Refusal(400, "empty Transfer-Encoding")
    if te:
        if headers.get("content-length") is not None:
            raise Refusal(400, "both Transfer-Encoding and Content-Length")
        if te != ["chunked"]:
            raise Refusal(501, "unsupported transfer coding %r" % ", ".join(te))
        return CHUNKED
    lengths = headers.get_all("content-length")
    if not lengths:
        return NO_FRAMING
    values = set()
    for value in lengths:
        for part in value.split(","):
            part = part.strip()
            if not (part.isascii() and part.isdigit()):
                raise Refusal(400, "invalid Content-Length %r" % value[:40])
            values.add(int(part))
    if len(values) != 1:
        raise Refusal(400, "conflicting Content-Length values")
    return Framing("length", values.pop())


def check_body_size(size: int, limit: Optional[int]) -> None:
    """The body limit: a body of more than `limit` bytes (None: no limit) is refused
    with 413, whether it says so up front (Content-Length) or as its chunks arrive."""
    if limit is not None and size > limit:
        raise Refusal(413, "body larger than %d bytes" % limit)


def has_body(request_method: Optional[str], status: int) -> bool:
    """Whether a response carries a body: never for HEAD (RFC 9110 §9.3.2), 1xx, 204 or
    304 (RFC 9110 §15). `request_method` None: judged by the status alone."""
    return request_method != "HEAD" and status >= 200 and status != 204 and status != 304


#: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF (RFC 9112 §7.1): 1 to 16 hex
#: digits, whitespace before an extension tolerated, extensions skipped, the whole line
#: at most MAX_CHUNK_LINE bytes, ended by CRLF (a bare LF is refused).
_CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r\n")


def chunk_size(buf: bytes, start: int) -> Optional[Tuple[int, int]]:
    """The chunk-size line at `start`: (the size, the first byte after its CRLF), or
    None when the line is not complete yet."""
    m = _CHUNK_SIZE_LINE.match(buf, start, start + MAX_CHUNK_LINE + 2)
    if m is not None:
        return int(m.group(1), 16), m.end()
    lf = buf.find(b"\n", start, start + MAX_CHUNK_LINE + 2)
    if lf >= 0:
        line = bytes(buf[start:lf])
        if line.endswith(b"\r"):
            raise Refusal(400, "bad chunk-size line %r" % line[:40])
        raise Refusal(400, "chunk-size line %r not ended by CRLF" % line[:40])
    if len(buf) - start > MAX_CHUNK_LINE + 1:
        raise Refusal(400, "chunk-size line too long")
    return None


# ------------------------------------------------------------------------ keep-alive

def keep_alive(http_version: str, connection: Iterable[str]) -> bool:
    """Whether the connection stays open after a message (RFC 9112 §9.3): not when its
    Connection field says `close`; for HTTP/1.0 only when it says `keep-alive`.
    `connection`: that field's tokens, lower-cased. The CLI keeps connections open
    (PROTOCOL.md §2)."""
    tokens = list(connection)
    if "close" in tokens:
        return False
    return http_version != "1.0" or "keep-alive" in tokens


def connection_tokens(value: str) -> List[str]:
    """The tokens of one Connection field value, lower-cased."""
    return [token.strip().lower() for token in value.split(",") if token.strip()]
