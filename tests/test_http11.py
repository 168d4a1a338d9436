"""ide_protocol.wire.http11: framing, keep-alive, limits, errors, writers, round trips.

Every parser test goes through `feed_all_ways`: the input is parsed whole, one byte at
a time and cut in two at every byte boundary, and the (normalised) events must agree.
"""
from __future__ import annotations

import json

import pytest

from ide_protocol.wire import http11
from ide_protocol.wire.http11 import (
    LAST_CHUNK,
    ConnectionClosed,
    Data,
    EndOfMessage,
    Headers,
    ParseError,
    Request,
    RequestParser,
    Response,
    ResponseParser,
    encode_chunk,
    encode_chunked_body,
    write_request,
    write_response,
    write_response_head,
)
from splitting import bodies, feed_all_ways, normalise, run


def req(data: bytes, eof: bool = False, **kw):
    return feed_all_ways(lambda: RequestParser(**kw), data, finish="feed_eof" if eof else None)


def resp(data: bytes, eof: bool = False, expect=(), **kw):
    def make():
        parser = ResponseParser(**kw)
        for method in expect:
            parser.expect(method)
        return parser

    return feed_all_ways(make, data, finish="feed_eof" if eof else None)


def only_error(events):
    errors = [e for e in events if isinstance(e, ParseError)]
    assert len(errors) == 1, events
    assert events[-1] is errors[0], "nothing may follow a ParseError: %r" % events
    return errors[0]


# ---------------------------------------------------------------------------- Headers


def test_headers_case_insensitive_order_and_repeats_kept():
    h = Headers([("Accept", "a"), ("X-Thing", "1"), ("accept", "b"), ("ACCEPT", "c")])
    assert h.get("accept") == "a"
    assert h.get("ACCEPT") == "a"
    assert h.get_all("Accept") == ["a", "b", "c"]
    assert h.get("missing") is None
    assert h.get("missing", "d") == "d"
    assert "x-thing" in h and "X-THING" in h and "nope" not in h
    assert 3 not in h
    assert list(h) == [("Accept", "a"), ("X-Thing", "1"), ("accept", "b"), ("ACCEPT", "c")]
    assert len(h) == 4
    h.set("x-thing", "2")
    assert h.raw[-1] == ("x-thing", "2") and h.get_all("X-Thing") == ["2"]
    h.remove("ACCEPT")
    assert h.raw == [("x-thing", "2")]
    assert Headers({"A": 1}).raw == [("A", "1")]
    assert Headers(h) == h and Headers(h) is not h


def test_headers_tokens():
    h = Headers([("Connection", "Keep-Alive, Upgrade"), ("connection", " close ,")])
    assert h.tokens("connection") == ["keep-alive", "upgrade", "close"]


def test_parsed_headers_keep_case_order_repeats_and_trim_whitespace():
    data = (b"GET /x?q=1 HTTP/1.1\r\nHost: localhost\r\naccept: a\r\nX-Dup: 1\r\n"
            b"x-dup:2\r\nX-Empty:\r\nX-Space: \t padded value \t\r\n\r\n")
    events = req(data)
    request = events[0]
    assert request.headers.raw == [("Host", "localhost"), ("accept", "a"), ("X-Dup", "1"),
                                   ("x-dup", "2"), ("X-Empty", ""), ("X-Space", "padded value")]
    assert request.headers.get_all("X-DUP") == ["1", "2"]
    assert request.target == "/x?q=1" and request.path == "/x"
    assert events[1:] == [EndOfMessage()]


def test_header_value_latin1_and_utf8_bytes_survive():
    data = "POST / HTTP/1.1\r\nX-Name: caf\u00e9\r\nContent-Length: 0\r\n\r\n".encode("utf-8")
    (request, end) = req(data)
    # Values are decoded as latin-1, so the original bytes can always be recovered.
    assert request.headers.get("x-name").encode("latin-1").decode("utf-8") == "caf\u00e9"


# ------------------------------------------------------------------ request framing


def test_content_length_body():
    data = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
    events = req(data)
    assert events == [Request("POST", "/mcp", [("Host", "x"), ("Content-Length", "11")]),
                      Data(b"hello world"), EndOfMessage()]


def test_content_length_zero_and_bare_lf_lines():
    events = req(b"POST / HTTP/1.1\nContent-Length: 0\n\n")
    assert events == [Request("POST", "/", [("Content-Length", "0")]), EndOfMessage()]


