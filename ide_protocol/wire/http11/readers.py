"""The readers: bytes in, events out, for requests (a server) and responses (a client).

One state machine for both directions. Its states, and what moves it on:

    HEAD         a head: start line and fields up to the empty line; the framing rule
                 (`rules.body_framing`) picks the body's state, or the message ends
    LENGTH       `Content-Length` bytes of body
    CHUNK_SIZE   a chunk-size line (`rules.chunk_size`); 0 -> TRAILERS
    CHUNK_DATA   that many bytes of chunk data
    CHUNK_END    the CRLF after the chunk data -> CHUNK_SIZE
    TRAILERS     trailer fields, then the empty line: the message ends
                 (the four chunked states are read by one method, `_read_chunked`)
    UNTIL_CLOSE  a response body delimited by the connection closing
    CLOSED       a message said `Connection: close` (`rules.keep_alive`): nothing more
    DEAD         after a ParseError

At the end of a message the reader goes back to HEAD when the connection stays open
(keep-alive, pipelining: PROTOCOL.md §2), else to CLOSED. The readers never raise on
input: a broken rule becomes a `ParseError` event carrying the status to answer with,
and the reader is dead from then on. The outcome never depends on how the bytes were
split between calls to `feed`.

The parse of a request head is a pure function of its bytes, and Copilot CLI sends the
same head again and again on a connection (PROTOCOL.md §2), so a request reader keeps
the last head it parsed with its bytes: when the next head is those bytes again (one
comparison), its parse is the same (fields, their index, framing, keep-alive, whether a
body follows). What
depends on the reader's settings, the body limit, is checked on every request. (It
halves what a `tools/call` costs the server: 167 000 instructions with it, 362 000
without, `tools/bench_cost.py` on 2026-12-06.)
"""
from __future__ import annotations

from typing import Dict, List, Literal, NamedTuple, Optional, Tuple, Union

from .events import END_OF_MESSAGE, ConnectionClosed, Data, EndOfMessage, ParseError, ParserEvent, Request, Response
from .headers import NO_TRAILERS, Headers
from .rules import (DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD, NO_FRAMING, Framing, Refusal, body_follows, body_framing,
                    body_room, check_body_size, check_request_fields, check_section_size, chunk_size, has_body,
                    head_end, keep_alive, parse_fields, parse_request_line, parse_status_line)

__all__ = ["ReadState", "RequestParser", "ResponseParser"]

_CR, _LF = 0x0D, 0x0A


class _RequestHead(NamedTuple):
    """A parsed request head: everything in it that does not depend on the reader."""
    method: str
    target: str
    http_version: str
    fields: List[Tuple[str, str]]  # (never changed: each request gets a copy)
    field_index: Dict[str, List[str]]  # (not `index`: that would hide tuple.index)
    framing: Framing
    keep_alive: bool
    body_follows: bool


def _parse_request_head(lines: List[bytes]) -> _RequestHead:
    start = lines[0]
    line = parse_request_line(start[:-1] if start.endswith(b"\r") else start)
    headers = parse_fields(lines[1:])
    check_request_fields(line.http_version, headers)
    framing = body_framing(headers)
    return _RequestHead(line.method, line.target, line.http_version, headers.raw, headers.index(),
                        framing, keep_alive(line.http_version, headers.tokens("connection")), body_follows(framing))


#: Where a reader is (see the module's doc). Plain strings, typed: the reader compares
#: its state several times per message, and a string constant costs nothing to load,
#: where an `enum.Enum` member's lookup costs about 70 ns more on CPython 3.8-3.11
#: (tools/bench_cost.py: 16 000 instructions of a `tools/call` with an enum here).
ReadState = Literal["HEAD", "LENGTH", "CHUNK_SIZE", "CHUNK_DATA", "CHUNK_END", "TRAILERS", "UNTIL_CLOSE",
                    "CLOSED", "DEAD"]


