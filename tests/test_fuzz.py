"""Seeded random fuzzing of every parser of the wire core (stdlib `random` only).

Valid messages (the real capture's requests and responses, and hand-made ones that use
every framing feature) are mutated and truncated, then fed in random pieces. For each:

* only events (or `ParseError` events) come out: no exception of any kind;
* every feed returns (a watchdog dumps the stacks and fails the run if one hangs);
* memory stays bounded by the limits: `buffered` never exceeds the head limit (or the
  chunk-size line limit) whatever was fed;
* nothing follows a `ParseError`; bodies never exceed `max_body`;
* the same bytes fed whole, byte by byte and in random pieces give the same normalised
  events (split invariance).

The seed is fixed so that a failure is reproducible; set FUZZ_SEED to explore others.
"""
from __future__ import annotations

import asyncio
import faulthandler
import os
import random
import sys

import pytest

from ide_protocol import rpc
from ide_protocol.wire import jsonrpc
from ide_protocol.wire.http11 import (
    MAX_CHUNK_LINE,
    ConnectionClosed,
    Data,
    EndOfMessage,
    ParseError,
    Request,
    RequestParser,
    Response,
    ResponseParser,
    encode_chunk,
    write_request,
    write_response,
    write_response_head,
    LAST_CHUNK,
)
from ide_protocol.wire.ndjson import LineSplitter, LineTooLong, encode
from ide_protocol.wire.sse import SSEDecoder, SSEEvent, encode_event, encode_message
from splitting import normalise

SEED = int(os.environ.get("FUZZ_SEED", "20261130"))
PER_KIND = 5000  # messages per parser kind; 4 kinds + JSON-RPC => well over 20 000


@pytest.fixture(autouse=True)
def watchdog():
    # Not a timing assertion: a guard that turns an infinite loop into a failure with a
    # traceback instead of a hung CI job.
    faulthandler.dump_traceback_later(300, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _capture_messages():
    sys.path.insert(0, os.path.dirname(__file__))
    import test_capture as cap

    requests, responses = [], []
    for conn in cap.EXPECTED_REQUESTS:
        requests.extend(cap.message_blocks(conn, "C>S"))
        responses.extend(cap.message_blocks(conn, "S>C"))
    return requests, responses


CAPTURE_REQUESTS, CAPTURE_RESPONSES = _capture_messages()

REQUEST_SEEDS = CAPTURE_REQUESTS + [
    write_request("POST", "/mcp", [("Host", "localhost")], b'{"jsonrpc":"2.0","id":1,"method":"x"}'),
    write_request("POST", "/mcp", [("Host", "h")], "\u00e9\u65e5".encode("utf-8") * 20, chunked=True, chunk_size=7),
    write_request("GET", "/mcp", [("Host", "h"), ("Connection", "close")]),
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n"
    b"0\r\nX-Trailer: t\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
    b"DELETE /mcp HTTP/1.1\nHost: x\n\n",
    b"\r\nPOST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
]

RESPONSE_SEEDS = CAPTURE_RESPONSES + [
    write_response(200, [("Content-Type", "application/json")], b'{"jsonrpc":"2.0","id":1,"result":{}}'),
    write_response_head(200, [("Content-Type", "text/event-stream")])
    + encode_chunk(encode_message('{"jsonrpc":"2.0","method":"n"}')) + LAST_CHUNK,
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
]

SSE_SEEDS = [
    encode_message('{"jsonrpc":"2.0","id":1,"result":{}}') * 2,
    encode_event("a\nb\r\nc", event="e", id="1", retry=5, comment="x\ny"),
    b"\xef\xbb\xbfdata: x\r\rdata: y\r\n\r\n: c\n\n",
    b"data: " + "\u00e9".encode("utf-8") * 30 + b"\n\n",
]

NDJSON_SEEDS = [
    encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"t": "\u2028\u00e9"}}) * 3,
    b'{"a":1}\r\n\r\n  \n{"b":2}',
    b"x" * 150 + b"\n" + b"y" * 50 + b"\r\n",
]

JSON_SEEDS = [
    b'{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"open_diff","arguments":{"t":"a\\nb"}}}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"{\\"x\\":1.5e3}"}]}}',
    b'{"jsonrpc":"2.0","id":5,"error":{"code":-32001,"message":"Session not found","data":[null,true]}}',
    b'[{"jsonrpc":"2.0","method":"a"},1,"\\ud800",-0.0,1e308]',
]

