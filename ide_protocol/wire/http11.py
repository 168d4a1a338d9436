"""HTTP/1.1 messages, sans-IO: bytes in, events out; events in, bytes out.

Copilot CLI speaks MCP's Streamable HTTP over a Unix socket or named pipe (PROTOCOL.md
§2), so the server needs an HTTP/1.1 implementation that the standard library does not
offer in a usable form (`http.server` is blocking and thread-based). In the manner of
h11, nothing here touches a socket or an event loop: `RequestParser`/`ResponseParser`
take bytes and return events, the writers return bytes, and the asyncio glue is a thin
layer elsewhere. That keeps every framing rule testable byte by byte.

The parsers never raise on input. A malformed message becomes a `ParseError` event with
the status code the server should answer with (400, 413, 431, 501, 505); after it the
parser is dead and the connection should be closed once the error response is written.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

DEFAULT_MAX_HEAD = 64 * 1024
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

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_REQUEST_LINE = re.compile(rb"([^ ]+) ([^ ]+) (HTTP/(\d)\.(\d))\Z")
_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) (\d{3})(?: (.*))?\Z")
_CHUNK_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,16})[ \t]*(?:;.*)?\Z")
_VALUE_BAD = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_ONE_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,16})\r\n")
_ONE_CHUNK_END = b"\r\n0\r\n\r\n"  # the chunk's CRLF, then the last chunk and an empty trailer
_HEX_DIGITS = b"0123456789abcdefABCDEF"


# --------------------------------------------------------------------------- headers


class Headers:
    """Header fields in arrival order; lookups ignore case, repeats are kept.

    Names keep the case they were sent with (the capture shows `accept` next to `Host`),
    which matters to a tracer and costs nothing.
    """

    __slots__ = ("raw", "_index")

    def __init__(self, pairs: Union[None, "Headers", Iterable[Tuple[str, str]], Dict[str, str]] = None) -> None:
        if pairs is None:
            self.raw: List[Tuple[str, str]] = []
        elif isinstance(pairs, Headers):
            self.raw = list(pairs.raw)
        elif isinstance(pairs, dict):
            self.raw = [(str(k), str(v)) for k, v in pairs.items()]
        else:
            self.raw = [(str(k), str(v)) for k, v in pairs]
        self._index: Optional[Tuple[int, Dict[str, List[str]]]] = None

    def index(self) -> Dict[str, List[str]]:
        """The lower-cased index (name -> values; do not change it). The requests a
        parser makes from byte-identical heads share one index object, so its identity
        says "the same head as before": a server can reuse what it decided about that
        head (the CLI repeats its head on every request, issue 6)."""
        # Built at the first lookup: a request's headers are looked up a dozen times,
        # and a scan per lookup lower-cased every name each time. Rebuilt when `raw`
        # changed length; change fields through add/set/remove.
        index = self._index
        if index is None or index[0] != len(self.raw):
            table: Dict[str, List[str]] = {}
            for key, value in self.raw:
                table.setdefault(key.lower(), []).append(value)
            index = self._index = (len(self.raw), table)
        return index[1]

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        values = self.index().get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> List[str]:
        return list(self.index().get(name.lower(), ()))

    def tokens(self, name: str) -> List[str]:
        """Comma-separated tokens of every field called `name`, lower-cased."""
        out: List[str] = []
        for value in self.get_all(name):
            out.extend(t.strip().lower() for t in value.split(",") if t.strip())
        return out

    def add(self, name: str, value: str) -> None:
        self.raw.append((name, value))
        self._index = None

    def set(self, name: str, value: str) -> None:
        self.remove(name)
        self.raw.append((name, value))
        self._index = None

    def remove(self, name: str) -> None:
        lname = name.lower()
        self.raw = [(k, v) for k, v in self.raw if k.lower() != lname]
        self._index = None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tuple[str, str]]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return list(self.raw) == list(other.raw)  # (NO_TRAILERS holds a tuple)
        return NotImplemented

    def __repr__(self) -> str:
        return "Headers(%r)" % (self.raw,)


class _FrozenHeaders(Headers):
    """Header fields that cannot change: `NO_TRAILERS`, shared by every message that
    has no trailers (most), so that none needs an object of its own (issue 6)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.raw = ()  # type: ignore[assignment]

    def _read_only(self, *args: Any) -> None:
        raise TypeError("these header fields are read-only")

    add = set = remove = _read_only  # type: ignore[assignment]