def test_repeated_identical_content_length_is_accepted():
    events = req(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3, 3\r\n\r\nabc")
    assert bodies(events) == [b"abc"]


def test_chunked_body_with_extensions_and_trailers():
    data = (b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;name=value\r\nhello\r\n"
            b"1 ; a=\"quoted;x\"\r\n \r\n"
            b"6\r\nworld!\r\n"
            b"0;last\r\nX-Checksum: abc\r\nx-checksum: def\r\n\r\n")
    events = req(data)
    assert events[0].method == "POST"
    assert events[1] == Data(b"hello world!")
    assert events[2] == EndOfMessage([("X-Checksum", "abc"), ("x-checksum", "def")])
    assert events[2].trailers.get_all("X-CHECKSUM") == ["abc", "def"]
    assert len(events) == 3


@pytest.mark.parametrize("size_line", [b"1a", b"1A", b"01A", b"0000001a"])
def test_chunk_size_upper_and_lower_hex(size_line):
    body = bytes(range(26))
    data = (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size_line + b"\r\n"
            + body + b"\r\n0\r\n\r\n")
    assert bodies(req(data)) == [body]


def test_chunked_data_never_spans_two_chunks():
    parser = RequestParser()
    events = parser.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n")
    assert [e.data for e in events if isinstance(e, Data)] == [b"abc", b"def"]


def test_transfer_encoding_is_case_insensitive():
    data = (b"POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    assert bodies(req(data)) == [b"ok"]


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD", "OPTIONS"])
def test_no_body_without_framing_headers(method):
    data = ("%s /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n" % method).encode()
    events = req(data)
    assert events == [Request(method, "/mcp", [("Host", "localhost")]), EndOfMessage()]


def test_pipelined_requests_in_one_buffer():
    data = (b"GET /a HTTP/1.1\r\n\r\n"
            b"POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
            b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            b"DELETE /d HTTP/1.1\r\n\r\n")
    events = req(data, eof=True)
    assert [e.target for e in events if isinstance(e, Request)] == ["/a", "/b", "/c", "/d"]
    assert bodies(events) == [b"", b"hi", b"abc", b""]
    assert isinstance(events[-1], ConnectionClosed)


def test_keep_alive_across_feeds_and_state():
    parser = RequestParser()
    assert parser.idle
    e1 = parser.feed(b"POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx")
    assert [type(e) for e in e1] == [Request, Data, EndOfMessage]
    assert e1[0].keep_alive and parser.idle and parser.state == "HEAD"
    e2 = parser.feed(b"GET /again HTTP/1.1\r\n\r\n")
    assert e2 == [Request("GET", "/again"), EndOfMessage()]
    assert parser.feed_eof() == [ConnectionClosed()]


def test_empty_lines_before_a_request_are_tolerated():
    events = req(b"\r\n\r\n\nGET / HTTP/1.1\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\n")
    assert [e.target for e in events if isinstance(e, Request)] == ["/", "/2"]


def test_connection_close_stops_reading():
    data = (b"POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
            b"GET /ignored HTTP/1.1\r\n\r\n")
    events = req(data, eof=True)
    assert not events[0].keep_alive
    assert events[1:] == [Data(b"ok"), EndOfMessage(), ConnectionClosed()]
    parser = RequestParser()
    parser.feed(data)
    assert parser.state == "CLOSED"
    assert parser.feed(b"GET / HTTP/1.1\r\n\r\n") == []


def test_http10_defaults_to_close_and_keep_alive_opt_in():
    events = req(b"GET / HTTP/1.0\r\n\r\nGET /more HTTP/1.0\r\n\r\n", eof=True)
    assert events == [Request("GET", "/", http_version="1.0"), EndOfMessage(), ConnectionClosed()]
    assert not events[0].keep_alive
    events = req(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /more HTTP/1.0\r\n\r\n")
    assert [e.target for e in events if isinstance(e, Request)] == ["/", "/more"]
    assert events[0].keep_alive and events[0].http_version == "1.0"


def test_feed_eof_between_and_inside_messages():
    assert req(b"", eof=True) == [ConnectionClosed()]
    events = req(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", eof=True)
    assert isinstance(events[-1], ParseError) and events[-1].status == 400
    events = req(b"GET / HT", eof=True)
    assert only_error(events).status == 400
    parser = RequestParser()
    parser.feed(b"GET / HT")
    assert not parser.idle and parser.buffered == 8


# ------------------------------------------------------------------- request errors


def test_431_header_block_too_large():
    data = b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"
    assert only_error(req(data)).status == 431
    # ...and without ever completing the block: the limit, not the terminator, decides.
    parser = RequestParser(max_head=1024)
    events = []
    for _ in range(200):
        events += parser.feed(b"X-Header: 12345678901234567890\r\n")
        assert parser.buffered <= 1024 + 2
    assert only_error(events).status == 431


def test_request_line_too_long_is_431():
    assert only_error(req(b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\n\r\n", max_head=1024)).status == 431


@pytest.mark.parametrize("terminator", [b"\r\n\r\n", b"\n\n", b"\n\r\n"])
def test_head_limit_is_exact_whatever_the_split(terminator):
    # A head of exactly max_head bytes (up to the end of its last line) passes, one byte
    # more fails: the same verdict whole and byte by byte (the bug here was a 431 when
    # the terminator trickled in one byte at a time).
    head = b"GET / HTTP/1.1\r\nX: " + b"a" * 40
    last = head + b"\r" if terminator.startswith(b"\r") else head
    limit = len(last)
    events = req(head + terminator, max_head=limit)
    assert isinstance(events[0], Request), events
    events = req(head + terminator, max_head=limit - 1)
    assert only_error(events).status == 431


def test_413_content_length_over_max_body():
    data = b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"
    assert only_error(req(data, max_body=100)).status == 413
    assert bodies(req(data + b"x" * 101, max_body=101)) == [b"x" * 101]


def test_413_chunked_total_over_max_body():
    data = (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"32\r\n" + b"a" * 50 + b"\r\n33\r\n" + b"b" * 51 + b"\r\n0\r\n\r\n")
    events = req(data, max_body=100)
    assert only_error(events).status == 413
    assert normalise(events)[1] == Data(b"a" * 50)  # the first chunk fits and was delivered
    assert bodies(req(data, max_body=101)) == [b"a" * 50 + b"b" * 51]


def test_default_max_body_is_at_least_32_mib():
    assert RequestParser().max_body >= 32 * 1024 * 1024
    parser = RequestParser()
    events = parser.feed(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (32 * 1024 * 1024))
    assert [type(e) for e in events] == [Request]


@pytest.mark.parametrize("data, status", [
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / HTTP/0.9\r\n\r\n", 505),
    (b"GET / HTTP/1.2\r\n\r\n", 505),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: \xd9\xa3\r\n\r\n", 400),  # Arabic-Indic 3
    (b"GET  / HTTP/1.1\r\n\r\n", 400),
    (b"GET /\r\n\r\n", 400),
    (b"G(T / HTTP/1.1\r\n\r\n", 400),
    (b"GET /a\x00b HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n: empty name\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\rX", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nBad Trailer\r\n\r\n", 400),
])
def test_malformed_requests(data, status):
    events = req(data)
    assert only_error(events).status == status
    assert isinstance(only_error(events).message, str) and only_error(events).message


def test_chunk_size_line_too_long_is_400():
    data = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"x" * 5000 + b"\r\n"
    assert only_error(req(data)).status == 400


def test_16_hex_digit_chunk_size_is_413_not_a_crash():
    data = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"
    assert only_error(req(data)).status == 413


def test_parser_is_dead_after_an_error():
    parser = RequestParser()
    events = parser.feed(b"GET / HTTP/9.9\r\n\r\n")
    assert events == [ParseError(505, events[0].message)]
    assert parser.state == "DEAD"
    assert parser.feed(b"GET / HTTP/1.1\r\n\r\n") == []
    assert parser.feed_eof() == []
    assert parser.buffered == 0


def test_error_after_good_messages_keeps_their_events():
    events = req(b"GET /ok HTTP/1.1\r\n\r\nGET /bad HTTP/1.1\r\nX\r\n\r\nGET /never HTTP/1.1\r\n\r\n")
    assert events[:2] == [Request("GET", "/ok"), EndOfMessage()]
    assert only_error(events).status == 400


# ------------------------------------------------------------------ response parsing


def test_response_content_length_and_keep_alive():
    data = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    events = resp(data, eof=True)
    assert events[0] == Response(200, "OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    assert events[3] == Response(404, "Not Found", [("Content-Length", "0")])
    assert bodies(events) == [b"{}", b""]
    assert events[-1] == ConnectionClosed()


def test_response_read_until_close():
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this until the end"
    events = resp(data, eof=True)
    assert normalise(events)[1:] == [Data(b"all of this until the end"), EndOfMessage()]
    # Without EOF the message is never complete, but the data is delivered as it comes.
    parser = ResponseParser()
    assert [type(e) for e in parser.feed(data[:60])] == [Response, Data]
    assert parser.feed(b" and more") == [Data(b" and more")]
    assert parser.feed_eof() == [EndOfMessage()]
    assert parser.feed(b"late") == []


def test_response_until_close_honours_max_body():
    data = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 20
    events = resp(data, eof=True, max_body=10)
    assert normalise(events)[1] == Data(b"x" * 10)
    assert only_error(events).status == 413
    assert bodies(resp(data, eof=True, max_body=20)) == [b"x" * 20]


def test_response_reason_phrase_optional_and_free_text():
    events = resp(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\nHTTP/1.1 500 Oh: no, really\r\nContent-Length: 0\r\n\r\n")
    assert [(e.status, e.reason) for e in events if isinstance(e, Response)] == [(200, ""), (500, "Oh: no, really")]


def test_endless_chunked_stream_delivered_chunk_by_chunk():
    parser = ResponseParser()
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    assert [type(e) for e in parser.feed(head)] == [Response]
    for i in range(50):
        event = b"event: message\ndata: {\"n\":%d}\n\n" % i
        assert parser.feed(encode_chunk(event)) == [Data(event)]
    # Half a chunk gives half its data at once, not after the rest arrives.
    chunk = encode_chunk(b"0123456789")
    assert parser.feed(chunk[:7]) == [Data(b"0123")]
    assert parser.feed(chunk[7:]) == [Data(b"456789")]
    assert parser.feed(LAST_CHUNK) == [EndOfMessage()]
    assert parser.idle


def test_endless_stream_all_ways():
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(encode_chunk(b"event: message\ndata: %d\n\n" % i) for i in range(20))
    events = resp(head + body)
    assert normalise(events)[1] == Data(b"".join(b"event: message\ndata: %d\n\n" % i for i in range(20)))
    assert not any(isinstance(e, EndOfMessage) for e in events)


@pytest.mark.parametrize("status", [204, 304])
def test_204_and_304_have_no_body(status):
    data = b"HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz" % status
    events = resp(data)
    assert [type(e) for e in events] == [Response, EndOfMessage, Response, Data, EndOfMessage]
    assert bodies(events) == [b"", b"z"]


def test_head_response_has_no_body():
    data = (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
    events = resp(data, expect=["HEAD", "GET"])
    assert bodies(events) == [b"", b"abc"]
    # Without expect("HEAD") the same bytes mean a 100-byte body.
    assert [type(e) for e in resp(data)] == [Response, Data]


def test_interim_1xx_then_final_response():
    data = (b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    events = resp(data, expect=["HEAD", "POST"])  # HEAD answered: 1xx must not consume it
    events = resp(data, expect=["POST"])
    assert [(type(e).__name__, getattr(e, "status", None)) for e in events] == [
        ("Response", 100), ("EndOfMessage", None), ("Response", 200), ("Data", None), ("EndOfMessage", None)]


def test_http10_response_closes_after_it():
    data = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.0 200 OK\r\n\r\n"
    events = resp(data, eof=True)
    assert not events[0].keep_alive
    assert events[1:] == [Data(b"ok"), EndOfMessage(), ConnectionClosed()]


@pytest.mark.parametrize("data, status", [
    (b"HTTP/2 200 OK\r\n\r\n", 400),
    (b"HTTP/2.0 200 OK\r\n\r\n", 505),
    (b"HTTP/1.1 2000 OK\r\n\r\n", 400),
    (b"HTTP/1.1 OK\r\n\r\n", 400),
    (b"ICY 200 OK\r\n\r\n", 400),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: br\r\n\r\n", 501),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400),
])
def test_malformed_responses(data, status):
    assert only_error(resp(data)).status == status


def test_response_closed_mid_chunk_is_an_error():
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    events = resp(data, eof=True)
    assert normalise(events)[1] == Data(b"ab")
    assert only_error(events).status == 400


# -------------------------------------------------------------------------- writers


def test_write_request_fixed_and_get():
    assert write_request("GET", "/mcp", [("Host", "localhost")]) == b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n"
    out = write_request("POST", "/mcp", {"Host": "x"}, b"{}")
    assert out == b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def test_write_request_chunked_like_the_cli():
    out = write_request("POST", "/mcp", [("Host", "localhost")], b"0123456789", chunked=True, chunk_size=4)
    assert out == (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"4\r\n0123\r\n4\r\n4567\r\n2\r\n89\r\n0\r\n\r\n")
    assert write_request("POST", "/", None, b"", chunked=True).endswith(b"\r\n\r\n0\r\n\r\n")


def test_write_response_and_streaming_head():
    assert write_response(202, [("Content-Type", "text/plain")]) == (
        b"HTTP/1.1 202 Accepted\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n")
    assert write_response(418, None, b"x", reason="Teapot") == b"HTTP/1.1 418 Teapot\r\nContent-Length: 1\r\n\r\nx"
    assert write_response(599) == b"HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n"
    head = write_response_head(200, [("Content-Type", "text/event-stream")])
    assert head == b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_write_response_no_content_length_on_204_and_1xx():
    assert write_response(204) == b"HTTP/1.1 204 No Content\r\n\r\n"
    assert write_response(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    with pytest.raises(ValueError):
        write_response(204, None, b"body")


def test_writer_keeps_caller_framing_header():
    out = write_response(200, [("content-length", "2")], b"ok")
    assert out.count(b"ength") == 1


def test_encode_chunk():
    assert encode_chunk(b"") == b""
    assert encode_chunk(b"a" * 255) == b"ff\r\n" + b"a" * 255 + b"\r\n"
    assert encode_chunk(bytearray(b"ab")) == b"2\r\nab\r\n"
    assert encode_chunked_body(b"") == LAST_CHUNK == b"0\r\n\r\n"


@pytest.mark.parametrize("call", [
    lambda: write_request("GET", "/a b", None),
    lambda: write_request("GET", "/\r\nX-Injected: 1", None),
    lambda: write_request("GET", "", None),
    lambda: write_request("G T", "/", None),
    lambda: write_request("GET", "/", None, http_version="2"),
    lambda: write_request("GET", "/", [("X", "a\r\nInjected: 1")]),
    lambda: write_request("GET", "/", [("Bad Name", "1")]),
    lambda: write_response(200, None, b"", reason="OK\r\nX-Injected: 1"),
    lambda: write_response(200, [("X", "\n")]),
    lambda: write_response(99),
    lambda: write_response(True),
    lambda: write_response_head(200, [("X:Y", "1")]),
])
def test_writers_refuse_what_would_corrupt_the_stream(call):
    with pytest.raises(ValueError):
        call()


# ----------------------------------------------------------------------- round trips

NON_ASCII_JSON = json.dumps({"jsonrpc": "2.0", "id": "\u00e9\u00e8", "method": "tools/call",
                             "params": {"text": "\u65e5\u672c\u8a9e \U0001F600 \u2028 caf\u00e9"}},
                            ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("body", [b"", b"{}", NON_ASCII_JSON, bytes(range(256)) * 4],
                         ids=["empty", "json", "non-ascii-json", "binary"])
@pytest.mark.parametrize("chunked", [False, True])
def test_request_round_trip(body, chunked):
    headers = [("X-Copilot-Session-Id", "s"), ("accept", "application/json, text/event-stream"),
               ("content-type", "application/json"), ("Host", "localhost")]
    wire = write_request("POST", "/mcp", headers, body, chunked=chunked, chunk_size=100)
    events = req(wire + wire)
    requests = [e for e in events if isinstance(e, Request)]
    assert len(requests) == 2
    framing = ("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(len(body)))
    assert requests[0] == Request("POST", "/mcp", headers + [framing])
    assert bodies(events) == [body, body]


@pytest.mark.parametrize("body", [b"", NON_ASCII_JSON, b"z" * 3000], ids=["empty", "non-ascii-json", "3000"])
@pytest.mark.parametrize("chunked", [False, True])
def test_response_round_trip(body, chunked):
    headers = [("Content-Type", "text/event-stream"), ("mcp-session-id", "abc")]
    if chunked:
        wire = write_response_head(200, headers)
        for i in range(0, len(body), 1000):
            wire += encode_chunk(body[i:i + 1000])
        wire += LAST_CHUNK
        framing = ("Transfer-Encoding", "chunked")
    else:
        wire = write_response(200, headers, body)
        framing = ("Content-Length", str(len(body)))
    events = resp(wire)
    assert events[0] == Response(200, "OK", headers + [framing])
    assert bodies(events) == [body]
    assert isinstance(events[-1], EndOfMessage)


TEN_MB = 10 * 1000 * 1000


@pytest.mark.parametrize("chunked", [False, True])
def test_ten_megabyte_round_trip(chunked):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"new_file_contents": "\u00e9x" * (TEN_MB // 3)}},
                      ensure_ascii=False).encode("utf-8")
    assert len(body) > TEN_MB
    wire = write_request("POST", "/mcp", [("Host", "localhost")], body, chunked=chunked, chunk_size=65536)
    # Whole, in 64 KiB pieces, and in uneven pieces.
    for step in (len(wire), 65536, 99991):
        parser = RequestParser()
        events = run(parser, [wire[i:i + step] for i in range(0, len(wire), step)])
        assert bodies(events) == [body]
        assert parser.idle
    response = write_response(200, [("Content-Type", "application/json")], body)
    assert bodies(ResponseParser().feed(response)) == [body]


def test_parser_never_emits_bytearray_or_memoryview_data():
    parser = RequestParser()
    events = parser.feed(memoryview(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"))
    assert [type(e.data) for e in events if isinstance(e, Data)] == [bytes]


def test_event_reprs_and_equality():
    assert "bytes" in repr(Data(b"x" * 100))
    assert Data(b"a") != Request("GET", "/")
    assert EndOfMessage() == EndOfMessage(Headers())
    assert http11.REASONS[413] and http11.REASONS[431]


@pytest.mark.parametrize("framing", [
    b"5\nhello\r\n0\r\n\r\n",        # a bare LF ends the chunk-size line
    b"5\r\nhello\n0\r\n\r\n",        # a bare LF after the chunk data
    b"6\r\nhello\r\n0\r\n\r\n",      # a size one too large: the data would swallow the CR
    b"5\r\nhello\r\n0\n\r\n",        # a bare LF ends the last chunk's line
    b" 5\r\nhello\r\n0\r\n\r\n",     # whitespace before the size
    b"5;x\nhello\r\n0\r\n\r\n",      # a bare LF after an extension
], ids=["lf-after-size", "lf-after-data", "size-plus-one", "lf-after-last-chunk", "space-before-size",
        "lf-after-extension"])
def test_chunk_framing_takes_crlf_only(framing: bytes) -> None:
    # RFC 9112 §7.1: chunk-size [ chunk-ext ] CRLF, chunk-data CRLF. However split.
    events = req(b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + framing)
    assert isinstance(events[-1], ParseError) and events[-1].status == 400, events
    assert not any(isinstance(e, EndOfMessage) for e in events)


def test_the_parser_decides_framing_for_the_layers_above():
    # A request says whether a body follows its head; a response whether it is chunked.
    events = RequestParser().feed(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
                                  b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                                  b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"
                                  b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
    requests = [e for e in events if isinstance(e, Request)]
    assert [r.body_follows for r in requests] == [False, True, True, False]
    assert [r.keep_alive for r in requests] == [True, True, True, False]
    assert Request("POST", "/", [("Transfer-Encoding", "chunked")]).body_follows  # made by hand: the same rule
    chunked, = [e for e in ResponseParser().feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                if isinstance(e, Response)]
    plain, = [e for e in ResponseParser().feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
              if isinstance(e, Response)]
    assert chunked.chunked and not plain.chunked


def test_the_writers_spell_the_connection_field_given_keep_alive():
    data = write_request("POST", "/mcp", [("Host", "localhost")], b"{}", chunked=True, keep_alive=True)
    assert data.startswith(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
    assert b"\r\nConnection: close\r\n" in write_response(200, [], b"x", keep_alive=False)
    assert b"Connection" not in write_response(200, [], b"x")  # (not asked: not written)
    for writer in (lambda: write_response(200, [("connection", "x")], b"", keep_alive=True),
                   lambda: write_response_head(200, (("Connection", "close"),), keep_alive=False),
                   lambda: write_request("GET", "/", [("Connection", "close")], keep_alive=True)):
        with pytest.raises(ValueError):
            writer()


def test_one_size_limit_for_heads_and_trailers_and_a_field_count():
    trailer = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: " + b"a" * 300 + b"\r\n\r\n"
    error, = [e for e in RequestParser(max_head=256).feed(trailer) if isinstance(e, ParseError)]
    assert error.status == 431 and "trailer section larger than 256" in error.message
    many = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(http11.MAX_FIELDS + 1)) + b"\r\n"
    error, = [e for e in RequestParser().feed(many) if isinstance(e, ParseError)]
    assert error.status == 431
    fine = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(http11.MAX_FIELDS)) + b"\r\n"
    assert [type(e) for e in RequestParser().feed(fine)] == [Request, EndOfMessage]
    assert http11.DEFAULT_MAX_BODY == RequestParser().max_body == 64 * 1024 * 1024  # the one default
