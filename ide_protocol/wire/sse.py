"""Server-sent events (the `text/event-stream` format), sans-IO.

The MCP server answers each request with one event and writes pushes on the GET stream
as events (PROTOCOL.md §2: `event: message\\ndata: <json>\\n\\n`, no `id:` lines); the
event format is written once, in `_field` and `_END`. The decoder is the client side,
used by our own client, checker and tracer; it follows the WHATWG parsing rules (any
of CRLF, LF, CR ends a line; one space after the colon is dropped; an event is
dispatched only when it has data).
"""
from __future__ import annotations

import re
from typing import List, Optional, Union

_NEWLINES = re.compile(r"\r\n|\r|\n")


def _field(name: str, value: str) -> str:
    """One field line of an event: `name: value` and LF, or the bare name for an empty
    value (the WHATWG format; the CLI's peers write `event: message\ndata: <json>\n`)."""
    return "%s: %s\n" % (name, value) if value else name + "\n"


#: An event ends with an empty line.
_END = "\n"


def encode_event(data: Optional[str] = None, event: Optional[str] = None, id: Optional[str] = None,
                 retry: Optional[int] = None, comment: Optional[str] = None) -> bytes:
    """One event. Multi-line `data` becomes several `data:` lines, whatever its line
    endings, and decodes back to the same text with `\\n` separators."""
    parts: List[str] = []
    if comment is not None:
        for line in _NEWLINES.split(comment):
            parts.append(":" + (" " + line if line else "") + "\n")
    if event is not None:
        _single_line("event", event)
        parts.append(_field("event", event))
    if id is not None:
        _single_line("id", id)
        if "\0" in id:
            raise ValueError("an SSE id cannot contain NUL")
        parts.append(_field("id", id))
    if retry is not None:
        if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
            raise ValueError("retry must be a non-negative integer")
        parts.append(_field("retry", "%d" % retry))
    if data is not None:
        for line in _NEWLINES.split(data):
            parts.append(_field("data", line))
    parts.append(_END)
    return "".join(parts).encode("utf-8")


def encode_message(json_text: Union[str, bytes]) -> bytes:
    """The event Copilot CLI's peers use for a JSON-RPC message (PROTOCOL.md §2):
    `encode_event(json_text, event="message")`, for JSON with no raw newlines (from
    `jsonrpc.dumps`: one `data:` line), joined from bytes without re-encoding."""
    if isinstance(json_text, str):
        json_text = json_text.encode("utf-8")
    return b"".join((_MESSAGE_START, json_text, _MESSAGE_END))


# (The same field lines as encode_event writes, encoded once.)
_MESSAGE_START = (_field("event", "message") + "data: ").encode("ascii")
_MESSAGE_END = ("\n" + _END).encode("ascii")


def _single_line(field: str, value: str) -> None:
    if "\n" in value or "\r" in value:
        raise ValueError("an SSE %s cannot contain a line break" % field)


class SSEEvent:
    """A decoded event. `event` defaults to "message", as in the browser API."""

    __slots__ = ("event", "data", "id", "retry")

    def __init__(self, event: str = "message", data: str = "", id: Optional[str] = None,
                 retry: Optional[int] = None) -> None:
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SSEEvent) and (self.event, self.data, self.id, self.retry) == (
            other.event, other.data, other.id, other.retry)

    def __repr__(self) -> str:
        return "SSEEvent(event=%r, data=%r, id=%r, retry=%r)" % (self.event, self.data, self.id, self.retry)