INTERESTING = [b"\r", b"\n", b"\r\n", b":", b" ", b"\t", b"0", b"f", b"F", b";", b"\x00", b"\xff",
               b"\xef\xbb\xbf", b"-", b"9" * 20, b"HTTP/1.1 ", b"chunked", b"Content-Length: 5\r\n",
               b"Transfer-Encoding: chunked\r\n", b"\r\n\r\n", b"0\r\n\r\n", b"data:", b"\"", b"{", b"}",
               b"[", b"]", b"\\u", b"1e999", b"NaN", b"\\ud800", b"null", b",", b"id", b"retry: 1\n"]


def mutate(rng: random.Random, data: bytes, seeds) -> bytes:
    data = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.random()
        pos = rng.randint(0, len(data)) if data else 0
        if op < 0.2 and data:  # flip a byte
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
        elif op < 0.4:  # insert something interesting
            data[pos:pos] = rng.choice(INTERESTING)
        elif op < 0.55 and data:  # delete a range
            del data[pos:pos + rng.randint(1, 16)]
        elif op < 0.65 and data:  # duplicate a range
            end = min(len(data), pos + rng.randint(1, 64))
            data[pos:pos] = data[pos:end]
        elif op < 0.75:  # splice with another seed
            other = rng.choice(seeds)
            cut = rng.randint(0, len(other))
            data = data[:pos] + other[cut:]
        elif op < 0.85 and data:  # replace a digit run with a big or odd number
            i = rng.randrange(len(data))
            data[i:i + 1] = rng.choice((b"99999999999999999999", b"ffffffffffffffff", b"-1", b"0x10", b"1.0"))
        else:  # truncate
            data = data[:pos]
    return bytes(data)


def random_pieces(rng: random.Random, data: bytes):
    if not data:
        return [b""]
    style = rng.random()
    if style < 0.3:
        return [data]
    if style < 0.4:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(rng.sample(range(1, len(data) + 1), min(len(data), rng.randint(1, 6))))
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(data[last:cut])
        last = cut
    pieces.append(data[last:])
    return pieces


HTTP_EVENT_TYPES = (Request, Response, Data, EndOfMessage, ParseError, ConnectionClosed)


def check_http(make, rng, seeds, iterations):
    errors = 0
    for _ in range(iterations):
        data = mutate(rng, rng.choice(seeds), seeds)
        limits = rng.choice(((65536, None), (256, 512), (64, 64)))
        parser = make(*limits)
        bound = max(parser.max_head + 2, MAX_CHUNK_LINE)
        events = []
        for piece in random_pieces(rng, data):
            out = parser.feed(piece)
            assert isinstance(out, list)
            events.extend(out)
            assert parser.buffered <= bound, (data, parser.buffered)
        if rng.random() < 0.5:
            events.extend(parser.feed_eof())
            assert parser.buffered == 0
        for i, event in enumerate(events):
            assert isinstance(event, HTTP_EVENT_TYPES), event
            if isinstance(event, ParseError):
                errors += 1
                assert i == len(events) - 1, events
                assert event.status in (400, 413, 431, 501, 505)
                assert isinstance(event.message, str)
            elif isinstance(event, (Request, Response)):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in event.headers)
            elif isinstance(event, Data):
                assert type(event.data) is bytes and event.data
        if parser.max_body is not None:
            body = 0
            for event in events:
                if isinstance(event, (Request, Response)):
                    body = 0
                elif isinstance(event, Data):
                    body += len(event.data)
                    assert body <= parser.max_body
    return errors


def make_request_parser(max_head, max_body):
    return RequestParser(max_head=max_head, max_body=max_body if max_body is not None else 32 * 1024 * 1024)


def make_response_parser(max_head, max_body):
    parser = ResponseParser(max_head=max_head, max_body=max_body)
    if max_head == 256:
        parser.expect("HEAD")
    return parser


def test_fuzz_request_parser():
    rng = random.Random(SEED)
    errors = check_http(make_request_parser, rng, REQUEST_SEEDS, PER_KIND)
    assert 0 < errors < PER_KIND  # the mutations reach both good and bad paths


def test_fuzz_response_parser():
    rng = random.Random(SEED + 1)
    errors = check_http(make_response_parser, rng, RESPONSE_SEEDS, PER_KIND)
    assert 0 < errors < PER_KIND