NO_TRAILERS: Headers = _FrozenHeaders()

HeadersLike = Union[Headers, Iterable[Tuple[str, str]], Dict[str, str], None]


# ---------------------------------------------------------------------------- events


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


def _keep_alive(version: str, headers: Headers) -> bool:
    tokens = headers.tokens("connection")
    if "close" in tokens:
        return False
    if version == "1.0":
        return "keep-alive" in tokens
    return True


class Request(Event):
    """A request head. `keep_alive`: whether the connection stays open after it, as
    its headers say at creation (the parser passes what it decided already)."""

    __slots__ = ("method", "target", "headers", "http_version", "keep_alive")
    _fields = ("method", "target", "headers", "http_version")

    def __init__(self, method: str, target: str, headers: HeadersLike = None, http_version: str = "1.1",
                 keep_alive: Optional[bool] = None) -> None:
        self.method = method
        self.target = target
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self.http_version = http_version
        self.keep_alive = _keep_alive(http_version, self.headers) if keep_alive is None else keep_alive

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]


class Response(Event):
    __slots__ = ("status", "reason", "headers", "http_version")
    _fields = ("status", "reason", "headers", "http_version")

    def __init__(self, status: int, reason: str = "", headers: HeadersLike = None, http_version: str = "1.1") -> None:
        self.status = status
        self.reason = reason
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self.http_version = http_version

    @property
    def keep_alive(self) -> bool:
        return _keep_alive(self.http_version, self.headers)


class Data(Event):
    """Part of a body. For chunked bodies, data never spans two chunks, but one chunk
    may arrive as several `Data` events (an endless SSE stream is delivered as it comes)."""

    __slots__ = ("data",)
    _fields = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class EndOfMessage(Event):
    __slots__ = ("trailers",)
    _fields = ("trailers",)

    def __init__(self, trailers: HeadersLike = None) -> None:
        self.trailers = trailers if isinstance(trailers, Headers) else (
            NO_TRAILERS if trailers is None else Headers(trailers))


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