class _Reader:
    """The state machine shared by both directions; subclasses read the start line
    and pick the body's framing (`_start_message`)."""

    def __init__(self, max_head: int = DEFAULT_MAX_HEAD, max_body: Optional[int] = DEFAULT_MAX_BODY) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self._buf: Union[bytes, bytearray] = b""
        self._pos = 0            # bytes of _buf already consumed
        self._scan = 0           # where the search for the end of a head resumes
        #: Where the reader is (`ReadState`).
        self.state: ReadState = "HEAD"
        self._remaining = 0      # bytes left in a Content-Length body or the current chunk
        self._body_seen = 0      # body bytes so far in this message (rules.check_body_size)
        self._keep_alive = True  # whether the current message leaves the connection open
        #: The bytes of the last head whose parse the reader keeps (see the module's doc).
        self._head_bytes: Optional[bytes] = None
        #: True between messages with nothing buffered (a clean place to close); set
        #: at the end of each `feed`/`feed_eof`.
        self.idle = True

    @property
    def buffered(self) -> int:
        """Bytes held and not yet consumed (what a peer makes the reader hold: bounded
        by the head limit, a chunk-size line, or one read)."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> List[ParserEvent]:
        """Consume bytes; return every event they complete. Never raises on input: a
        broken rule is a `ParseError` event (an exception here is the reader's own bug,
        and is not dressed as the peer's malformed message)."""
        if self.state == "DEAD" or self.state == "CLOSED":
            return []
        if data:
            if self._pos == len(self._buf):  # nothing left over: read `data` as it is
                self._buf = data if type(data) is bytes else bytes(data)
                self._pos = self._scan = 0
            else:
                if type(self._buf) is bytes:
                    self._buf = bytearray(self._buf)
                self._buf += data
        events: List[ParserEvent] = []
        try:
            # One state at a time, for as long as bytes last and a state makes progress.
            while self._pos < len(self._buf):
                state = self.state
                if state == "HEAD":
                    more = self._read_head(events)
                elif state == "LENGTH":
                    more = self._read_length(events)
                elif state == "UNTIL_CLOSE":
                    more = self._read_until_close(events)
                elif state == "CLOSED" or state == "DEAD":
                    break
                else:
                    more = self._read_chunked(events)
                if not more:
                    break
        except Refusal as refusal:  # (a broken rule; a bug of the reader itself is raised as it is)
            self._die(events, refusal.status, refusal.message)
        if self._pos:
            if self._pos == len(self._buf):  # all consumed (the usual): start afresh
                self._buf = b""
                self._pos = self._scan = 0
            else:
                self._compact()
        self.idle = self.state == "HEAD" and not self._buf
        return events

    def feed_eof(self) -> List[ParserEvent]:
        """The peer closed its side. Returns the events that closing completes."""
        events: List[ParserEvent] = []
        if self.state == "DEAD":
            return events
        rest = self._buf[self._pos:]
        if self.state == "UNTIL_CLOSE":
            if rest:
                events.append(Data(bytes(rest)))
            events.append(END_OF_MESSAGE)
            self.state = "CLOSED"
        elif self.state == "CLOSED" or (self.state == "HEAD" and not rest.strip()):
            events.append(ConnectionClosed())
            self.state = "CLOSED"
        else:
            self._die(events, 400, "connection closed in the middle of a message")
        self._buf = b""
        self._pos = self._scan = 0
        self.idle = False
        return events

    # -- the states

    def _read_head(self, events: List[ParserEvent]) -> bool:
        buf = self._buf
        pos = self._pos
        if buf[pos] == _CR or buf[pos] == _LF:
            # Tolerate empty lines before a start line (RFC 9112 §2.2).
            while pos < len(buf) and buf[pos] in (_CR, _LF):
                pos += 1
            self._pos = pos
            if pos >= len(buf):
                return False
        self._body_seen = 0
        last = self._head_bytes
        if last is not None and buf.startswith(last, pos):
            # The bytes of the head before: the head ends where that one ended.
            self._pos = self._scan = pos + len(last)
            self._start_message(events, last, len(last))
            if self._pos < len(buf):  # (its body, in the same step)
                state = self.state
                if state == "LENGTH":
                    return self._read_length(events)
                if state == "CHUNK_SIZE":
                    return self._read_chunked(events)
            return True
        found = self._section_end(pos, "header block")
        if found is None:
            return False
        end, after = found
        self._pos = self._scan = after
        self._start_message(events, bytes(buf[pos:after]), end - pos)
        return True

    def _section_end(self, pos: int, what: str) -> Optional[Tuple[int, int]]:
        """Where the head or trailer section starting at `pos` ends (`rules.head_end`),
        or None while it is incomplete; either way within the size limit
        (`rules.check_section_size`, one limit for both)."""
        buf = self._buf
        found = head_end(buf, max(pos, self._scan))
        if found is None:
            # The section cannot end before len(buf) - 2 (its end is at most "\n\r\n",
            # two bytes of which may be here): refuse only when even that is past the
            # limit, so that the outcome never depends on how the bytes were split.
            self._scan = max(pos, len(buf) - 2)
            check_section_size(len(buf) - pos - 2, self.max_head, what)
            return None
        check_section_size(found[0] - pos, self.max_head, what)
        return found

    def _start_message(self, events: List[ParserEvent], head: bytes, lines_end: int) -> None:
        raise NotImplementedError

    def _begin_body(self, events: List[ParserEvent], framing: Framing) -> None:
        kind = framing.kind
        if kind == "chunked":
            self.state = "CHUNK_SIZE"
        elif kind == "length" and framing.length > 0:
            self.state = "LENGTH"
            self._remaining = framing.length
        elif kind == "close":
            self.state = "UNTIL_CLOSE"
        else:
            self._end_message(events, NO_TRAILERS)

    def _read_length(self, events: List[ParserEvent]) -> bool:
        buf = self._buf
        pos = self._pos
        end = pos + self._remaining
        if end > len(buf):
            end = len(buf)
        events.append(Data(buf[pos:end] if type(buf) is bytes else bytes(buf[pos:end])))
        self._pos = end
        self._remaining -= end - pos
        if not self._remaining:
            self._end_message(events, NO_TRAILERS)
        return True

    def _read_chunked(self, events: List[ParserEvent]) -> bool:
        """The states of a chunked body (RFC 9112 §7.1), in order, for as long as bytes
        last: a chunk-size line, its data, the CRLF after it, again; the last chunk
        (size 0), then the trailer section."""
        buf = self._buf
        pos = self._pos
        end = len(buf)
        state = self.state
        remaining = self._remaining
        while state != "TRAILERS":
            if state == "CHUNK_SIZE":
                found = chunk_size(buf, pos)
                if found is None:
                    break
                remaining, pos = found
                if not remaining:
                    state = "TRAILERS"
                    break
                self._body_seen += remaining
                check_body_size(self._body_seen, self.max_body)
                state = "CHUNK_DATA"
            if state == "CHUNK_DATA":
                n = end - pos
                if n > remaining:
                    n = remaining
                if n:
                    events.append(Data(buf[pos:pos + n] if type(buf) is bytes else bytes(buf[pos:pos + n])))
                    pos += n
                    remaining -= n
                if remaining:
                    break
                state = "CHUNK_END"
            # CHUNK_END: chunk data is followed by exactly CRLF; anything else means the
            # chunk was longer than its size said, or its size was wrong.
            if end - pos < 2:
                if pos < end and buf[pos] != _CR:
                    raise Refusal(400, "chunk data not followed by CRLF")
                break
            if buf[pos] != _CR or buf[pos + 1] != _LF:
                raise Refusal(400, "chunk data not followed by CRLF")
            pos += 2
            state = "CHUNK_SIZE"
        self.state = state
        self._pos = pos
        self._remaining = remaining
        if state != "TRAILERS" or pos >= end:
            return False
        if buf.startswith(b"\r\n", pos):  # no trailer fields (the usual)
            self._pos = pos + 2
            self._end_message(events, NO_TRAILERS)
            return True
        return self._read_trailers(events)

    def _read_trailers(self, events: List[ParserEvent]) -> bool:
        buf = self._buf
        pos = self._pos
        # No trailer fields: the empty line at once (CRLF, or a bare LF as in a head).
        if buf[pos] == _LF:
            self._pos = pos + 1
            self._end_message(events, NO_TRAILERS)
            return True
        found = self._section_end(pos, "trailer section")
        if found is None:
            return False
        end, after = found
        trailers = parse_fields(bytes(buf[pos:end]).split(b"\n"))
        self._pos = after
        self._end_message(events, trailers)
        return True

    def _read_until_close(self, events: List[ParserEvent]) -> bool:
        pos = self._pos
        avail = len(self._buf) - pos
        room = body_room(self._body_seen, self.max_body)
        take = avail if room is None else max(0, min(avail, room))
        if take:
            events.append(Data(self._take(pos, pos + take)))
        self._body_seen += take
        self._pos = pos + take
        check_body_size(self._body_seen + avail - take, self.max_body)  # (refuses the rest: 413)
        return False

    def _end_message(self, events: List[ParserEvent], trailers: Headers) -> None:
        events.append(END_OF_MESSAGE if trailers is NO_TRAILERS else EndOfMessage(trailers))
        if self._keep_alive:
            self.state = "HEAD"
            self._scan = self._pos
        else:
            self.state = "CLOSED"
            self._buf = b""
            self._pos = self._scan = 0

    # -- the buffer

    def _take(self, start: int, end: int) -> bytes:
        buf = self._buf
        return buf[start:end] if type(buf) is bytes else bytes(buf[start:end])

    def _die(self, events: List[ParserEvent], status: int, message: str) -> None:
        events.append(ParseError(status, message))
        self.state = "DEAD"
        self._buf = b""
        self._pos = self._scan = 0

    def _compact(self) -> None:
        # Part of the buffer consumed: keep the rest in a bytearray, dropping the
        # consumed bytes once they are a large share (amortised linear, never quadratic).
        pos = self._pos
        if type(self._buf) is bytes or pos > 65536:
            self._buf = bytearray(self._buf[pos:])
            self._scan = max(0, self._scan - pos)
            self._pos = 0


class RequestParser(_Reader):
    """Reads requests as a server receives them, back to back on one connection."""

    def __init__(self, max_head: int = DEFAULT_MAX_HEAD, max_body: Optional[int] = DEFAULT_MAX_BODY) -> None:
        super().__init__(max_head, max_body)
        self._head: Optional[_RequestHead] = None  # the parse of `_head_bytes`

    def _start_message(self, events: List[ParserEvent], head: bytes, lines_end: int) -> None:
        parsed = self._head
        if parsed is None or head is not self._head_bytes:
            parsed = _parse_request_head(head[:lines_end].split(b"\n"))
            self._head_bytes, self._head = head, parsed
        method, target, version, fields, index, framing, keep_alive, follows = parsed
        if framing.kind == "length":
            check_body_size(framing.length, self.max_body)
        self._keep_alive = keep_alive
        events.append(Request(method, target, Headers.parsed(fields, index), version, keep_alive, follows))
        self._begin_body(events, framing)


class ResponseParser(_Reader):
    """Reads responses as a client receives them.

    Call `expect(method)` for each request sent, so that the answer to a HEAD request is
    known to have no body (`rules.has_body`). Bodies are not limited in total by default
    (a GET stream is endless); they are delivered as they arrive, so memory stays
    bounded anyway.
    """

    def __init__(self, max_head: int = DEFAULT_MAX_HEAD, max_body: Optional[int] = None) -> None:
        super().__init__(max_head, max_body)
        self._methods: List[str] = []

    def expect(self, method: str) -> None:
        self._methods.append(method.upper())

    def _start_message(self, events: List[ParserEvent], head: bytes, lines_end: int) -> None:
        lines = head[:lines_end].split(b"\n")
        start = lines[0]
        line = parse_status_line(start[:-1] if start.endswith(b"\r") else start)
        headers = parse_fields(lines[1:])
        response = Response(line.status, line.reason, headers, line.http_version)
        interim = 100 <= line.status < 200
        method = self._methods[0] if self._methods else "GET"
        if not interim and self._methods:
            self._methods.pop(0)
        self._keep_alive = response.keep_alive
        events.append(response)
        if interim:
            # 1xx has no body and is followed by the real response.
            self._keep_alive = True
            self._end_message(events, NO_TRAILERS)
            return
        if not has_body(method, line.status):
            self._end_message(events, NO_TRAILERS)
            return
        framing = body_framing(headers)
        check_body_size(framing.length, self.max_body)
        if framing is NO_FRAMING:
            framing = Framing("close")  # read until the connection closes (RFC 9112 §6.3)
            self._keep_alive = False
        self._begin_body(events, framing)
