"""The usual request, made cheaper (issue 6): what the shortcuts must keep promising.

Since 62c06d9 the server answers Copilot CLI's usual request (the head of the last
request again, byte for byte, and a body of one chunk, all in one read) without the
general parser path, and a few encoders and the JSON-RPC classifier take shortcuts
too. Each shortcut is only correct if it gives exactly what the long way gives, and if
it steps aside (consuming nothing) for anything else. This file pins that down:

* `http11.RequestParser.feed_whole`: when it answers, when it steps aside, and that the
  parser then behaves as a fresh parser fed the same bytes; `feed` taking the same
  shortcut internally; the Request it returns (fresh fields, shared header index);
* `transport`: the usual request answered inside `data_received` with no task, over a
  real Unix socket; pipelining, byte-by-byte input, a bad chunk size after a repeat, a
  repeat while a continuation waits; every kind of application; `Responder.__slots__`;
* `http11.chunk_size_line` / `encode_chunk`, `sse.encode_message`;
* `jsonrpc.dumps` of a response with an `Encoded` result (any member order, every kind
  of id), `jsonrpc.parse_message` against the classifier of 62c06d9, `jsonrpc.loads`
  (the C scanner tried first) against json's semantics;
* the MCP server end to end: many `get_selection` calls with byte-identical heads, and
  `open_diff` still streaming its head before the user decides.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from ide_protocol.wire import http11, jsonrpc, sse
from ide_protocol.common import tools
from ide_protocol.server import transport
from ide_protocol.wire.http11 import Data, EndOfMessage, ParseError, Request, RequestParser
from ide_protocol.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR, JsonRpcError
from ide_protocol.common.tools import Selection
from ide_wire import Conn, cli_for, make_server, run, tool_json, until
from splitting import feed_all_ways, normalise
from test_answer_now import CLI_FIELDS, CLI_HEAD, FakeConn, _old_loads, one_chunk, only, post, released, serve

# ==================================================================== helpers

FIRST_BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
FIRST = CLI_HEAD + one_chunk(FIRST_BODY)
REPEAT_BODY = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_selection"}}'
REPEAT = CLI_HEAD + one_chunk(REPEAT_BODY)


def parser_after(history: bytes, **kw: Any) -> Tuple[RequestParser, List[Any]]:
    """A parser that has been fed `history` (in one piece), and the events it gave."""
    parser = RequestParser(**kw)
    return parser, parser.feed(history)


def whole_events(whole: Tuple[Request, bytes]) -> List[Any]:
    """What `feed` gives for a request `feed_whole` took."""
    return [whole[0], Data(whole[1]), EndOfMessage()]


def check_like_a_fresh_parser(history: bytes, data: Any, fast: bool, **kw: Any) -> List[Any]:
    """Feed `history`, then offer `data` to `feed_whole`: it must answer iff `fast`;
    when it steps aside it must have consumed nothing (the parser's state is as before
    and `feed(data)` gives what a fresh parser fed history + data gives, however split).
    Then one more repeated request must still be parsed as the long way parses it.
    Returns the events `data` gave."""
    make = functools.partial(RequestParser, **kw)
    parser, first = parser_after(history, **kw)
    before = (parser.state_name, parser.buffered, parser.idle)
    whole = parser.feed_whole(data)
    assert (whole is not None) == fast, (data, whole)
    if whole is None:
        assert (parser.state_name, parser.buffered, parser.idle) == before
        got = parser.feed(data)
    else:
        assert type(whole[1]) is bytes and whole[0].keep_alive
        got = whole_events(whole)
    expected = feed_all_ways(make, history + bytes(data))
    assert normalise(first + got) == expected
    after = parser.feed(REPEAT)
    assert normalise(first + got + after) == normalise(make().feed(history + bytes(data) + REPEAT))
    return got


def spy_on_parser(parser: RequestParser) -> List[str]:
    """Record how a connection's parser is used: "whole" when `feed_whole` took the
    data, "none" when it stepped aside, "feed" for each call of `feed` (which itself
    offers the data to `feed_whole` first)."""
    log: List[str] = []
    feed_whole, feed = parser.feed_whole, parser.feed

    def spying_feed_whole(data: Any) -> Any:
        result = feed_whole(data)
        log.append("none" if result is None else "whole")
        return result

    def spying_feed(data: Any) -> Any:
        log.append("feed")
        return feed(data)

    parser.feed_whole = spying_feed_whole  # type: ignore[assignment]
    parser.feed = spying_feed  # type: ignore[assignment]
    return log


async def reply_to(conn: Conn, data: bytes) -> Any:
    conn.send_raw(data, expect="POST")
    return await conn.read_reply()


def echo(tag: str, req: Request, body: bytes, responder: transport.Responder, seen: List[Any]) -> None:
    """The answer every test application gives: `tag:body`, and a record of the call."""
    seen.append((tag, type(req), req.target, body, type(responder), asyncio.current_task() is None))
    responder.send_chunked_now(200, [("Content-Type", "text/plain")], [tag.encode() + b":" + body])


# ============================================================= feed_whole


def test_feed_whole_needs_a_head_seen_before() -> None:
    parser = RequestParser()
    assert parser.feed_whole(FIRST) is None  # nothing parsed yet: no last head
    assert parser.idle and parser.buffered == 0
    assert parser.feed(FIRST) == [Request("POST", "/mcp", CLI_FIELDS), Data(FIRST_BODY), EndOfMessage()]


def test_feed_whole_takes_a_repeated_request() -> None:
    parser, first = parser_after(FIRST)
    for _ in range(3):
        whole = parser.feed_whole(REPEAT)
        assert whole is not None
        request, body = whole
        assert request == first[0] == Request("POST", "/mcp", CLI_FIELDS)
        assert (request.method, request.target, request.http_version, request.keep_alive) == (
            "POST", "/mcp", "1.1", True)
        assert body == REPEAT_BODY and type(body) is bytes
        assert parser.idle and parser.buffered == 0 and parser.state_name == "HEAD"
    # The boundaries of the size line: 16 hex digits, upper-case hex.
    for size_line, body in ((b"%016x" % 5, b"12345"), (b"1A", b"z" * 26), (b"aB", b"y" * 0xAB)):
        assert check_like_a_fresh_parser(FIRST, CLI_HEAD + size_line + b"\r\n" + body + b"\r\n0\r\n\r\n",
                                         fast=True)[1] == Data(body)


def test_feed_whole_returns_a_fresh_request_sharing_only_the_header_index() -> None:
    parser, first = parser_after(FIRST)
    shared = first[0].headers.index()
    second, _ = parser.feed_whole(REPEAT)  # type: ignore[misc]
    third, _ = parser.feed_whole(REPEAT)  # type: ignore[misc]
    assert second is not third and second is not first[0]
    assert second.headers is not third.headers and second.headers.raw is not third.headers.raw
    assert second.headers.raw is not first[0].headers.raw
    assert second.headers.index() is shared and third.headers.index() is shared
    # A handler changes its request's fields: the next request is not affected.
    second.headers.raw.append(("X-Added", "1"))
    second.headers.raw[0] = ("Authorization", "Nonce changed")
    third.headers.set("Host", "elsewhere")
    fourth, _ = parser.feed_whole(REPEAT)  # type: ignore[misc]
    assert fourth.headers.raw == CLI_FIELDS and type(fourth.headers.raw) is list
    assert fourth.headers.index() is shared
    assert fourth.headers.get("authorization") == "Nonce abc" and fourth.headers.get("host") == "localhost"
    assert shared["authorization"] == ["Nonce abc"] and "x-added" not in shared
    assert third.headers.get("host") == "elsewhere"  # (its own index, rebuilt)
    # feed() shares it too, whichever path it takes.
    events = parser.feed(REPEAT + REPEAT)
    requests = [e for e in events if isinstance(e, Request)]
    assert len(requests) == 2 and all(r.headers.index() is shared for r in requests)
    assert requests[0].headers.raw is not requests[1].headers.raw


def test_feed_whole_steps_aside_for_pipelined_and_split_requests() -> None:
    # Two requests in one read: not one whole request.
    events = check_like_a_fresh_parser(FIRST, REPEAT + REPEAT, fast=False)
    assert normalise(events) == [Request("POST", "/mcp", CLI_FIELDS), Data(REPEAT_BODY), EndOfMessage()] * 2
    check_like_a_fresh_parser(FIRST, REPEAT + b"\r\n", fast=False)  # one empty line after it
    check_like_a_fresh_parser(FIRST, b"\r\n" + REPEAT, fast=False)  # one empty line before it
    check_like_a_fresh_parser(FIRST, REPEAT + CLI_HEAD[:10], fast=False)  # part of the next
    # A repeat cut anywhere: neither part is a whole request, and the parts give the
    # same events as the whole.
    for cut in range(1, len(REPEAT)):
        parser, first = parser_after(FIRST)
        head, tail = REPEAT[:cut], REPEAT[cut:]
        assert parser.feed_whole(head) is None
        events = parser.feed(head)
        assert parser.feed_whole(tail) is None, cut
        events += parser.feed(tail)
        assert normalise(events) == [first[0], Data(REPEAT_BODY), EndOfMessage()], cut
        assert parser.feed_whole(REPEAT) is not None  # and the next one is whole again
    # Something buffered before a whole repeat: never skipped over.
    check_like_a_fresh_parser(FIRST + b"P", REPEAT, fast=False)
    check_like_a_fresh_parser(FIRST + b"\r\n", REPEAT, fast=True)  # (empty lines are dropped, not buffered)


def test_feed_whole_steps_aside_for_another_head() -> None:
    for other in (CLI_HEAD.replace(b"/mcp", b"/mcq"), CLI_HEAD.replace(b"Nonce abc", b"Nonce abd"),
                  CLI_HEAD.replace(b"Host:", b"host:"), CLI_HEAD[:-2] + b"X-More: 1\r\n\r\n",
                  CLI_HEAD.replace(b"\r\n", b"\n")):
        events = check_like_a_fresh_parser(FIRST, other + one_chunk(b"{}"), fast=False)
        assert isinstance(events[0], Request) and events[1:] == [Data(b"{}"), EndOfMessage()]
        # That head is now the last one: its repeat is whole, the old one's is not.
        parser, _ = parser_after(FIRST + other + one_chunk(b"{}"))
        assert parser.feed_whole(REPEAT) is None
        parser.feed(other + one_chunk(b"[]"))
        assert parser.feed_whole(other + one_chunk(b"[1]"))[1] == b"[1]"  # type: ignore[index]
    # HTTP/1.0 keeping the connection alive, chunked: repeated, it is whole too.
    head10 = CLI_HEAD.replace(b"HTTP/1.1", b"HTTP/1.0")
    got = check_like_a_fresh_parser(head10 + one_chunk(b"{}"), head10 + one_chunk(b"[2]"), fast=True)
    assert got[0].http_version == "1.0" and got[0].keep_alive


def shape(events: List[Any]) -> str:
    """The kinds of the events after merging Data: "Request Data End", "Request 400", ..."""
    names = {"Request": "Request", "Data": "Data", "EndOfMessage": "End"}
    return " ".join(names.get(type(e).__name__) or str(e.status) for e in normalise(events))


# What follows the repeated head: whether feed_whole takes it, and what the long way
# makes of it (feed_whole must give the same, or step aside and let feed give it).
CHUNK_FRAMINGS = [
    (b"10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n", True, "Request Data End"),
    (b"1A\r\n" + b"b" * 26 + b"\r\n0\r\n\r\n", True, "Request Data End"),  # upper-case hex
    (b"0000000000000010\r\n" + b"c" * 16 + b"\r\n0\r\n\r\n", True, "Request Data End"),  # 16 digits
    (b"7\r\n\r\n0\r\n\r\n" + b"\r\n0\r\n\r\n", True, "Request Data End"),  # a body like an end
    (b"00000000000000010\r\n" + b"c" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),  # 17 digits
    (b"0x10\r\n" + b"d" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),
    (b"+10\r\n" + b"f" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),
    (b"-10\r\n" + b"f" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),
    (b"1_0\r\n" + b"g" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),  # int() would take it
    (b"\r\n" + b"i" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),  # empty size line
    (b"\xd9\xa1\xd9\xa0\r\n" + b"j" * 16 + b"\r\n0\r\n\r\n", False, "Request 400"),  # Arabic-Indic digits
    (b" 10\r\n" + b"e" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),  # whitespace
    (b"10 \r\n" + b"e" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),
    (b"10;ext\r\n" + b"h" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),  # an extension
    (b"10;a=b\r\n" + b"h" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),
    (b"0\r\n\r\n", False, "Request End"),  # an empty body
    (b"0\r\n\r\n0\r\n\r\n", False, "Request End 400"),  # an empty body, then a bad request line
    (b"10\n" + b"k" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),  # bare LFs
    (b"10\r\n" + b"l" * 16 + b"\n0\r\n\r\n", False, "Request Data End"),
    (b"10\r\n" + b"l" * 16 + b"\r\n0\r\n\n", False, "Request Data End"),
    (b"10\r\n" + b"m" * 16 + b"\r\n0\r\nX-T: 1\r\n\r\n", False, "Request Data End"),  # trailers
    (b"8\r\n" + b"n" * 8 + b"\r\n8\r\n" + b"n" * 8 + b"\r\n0\r\n\r\n", False, "Request Data End"),  # 2 chunks
    (b"f\r\n" + b"o" * 16 + b"\r\n0\r\n\r\n", False, "Request Data 400"),  # size one too small
    (b"11\r\n" + b"p" * 16 + b"\r\n0\r\n\r\n", False, "Request Data End"),  # one too large: takes the CR
    (b"10\r\n" + b"q" * 16 + b"\r\n0\r\n", False, "Request Data"),  # no empty trailer line yet
]


@pytest.mark.parametrize("framing, fast, expected", CHUNK_FRAMINGS,
                         ids=[repr(f[:12]) for f, _, _ in CHUNK_FRAMINGS])
def test_feed_whole_chunk_size_lines_like_the_long_way(framing: bytes, fast: bool, expected: str) -> None:
    events = check_like_a_fresh_parser(FIRST, CLI_HEAD + framing, fast=fast)
    assert shape(events) == expected
    if expected.endswith("400"):
        assert "chunk" in events[-1].message or "request line" in events[-1].message


def test_feed_whole_steps_aside_for_other_framings() -> None:
    # `Connection: close`: after it the parser reads nothing more, whole or not.
    closing = CLI_HEAD.replace(b"Connection: keep-alive", b"Connection: close")
    assert check_like_a_fresh_parser(closing + one_chunk(b"{}"), closing + one_chunk(b"{}"), fast=False) == []
    # A body with a Content-Length, repeated byte for byte, even one that looks chunked.
    for first, body in ((b"{}", b"[]"), (b"2\r\n{}\r\n0\r\n\r\n", b"2\r\n[]\r\n0\r\n\r\n")):
        events = check_like_a_fresh_parser(post("/mcp", first), post("/mcp", body), fast=False)
        assert normalise(events)[1:] == [Data(body), EndOfMessage()]
    # The repeat of a chunked head that had more than one chunk is still whole.
    check_like_a_fresh_parser(CLI_HEAD + b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n", REPEAT, fast=True)


def test_feed_whole_respects_max_body() -> None:
    limit = len(FIRST_BODY)
    check_like_a_fresh_parser(FIRST, CLI_HEAD + one_chunk(b"x" * limit), fast=True, max_body=limit)
    events = check_like_a_fresh_parser(FIRST, CLI_HEAD + one_chunk(b"x" * (limit + 1)), fast=False, max_body=limit)
    assert normalise(events) == [Request("POST", "/mcp", CLI_FIELDS),
                                 ParseError(413, "body larger than %d bytes" % limit)]
    check_like_a_fresh_parser(FIRST, CLI_HEAD + one_chunk(b"x" * (limit + 1)), fast=True, max_body=None)


def test_feed_whole_takes_only_bytes() -> None:
    for data in (bytearray(REPEAT), memoryview(REPEAT)):
        events = check_like_a_fresh_parser(FIRST, data, fast=False)
        assert normalise(events) == [Request("POST", "/mcp", CLI_FIELDS), Data(REPEAT_BODY), EndOfMessage()]


def test_feed_whole_after_a_parse_error() -> None:
    parser, events = parser_after(FIRST + CLI_HEAD + b"zz\r\n")
    assert isinstance(events[-1], ParseError) and parser.state_name == "DEAD"
    for _ in range(2):
        assert parser.feed_whole(REPEAT) is None
        assert parser.feed(REPEAT) == []
    assert parser.feed_eof() == []


def test_feed_takes_the_same_shortcut() -> None:
    # feed(), given a whole repeat, answers through feed_whole: the events must be those
    # of the general path over the same bytes, however they arrive.
    parser, first = parser_after(FIRST)
    log = spy_on_parser(parser)
    fed = parser.feed(REPEAT)
    assert log == ["feed", "whole"]  # (the shortcut was taken)
    assert len(fed) == 3 and type(fed[1].data) is bytes and fed[2].trailers is http11.NO_TRAILERS
    assert normalise(first + fed) == feed_all_ways(RequestParser, FIRST + REPEAT)
    for body in (b"{}", b"\x00\r\n0\r\n\r\n", b"q" * 70000):
        data = CLI_HEAD + one_chunk(body)
        fed = parser.feed(data)
        assert fed == feed_all_ways(RequestParser, FIRST + data, cuts=range(len(FIRST) - 3, len(FIRST) + 400))[3:]


# ================================================================= transport


def test_a_repeated_request_is_answered_inside_data_received(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("now", req, body, responder, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        reply = await reply_to(conn, post("/a", b"first", chunked=True))
        assert (reply.status, reply.body) == (200, b"now:first")
        server_conn = only(listener)
        log = spy_on_parser(server_conn._parser)
        for i in range(5):
            reply = await reply_to(conn, post("/a", b"repeat %d" % i, chunked=True))
            assert (reply.status, reply.body, reply.complete) == (200, b"now:repeat %d" % i, True)
            assert reply.headers.get("connection") == "keep-alive"
        assert log == ["whole"] * 5  # each from feed_whole, no parser events
        assert all(no_task for *_, no_task in seen) and listener._tasks == set()
        assert server_conn.requests == 6 and server_conn._parser.idle
        assert server_conn._timer is None  # nothing partial: no request timer
        conn.close()
        await released(listener, "connection released")
    run(main())


def test_pipelined_repeats_are_answered_in_order(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("p", req, body, responder, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        assert (await reply_to(conn, post("/a", b"0", chunked=True))).body == b"p:0"
        conn.send_raw(post("/a", b"1", chunked=True) + post("/a", b"2", chunked=True))
        for expected in (b"p:1", b"p:2"):
            conn.parser.expect("POST")
            reply = await conn.read_reply()
            assert (reply.status, reply.body, reply.complete) == (200, expected, True)
        assert [s[3] for s in seen] == [b"0", b"1", b"2"]
        # Then one alone again, and three at once.
        assert (await reply_to(conn, post("/a", b"3", chunked=True))).body == b"p:3"
        conn.send_raw(b"".join(post("/a", b"%d" % i, chunked=True) for i in (4, 5, 6)))
        for i in (4, 5, 6):
            conn.parser.expect("POST")
            assert (await conn.read_reply()).body == b"p:%d" % i
        assert only(listener).requests == 7
        conn.close()
        await released(listener, "connection released")
    run(main())


def test_a_bad_chunk_size_after_a_repeat_is_refused(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("x", req, body, responder, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        first = post("/a", b"{}", chunked=True)
        assert (await reply_to(conn, first)).status == 200
        head = first[:first.index(b"\r\n\r\n") + 4]
        reply = await reply_to(conn, head + b"0x2\r\n{}\r\n0\r\n\r\n")
        assert reply.status == 400 and reply.headers.get("connection") == "close"
        assert b"chunk-size" in reply.body
        assert await conn.wait_closed()
        assert len(seen) == 1  # the app never saw it
        await released(listener, "connection released")
    run(main())


def test_a_request_sent_byte_by_byte_after_a_repeat(tmp_path: Any) -> None:
    seen: List[Any] = []

    def app(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("b", req, body, responder, seen)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        for body in (b"one", b"two"):
            assert (await reply_to(conn, post("/a", body, chunked=True))).body == b"b:" + body
        log = spy_on_parser(only(listener)._parser)
        data = post("/a", b"three", chunked=True)
        conn.parser.expect("POST")
        for i in range(len(data)):
            before = log.count("feed")
            conn.writer.write(data[i:i + 1])
            await until(lambda: log.count("feed") > before, what="byte %d read" % i)
        reply = await conn.read_reply()
        assert (reply.status, reply.body, reply.complete) == (200, b"b:three", True)
        assert log.count("whole") == 0 and log.count("feed") == len(data)
        # And the next whole repeat takes the shortcut again.
        assert (await reply_to(conn, post("/a", b"four", chunked=True))).body == b"b:four"
        assert log[-1] == "whole" and [s[3] for s in seen] == [b"one", b"two", b"three", b"four"]
        conn.close()
        await released(listener, "connection released")
    run(main())


def test_a_repeat_waits_behind_a_continuation(tmp_path: Any) -> None:
    # The shortcut must not overtake an answer still being finished in the handler task.
    gate: List[asyncio.Event] = []  # (made inside the loop: Python 3.8 binds an Event to a loop)
    order: List[bytes] = []

    def app(req: Request, body: bytes, responder: transport.Responder) -> Any:
        order.append(body)
        if body == b"wait":
            async def finish() -> None:
                await gate[0].wait()
                responder.send_now(200, [], b"waited")
            return finish
        responder.send_now(200, [], b"now")
        return None

    async def main() -> None:
        gate.append(asyncio.Event())
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        assert (await reply_to(conn, post("/a", b"first", chunked=True))).body == b"now"
        conn.send_raw(post("/a", b"wait", chunked=True), expect="POST")
        await until(lambda: order == [b"first", b"wait"], what="wait read")
        conn.send_raw(post("/a", b"next", chunked=True), expect="POST")  # a whole repeat, alone
        await until(lambda: only(listener)._pending or len(order) > 2, what="next read")
        assert order == [b"first", b"wait"]  # queued, not answered ahead of the waiting one
        gate[0].set()
        assert (await conn.read_reply()).body == b"waited"
        assert (await conn.read_reply()).body == b"now"
        assert order == [b"first", b"wait", b"next"]
        conn.close()
        await released(listener, "connection released")
    run(main())


class CallableApp:
    def __init__(self, seen: List[Any]) -> None:
        self.seen = seen

    def __call__(self, req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("callable", req, body, responder, self.seen)


class Handlers:
    def __init__(self, seen: List[Any]) -> None:
        self.seen = seen

    def handle(self, req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("method", req, body, responder, self.seen)


class AsyncCallableApp:
    def __init__(self, seen: List[Any]) -> None:
        self.seen = seen

    async def __call__(self, req: Request, body: bytes, responder: transport.Responder) -> None:
        await asyncio.sleep(0)
        echo("async callable", req, body, responder, self.seen)


STATIC_SEEN: List[Any] = []


class StaticCallApp:
    """`__call__` as a static method: calling the app passes no instance."""

    @staticmethod
    def __call__(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("static", req, body, responder, STATIC_SEEN)


def _static_app(seen: List[Any]) -> StaticCallApp:
    global STATIC_SEEN
    STATIC_SEEN = seen
    return StaticCallApp()


class ShadowedCallApp(CallableApp):
    """An instance attribute named `__call__` is not what calling the app runs."""

    def __init__(self, seen: List[Any]) -> None:
        super().__init__(seen)
        self.__call__ = lambda *args: echo("shadow", *args, self.seen)  # type: ignore[method-assign]


def _function_app(seen: List[Any]) -> Callable[..., None]:
    def app(req: Request, body: bytes, responder: transport.Responder) -> None:
        echo("function", req, body, responder, seen)
    return app


def _tagged(tag: str, seen: List[Any], req: Request, body: bytes, responder: transport.Responder) -> None:
    echo(tag, req, body, responder, seen)


async def _coroutine_function(seen: List[Any], req: Request, body: bytes, responder: transport.Responder) -> None:
    await asyncio.sleep(0)
    echo("async function", req, body, responder, seen)


APP_KINDS: Dict[str, Tuple[str, bool, Callable[[List[Any]], Any]]] = {
    # name: (tag it answers with, answered inside data_received, app maker)
    "function": ("function", True, _function_app),
    "callable instance": ("callable", True, CallableApp),
    "static __call__": ("static", True, _static_app),
    "instance attribute __call__": ("callable", True, ShadowedCallApp),
    "partial": ("partial", True, lambda seen: functools.partial(_tagged, "partial", seen)),
    "bound method": ("method", True, lambda seen: Handlers(seen).handle),
    "async function": ("async function", False, lambda seen: functools.partial(_coroutine_function, seen)),
    "async callable instance": ("async callable", False, AsyncCallableApp),
}


@pytest.mark.parametrize("kind", list(APP_KINDS))
def test_every_kind_of_app_is_called_with_request_body_and_responder(tmp_path: Any, kind: str) -> None:
    tag, at_once, make = APP_KINDS[kind]
    seen: List[Any] = []
    app = make(seen)
    assert transport.is_async_app(app) == (not at_once)

    async def main() -> None:
        listener = await serve(tmp_path, app)
        conn = await Conn.open(listener.socket_path)
        bodies = [b"first", b"second", b"third"]
        for body in bodies:  # the first, then whole repeats
            reply = await reply_to(conn, post("/k", body, chunked=True))
            assert (reply.status, reply.body, reply.complete) == (200, tag.encode() + b":" + body, True)
        conn.send_raw(post("/k", b"p1", chunked=True) + post("/k", b"p2", chunked=True))
        for body in (b"p1", b"p2"):
            conn.parser.expect("POST")
            assert (await conn.read_reply()).body == tag.encode() + b":" + body
        bodies += [b"p1", b"p2"]
        assert seen == [(tag, Request, "/k", body, transport.Responder, at_once) for body in bodies]
        conn.close()
        await released(listener, "connection released")
    run(main())


def test_responder_has_slots() -> None:
    responder = transport.Responder(FakeConn(), Request("POST", "/"))  # type: ignore[arg-type]
    assert not hasattr(responder, "__dict__")
    with pytest.raises(AttributeError):
        responder.colour = "red"  # type: ignore[attr-defined]
    responder.close_after = True  # its own fields are still settable
    assert responder.close_after and not responder.started


# ========================================================= small encoders


def test_chunk_size_line_is_the_hex_size_line() -> None:
    for n in (0, 1, 9, 10, 15, 16, 17, 255, 256, 4095, 4096, 65535, 65536, 2 ** 32, 2 ** 40, 2 ** 64 - 1):
        assert http11.chunk_size_line(n) == b"%x\r\n" % n
        assert http11.chunk_size_line(n) == b"%x\r\n" % n  # and again (remembered)
    assert http11.chunk_size_line(4096) is http11.chunk_size_line(4096)


def test_chunk_size_line_cache_stays_bounded() -> None:
    for n in range(100000, 105000):
        assert http11.chunk_size_line(n) == b"%x\r\n" % n
        assert len(http11._SIZE_LINES) <= 1024
    assert http11.chunk_size_line(7) == b"7\r\n"


def test_encode_chunk() -> None:
    assert http11.encode_chunk(b"") == b""
    for data in (b"x", b"{}", b"\r\n", b"a" * 15, b"b" * 16, b"c" * 4096, "\u00e9".encode()):
        assert http11.encode_chunk(data) == b"%x\r\n" % len(data) + data + b"\r\n"
    encoded = b"".join(http11.encode_chunk(piece) for piece in (b"ab", b"", b"c" * 300)) + http11.LAST_CHUNK
    events = RequestParser().feed(CLI_HEAD + encoded)
    assert normalise(events)[1:] == [Data(b"ab" + b"c" * 300), EndOfMessage()]


@pytest.mark.parametrize("text", ['{"jsonrpc":"2.0","id":1,"result":{}}', "", "caf\u00e9 \u65e5\u672c \U0001F600",
                                  "\u2028", "x" * 5000], ids=["json", "empty", "non-ascii", "line-separator", "long"])
def test_sse_encode_message(text: str) -> None:
    raw = text.encode("utf-8")
    expected = b"event: message\ndata: " + raw + b"\n\n"
    assert sse.encode_message(raw) == expected
    assert sse.encode_message(text) == expected
    if text:
        assert sse.SSEDecoder().feed(expected) == [sse.SSEEvent("message", text)]


# ============================================================ jsonrpc.dumps

ENCODED = jsonrpc.Encoded({"content": [{"type": "text", "text": "caf\u00e9 \"q\" \\ \u2028 \U0001F600"}],
                           "isError": False, "n": [1, 2.5, None]})
USUAL_IDS = [0, 1, -1, 7, 2 ** 31, -(2 ** 63), 2 ** 70, -(2 ** 70), "", "abc", "caf\u00e9", 'q"uo\\te', "\n\t\x01",
             "\u2028\u2029", "\U0001F600", "</script>"]


def _plain_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _with_plain_result(obj: Dict[str, Any]) -> Dict[str, Any]:
    return {k: dict(v) if type(v) is jsonrpc.Encoded else v for k, v in obj.items()}


@pytest.mark.parametrize("msg_id", USUAL_IDS, ids=[repr(i) for i in USUAL_IDS])
def test_dumps_encoded_result_in_any_member_order(msg_id: Any) -> None:
    usual = jsonrpc.dumps({"jsonrpc": "2.0", "id": msg_id, "result": dict(ENCODED)})
    assert usual == _plain_json({"jsonrpc": "2.0", "id": msg_id, "result": dict(ENCODED)})
    members = [("jsonrpc", "2.0"), ("id", msg_id), ("result", ENCODED)]
    for order in itertools.permutations(members):
        assert jsonrpc.dumps(dict(order)) == usual, order


UNUSUAL_RESPONSES: List[Dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": True, "result": ENCODED},
    {"result": ENCODED, "id": False, "jsonrpc": "2.0"},
    {"jsonrpc": "2.0", "id": 1.5, "result": ENCODED},
    {"id": 2.0, "jsonrpc": "2.0", "result": ENCODED},
    {"jsonrpc": "2.0", "id": None, "result": ENCODED},
    {"jsonrpc": "2.0", "id": [1], "result": ENCODED},
    {"jsonrpc": "2.0", "id": {"a": 1}, "result": ENCODED},
    {"jsonrpc": "2.0", "x": 1, "result": ENCODED},  # no id, a third member
    {"result": ENCODED, "jsonrpc": "2.0", "error": None},
    {"jsonrpc": "1.0", "id": 1, "result": ENCODED},
    {"result": ENCODED, "jsonrpc": 2.0, "id": 1},
    {"jsonrpc": None, "id": "a", "result": ENCODED},
    {"jsonrpc": "2.0", "id": 1, "result": ENCODED, "extra": 1},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}},
]


@pytest.mark.parametrize("obj", UNUSUAL_RESPONSES, ids=[str(i) for i in range(len(UNUSUAL_RESPONSES))])
def test_dumps_of_unusual_responses_is_plain_json(obj: Dict[str, Any]) -> None:
    plain = _with_plain_result(obj)
    assert jsonrpc.dumps(obj) == _plain_json(plain)  # the same bytes, members in the dict's order
    assert json.loads(jsonrpc.dumps(obj)) == json.loads(_plain_json(plain))


def test_dumps_encoded_result_with_ids_utf8_cannot_carry() -> None:
    for obj in ({"jsonrpc": "2.0", "id": "\ud800", "result": ENCODED},
                {"result": ENCODED, "id": "a\udfff", "jsonrpc": "2.0"},
                {"jsonrpc": "2.0", "id": 1, "result": jsonrpc.Encoded({"t": "\ud800 \u00e9"})}):
        out = jsonrpc.dumps(obj)
        assert out.isascii() and json.loads(out) == _with_plain_result(obj)
        assert out == json.dumps(_with_plain_result(obj), separators=(",", ":"), allow_nan=False).encode()


# ===================================================== jsonrpc.parse_message


def _old_parse_message(obj: Any) -> Tuple[Any, ...]:
    """`jsonrpc.parse_message` and `_valid_id` as of 62c06d9 (before the one-test path
    for the usual request), returning what `summary` returns."""
    def valid_id(value: Any) -> bool:
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))

    def invalid(msg_id: Any, message: str) -> Tuple[Any, ...]:
        return ("Invalid", _typed(msg_id), None, None, (INVALID_REQUEST, message))

    if not isinstance(obj, dict):
        return invalid(None, "Invalid Request: expected a JSON object")
    raw_id = obj.get("id")
    has_id = "id" in obj and raw_id is not None
    msg_id = raw_id if type(raw_id) is int or type(raw_id) is str or valid_id(raw_id) else None
    null_id_request = "id" in obj and raw_id is None
    if obj.get("jsonrpc") != "2.0":
        return invalid(msg_id, 'Invalid Request: "jsonrpc" must be "2.0"')
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            return invalid(msg_id, "Invalid Request: method must be a string")
        params = obj.get("params")
        if "params" in obj and not isinstance(params, (dict, list)):
            return invalid(msg_id, "Invalid Request: params must be an object or array")
        if null_id_request:
            return invalid(None, "Invalid Request: id must not be null")
        if has_id:
            if msg_id is None:
                return invalid(None, "Invalid Request: id must be a string or an integer")
            return ("Request", _typed(msg_id), method, _typed(params), None)
        return ("Notification", None, method, _typed(params), None)
    if "result" in obj or "error" in obj:
        if "result" in obj and "error" in obj:
            return invalid(msg_id, "Invalid Response: both result and error")
        if "error" in obj:
            error = obj["error"]
            if not (isinstance(error, dict) and isinstance(error.get("code"), int)
                    and isinstance(error.get("message"), str)):
                return invalid(msg_id, "Invalid Response: malformed error object")
            if has_id and msg_id is None:
                return invalid(None, "Invalid Response: bad id")
            err = JsonRpcError.from_dict(error)
            return ("ErrorResponse", _typed(msg_id), None, None, (err.code, err.message))
        if msg_id is None:
            return invalid(None, "Invalid Response: missing id")
        return ("Response", _typed(msg_id), None, _typed(obj["result"]), None)
    return invalid(msg_id, "Invalid Request: no method, result or error")


def _typed(value: Any) -> Any:
    """A value with its type, so that 1, 1.0 and True differ."""
    return (type(value).__name__, repr(value))


def summary(msg: jsonrpc.Message) -> Tuple[Any, ...]:
    kind = type(msg).__name__
    error = getattr(msg, "error", None)
    if kind == "Request":
        return (kind, _typed(msg.id), msg.method, _typed(msg.params), None)  # type: ignore[attr-defined]
    if kind == "Notification":
        return (kind, None, msg.method, _typed(msg.params), None)  # type: ignore[attr-defined]
    if kind == "Response":
        return (kind, _typed(msg.id), None, _typed(msg.result), None)  # type: ignore[attr-defined]
    return (kind, _typed(msg.id), None, None, (error.code, error.message))  # type: ignore[attr-defined, union-attr]


_ABSENT = object()
IDS = [_ABSENT, 1, 0, -5, 2 ** 70, "a", "", True, False, 1.5, 1.0, None, [1], {"a": 1}]
METHODS = [_ABSENT, "tools/call", "", 5, None, ["m"], True]
PARAMS = [_ABSENT, {}, {"a": 1}, [], [1], None, "s", 3, True, 1.5]
VERSIONS = [_ABSENT, "2.0", "1.0", 2.0, None, "2.0 "]
EXTRAS: List[Dict[str, Any]] = [{}, {"result": 1}, {"result": None}, {"error": {"code": 1, "message": "x"}},
                                {"error": {"code": "1", "message": "x"}}, {"result": 1, "error": None}]


def _messages() -> List[Any]:
    out: List[Any] = [[], [{"jsonrpc": "2.0", "id": 1, "method": "m"}], "x", 1, None, True, 1.5]
    for msg_id, method, params, version, extra in itertools.product(IDS, METHODS, PARAMS, VERSIONS, EXTRAS):
        obj: Dict[str, Any] = {}
        for key, value in (("jsonrpc", version), ("id", msg_id), ("method", method), ("params", params)):
            if value is not _ABSENT:
                obj[key] = value
        obj.update(extra)
        out.append(obj)
    return out


def test_parse_message_classifies_as_before() -> None:
    messages = _messages()
    assert len(messages) > 10000
    kinds = set()
    for obj in messages:
        msg = jsonrpc.parse_message(obj)
        assert summary(msg) == _old_parse_message(obj), obj
        assert msg.raw is obj
        if type(msg) is jsonrpc.Request:
            assert msg.id is obj["id"] and msg.method is obj["method"]  # type: ignore[attr-defined]
            assert msg.params is obj.get("params")  # type: ignore[attr-defined]
        kinds.add(type(msg).__name__)
    assert kinds == {"Request", "Notification", "Response", "ErrorResponse", "Invalid"}


def test_parse_message_of_dict_subclasses_and_str_and_int_subclasses() -> None:
    class MyDict(dict):  # type: ignore[type-arg]
        pass

    class MyStr(str):
        pass

    class MyInt(int):
        pass

    for obj in (MyDict(jsonrpc="2.0", id=1, method="m", params={}),
                {"jsonrpc": "2.0", "id": MyInt(3), "method": "m"},
                {"jsonrpc": "2.0", "id": MyStr("x"), "method": MyStr("m")},
                {"jsonrpc": MyStr("2.0"), "id": 1, "method": "m"},
                {"jsonrpc": "2.0", "id": 1, "method": "m", "params": MyDict(a=1)}):
        assert summary(jsonrpc.parse_message(obj)) == _old_parse_message(obj), obj


# ============================================================== jsonrpc.loads

DEEP_LISTS = "[" * 100000 + "]" * 100000
LOADS_EXTRA_INPUTS: List[Any] = [
    "\ufeff{}", "\ufeff[]", "\ufeff", "\ufeff 1", b"\xef\xbb\xbf{}", b"\xef\xbb\xbf[1]", bytearray(b"\xef\xbb\xbf{}"),
    " [1]", "\n\t[1, 2]", "\r\n[]\r\n", " 1", "1 ", "1\n", " 1 ", "1 2", "-0", "-0.0", "1.5e3", "1E+2", "0e0",
    "-", "--1", "01", "1.", ".5", "+1", "12345678901234567890123456789", "1e999", "[1e999]", "-1e999", "NaN",
    "-Infinity", "[NaN]", '{"\ud800":1}', '{"\\ud800":"\\udfff"}', '"\\ud800"', '"' + "x" * 1000000 + '"',
    '"' + "\u00e9" * 100000 + '"', DEEP_LISTS, "[" * 100000, '"\x7f"', '"\x1f"', "true", "truex", "nul", "[]]",
    '"a" "b"', "[1,]", "{}  \n", b" {}", b"\xed\xa0\x80", b'"\xed\xa0\x80"', memoryview(b" [1] "),
    bytearray(b"\xff"), "\u00a0{}", "\u3000[]", "{}\u00a0",
]


@pytest.mark.parametrize("data", LOADS_EXTRA_INPUTS, ids=[str(i) for i in range(len(LOADS_EXTRA_INPUTS))])
def test_loads_behaves_as_json_does(data: Any) -> None:
    expected = _old_loads(data)
    try:
        got: Tuple[str, Any] = ("ok", jsonrpc.loads(data))
    except JsonRpcError as exc:
        assert exc.code == PARSE_ERROR
        got = ("error", exc.message)
    assert got == expected
    assert repr(got[1]) == repr(expected[1])  # (-0.0 is not 0.0, 1500.0 is not 1500)
    if data is DEEP_LISTS:
        assert got[0] == "error" and "recursion" in got[1]


# ================================================ the MCP server end to end


def _plain_answer(msg_id: Any, tool_result: Any) -> bytes:
    """The SSE data of a get_selection answer as plainly encoded (no cached rendering)."""
    return _plain_json(jsonrpc.result_response(msg_id, tools.text_result(tool_result)))


def test_mcp_many_get_selection_calls_with_identical_heads(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=0) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            log = spy_on_parser(only(server.listener)._parser)
            path = str(tmp_path / "ws" / "m\u00e9.py")
            expected: Any = None
            last: Optional[Selection] = None
            for i in range(40):
                if i % 4 == 1:
                    last = Selection(path, "line %d \u00e9\U0001F600" % i, (i, 0), (i, 5 + i % 3))
                    server.set_selection(last)
                    expected = last.tool_result()
                elif i % 10 == 9 and last is not None:
                    server.set_selection(None)  # no active editor: the last one, not current
                    expected = last.tool_result(current=False)
                msg_id: Any = i if i % 3 else "id-%d \u00e9\"" % i
                reply = await cli.post(jsonrpc.request(msg_id, "tools/call", {"name": "get_selection"}), conn=conn)
                assert reply.status == 200 and reply.complete and reply.content_type == "text/event-stream"
                assert reply.headers.get("mcp-session-id") == cli.session_id
                assert len(reply.events) == 1 and reply.events[0].event == "message"
                assert reply.events[0].data.encode("utf-8") == _plain_answer(msg_id, expected), i
                assert reply.message["id"] == msg_id and tool_json(reply.message["result"]) == expected
            assert log == ["whole"] * 40  # every one the usual request, taken whole
            assert server.stats()["connection_tasks"] == 0
            cli.close()
    run(main())


def test_mcp_open_diff_head_comes_before_the_decision(tmp_path: Any) -> None:
    shown: List[str] = []

    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: shown.append(d.tab_name)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            log = spy_on_parser(only(server.listener)._parser)
            assert tool_json(await cli.call_tool("get_selection", conn=conn)) is None
            diff = jsonrpc.request(41, "tools/call", {"name": "open_diff", "arguments": {
                "original_file_path": str(tmp_path / "f.txt"), "new_file_contents": "new\n", "tab_name": "tab"}})
            conn.send_raw(cli.encode("POST", diff), expect="POST")
            head = await asyncio.wait_for(conn.open_stream(), 5)  # nobody has decided yet
            assert head.status == 200 and head.headers.get("content-type") == "text/event-stream"
            assert head.headers.get("transfer-encoding") == "chunked"
            assert head.headers.get("mcp-session-id") == cli.session_id
            await until(lambda: shown == ["tab"], what="diff shown")
            assert [d.tab_name for d in server.pending_diffs()] == ["tab"]
            assert log == ["whole", "whole"]  # both repeats of the head, taken whole
            assert server.resolve_diff("tab", accept=True)
            event = await conn.next_sse()
            assert event is not None
            answer = json.loads(event.data)
            assert answer["id"] == 41 and tool_json(answer["result"])["result"] == "SAVED"
            assert await conn.next_sse() is None  # the end of that response
            # The connection goes on: the next usual request is answered at once.
            assert tool_json(await cli.call_tool("get_selection", conn=conn)) is None
            assert log[-1] == "whole"
            await until(lambda: server.stats()["connection_tasks"] == 0, what="handler task ended")
            cli.close()
    run(main())
