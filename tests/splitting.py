"""Feed a parser the same bytes in every way they can be split, and insist on one answer.

The acceptance of the wire core asks that every parser test also holds when the input
arrives one byte at a time and when it is cut in two at each byte boundary. `feed_all_ways`
does the three runs and compares them after normalisation: consecutive HTTP `Data`
events are merged, because a body may legitimately arrive in more pieces when the bytes
do (everything else, including where an error is reported, must be identical).

Works for every incremental parser of the core:

* `http11.RequestParser` / `ResponseParser` (`finish="feed_eof"` to close the stream),
* `sse.SSEDecoder` (no finish call),
* `ndjson.LineSplitter` (`finish="flush"`).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Sequence

from ide_protocol.wire.http11 import Data

# Above this size, the two-way splits (quadratic in total work) are sampled rather than
# exhaustive, so that a test with a large body stays fast.
EXHAUSTIVE_LIMIT = 6000


def normalise(events: Iterable[Any]) -> List[Any]:
    """Merge consecutive `Data` events; keep everything else as it is."""
    out: List[Any] = []
    for event in events:
        if isinstance(event, Data) and out and isinstance(out[-1], Data):
            out[-1] = Data(out[-1].data + event.data)
        elif isinstance(event, Data):
            out.append(Data(bytes(event.data)))
        else:
            out.append(event)
    return out


def run(parser: Any, pieces: Iterable[bytes], finish: Optional[str] = None) -> List[Any]:
    """Feed `pieces` in order (then call `finish` if given); return every event."""
    events: List[Any] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    if finish:
        events.extend(getattr(parser, finish)())
    return events


def split_points(n: int) -> Sequence[int]:
    if n <= EXHAUSTIVE_LIMIT:
        return range(1, n)
    # Large inputs: every boundary near both ends (where heads and trailers live) plus a
    # regular sample through the middle.
    near = set(range(1, min(n, 3000))) | set(range(max(1, n - 3000), n))
    near |= set(range(1, n, max(1, n // 500)))
    return sorted(near)


def feed_all_ways(make_parser: Callable[[], Any], data: bytes, finish: Optional[str] = None,
                  bytewise: bool = True, cuts: Optional[Iterable[int]] = None) -> List[Any]:
    """Parse `data` whole, byte by byte and split in two at each boundary; assert that the
    normalised events agree and return them. `cuts` restricts the two-way splits (for a
    long stream whose messages are each tested exhaustively on their own)."""
    data = bytes(data)
    expected = normalise(run(make_parser(), [data], finish))
    if bytewise:
        one_by_one = normalise(run(make_parser(), [data[i:i + 1] for i in range(len(data))], finish))
        assert one_by_one == expected, "byte-by-byte feeding differs:\n%r\n!=\n%r" % (one_by_one, expected)
    for cut in (split_points(len(data)) if cuts is None else cuts):
        got = normalise(run(make_parser(), [data[:cut], data[cut:]], finish))
        assert got == expected, "split at %d differs:\n%r\n!=\n%r" % (cut, got, expected)
    return expected


def bodies(events: Iterable[Any]) -> List[bytes]:
    """The body of each message in a list of HTTP events (Data joined per message)."""
    out: List[bytes] = []
    current: Optional[List[bytes]] = None
    for event in events:
        name = type(event).__name__
        if name in ("Request", "Response"):
            current = []
        elif name == "Data" and current is not None:
            current.append(event.data)
        elif name == "EndOfMessage" and current is not None:
            out.append(b"".join(current))
            current = None
    return out
