"""ide_protocol.wire.ndjson: the line splitter (fed every way it can be split) and the encoder."""
from __future__ import annotations

import json

from ide_protocol.wire import jsonrpc
from ide_protocol.wire.ndjson import DEFAULT_MAX_LINE, LineSplitter, LineTooLong, encode
from splitting import feed_all_ways, run


def split(data: bytes, **kw):
    return feed_all_ways(lambda: LineSplitter(**kw), data, finish="flush")


def test_lines_lf_and_crlf():
    assert split(b'{"a":1}\n{"b":2}\r\n{"c":3}\n') == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_blank_lines_dropped():
    assert split(b"\n\r\n  \n\t\r\n1\n\n\n2\n") == [b"1", b"2"]


def test_blank_lines_kept_as_empty_when_asked():
    """For a reader that numbers lines (the bridge): each blank line counts, and an
    over-long line is one item, however it was fed."""
    data = b"a\n\n \r\nb\n" + b"x" * 20 + b"\nc\n"
    assert feed_all_ways(lambda: LineSplitter(10, keep_blank=True), data, finish="flush") == [
        b"a", b"", b"", b"b", LineTooLong(20), b"c"]


def test_missing_final_newline_needs_flush():
    splitter = LineSplitter()
    assert splitter.feed(b"1\n2") == [b"1"]
    assert splitter.buffered == 1
    assert splitter.flush() == [b"2"]
    assert splitter.flush() == []
    assert split(b"1\n2") == [b"1", b"2"]
    assert split(b"1\n2\r") == [b"1", b"2"]


def test_only_lf_splits_unicode_separators_kept():
    # U+2028/U+2029 and NEL arrive raw inside JSON strings (json.dumps with
    # ensure_ascii=False leaves them unescaped); str.splitlines() would cut there.
    obj = {"t": "a\u2028b\u2029c\u0085d"}
    raw = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    assert "\u2028".encode("utf-8") in raw
    (line,) = split(raw + b"\n")
    assert line == raw and json.loads(line.decode("utf-8")) == obj
    # Nor are a form feed, a vertical tab or a lone CR line breaks.
    assert split(b"a\x0cb\x0bc\rd\n") == [b"a\x0cb\x0bc\rd"]


def test_multibyte_utf8_never_cut():
    raw = ("\U0001F600\u00e9\u65e5" * 10).encode("utf-8")
    assert split(raw + b"\n" + raw) == [raw, raw]


def test_ten_megabyte_line_passes_in_small_pieces():
    assert DEFAULT_MAX_LINE >= 10 * 1000 * 1000
    obj = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "\u00e9" * (5 * 1000 * 1000 + 10)}}
    line = encode(obj)
    assert len(line) > 10 * 1000 * 1000
    for step in (len(line), 65536, 4093):
        splitter = LineSplitter()
        out = run(splitter, [line[i:i + step] for i in range(0, len(line), step)] + [b"{}\n"])
        assert len(out) == 2
        assert jsonrpc.loads(out[0]) == obj and out[1] == b"{}"
        assert splitter.buffered == 0


def test_over_long_line_skipped_and_stream_stays_in_sync():
    data = b"short\n" + b"x" * 25 + b"\nafter\n" + b"y" * 11 + b"\r\nend"
    assert split(data, max_line=10) == [b"short", LineTooLong(25), b"after", LineTooLong(12), b"end"]


def test_over_long_final_line_reported_on_flush():
    assert split(b"ok\n" + b"z" * 30, max_line=10) == [b"ok", LineTooLong(30)]


def test_memory_bounded_while_skipping():
    splitter = LineSplitter(max_line=100)
    out = []
    for _ in range(1000):
        out += splitter.feed(b"q" * 37)
        assert splitter.buffered <= 100
    out += splitter.feed(b"\n{}\n")
    assert out == [LineTooLong(37000), b"{}"]


def test_line_exactly_at_limit():
    assert split(b"a" * 10 + b"\n", max_line=10) == [b"a" * 10]
    assert split(b"a" * 11 + b"\n", max_line=10) == [LineTooLong(11)]


def test_encode_one_line_compact_utf8():
    out = encode({"text": "a\nb\u2028\u00e9", "n": 1})
    assert out == '{"text":"a\\nb\u2028\u00e9","n":1}\n'.encode("utf-8")
    assert out.count(b"\n") == 1
    assert split(out + out) == [out[:-1], out[:-1]]


def test_line_too_long_repr_and_eq():
    assert LineTooLong(5) == LineTooLong(5) != LineTooLong(6)
    assert LineTooLong(5) != b"5"
    assert "5" in repr(LineTooLong(5))
