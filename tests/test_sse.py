"""ide_protocol.wire.sse: the encoder, and the incremental decoder fed every way it can be split."""
from __future__ import annotations

import pytest

from ide_protocol.wire import jsonrpc
from ide_protocol.wire.sse import SSEDecoder, SSEEvent, encode_event, encode_message
from splitting import feed_all_ways


def dec(data: bytes, **kw):
    return feed_all_ways(lambda: SSEDecoder(**kw), data)


# --------------------------------------------------------------------------- encoder


def test_encode_message_is_the_cli_shape():
    assert encode_message('{"a":1}') == b'event: message\ndata: {"a":1}\n\n'
    assert encode_message("\u00e9") == "event: message\ndata: \u00e9\n\n".encode("utf-8")


def test_encode_event_all_fields():
    out = encode_event("x", event="update", id="7", retry=1500, comment="hello")
    assert out == b": hello\nevent: update\nid: 7\nretry: 1500\ndata: x\n\n"
    assert encode_event(comment="") == b":\n\n"
    assert encode_event("") == b"data\n\n"


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "a\rb", "a\n\nb", "\n", "trailing\n", "x"])
def test_multi_line_data_round_trip(text):
    wire = encode_event(text)
    assert wire.count(b"data") == len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    (event,) = dec(wire)
    assert event.data == text.replace("\r\n", "\n").replace("\r", "\n")


def test_multi_line_comment():
    assert encode_event("d", comment="one\ntwo") == b": one\n: two\ndata: d\n\n"
    assert dec(encode_event("d", comment="one\ntwo")) == [SSEEvent("message", "d")]


@pytest.mark.parametrize("kwargs", [
    {"event": "a\nb"}, {"id": "1\r2"}, {"id": "a\0b"}, {"retry": -1}, {"retry": 1.5}, {"retry": True},
])
def test_encoder_refuses_what_cannot_be_encoded(kwargs):
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)


def test_encoder_round_trip_every_field():
    wire = encode_event("line one\nline two \u2028 \U0001F600", event="e", id="id-1", retry=10, comment="c")
    assert dec(wire) == [SSEEvent("e", "line one\nline two \u2028 \U0001F600", "id-1", 10)]


# --------------------------------------------------------------------------- decoder


def test_decoder_basic_and_default_event_type():
    assert dec(b"data: hello\n\n") == [SSEEvent("message", "hello")]
    assert dec(b"event: ping\ndata: x\n\n") == [SSEEvent("ping", "x")]
    assert dec(b"event:\ndata: x\n\n") == [SSEEvent("message", "x")]


def test_decoder_multi_line_data():
    assert dec(b"data: a\ndata:b\ndata:  c\ndata\ndata:\n\n") == [SSEEvent("message", "a\nb\n c\n\n")]


@pytest.mark.parametrize("nl", [b"\n", b"\r", b"\r\n"])
def test_decoder_every_line_ending(nl):
    wire = b"event: e" + nl + b"data: 1" + nl + b"data: 2" + nl + nl + b"data: 3" + nl + nl
    assert dec(wire) == [SSEEvent("e", "1\n2"), SSEEvent("message", "3")]


def test_decoder_mixed_line_endings():
    wire = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r"
    assert dec(wire) == [SSEEvent("message", "a\nb\nc"), SSEEvent("message", "d")]


def test_cr_then_other_byte_dispatches_whatever_the_split():
    # A CR at the end of a piece may be half a CRLF; as soon as the next byte is not LF,
    # the line (here an empty one: dispatch) is complete. Bug found: when that next byte
    # came alone in a feed, dispatch waited for a later newline.
    assert dec(b"data: x\n\rZ") == [SSEEvent("message", "x")]
    # And a CR ends its line at once (no waiting for the next byte), a LF after it in the
    # next piece is then the rest of a CRLF, not an empty line.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert decoder.feed(b"\r") == [SSEEvent("message", "x")]
    assert decoder.feed(b"\ndata: y\r") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("message", "y")]


def test_decoder_comments_ignored():
    assert dec(b": keep-alive\n:\ndata: x\n: in the middle\n\n: trailing\n\n") == [SSEEvent("message", "x")]
    assert dec(b": only a comment\n\n") == []


def test_decoder_retry():
    assert dec(b"retry: 3000\ndata: x\n\n") == [SSEEvent("message", "x", retry=3000)]
    assert dec(b"retry: 3s\ndata: x\n\n") == [SSEEvent("message", "x")]
    assert dec(b"retry:\ndata: x\n\n") == [SSEEvent("message", "x")]
    # Only ASCII digits: U+00B2 (superscript two) and Arabic-Indic digits pass
    # str.isdigit(); the bug was a ValueError out of feed().
    assert dec("retry: \u00b2\ndata: x\n\n".encode("utf-8")) == [SSEEvent("message", "x")]
    assert dec("retry: \u0661\u0662\ndata: x\n\n".encode("utf-8")) == [SSEEvent("message", "x")]


def test_decoder_id_and_last_event_id():
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 1\ndata: a\n\n") == [SSEEvent("message", "a", "1")]
    assert decoder.last_event_id == "1"
    assert decoder.feed(b"id: a\0b\ndata: b\n\n") == [SSEEvent("message", "b")]  # NUL: ignored
    assert decoder.last_event_id == "1"
    assert decoder.feed(b"id\n\n") == []  # an id without data still sets the last id
    assert decoder.last_event_id == ""
    assert dec(b"id: 5\ndata: x\n\n") == [SSEEvent("message", "x", "5")]


def test_decoder_event_without_data_is_not_dispatched():
    assert dec(b"event: nothing\n\nevent: e\ndata\n\n") == [SSEEvent("e", "")]