class SSEDecoder:
    """Incremental decoder: bytes in (split anywhere), events out.

    `max_event` bounds the data buffered for one event (in characters, the "\\n"
    joining its lines included) and the length of one line (in bytes); past it the
    decoder drops the whole event (the rest of an over-long line is skipped up to its
    end, and later `data:` lines of that event are ignored up to the blank line that
    ends it) and counts it in `dropped`, rather than growing without limit on a broken
    stream. The outcome never depends on how the bytes were split.

    The data of an event is kept in one buffer, as the bytes received (at most four for
    each character counted), and decoded once when the event is dispatched, so that
    the memory held follows what the limit counts: kept as one string per line, a
    flood of short `data:` lines under the limit cost some twenty times the limit.
    """

    def __init__(self, max_event: int = 64 * 1024 * 1024) -> None:
        self.max_event = max_event
        self.dropped = 0
        self.last_event_id: Optional[str] = None
        self._pending = bytearray()
        self._first = True
        self._skip_line = False   # discarding the rest of an over-long line
        self._drop_event = False  # the current event overflowed: no dispatch
        self._after_cr = False    # the last piece ended with CR (maybe half a CRLF)
        self._reset()

    @property
    def buffered(self) -> int:
        """Bytes held for an unterminated line (at most `max_event`)."""
        return len(self._pending)

    def _reset(self) -> None:
        self._event = ""
        self._data = bytearray()  # the event's data lines as received, joined by b"\n"
        self._lines = 0           # how many `data:` lines (an empty one counts)
        self._size = 0
        self._id: Optional[str] = None
        self._retry: Optional[int] = None

    def _overflow(self) -> None:
        if not self._drop_event:
            self.dropped += 1
        self._drop_event = True
        self._data = bytearray()
        self._lines = 0
        self._size = 0

    def feed(self, data: bytes) -> List[SSEEvent]:
        events: List[SSEEvent] = []
        if not data:
            return events
        data = bytes(data)
        if self._first:
            probe = bytes(self._pending) + data
            if len(probe) < 3 and b"\xef\xbb\xbf".startswith(probe):
                self._pending = bytearray(probe)
                return events
            self._first = False
            if probe.startswith(b"\xef\xbb\xbf"):
                probe = probe[3:]
            self._pending = bytearray()
            data = probe
        if self._after_cr:
            # The previous piece ended with CR, already taken as a line end (so that an
            # event is dispatched at once); a LF right after it is the rest of a CRLF.
            self._after_cr = False
            if data.startswith(b"\n"):
                data = data[1:]
                if not data:
                    return events
        pending = self._pending
        if b"\n" not in data and b"\r" not in data:
            # The middle of a line: append without rescanning (linear, not quadratic).
            if not self._skip_line:
                pending += data
                if len(pending) > self.max_event:
                    self._pending = bytearray()
                    self._skip_line = True
                    self._overflow()
            return events
        buf = bytes(pending) + data if pending else data
        start = 0
        n = len(buf)
        while start < n:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                end = cr
                if cr + 1 == n:
                    nxt = n
                    self._after_cr = True
                else:
                    nxt = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
            else:
                end, nxt = lf, lf + 1
            if self._skip_line:
                self._skip_line = False  # the end of an over-long line
            elif end - start > self.max_event:
                self._overflow()
            else:
                self._line(buf[start:end], events)
            start = nxt
        rest = b"" if self._skip_line else buf[start:]
        if len(rest) > self.max_event:
            rest = b""
            self._skip_line = True
            self._overflow()
        self._pending = bytearray(rest)
        return events

    def _line(self, raw: bytes, events: List[SSEEvent]) -> None:
        """One line, without its line end. It is cut at its first colon as bytes: a
        colon or a space is one byte that is never part of a UTF-8 sequence, so this is
        the cut of the decoded line, and a `data:` value is kept undecoded."""
        if not raw:
            if self._lines and not self._drop_event:
                # Decoding the joined lines is decoding each line on its own: the "\n"
                # between two lines ends any sequence cut short before it.
                data = self._data.decode("utf-8", "replace")
                events.append(SSEEvent(self._event or "message", data, self._id, self._retry))
            if self._id is not None:
                self.last_event_id = self._id
            self._drop_event = False
            self._reset()
            return
        if raw.startswith(b":"):
            return
        field, sep, value = raw.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            if self._drop_event:
                return
            chars = len(value) if value.isascii() else len(value.decode("utf-8", "replace"))
            self._size += chars + (1 if self._lines else 0)  # with the "\n" joining lines
            if self._size > self.max_event:
                self._overflow()
                return
            if self._lines:
                self._data += b"\n"
            self._data += value
            self._lines += 1
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif field == b"retry":
            if value and all(0x30 <= c <= 0x39 for c in value):
                self._retry = int(value)
