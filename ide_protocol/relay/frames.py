"""The relay's link format, sans-IO: several byte streams and lock news over one pipe.

The two halves of `relay` talk over a single byte stream (the stdin/stdout of `ssh`,
`docker exec -i`, `wsl.exe`...). Over it they carry every HTTP connection the CLI opens
(it keeps a GET stream open while it POSTs; probes come and go), so each connection is a
numbered *stream*, and each stream has a send window so that one slow reader never stops
the others: a side sends at most `INITIAL_WINDOW` bytes of DATA on a stream before the
other side gives CREDIT back for what it has delivered.

The link starts with `MAGIC` (sent by both halves). A remote shell may print a banner
on stdout before the half starts, so the parser skips anything before the magic, up to
`MAX_PREAMBLE` bytes. After it, every frame is

    type (1 byte) | stream id (4 bytes, big-endian) | payload length (4 bytes) | payload

with the payload at most `MAX_PAYLOAD` bytes (a writer splits larger data). Frames:

* OPEN   stream — the CLI side accepted a connection; the IDE side connects to the IDE.
* DATA   stream, bytes — bytes of that connection, in order.
* CREDIT stream, 4-byte count — the receiver delivered that many more bytes.
* CLOSE  stream — the sender's end of that connection is finished (no more DATA).
* LOCK   stream 0, JSON object or `null` — the IDE's lock as the IDE side sees it
         appear or change, `null` when it went.
* PING   stream 0, 8 bytes — are you there? The receiver answers at once with
* PONG   stream 0, the same 8 bytes. Any frame received shows the other half alive;
         the timing (how often to ask, how long a silence means death) is the
         link's (`link.py`), not the format's.

A greeting of another version of the format (`PREFIX` then other digits) ends the
link with a clear error instead of being skipped as junk: both halves must be of one
version (the one-file zipapp copied to the other machine is often older).

The parser never raises: junk, an unknown type, an oversized length or a bad payload
ends the link with one `LinkError` event, after which it returns nothing.
"""
from __future__ import annotations

import json
import struct
from typing import Any, List, Optional, Tuple, Union

PREFIX = b"\x00copilot-ide-relay/"
VERSION = 2
MAGIC = PREFIX + b"%d\n" % VERSION
MAX_PREAMBLE = 64 * 1024
MAX_PAYLOAD = 64 * 1024
INITIAL_WINDOW = 256 * 1024
MAX_STREAM_ID = 0xFFFFFFFF

OPEN, DATA, CREDIT, CLOSE, LOCK, PING, PONG = 1, 2, 3, 4, 5, 6, 7
PING_SIZE = 8
_HEADER = struct.Struct(">BII")
HEADER_SIZE = _HEADER.size
_NAMES = {OPEN: "OPEN", DATA: "DATA", CREDIT: "CREDIT", CLOSE: "CLOSE", LOCK: "LOCK", PING: "PING", PONG: "PONG"}


# ------------------------------------------------------------------ events


class LinkEvent:
    """What the parser returns; equal when of the same type with the same fields."""

    __slots__ = ()

    def _fields(self) -> Tuple[Any, ...]:
        names: Tuple[str, ...] = self.__slots__
        return tuple(getattr(self, name) for name in names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinkEvent) and type(other) is type(self) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return "%s%r" % (type(self).__name__, self._fields())


class Hello(LinkEvent):
    """The other half's magic arrived: the link is up. `skipped` bytes came before it."""

    __slots__ = ("skipped",)

    def __init__(self, skipped: int = 0) -> None:
        self.skipped = skipped


class Open(LinkEvent):
    __slots__ = ("stream",)

    def __init__(self, stream: int) -> None:
        self.stream = stream


class StreamData(LinkEvent):
    __slots__ = ("stream", "data")

    def __init__(self, stream: int, data: bytes) -> None:
        self.stream = stream
        self.data = data


class Credit(LinkEvent):
    __slots__ = ("stream", "count")

    def __init__(self, stream: int, count: int) -> None:
        self.stream = stream
        self.count = count


class Close(LinkEvent):
    __slots__ = ("stream",)

    def __init__(self, stream: int) -> None:
        self.stream = stream


class LockNews(LinkEvent):
    """The IDE's lock (its JSON object) as the IDE side now sees it; None: it is gone."""

    __slots__ = ("lock",)

    def __init__(self, lock: Optional[dict]) -> None:
        self.lock = lock