def test_decoder_field_without_colon_and_unknown_fields():
    assert dec(b"data\nfoo: bar\nunknown\n\n") == [SSEEvent("message", "")]
    assert dec(b"DATA: x\n\ndata: y\n\n") == [SSEEvent("message", "y")]


def test_decoder_bom_only_at_start():
    assert dec(b"\xef\xbb\xbfdata: x\n\n") == [SSEEvent("message", "x")]
    # A second BOM is not stripped: the line is then an unknown field.
    assert dec(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n") == [SSEEvent("message", "y")]
    assert dec(b"data: a\n\n\xef\xbb\xbfdata: x\n\n") == [SSEEvent("message", "a")]
    assert dec(b"\xef\xbb") == []


def test_decoder_utf8_split_inside_characters():
    text = "\u65e5\u672c\u8a9e \U0001F600 caf\u00e9"
    assert dec(("data: %s\n\n" % text).encode("utf-8")) == [SSEEvent("message", text)]


def test_decoder_incomplete_event_waits():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("message", "x")]


def test_decoder_json_rpc_messages_from_the_capture_shape():
    wire = b"".join(encode_message(jsonrpc.dumps_str(jsonrpc.notification("n", {"i": i}))) for i in range(5))
    events = dec(wire)
    assert [jsonrpc.decode_message(e.data).params["i"] for e in events] == list(range(5))


def test_long_line_fed_in_small_pieces():
    decoder = SSEDecoder()
    payload = b"x" * 200000
    out = decoder.feed(b"data: ")
    for i in range(0, len(payload), 100):
        out += decoder.feed(payload[i:i + 100])
    out += decoder.feed(b"\n\n")
    assert out == [SSEEvent("message", "x" * 200000)]


# ----------------------------------------------------------------------- max_event


def test_over_long_line_dropped_and_its_tail_not_parsed():
    # Bug found: the decoder dropped the first max_event bytes of a long line and then
    # parsed its tail as a new line, so attacker-controlled bytes inside a data line
    # became a field of their own.
    wire = b"data: " + b"A" * 30 + b"\ndata: injected\n\ndata: ok\n\n"
    events = dec(b"data: " + b"A" * 30 + b"data: injected\n\ndata: ok\n\n", max_event=20)
    assert events == [SSEEvent("message", "ok")]
    events = dec(wire, max_event=20)
    assert events == [SSEEvent("message", "ok")]


def test_over_long_event_dropped_entirely():
    # Bug found: after an over-long event was dropped, its remaining data lines were
    # collected again and dispatched as a truncated event.
    wire = b"data: 0123456789\ndata: 0123456789\ndata: tail\n\ndata: next\n\n"
    assert dec(wire, max_event=15) == [SSEEvent("message", "next")]
    decoder = SSEDecoder(max_event=15)
    assert decoder.feed(wire) == [SSEEvent("message", "next")]
    assert decoder.dropped == 1


def test_dropped_count_independent_of_split():
    wire = b": " + b"c" * 50 + b"\r\ndata: x\r\n\r\ndata: " + b"d" * 50 + b"\r\rdata: y\r\r"
    for pieces in ([wire], [wire[i:i + 1] for i in range(len(wire))], [wire[:33], wire[33:]]):
        decoder = SSEDecoder(max_event=20)
        out = []
        for piece in pieces:
            out += decoder.feed(piece)
        assert out == [SSEEvent("message", "y")]
        assert decoder.dropped == 2
        assert decoder.buffered <= 20


def test_line_exactly_at_limit_passes():
    line = b"data: " + b"z" * 14  # 20 bytes
    assert dec(line + b"\r\n\r\n", max_event=20) == [SSEEvent("message", "z" * 14)]
    assert dec(line + b"z\r\n\r\n", max_event=20) == []


def test_an_event_of_many_short_lines_costs_memory_in_proportion_to_its_data():
    """The limit counts the data of an event, and now the decoder's memory follows it:
    each `data:` line used to be kept as a Python string of its own, so an event of
    short lines just under a 256 KiB limit held ~5 MiB (4 MiB: ~97 MiB). The decoder's
    own allocations are measured (tracemalloc), fed as the client feeds it."""
    import tracemalloc
    limit = 256 * 1024
    line = b"data:ab\n"                 # 8 bytes on the wire, 3 counted towards the limit
    count = limit // 3 - 10             # just under the limit: the event is dispatched
    piece = line * (64 * 1024 // len(line))
    per_piece = len(piece) // len(line)
    decoder = SSEDecoder(max_event=limit)
    tracemalloc.start()
    try:
        fed = 0
        while fed < count:
            n = min(per_piece, count - fed)
            assert decoder.feed(piece[:n * len(line)]) == []
            fed += n
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * limit, peak
    (event,) = decoder.feed(b"\n")
    assert event.data == "\n".join(["ab"] * count) and decoder.dropped == 0


@pytest.mark.parametrize("values", [
    [b"\xe6\x97", b"\xa5x"],            # a character cut in two by a line end: two U+FFFDs, not one
    [b"\xf0\x9f\x98", b"", b"\x80\x80", b"caf\xc3\xa9 \xff"],
    [b"\xed\xa0\x80", b"ok"],           # an encoded surrogate: replaced, never a lone surrogate
])
def test_invalid_utf8_in_data_lines_is_replaced_line_by_line(values):
    """Each line is decoded on its own (WHATWG: the stream is decoded before it is cut
    into lines, and a line end never belongs to a character), whatever the buffer."""
    wire = b"".join(b"data:" + v + b"\n" for v in values) + b"\n"
    expected = "\n".join(v.decode("utf-8", "replace") for v in values)
    assert dec(wire) == [SSEEvent("message", expected)]
