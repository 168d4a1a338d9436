"""The relay's link format: every split of a stream, junk, a fuzzed stream, a dead half."""
from __future__ import annotations

import random
import struct

from ide_protocol.relay import frames
from ide_protocol.relay.frames import (MAGIC, MAX_PAYLOAD, Close, Credit, Hello, LinkError, LinkParser, LockNews, Open,
                                       Ping, Pong, StreamData)
from splitting import feed_all_ways, run

LOCK = {"socketPath": "/tmp/x.sock", "workspaceFolders": ["/w"], "headers": {"Authorization": "Nonce n"}}


def sample_stream() -> bytes:
    return (b"Welcome to host\r\n" + MAGIC + frames.encode_open(1) + frames.encode_data(1, b"POST /mcp HTTP/1.1\r\n")
            + frames.encode_open(7) + frames.encode_credit(1, 4096) + frames.encode_lock(LOCK)
            + frames.encode_data(7, bytes(range(256))) + frames.encode_ping(b"\0\0\0\0\0\0\0\x01")
            + frames.encode_close(1) + frames.encode_pong(b"12345678") + frames.encode_lock(None))


EXPECTED = [Hello(17), Open(1), StreamData(1, b"POST /mcp HTTP/1.1\r\n"), Open(7), Credit(1, 4096), LockNews(LOCK),
            StreamData(7, bytes(range(256))), Ping(b"\0\0\0\0\0\0\0\x01"), Close(1), Pong(b"12345678"),
            LockNews(None)]


def test_every_split_gives_the_same_events() -> None:
    assert feed_all_ways(LinkParser, sample_stream(), finish="feed_eof") == EXPECTED


def test_large_data_is_split_into_bounded_frames_and_joins_back() -> None:
    blob = bytes(random.Random(1).getrandbits(8) for _ in range(3 * MAX_PAYLOAD + 5))
    encoded = frames.encode_data(3, blob)
    events = run(LinkParser(), [MAGIC, encoded], "feed_eof")
    assert [len(e.data) for e in events[1:]] == [MAX_PAYLOAD] * 3 + [5]
    assert b"".join(e.data for e in events[1:]) == blob


def test_a_half_that_dies_mid_frame_is_an_error_not_a_hang() -> None:
    data = MAGIC + frames.encode_open(1) + frames.encode_data(1, b"hello")
    for cut in range(len(MAGIC) + frames.HEADER_SIZE + 1, len(data)):
        events = run(LinkParser(), [data[:cut]], "feed_eof")
        assert events[:2] == [Hello(0), Open(1)]
        assert isinstance(events[-1], LinkError) and "middle of a frame" in events[-1].message
    assert run(LinkParser(), [data], "feed_eof") == [Hello(0), Open(1), StreamData(1, b"hello")]


def test_an_end_before_the_greeting_is_an_error() -> None:
    events = run(LinkParser(), [b"bash: python3: command not found\n"], "feed_eof")
    assert len(events) == 1 and "before the other half started" in events[0].message


def test_bad_frames_end_the_link_once() -> None:
    bad = [
        struct.pack(">BII", 99, 1, 0),                          # unknown type
        struct.pack(">BII", frames.DATA, 1, MAX_PAYLOAD + 1),   # too large: refused from the header alone
        struct.pack(">BII", frames.DATA, 0, 1) + b"x",          # data on stream 0
        struct.pack(">BII", frames.CREDIT, 1, 2) + b"xx",       # credit of the wrong size
        struct.pack(">BII", frames.CREDIT, 1, 4) + b"\0\0\0\0",  # zero credit
        struct.pack(">BII", frames.OPEN, 1, 1) + b"x",          # open with a payload
        struct.pack(">BII", frames.LOCK, 0, 3) + b"[1]",        # lock that is not an object
        struct.pack(">BII", frames.LOCK, 0, 2) + b"\xff{",      # lock that is not JSON
        struct.pack(">BII", frames.LOCK, 2, 4) + b"null",       # lock on a stream
        struct.pack(">BII", frames.PING, 0, 7) + b"1234567",    # ping of the wrong size
        struct.pack(">BII", frames.PONG, 3, 8) + b"12345678",   # pong on a stream
    ]
    for frame in bad:
        parser = LinkParser()
        events = parser.feed(MAGIC + frame + frames.encode_open(5))
        assert events[0] == Hello(0) and len(events) == 2 and isinstance(events[1], LinkError), (frame, events)
        assert parser.dead and parser.feed(frames.encode_open(6)) == [] and parser.feed_eof() == []


def test_junk_without_a_greeting_is_bounded() -> None:
    parser = LinkParser()
    events = []
    for _ in range(100):
        events += parser.feed(b"x" * 1024)
    assert len(events) == 1 and isinstance(events[0], LinkError)
    assert len(parser._buffer) == 0


def test_fuzzed_streams_never_raise_and_keep_memory_bounded() -> None:
    rng = random.Random(22)
    good = sample_stream()
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256)
        if rng.random() < 0.3:
            data += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
        parser = LinkParser()
        pieces = []
        i = 0
        while i < len(data):
            n = rng.randint(1, 64)
            pieces.append(bytes(data[i:i + n]))
            i += n
        events = run(parser, pieces, "feed_eof")
        assert all(isinstance(e, frames.LinkEvent) for e in events)
        assert sum(isinstance(e, LinkError) for e in events) <= 1
        if any(isinstance(e, LinkError) for e in events):
            assert isinstance(events[-1], LinkError)
        assert len(parser._buffer) <= frames.HEADER_SIZE + MAX_PAYLOAD


def test_a_greeting_of_another_version_is_named_not_skipped_as_junk() -> None:
    """A zipapp of an older relay on the other machine: its greeting (`/1`) was junk to
    skip, and the link waited for a greeting that never came."""
    older = b"Welcome\r\n" + frames.PREFIX + b"1\n" + frames.encode_lock(None)
    for events in (run(LinkParser(), [older], "feed_eof"),
                   run(LinkParser(), [older[i:i + 1] for i in range(len(older))], "feed_eof")):
        assert len(events) == 1 and isinstance(events[0], LinkError), events
        assert events[0].message == ("the other half speaks version 1 of the relay's link, this one %d: run the "
                                     "same version of copilot-ide on both sides" % frames.VERSION)
    # the prefix inside a banner, not followed by a version, is junk like any other
    assert run(LinkParser(), [frames.PREFIX + b"x\n" + MAGIC], "feed_eof") == [Hello(len(frames.PREFIX) + 2)]
