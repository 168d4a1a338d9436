"""Server-sent events (the `text/event-stream` format), sans-IO.

The MCP server answers each request with one event and writes pushes on the GET stream
as events (PROTOCOL.md §2: `event: message\\ndata: <json>\\n\\n`, no `id:` lines). The
decoder is the client side, used by our own client, checker and tracer; it follows the
WHATWG parsing rules (any of CRLF, LF, CR ends a line; one space after the colon is
dropped; an event is dispatched only when it has data).
"""
from __future__ import annotations

import re
from typing import List, Optional

_NEWLINES = re.compile(r"\r\n|\r|\n")


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
        parts.append("event: %s\n" % event)
    if id is not None:
        _single_line("id", id)
        if "\0" in id:
            raise ValueError("an SSE id cannot contain NUL")
        parts.append("id: %s\n" % id)
    if retry is not None:
        if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
            raise ValueError("retry must be a non-negative integer")
        parts.append("retry: %d\n" % retry)
    if data is not None:
        for line in _NEWLINES.split(data):
            parts.append("data: %s\n" % line if line else "data\n")
    parts.append("\n")
    return "".join(parts).encode("utf-8")


def encode_message(json_text: str) -> bytes:
    """The exact event shape Copilot CLI's peers use for a JSON-RPC message
    (PROTOCOL.md §2). JSON from `jsonrpc.dumps` has no raw newlines, so this is one
    `data:` line."""
    return b"event: message\ndata: " + json_text.encode("utf-8") + b"\n\n"


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

    `max_event` bounds the data buffered for one event and for one unterminated line;
    past it the decoder drops the event and reports it in `dropped` rather than growing
    without limit on a broken stream.
    """

    def __init__(self, max_event: int = 64 * 1024 * 1024) -> None:
        self.max_event = max_event
        self.dropped = 0
        self.last_event_id: Optional[str] = None
        self._pending = bytearray()
        self._first = True
        self._reset()

    def _reset(self) -> None:
        self._event = ""
        self._data: List[str] = []
        self._size = 0
        self._id: Optional[str] = None
        self._retry: Optional[int] = None

    def feed(self, data: bytes) -> List[SSEEvent]:
        events: List[SSEEvent] = []
        if self._pending and b"\n" not in data and b"\r" not in data:
            # The middle of a long line: append without rescanning (linear, not quadratic).
            self._pending += data
            if len(self._pending) > self.max_event:
                self._pending = bytearray()
                self.dropped += 1
                self._reset()
            return events
        buf = bytes(self._pending) + data if self._pending else data
        if self._first and buf:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                self._pending = bytearray(buf)
                return events
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
            self._first = False
        start = 0
        n = len(buf)
        while start < n:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr + 1 == n:
                    break  # a CR at the end may be the first half of CRLF
                end, nxt = cr, (cr + 2 if buf[cr + 1] == 0x0A else cr + 1)
            else:
                end, nxt = lf, lf + 1
            self._line(buf[start:end], events)
            start = nxt
        self._pending = bytearray(buf[start:])
        if len(self._pending) > self.max_event:
            self._pending = bytearray()
            self.dropped += 1
            self._reset()
        return events

    def _line(self, raw: bytes, events: List[SSEEvent]) -> None:
        if not raw:
            if self._data:
                data = "\n".join(self._data)
                events.append(SSEEvent(self._event or "message", data, self._id, self._retry))
            if self._id is not None:
                self.last_event_id = self._id
            self._reset()
            return
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            return
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._size += len(value)
            if self._size > self.max_event:
                self.dropped += 1
                self._reset()
                return
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry":
            if value.isdigit():
                self._retry = int(value)