class _Fail(Exception):
    """Internal: turns into a ParseError event at the parser's boundary."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --------------------------------------------------------------------------- parsers

# Parser states.
_HEAD = 0
_LENGTH = 1        # body with a known number of bytes left
_CHUNK_SIZE = 2    # waiting for a chunk-size line
_CHUNK_DATA = 3    # inside a chunk
_CHUNK_END = 4     # the CRLF after a chunk's data
_TRAILERS = 5      # trailer fields after the last chunk
_UNTIL_CLOSE = 6   # response body delimited by the connection closing
_CLOSED = 7        # a message said `Connection: close`; nothing more is read
_DEAD = 8          # after a ParseError


def _repeat_headers(last: Tuple[bytes, bytes, Tuple[Tuple[str, str], ...], Any]) -> Headers:
    """The fields of a repeated head (see _Parser._parse_head): a fresh list, which a
    handler may change, and the shared index, which nobody changes in place."""
    headers = Headers.__new__(Headers)  # (no __init__ to run: both fields are set here)
    headers.raw = list(last[2])
    headers._index = last[3]
    return headers


class _Parser:
    """The state machine shared by both directions; subclasses parse the start line
    and decide the body framing."""

    def __init__(self, max_head: int = DEFAULT_MAX_HEAD, max_body: Optional[int] = DEFAULT_MAX_BODY) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self._buf = bytearray()
        self._pos = 0            # bytes of _buf already consumed
        self._scan = 0           # where the search for the end of the head resumes
        self._state = _HEAD
        self._remaining = 0      # bytes left in a fixed body or the current chunk
        self._body_seen = 0      # body bytes so far in this message (for max_body)
        self._keep_alive = True
        # The last head parsed: its bytes, start line, fields and their lower-cased
        # index (see _parse_head).
        self._last_head: Optional[Tuple[bytes, bytes, Tuple[Tuple[str, str], ...], Any]] = None

    @property
    def state_name(self) -> str:
        return ("HEAD", "LENGTH", "CHUNK_SIZE", "CHUNK_DATA", "CHUNK_END", "TRAILERS",
                "UNTIL_CLOSE", "CLOSED", "DEAD")[self._state]

    @property
    def idle(self) -> bool:
        """True between messages with nothing buffered (a clean place to close)."""
        return self._state == _HEAD and self._pos == len(self._buf)

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> List[ParserEvent]:
        """Consume bytes; return every event they complete. Never raises."""
        if self._state in (_DEAD, _CLOSED):
            return []
        whole = self.feed_whole(data)
        if whole is not None:
            return [whole[0], Data(whole[1]), EndOfMessage(NO_TRAILERS)]
        if data:
            if self._pos and self._pos == len(self._buf):
                self._buf.clear()
                self._pos = 0
                self._scan = 0
            self._buf += data
        events: List[ParserEvent] = []
        try:
            # (Every state needs a byte to make progress: stop when none is left.)
            while (self._parse_head(events) if self._state == _HEAD else self._step(events)) \
                    and self._pos < len(self._buf):
                pass
        except _Fail as fail:
            self._die(events, fail.status, fail.message)
        except Exception as exc:  # defensive: a parser bug must still look like bad input
            self._die(events, 400, "malformed message (%s)" % type(exc).__name__)
        if self._pos:
            if self._pos == len(self._buf):  # all consumed (the usual): _compact, inline
                self._buf.clear()
                self._pos = self._scan = 0
            else:
                self._compact()
        return events

    def feed_eof(self) -> List[ParserEvent]:
        """The peer closed its side. Returns the events that closing completes."""
        events: List[ParserEvent] = []
        if self._state == _DEAD:
            return events
        if self._state == _UNTIL_CLOSE:
            if self._pos < len(self._buf):
                events.append(Data(bytes(self._buf[self._pos:])))
            events.append(EndOfMessage())
            self._state = _CLOSED
        elif self._state == _CLOSED or (self._state == _HEAD and not self._buf[self._pos:].strip()):
            events.append(ConnectionClosed())
            self._state = _CLOSED
        else:
            self._die(events, 400, "connection closed in the middle of a message")
        self._buf = bytearray()
        self._pos = 0
        return events

    # -- internals

    def _die(self, events: List[ParserEvent], status: int, message: str) -> None:
        events.append(ParseError(status, message))
        self._state = _DEAD
        self._buf = bytearray()
        self._pos = 0

    def _compact(self) -> None:
        # Drop consumed bytes once they are a large share of the buffer: amortised
        # linear, never quadratic, and a long pipelined buffer is not shifted per event.
        if self._pos and (self._pos == len(self._buf) or self._pos > 65536):
            del self._buf[:self._pos]
            self._scan = max(0, self._scan - self._pos)
            self._pos = 0

    def _step(self, events: List[ParserEvent]) -> bool:
        state = self._state
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        if state == _HEAD:
            return self._parse_head(events)
        if state == _LENGTH or state == _CHUNK_DATA:
            if avail <= 0:
                return False
            n = min(avail, self._remaining)
            events.append(Data(bytes(buf[pos:pos + n])))
            self._pos = pos + n
            self._remaining -= n
            if self._remaining == 0:
                if state == _LENGTH:
                    self._end_message(events, NO_TRAILERS)
                else:
                    self._state = _CHUNK_END
            return True
        if state == _CHUNK_SIZE:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                if avail > MAX_CHUNK_LINE:
                    raise _Fail(400, "chunk-size line too long")
                return False
            if nl - pos > MAX_CHUNK_LINE:
                raise _Fail(400, "chunk-size line too long")
            line = bytes(buf[pos:nl]).rstrip(b"\r")
            m = _CHUNK_LINE.match(line)
            if m is None:
                raise _Fail(400, "bad chunk-size line %r" % line[:40])
            size = int(m.group(1), 16)
            pos = self._pos = nl + 1
            if size == 0:
                if buf.startswith(b"\r\n", pos):  # no trailers: the usual end, in this step
                    self._pos = pos + 2
                    self._end_message(events, NO_TRAILERS)
                    return True
                self._state = _TRAILERS
                self._scan = pos
                return True
            self._body_seen += size
            if self.max_body is not None and self._body_seen > self.max_body:
                raise _Fail(413, "body larger than %d bytes" % self.max_body)
            end = pos + size
            if len(buf) >= end + 2 and buf[end] == 0x0D and buf[end + 1] == 0x0A:
                # The whole chunk and its CRLF are here (the usual case): one step, not
                # three (issue 6).
                events.append(Data(bytes(buf[pos:end])))
                self._pos = end + 2
                return True
            self._remaining = size
            self._state = _CHUNK_DATA
            return True
        if state == _CHUNK_END:
            if avail < 1:
                return False
            if buf[pos] == 0x0A:
                self._pos = pos + 1
            elif buf[pos] == 0x0D:
                if avail < 2:
                    return False
                if buf[pos + 1] != 0x0A:
                    raise _Fail(400, "chunk data not followed by CRLF")
                self._pos = pos + 2
            else:
                raise _Fail(400, "chunk data longer than its chunk-size")
            self._state = _CHUNK_SIZE
            return True
        if state == _TRAILERS:
            block = self._find_block()
            if block is None:
                return False
            lines = block
            self._end_message(events, self._parse_fields(lines))
            return True
        if state == _UNTIL_CLOSE:
            if avail <= 0:
                return False
            if self.max_body is not None and self._body_seen + avail > self.max_body:
                allowed = self.max_body - self._body_seen
                if allowed > 0:
                    events.append(Data(bytes(buf[pos:pos + allowed])))
                raise _Fail(413, "body larger than %d bytes" % self.max_body)
            events.append(Data(bytes(buf[pos:])))
            self._body_seen += avail
            self._pos = len(buf)
            return False
        return False

    def _find_block(self) -> Optional[List[bytes]]:
        """Find a header block ending in an empty line; returns its lines (without the
        empty one) and consumes it, or None when more bytes are needed."""
        buf = self._buf
        pos = self._pos
        # An empty block (trailers with no fields) is just CRLF.
        if buf.startswith(b"\r\n", pos):
            self._pos = pos + 2
            return []
        if buf.startswith(b"\n", pos):
            self._pos = pos + 1
            return []
        start = max(pos, self._scan)
        end = -1
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            nxt = nl + 1
            if buf.startswith(b"\n", nxt):
                end, cut = nl, nxt + 1
                break
            if buf.startswith(b"\r\n", nxt):
                end, cut = nl, nxt + 2
                break
            if nxt == len(buf) or (nxt + 1 == len(buf) and buf[nxt] == 0x0D):
                break  # the next line is not complete yet
            start = nxt
        if end < 0:
            self._scan = max(pos, len(buf) - 2)
            # The block cannot end before len(buf) - 2 (its terminator is at most
            # "\n\r\n", of which two bytes may already be here): only fail when even
            # that earliest end is past the limit, so the outcome never depends on how
            # the bytes were split.
            if len(buf) - pos - 2 > self.max_head:
                raise _Fail(431, "header block larger than %d bytes" % self.max_head)
            return None
        if end - pos > self.max_head:
            raise _Fail(431, "header block larger than %d bytes" % self.max_head)
        lines = bytes(buf[pos:end]).split(b"\n")
        self._pos = cut
        self._scan = cut
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    @staticmethod
    def _parse_fields(lines: Sequence[bytes]) -> Headers:
        headers = Headers()
        raw = headers.raw
        for line in lines:
            if not line:
                continue
            if line[:1] in (b" ", b"\t"):
                raise _Fail(400, "obsolete header line folding is not accepted")
            colon = line.find(b":")
            if colon <= 0:
                raise _Fail(400, "malformed header line %r" % line[:40])
            name = line[:colon]
            if not _TOKEN.match(name):
                raise _Fail(400, "invalid header name %r" % name[:40])
            value = line[colon + 1:].strip(b" \t")
            if _VALUE_BAD.search(value):
                raise _Fail(400, "invalid character in header %r" % name[:40])
            raw.append((name.decode("ascii"), value.decode("latin-1")))
        return headers

    def _parse_head(self, events: List[ParserEvent]) -> bool:
        buf = self._buf
        # Tolerate empty lines before a start line (RFC 9112 §2.2).
        while self._pos < len(buf) and buf[self._pos] in (0x0D, 0x0A):
            self._pos += 1
        if self._pos >= len(buf):
            return False
        pos = self._pos
        last = self._last_head
        if last is not None and buf.startswith(last[0], pos):
            # Byte for byte the head of the previous message on this connection (the
            # CLI repeats its headers): reuse its parsed fields (issue 6). The start
            # line and the framing are still checked by _start_message.
            self._pos = self._scan = pos + len(last[0])
            self._body_seen = 0
            self._start_again(events, last[1], _repeat_headers(last))
            return True
        block = self._find_block()
        if block is None:
            return False
        if not block:
            return True
        raw = bytes(buf[pos:self._pos])
        start, fields = block[0], block[1:]
        headers = self._parse_fields(fields)
        self._body_seen = 0
        self._start_message(events, start, headers)
        headers.index()  # (the index every later copy of this head shares)
        self._last_head = (raw, start, tuple(headers.raw), headers._index)
        return True

    def _framing(self, headers: Headers) -> Tuple[str, int]:
        """('chunked', 0), ('length', n) or ('none', 0), per RFC 9112 §6."""
        te = headers.tokens("transfer-encoding")
        if not te and headers.get("transfer-encoding") is not None:
            raise _Fail(400, "empty Transfer-Encoding")
        if te:
            if headers.get("content-length") is not None:
                # Both present is a request-smuggling vector; refuse it outright.
                raise _Fail(400, "both Transfer-Encoding and Content-Length")
            if te[-1] != "chunked" or len(te) > 1:
                raise _Fail(501, "unsupported transfer coding %r" % ", ".join(te))
            return "chunked", 0
        lengths = headers.get_all("content-length")
        if lengths:
            values = set()
            for value in lengths:
                for part in value.split(","):
                    part = part.strip()
                    if not (part.isascii() and part.isdigit()):
                        raise _Fail(400, "invalid Content-Length %r" % value[:40])
                    values.add(int(part))
            if len(values) != 1:
                raise _Fail(400, "conflicting Content-Length values")
            length = values.pop()
            if self.max_body is not None and length > self.max_body:
                raise _Fail(413, "body of %d bytes is larger than %d" % (length, self.max_body))
            return "length", length
        return "none", 0

    def _begin_body(self, events: List[ParserEvent], framing: str, length: int) -> None:
        if framing == "chunked":
            self._state = _CHUNK_SIZE
            # The usual request: one chunk, then the last chunk with no trailers, all
            # here already (the CLI's POSTs, PROTOCOL.md §2). Take the whole body in
            # this step rather than in three (issue 6); anything else goes the long way.
            buf = self._buf
            m = _ONE_CHUNK.match(buf, self._pos)
            if m is not None:
                start = m.end()
                size = int(m.group(1), 16)
                end = start + size
                if size and (self.max_body is None or size <= self.max_body) and buf.startswith(_ONE_CHUNK_END, end):
                    events.append(Data(bytes(buf[start:end])))
                    self._body_seen = size
                    self._pos = end + len(_ONE_CHUNK_END)
                    if self._keep_alive:  # (_end_message, inline for the usual case)
                        events.append(EndOfMessage(NO_TRAILERS))
                        self._state = _HEAD
                        self._scan = self._pos
                    else:
                        self._end_message(events, NO_TRAILERS)
        elif framing == "length" and length > 0:
            self._state = _LENGTH
            self._remaining = length
        elif framing == "close":
            self._state = _UNTIL_CLOSE
        else:
            self._end_message(events, NO_TRAILERS)

    def _end_message(self, events: List[ParserEvent], trailers: Headers) -> None:
        events.append(EndOfMessage(trailers))
        self._state = _HEAD if self._keep_alive else _CLOSED
        if not self._keep_alive:
            self._buf = bytearray()
            self._pos = 0
        self._scan = self._pos

    def _start_message(self, events: List[ParserEvent], start: bytes, headers: Headers) -> None:
        raise NotImplementedError

    def feed_whole(self, data: bytes) -> "Optional[Tuple[Any, bytes]]":
        """The message and its body when `data` is exactly one whole message that
        repeats the last head (requests only, see RequestParser); None to `feed` it."""
        return None

    def _start_again(self, events: List[ParserEvent], start: bytes, headers: Headers) -> None:
        """The head of the previous message again, byte for byte (see _parse_head)."""
        self._start_message(events, start, headers)


class RequestParser(_Parser):
    """Parses requests as a server receives them, back to back on one connection."""

    def _start_message(self, events: List[ParserEvent], start: bytes, headers: Headers) -> None:
        m = _REQUEST_LINE.match(start)
        if m is None:
            if re.match(rb"[^ ]+ [^ ]+ HTTP/", start) or start.startswith(b"PRI * HTTP/2"):
                raise _Fail(505, "unsupported HTTP version")
            raise _Fail(400, "malformed request line %r" % start[:60])
        method, target, _, major, minor = m.groups()
        if not _TOKEN.match(method):
            raise _Fail(400, "invalid method %r" % method[:20])
        if (major, minor) not in ((b"1", b"1"), (b"1", b"0")):
            raise _Fail(505, "unsupported HTTP version %s.%s" % (major.decode(), minor.decode()))
        if _VALUE_BAD.search(target) or b"\t" in target:
            raise _Fail(400, "invalid request target")
        version = "1.1" if minor == b"1" else "1.0"
        if version == "1.1" and len(headers.get_all("host")) > 1:
            raise _Fail(400, "more than one Host header")
        framing, length = self._framing(headers)
        request = Request(method.decode("ascii"), target.decode("latin-1"), headers, version)
        self._keep_alive = request.keep_alive
        self._parsed_start = (start, request.method, request.target, version, framing, length, self._keep_alive)
        events.append(request)
        self._begin_body(events, framing, length)

    #: What _start_message derived from the last start line and fields it accepted.
    _parsed_start: Optional[Tuple[bytes, str, str, str, str, int, bool]] = None

    def _start_again(self, events: List[ParserEvent], start: bytes, headers: Headers) -> None:
        parsed = self._parsed_start
        if parsed is None or parsed[0] is not start or (
                parsed[4] == "length" and self.max_body is not None and parsed[5] > self.max_body):
            self._start_message(events, start, headers)
            return
        # The same head as the last one accepted: the same request line and framing.
        self._keep_alive = parsed[6]
        events.append(Request(parsed[1], parsed[2], headers, parsed[3], parsed[6]))
        self._begin_body(events, parsed[4], parsed[5])

    def feed_whole(self, data: bytes) -> Optional[Tuple[Request, bytes]]:
        """`feed` for the usual request only, in one step: when `data` is exactly one
        whole request, nothing is buffered, and its head is byte for byte the last
        one's, return the request and its body. Otherwise return None having consumed
        nothing: call `feed`. (A server answers the CLI's usual traffic through here
        without event objects, issue 6.)"""
        # The body is one chunk, then the last chunk with no trailers (PROTOCOL.md §2),
        # read straight from `data`: no buffer, no regular expression, one copy (what a
        # request touches is what it costs when the caches are cold). Anything else, or
        # anything wrong, takes the general path, which says what is wrong.
        last = self._last_head
        parsed = self._parsed_start
        if last is None or parsed is None or self._buf or self._state != _HEAD or type(data) is not bytes \
                or parsed[0] is not last[1] or parsed[4] != "chunked" or not parsed[6] or not data.startswith(last[0]):
            return None
        start = len(last[0])
        nl = data.find(b"\r\n", start, start + 18)  # a chunk-size of 1 to 16 hex digits
        if nl <= start:
            return None
        size_hex = data[start:nl]
        if size_hex.translate(None, _HEX_DIGITS):  # anything but hex digits
            return None
        size = int(size_hex, 16)
        end = nl + 2 + size
        if not size or len(data) != end + len(_ONE_CHUNK_END) or not data.endswith(_ONE_CHUNK_END) \
                or (self.max_body is not None and size > self.max_body):
            return None
        self._keep_alive = True
        self._body_seen = size
        return Request(parsed[1], parsed[2], _repeat_headers(last), parsed[3], True), data[nl + 2:end]


class ResponseParser(_Parser):
    """Parses responses as a client receives them.

    Call `expect(method)` for each request sent, so that the answer to a HEAD request is
    known to have no body. Bodies are not limited in total by default (a GET stream is
    endless); they are delivered as they arrive, so memory stays bounded anyway.
    """

    def __init__(self, max_head: int = DEFAULT_MAX_HEAD, max_body: Optional[int] = None) -> None:
        super().__init__(max_head, max_body)
        self._methods: List[str] = []

    def expect(self, method: str) -> None:
        self._methods.append(method.upper())

    def _start_message(self, events: List[ParserEvent], start: bytes, headers: Headers) -> None:
        m = _STATUS_LINE.match(start)
        if m is None:
            raise _Fail(400, "malformed status line %r" % start[:60])
        major, minor, status_b, reason_b = m.groups()
        if major != b"1":
            raise _Fail(505, "unsupported HTTP version %s.%s" % (major.decode(), minor.decode()))
        version = "1.1" if minor == b"1" else "1.0"
        status = int(status_b)
        response = Response(status, (reason_b or b"").decode("latin-1"), headers, version)
        interim = 100 <= status < 200
        method = self._methods[0] if self._methods else "GET"
        if not interim and self._methods:
            self._methods.pop(0)
        self._keep_alive = response.keep_alive
        events.append(response)
        if interim:
            # 1xx has no body and is followed by the real response.
            self._keep_alive = True
            events.append(EndOfMessage())
            return
        if method == "HEAD" or status in (204, 304):
            self._end_message(events, NO_TRAILERS)
            return
        framing, length = self._framing(headers)
        if framing == "none":
            framing = "close"
            self._keep_alive = False
        self._begin_body(events, framing, length)


# --------------------------------------------------------------------------- writers


def _check_header(name: str, value: str) -> None:
    if not _TOKEN.match(name.encode("latin-1", "replace")):
        raise ValueError("invalid header name %r" % name)
    if _VALUE_BAD.search(value.encode("latin-1", "replace")):
        raise ValueError("invalid header value for %r" % name)


_TARGET_BAD = re.compile(r"[\x00-\x20\x7f]")
_REASON_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _request_line(method: str, target: str, http_version: str) -> str:
    if not _TOKEN.match(method.encode("latin-1", "replace")):
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


def _head_bytes(start: str, headers: HeadersLike) -> bytes:
    pairs = headers.raw if isinstance(headers, Headers) else (
        list(headers.items()) if isinstance(headers, dict) else list(headers or ()))
    parts = [start, "\r\n"]
    for name, value in pairs:
        value = str(value)
        _check_header(name, value)
        parts.append("%s: %s\r\n" % (name, value))
    parts.append("\r\n")
    return "".join(parts).encode("latin-1")


def _has(headers: HeadersLike, name: str) -> bool:
    if headers is None:
        return False
    pairs = headers.raw if isinstance(headers, Headers) else (
        headers.items() if isinstance(headers, dict) else headers)
    lname = name.lower()
    return any(k.lower() == lname for k, _ in pairs)


def _with(headers: HeadersLike, *extra: Tuple[str, str]) -> List[Tuple[str, str]]:
    pairs = list(headers.raw if isinstance(headers, Headers) else (
        headers.items() if isinstance(headers, dict) else (headers or ())))
    for name, value in extra:
        if not _has(pairs, name):
            pairs.append((name, value))
    return pairs


def encode_chunk(data: bytes) -> bytes:
    """One chunk of a chunked body. Empty data gives b"" (an empty chunk would end the body)."""
    if not data:
        return b""
    return b"".join((chunk_size_line(len(data)), data, b"\r\n"))


def chunk_size_line(size: int) -> bytes:
    """`b"%x\r\n" % size`, remembered: a server sends the same sizes again and again
    (issue 6: less code run per answer)."""
    line = _SIZE_LINES.get(size)
    if line is None:
        if len(_SIZE_LINES) >= 1024:
            _SIZE_LINES.clear()
        line = _SIZE_LINES[size] = b"%x\r\n" % size
    return line


_SIZE_LINES: Dict[int, bytes] = {}


LAST_CHUNK = b"0\r\n\r\n"


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
        head = _head_bytes(start, _with(headers, ("Transfer-Encoding", "chunked")))
        return head + encode_chunked_body(body or b"", chunk_size)
    if body is None:
        return _head_bytes(start, headers)
    head = _head_bytes(start, _with(headers, ("Content-Length", str(len(body)))))
    return head + body


def write_response(status: int, headers: HeadersLike = None, body: bytes = b"",
                   reason: Optional[str] = None) -> bytes:
    """A whole response with a `Content-Length` body (none for 1xx and 204, which
    cannot have a body, RFC 9110 §8.6)."""
    start = _status_line(status, reason)
    if status < 200 or status == 204:
        if body:
            raise ValueError("a %d response cannot have a body" % status)
        return _head_bytes(start, headers)
    return _head_bytes(start, _with(headers, ("Content-Length", str(len(body))))) + body


_HEAD_CACHE: Dict[Tuple[Any, ...], bytes] = {}


def write_response_head(status: int, headers: HeadersLike = None, reason: Optional[str] = None) -> bytes:
    """The head of a streamed response; the body follows as `encode_chunk` pieces and
    ends with `LAST_CHUNK`."""
    key: Optional[Tuple[Any, ...]] = None
    if type(headers) is list and type(status) is int:
        # A server sends the same few heads again and again (issue 6): remember them
        # rather than validate and encode every field each time.
        try:
            key = (status, reason, tuple(headers))
            cached = _HEAD_CACHE.get(key)
        except TypeError:  # an unhashable value
            key = cached = None
        if cached is not None:
            return cached
    start = _status_line(status, reason)
    data = _head_bytes(start, _with(headers, ("Transfer-Encoding", "chunked")))
    if key is not None and all(type(v) is str for _, v in headers):
        # (Text values only: True, 1 and 1.0 are equal keys but not the same field.)
        if len(_HEAD_CACHE) >= 256:
            _HEAD_CACHE.clear()
        _HEAD_CACHE[key] = data
    return data


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
