"""The framing rules of HTTP/1.1, one function each, used by the readers and writers.

Every rule a message is read or written by is here, once: where a head ends and how
large a head or trailer section may be (`check_section_size`), what a start line, a
target and a field line may hold (`check_target`, `check_field`, `check_field_count`),
how the body is framed (`body_framing`), whether a request's body follows
(`body_follows`), whether a response has one (`has_body`), the chunk-size grammar
(`chunk_size`), the body limit (`body_room`, `check_body_size`), whether the connection
stays open (`keep_alive`, `keeps_alive_after`) and how an answer says so
(`connection_value`). The readers and writers only apply them; the server and the
client above them spell none of these tokens. RFC 9112 is the grammar; PROTOCOL.md §2 says what
Copilot CLI sends (chunked POSTs, keep-alive, large bodies).

A rule that refuses input raises `Refusal`, carrying the status a server should answer
with; the readers turn it into a `ParseError` event.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Literal, NamedTuple, Optional, Sequence, Tuple

from .headers import Headers

#: The largest head, and the largest trailer section (one limit for both).
DEFAULT_MAX_HEAD = 64 * 1024
#: The most field lines a head or trailer section may have.
MAX_FIELDS = 256
#: The body limit, the one default: a server's `max_body` option overrides it. PROTOCOL.md
#: §2: bodies can be large (`open_diff` carries a whole file, JSON-escaped, so a 32 MiB
#: file needs more than 32 MiB of body).
DEFAULT_MAX_BODY = 64 * 1024 * 1024
MAX_CHUNK_LINE = 4096

REASONS: Dict[int, str] = {
    100: "Continue", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
    304: "Not Modified", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
    409: "Conflict", 411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
    503: "Service Unavailable", 505: "HTTP Version Not Supported",
}


class Refusal(ValueError):
    """Input that breaks a rule; `status` is the response a server should send. A
    `ValueError`, so that a writer refusing what a reader would refuse raises one."""

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


def check_section_size(size: int, limit: int, what: str) -> None:
    """The size limit of a head or a trailer section (`what`): more than `limit` bytes
    up to the end of its last line is refused with 431 (RFC 6585 §5)."""
    if size > limit:
        raise Refusal(431, "%s larger than %d bytes" % (what, limit))


def check_field_count(count: int) -> None:
    """At most MAX_FIELDS field lines in a head or trailer section (431)."""
    if count > MAX_FIELDS:
        raise Refusal(431, "more than %d header fields" % MAX_FIELDS)


def check_field(name: bytes, value: bytes) -> None:
    """A field line's name is a token (RFC 9110 §5.1) and its value holds no control
    character but HTAB (RFC 9110 §5.5): the rule for reading and for writing one."""
    if not TOKEN.match(name):
        raise Refusal(400, "invalid header name %r" % name[:40].decode("latin-1"))
    if VALUE_BAD.search(value):
        raise Refusal(400, "invalid header value for %r" % name[:40].decode("latin-1"))


def parse_fields(lines: Sequence[bytes]) -> Headers:
    """Field lines (without their line ends) -> Headers (RFC 9112 §5)."""
    headers = Headers()
    raw = headers.raw
    check_field_count(len(lines))
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
        value = line[colon + 1:].strip(b" \t")
        check_field(name, value)
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
    check_method(method)
    if (major, minor) not in ((b"1", b"1"), (b"1", b"0")):
        raise Refusal(505, "unsupported HTTP version %s.%s" % (major.decode(), minor.decode()))
    check_target(target)
    return RequestLine(method.decode("ascii"), target.decode("latin-1"), "1.1" if minor == b"1" else "1.0")


def check_method(method: bytes) -> None:
    """A method is a token (RFC 9110 §9.1)."""
    if not TOKEN.match(method):
        raise Refusal(400, "invalid method %r" % method[:20])


_TARGET_BAD = re.compile(rb"[\x00-\x20\x7f]")


def check_target(target: bytes) -> None:
    """A request target is not empty and holds no space or control character."""
    if not target or _TARGET_BAD.search(target):
        raise Refusal(400, "invalid request target %r" % target[:60])


def check_reason(reason: bytes) -> None:
    """A reason phrase holds no control character but HTAB (RFC 9112 §4)."""
    if VALUE_BAD.search(reason):
        raise Refusal(400, "invalid reason phrase %r" % reason[:60])


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

#: How a body is delimited: "chunked"; "length" (`Framing.length` bytes); "none" (the
#: head said neither: a request has no body); "close" (a response without either: its
#: body runs until the connection closes, RFC 9112 §6.3, which a response reader decides).
FramingKind = Literal["chunked", "length", "none", "close"]


class Framing(NamedTuple):
    """How a body is delimited (`FramingKind`), and its length for "length"."""
    kind: FramingKind
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


def body_follows(framing: Framing) -> bool:
    """Whether a body follows a request head: chunked, or a Content-Length above 0
    (RFC 9112 §6.3: a request with neither has none)."""
    return framing.kind == "chunked" or framing.length > 0


def body_room(seen: int, limit: Optional[int]) -> Optional[int]:
    """How many more body bytes the body limit allows after `seen` (None: no limit;
    below 0: past it, which `check_body_size` refuses)."""
    return None if limit is None else limit - seen


def check_body_size(size: int, limit: Optional[int]) -> None:
    """A body of more than `limit` bytes (None: no limit) is refused with 413, whether
    it says so up front (Content-Length) or as its chunks arrive."""
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


def keeps_alive_after(request_keeps_alive: bool, close: bool) -> bool:
    """Whether the connection stays open after an answer: when its request allowed it
    (`keep_alive`) and the answer does not ask to close (`close`)."""
    return request_keeps_alive and not close


def connection_value(keep_open: bool) -> str:
    """The `Connection` field an answer carries: `keep-alive` or `close` (RFC 9112
    §9.3; VS Code writes `keep-alive` on every answer it leaves open, PROTOCOL.md §2)."""
    return "keep-alive" if keep_open else "close"