class Ping(LinkEvent):
    """The other half asks whether this one is alive: answer `encode_pong(payload)`."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class Pong(LinkEvent):
    """The answer to a PING this half sent (its payload)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class LinkError(LinkEvent):
    """The link is unusable (junk, a frame too large, an end in the middle of a frame)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


Event = Union[Hello, Open, StreamData, Credit, Close, LockNews, Ping, Pong, LinkError]


# ------------------------------------------------------------------ writers


def _frame(kind: int, stream: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(kind, stream, len(payload)) + payload


def encode_open(stream: int) -> bytes:
    return _frame(OPEN, stream)


def encode_data(stream: int, data: bytes) -> bytes:
    """DATA frames for `data`, split at MAX_PAYLOAD (empty data makes no frame)."""
    view = memoryview(data)
    return b"".join(_frame(DATA, stream, bytes(view[i:i + MAX_PAYLOAD])) for i in range(0, len(data), MAX_PAYLOAD))


def encode_credit(stream: int, count: int) -> bytes:
    if not 0 < count <= 0xFFFFFFFF:
        raise ValueError("credit out of range: %r" % count)
    return _frame(CREDIT, stream, struct.pack(">I", count))


def encode_close(stream: int) -> bytes:
    return _frame(CLOSE, stream)


def encode_lock(lock: Optional[dict]) -> bytes:
    payload = json.dumps(lock, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError("lock announcement larger than %d bytes" % MAX_PAYLOAD)
    return _frame(LOCK, 0, payload)


def encode_ping(payload: bytes) -> bytes:
    if len(payload) != PING_SIZE:
        raise ValueError("a PING carries %d bytes" % PING_SIZE)
    return _frame(PING, 0, payload)


def encode_pong(payload: bytes) -> bytes:
    if len(payload) != PING_SIZE:
        raise ValueError("a PONG carries %d bytes" % PING_SIZE)
    return _frame(PONG, 0, payload)


# ------------------------------------------------------------------ parser


class LinkParser:
    """Bytes of the link in, events out. One instance per direction of one link."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._greeted = False
        self._skipped = 0
        self._dead = False

    @property
    def dead(self) -> bool:
        return self._dead

    def feed(self, data: bytes) -> List[Event]:
        if self._dead:
            return []
        self._buffer += data
        events: List[Event] = []
        if not self._greeted and not self._find_magic(events):
            return events
        while not self._dead and len(self._buffer) >= HEADER_SIZE:
            kind, stream, length = _HEADER.unpack_from(self._buffer)
            if kind not in _NAMES:
                return self._die(events, "unknown frame type %d" % kind)
            if length > MAX_PAYLOAD:
                return self._die(events, "%s frame of %d bytes (limit %d)" % (_NAMES[kind], length, MAX_PAYLOAD))
            if len(self._buffer) < HEADER_SIZE + length:
                break
            payload = bytes(self._buffer[HEADER_SIZE:HEADER_SIZE + length])
            del self._buffer[:HEADER_SIZE + length]
            event = _event(kind, stream, payload)
            events.append(event)
            if isinstance(event, LinkError):
                self._dead = True
        return events

    def feed_eof(self) -> List[Event]:
        """The other half's stream ended: an error when it stopped inside a frame or
        before its magic (a clean end between frames returns nothing)."""
        if self._dead:
            return []
        events: List[Event] = []
        if not self._greeted:
            return self._die(events, "the link ended before the other half started")
        if self._buffer:
            return self._die(events, "the link ended in the middle of a frame (%d bytes)" % len(self._buffer))
        self._dead = True
        return events

    def _find_magic(self, events: List[Event]) -> bool:
        at = self._buffer.find(MAGIC)
        other = self._other_version()
        if other is not None and (at < 0 or other[0] < at):
            self._die(events, "the other half speaks version %s of the relay's link, this one %d: run the same "
                              "version of copilot-ide on both sides" % (other[1], VERSION))
            return False
        if at < 0:
            # keep only a tail that may be the start of a greeting (of any version)
            keep = len(PREFIX) + 12
            if len(self._buffer) > keep:
                drop = len(self._buffer) - keep
                self._skipped += drop
                del self._buffer[:drop]
            if self._skipped > MAX_PREAMBLE:
                self._die(events, "no relay greeting in the first %d bytes (is the other half a relay?)"
                          % MAX_PREAMBLE)
            return False
        self._skipped += at
        del self._buffer[:at + len(MAGIC)]
        self._greeted = True
        events.append(Hello(self._skipped))
        return True

    def _other_version(self) -> Optional[Tuple[int, str]]:
        """Where a greeting of another version starts in the buffer, and its version."""
        at = self._buffer.find(PREFIX)
        while at >= 0:
            end = self._buffer.find(b"\n", at + len(PREFIX), at + len(PREFIX) + 12)
            if end < 0:
                return None  # (its end may be still to come: the magic keeps that tail)
            version = bytes(self._buffer[at + len(PREFIX):end])
            if version.isdigit() and int(version) != VERSION:
                return at, version.decode("ascii")
            at = self._buffer.find(PREFIX, at + 1)
        return None

    def _die(self, events: List[Event], message: str) -> List[Event]:
        self._dead = True
        self._buffer.clear()
        events.append(LinkError(message))
        return events


def _event(kind: int, stream: int, payload: bytes) -> Event:
    if kind == LOCK:
        if stream != 0:
            return LinkError("LOCK frame on stream %d" % stream)
        try:
            lock: Any = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return LinkError("LOCK frame that is not JSON")
        if lock is not None and not isinstance(lock, dict):
            return LinkError("LOCK frame that is not an object or null")
        return LockNews(lock)
    if kind in (PING, PONG):
        if stream != 0 or len(payload) != PING_SIZE:
            return LinkError("%s frame on stream %d of %d bytes" % (_NAMES[kind], stream, len(payload)))
        return Ping(payload) if kind == PING else Pong(payload)
    if stream == 0:
        return LinkError("%s frame on stream 0" % _NAMES[kind])
    if kind == DATA:
        return StreamData(stream, payload)
    if kind == CREDIT:
        if len(payload) != 4:
            return LinkError("CREDIT frame of %d bytes" % len(payload))
        count = struct.unpack(">I", payload)[0]
        if count == 0:
            return LinkError("CREDIT of 0")
        return Credit(stream, count)
    if payload:
        return LinkError("%s frame with a payload" % _NAMES[kind])
    return Open(stream) if kind == OPEN else Close(stream)