def test_fuzz_split_invariance_exact():
    # Stronger than the sampled check above: whole vs byte-by-byte vs random pieces,
    # with feed_eof, must give identical normalised events.
    rng = random.Random(SEED + 2)
    for i in range(1500):
        request = i % 2 == 0
        seeds = REQUEST_SEEDS if request else RESPONSE_SEEDS
        data = mutate(rng, rng.choice(seeds), seeds)
        make = (lambda: RequestParser(max_head=256, max_body=512)) if request else (
            lambda: ResponseParser(max_head=256, max_body=512))
        results = []
        for pieces in ([data], random_pieces(rng, data), [data[j:j + 1] for j in range(len(data))]):
            parser = make()
            events = []
            for piece in pieces:
                events.extend(parser.feed(piece))
            events.extend(parser.feed_eof())
            results.append(normalise(events))
        assert results[0] == results[1] == results[2], data


def test_fuzz_sse_decoder():
    rng = random.Random(SEED + 3)
    dispatched = 0
    for _ in range(PER_KIND):
        data = mutate(rng, rng.choice(SSE_SEEDS), SSE_SEEDS)
        max_event = rng.choice((64 * 1024 * 1024, 40, 8))
        results = []
        for pieces in ([data], random_pieces(rng, data)):
            decoder = SSEDecoder(max_event=max_event)
            events = []
            for piece in pieces:
                out = decoder.feed(piece)
                assert isinstance(out, list)
                events.extend(out)
                assert decoder.buffered <= max_event
            for event in events:
                assert isinstance(event, SSEEvent)
                assert isinstance(event.data, str) and isinstance(event.event, str) and event.event
                assert len(event.data) <= max_event
                assert event.retry is None or (isinstance(event.retry, int) and event.retry >= 0)
                assert event.id is None or "\0" not in event.id
            results.append((events, decoder.dropped))
        assert results[0] == results[1], data
        dispatched += len(results[0][0])
    assert dispatched > 0


def test_fuzz_ndjson_splitter():
    rng = random.Random(SEED + 4)
    for _ in range(PER_KIND):
        data = mutate(rng, rng.choice(NDJSON_SEEDS), NDJSON_SEEDS)
        max_line = rng.choice((64 * 1024 * 1024, 100, 10))
        results = []
        for pieces in ([data], random_pieces(rng, data)):
            splitter = LineSplitter(max_line=max_line)
            lines = []
            for piece in pieces:
                lines.extend(splitter.feed(piece))
                assert splitter.buffered <= max_line
            lines.extend(splitter.flush())
            assert splitter.buffered == 0
            for line in lines:
                if isinstance(line, LineTooLong):
                    assert line.size > max_line
                else:
                    assert type(line) is bytes and b"\n" not in line and line.strip()
                    assert len(line) <= max_line
            results.append(lines)
        assert results[0] == results[1], data


def test_fuzz_jsonrpc_decode_and_dispatch():
    rng = random.Random(SEED + 5)
    dispatcher = rpc.Dispatcher()
    dispatcher.add("tools/call", lambda params, context: params)  # echoes whatever came in
    dispatcher.add("notifications/initialized", lambda params, context: None)
    kinds = set()

    async def main():
        for _ in range(PER_KIND):
            data = mutate(rng, rng.choice(JSON_SEEDS), JSON_SEEDS)
            msg = jsonrpc.decode_message(data)
            assert isinstance(msg, jsonrpc.Message)
            kinds.add(msg.kind)
            if isinstance(msg, jsonrpc.Invalid):
                assert msg.error.code in (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST)
            else:
                # Whatever we accepted, we can send back.
                assert jsonrpc.loads(jsonrpc.dumps(msg.raw)) == msg.raw or msg.raw != msg.raw
            # parse_message on arbitrary decoded values (not only dicts) never raises.
            try:
                value = jsonrpc.loads(data)
            except jsonrpc.JsonRpcError as exc:
                assert exc.code == jsonrpc.PARSE_ERROR
            else:
                assert isinstance(jsonrpc.parse_message(value), jsonrpc.Message)
            out = await dispatcher.dispatch(msg)
            if out is not None:
                assert jsonrpc.parse_message(jsonrpc.loads(jsonrpc.dumps(out))).kind in ("response", "error")

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert {"request", "notification", "response", "error", "invalid"} <= kinds
