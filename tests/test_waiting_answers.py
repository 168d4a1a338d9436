"""Answers that wait, and the small pieces the request path is built of.

* `mcp`: answers that wait (a `PendingReply`, a `Stream` whose head goes first) let go
  of everything when the transport closes them unrun; requests cancelled or dropped
  before their method started leave nothing behind (nor a "never awaited" warning); the
  origin, nonce, path, session and version checks run on every request, also for a head
  byte-identical to one accepted before; plain tools answered at once, the selection's
  cached result;
* `jsonrpc`: `dispatch_now`/`call_now` and `Deferred`, `dumps` of responses (UTF-8, or
  ASCII when UTF-8 cannot carry the text), `dumps` after a failure, `loads`;
* `http11`: one-chunk bodies however split, the body limit, `NO_TRAILERS`,
  `Request.keep_alive`.

Whether a handler task starts at once (eager tasks, Python 3.12+) or one loop pass
later (before 3.12) changes the timing: the `starts_later` fixture runs those socket
tests as shipped and with the task started one pass later, on every version.
"""
from __future__ import annotations

import asyncio
import functools
import gc
import hmac
import inspect
import json
import sys
import threading
import time
import warnings
from unittest import mock
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ide_protocol.wire import http11, jsonrpc
from ide_protocol.common import tools
from ide_protocol.server import transport
from ide_protocol.server.listener import Listener
from ide_protocol.wire.http11 import NO_TRAILERS, Data, EndOfMessage, Headers, ParseError, Request, RequestParser
from ide_protocol.rpc import Deferred, Dispatcher
from ide_protocol.wire.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, PARSE_ERROR, JsonRpcError
from ide_protocol.server import mcp as mcp_module
from ide_protocol.server.answers import PendingReply, Reply, Stream
from ide_protocol.server.mcp import McpApp
from ide_protocol.common.tools import Selection
import ide_wire
import platforms
from ide_wire import Cli, Conn, cli_for, make_server, run, tool_error, tool_json, until
from splitting import feed_all_ways, normalise


EAGER_TASKS = sys.version_info >= (3, 12)


# ------------------------------------------------------------------------- helpers


@pytest.fixture(params=["shipped", "one-pass-later"])
def starts_later(request: Any, monkeypatch: Any) -> bool:
    """Returns True when a continuation's task starts one loop pass after the request
    was read (always before 3.12; forced here on 3.12+ too), False when it starts at
    once, inside data_received (eager tasks, 3.12+ as shipped)."""
    if request.param == "one-pass-later":
        monkeypatch.setattr(transport, "_start_task", lambda loop, coro: loop.create_task(coro))
        return True
    return not EAGER_TASKS


def post(target: str, body: bytes = b"", close: bool = False, chunked: bool = False) -> bytes:
    """A request as bytes (chunked as the CLI sends it, or with Content-Length)."""
    headers = "Host: x\r\n"
    headers += "Transfer-Encoding: chunked\r\n" if chunked else "Content-Length: %d\r\n" % len(body)
    if close:
        headers += "Connection: close\r\n"
    data = ("POST %s HTTP/1.1\r\n%s\r\n" % (target, headers)).encode()
    if chunked:
        return data + (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
    return data + body


async def serve(tmp_path: Any, app: Any) -> Listener:
    listener = Listener(app, max_body=1 << 20)
    await ide_wire.listen(listener, str(tmp_path))
    return listener


def only(listener: Listener) -> transport.HttpConnection:
    conn, = listener.connections
    return conn


def send_and_vanish(path: str, data: bytes) -> None:
    """A peer that sends a request and is gone before the answer: the server reads the
    request, and its first write fails (EPIPE), which drops the connection before a
    task started for the request can take it up."""
    ide_wire.send_and_vanish(path, data)


def unawaited(records: List[warnings.WarningMessage]) -> List[str]:
    return [str(w.message) for w in records if issubclass(w.category, RuntimeWarning)
            and "never awaited" in str(w.message)]


# ===================================================================== http11

CLI_HEAD = (b"POST /mcp HTTP/1.1\r\nAuthorization: Nonce abc\r\naccept: application/json, text/event-stream\r\n"
            b"content-type: application/json\r\nHost: localhost\r\nConnection: keep-alive\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
CLI_FIELDS = [("Authorization", "Nonce abc"), ("accept", "application/json, text/event-stream"),
              ("content-type", "application/json"), ("Host", "localhost"), ("Connection", "keep-alive"),
              ("Transfer-Encoding", "chunked")]


def one_chunk(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def test_one_chunk_body_gives_the_same_events_however_split() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    expected_request = Request("POST", "/mcp", CLI_FIELDS)
    # Two requests with byte-identical heads back to back (the CLI's usual traffic).
    events = feed_all_ways(RequestParser, CLI_HEAD + one_chunk(body) + CLI_HEAD + one_chunk(b"{}"))
    assert events == [expected_request, Data(body), EndOfMessage(), expected_request, Data(b"{}"), EndOfMessage()]
    assert all(e.keep_alive for e in events if isinstance(e, Request))
    assert all(e.trailers == Headers() for e in events if isinstance(e, EndOfMessage))
    # Nothing of it is left buffered: the parser is idle between requests (the
    # transport arms its request timer only while a request is partial).
    parser = RequestParser()
    for _ in range(3):
        assert len(parser.feed(CLI_HEAD + one_chunk(body))) == 3
        assert parser.idle and parser.state == "HEAD"
    # The same body in several chunks, or with what the one-step path leaves to the
    # long way (an extension, trailers, upper-case hex, whitespace), gives the same.
    for framed in (b"2\r\n{}\r\n0\r\n\r\n", b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n", b"2;ext=1\r\n{}\r\n0\r\n\r\n",
                   b"02 \r\n{}\r\n0\r\n\r\n"):
        assert feed_all_ways(RequestParser, CLI_HEAD + framed) == [expected_request, Data(b"{}"), EndOfMessage()]
    upper = b"z" * 26
    assert feed_all_ways(RequestParser, CLI_HEAD + b"1A\r\n" + upper + b"\r\n0\r\n\r\n")[1] == Data(upper)
    with_trailers = feed_all_ways(RequestParser, CLI_HEAD + b"2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n")
    assert with_trailers[-1] == EndOfMessage([("X-T", "1")])
    # A chunk longer than its size line is still refused.
    bad = feed_all_ways(RequestParser, CLI_HEAD + b"2\r\n{}}\r\n0\r\n\r\n")
    assert isinstance(bad[-1], ParseError) and bad[-1].status == 400


def test_one_chunk_body_respects_max_body() -> None:
    make = functools.partial(RequestParser, max_body=5)
    assert normalise(make().feed(CLI_HEAD + one_chunk(b"12345")))[1:] == [Data(b"12345"), EndOfMessage()]
    events = feed_all_ways(make, CLI_HEAD + one_chunk(b"12345") + CLI_HEAD + one_chunk(b"123456"))
    assert events[:4] == [Request("POST", "/mcp", CLI_FIELDS), Data(b"12345"), EndOfMessage(),
                          Request("POST", "/mcp", CLI_FIELDS)]
    assert events[4:] == [ParseError(413, "body larger than 5 bytes")]


def test_one_chunk_body_with_connection_close_stops_reading() -> None:
    head = CLI_HEAD.replace(b"Connection: keep-alive", b"Connection: close")
    data = head + one_chunk(b"{}") + CLI_HEAD + one_chunk(b"{}")
    events = feed_all_ways(RequestParser, data)
    assert len(events) == 3 and isinstance(events[0], Request) and not events[0].keep_alive
    assert events[1:] == [Data(b"{}"), EndOfMessage()]
    parser = RequestParser()
    assert len(parser.feed(data)) == 3
    assert parser.state == "CLOSED" and parser.feed(CLI_HEAD + one_chunk(b"{}")) == []


def test_no_trailers_is_shared_and_read_only() -> None:
    events = RequestParser().feed(CLI_HEAD + one_chunk(b"{}") + b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    ends = [e for e in events if isinstance(e, EndOfMessage)]
    assert len(ends) == 2 and all(e.trailers is NO_TRAILERS for e in ends)
    assert EndOfMessage().trailers is NO_TRAILERS
    for change in (lambda: NO_TRAILERS.add("X", "1"), lambda: NO_TRAILERS.set("X", "1"),
                   lambda: NO_TRAILERS.remove("X")):
        with pytest.raises(TypeError):
            change()
    assert len(NO_TRAILERS) == 0 and list(NO_TRAILERS) == [] and NO_TRAILERS.get("x") is None
    assert NO_TRAILERS == Headers() and "X" not in NO_TRAILERS
    copy = Headers(NO_TRAILERS)  # a copy is an ordinary, changeable Headers
    copy.add("X", "1")
    assert copy.get("x") == "1" and len(NO_TRAILERS) == 0
    own = EndOfMessage([("X-T", "1")]).trailers
    assert own is not NO_TRAILERS and own.get("x-t") == "1"


def test_request_keep_alive_is_decided_at_construction() -> None:
    assert Request("GET", "/").keep_alive
    assert not Request("GET", "/", [("Connection", "close")]).keep_alive
    assert not Request("GET", "/", [("Connection", "keep-alive, Close")]).keep_alive
    assert not Request("GET", "/", http_version="1.0").keep_alive
    assert Request("GET", "/", [("connection", "Keep-Alive")], "1.0").keep_alive
    assert not Request("GET", "/", keep_alive=False).keep_alive  # what the caller decided
    assert Request("GET", "/", [("Connection", "close")], keep_alive=True).keep_alive
    # From the parser, first and repeated heads alike (a repeated head's parse is remembered).
    head10 = b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    events = RequestParser().feed(head10 * 2 + b"GET / HTTP/1.0\r\n\r\n" + head10)
    requests = [e for e in events if isinstance(e, Request)]
    assert [r.keep_alive for r in requests] == [True, True, False]  # then the parser stops
    assert http11.keeps_alive_after(requests[2].keep_alive, False) is False  # the transport closes after it


# ==================================================================== jsonrpc


def request_msg(msg_id: Any, method: str, params: Any = None) -> jsonrpc.Message:
    return jsonrpc.parse_message(jsonrpc.request(msg_id, method, params))


def notification_msg(method: str, params: Any = None) -> jsonrpc.Message:
    return jsonrpc.parse_message(jsonrpc.notification(method, params))


def counting_dispatcher() -> Tuple[Dispatcher, List[str]]:
    d = Dispatcher()
    calls: List[str] = []

    def plain(params: Any, ctx: Any) -> Any:
        calls.append("plain")
        return {"params": params, "ctx": ctx}

    async def waits(params: Any, ctx: Any) -> Any:
        calls.append("waits")
        await asyncio.sleep(0)
        return {"waited": params}

    def boom(params: Any, ctx: Any) -> Any:
        calls.append("boom")
        raise KeyError("k")

    async def async_boom(params: Any, ctx: Any) -> Any:
        calls.append("async_boom")
        raise KeyError("k")

    def refuse(params: Any, ctx: Any) -> Any:
        calls.append("refuse")
        raise JsonRpcError(-32001, "Session not found", {"hint": 1})

    async def async_refuse(params: Any, ctx: Any) -> Any:
        calls.append("async_refuse")
        raise JsonRpcError(-32002, "nope")

    for name, handler in (("plain", plain), ("waits", waits), ("boom", boom), ("async_boom", async_boom),
                          ("refuse", refuse), ("async_refuse", async_refuse)):
        d.add(name, handler)
    return d, calls


def test_dispatch_now_answers_plain_handlers_with_no_loop() -> None:
    d, calls = counting_dispatcher()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # (no loop anywhere in this test)
    assert d.dispatch_now(request_msg(1, "plain", {"a": 1}), "ctx") == {
        "jsonrpc": "2.0", "id": 1, "result": {"params": {"a": 1}, "ctx": "ctx"}}
    assert d.call_now("plain", [1], "c") == {"params": [1], "ctx": "c"}
    boom = d.dispatch_now(request_msg("b", "boom"))
    assert boom["id"] == "b" and boom["error"]["code"] == INTERNAL_ERROR and "KeyError" in boom["error"]["message"]
    with pytest.raises(JsonRpcError) as info:
        d.call_now("boom", None)
    assert info.value.code == INTERNAL_ERROR
    assert d.dispatch_now(request_msg(2, "refuse")) == {
        "jsonrpc": "2.0", "id": 2, "error": {"code": -32001, "message": "Session not found", "data": {"hint": 1}}}
    assert d.dispatch_now(request_msg(3, "missing"))["error"]["code"] == METHOD_NOT_FOUND
    with pytest.raises(JsonRpcError) as info:
        d.call_now("missing", None)
    assert info.value.code == METHOD_NOT_FOUND
    # Notifications are never answered, whatever the handler does.
    calls.clear()
    for method in ("plain", "boom", "refuse", "missing"):
        assert d.dispatch_now(notification_msg(method)) is None
    assert calls == ["plain", "boom", "refuse"]
    # Invalid messages get their error; responses get nothing.
    invalid = d.dispatch_now(jsonrpc.parse_message({"jsonrpc": "2.0", "id": 4, "method": 5}))
    assert invalid["id"] == 4 and invalid["error"]["code"] == jsonrpc.INVALID_REQUEST
    assert d.dispatch_now(jsonrpc.parse_message(jsonrpc.result_response(1, 2))) is None


def test_a_deferred_call_is_made_whole_and_offers_only_run_and_drop() -> None:
    # A Deferred gets everything it answers with when it is made (its message
    # included), and its interface is `run()` and `drop()`: nothing for a caller to
    # fill in afterwards, no reaching back into the dispatcher.
    d, calls = counting_dispatcher()
    deferred = d.dispatch_now(request_msg(8, "async_boom"))
    assert isinstance(deferred, Deferred)
    assert sorted(name for name in dir(deferred) if not name.startswith("_")) == ["drop", "run"]
    d._routes.clear()  # (the dispatcher may change: the call already has what it needs)
    answer = run(deferred.run())
    assert answer["id"] == 8 and answer["error"]["code"] == INTERNAL_ERROR


def test_dispatch_now_defers_coroutine_functions_without_calling_them() -> None:
    d, calls = counting_dispatcher()
    deferred = d.dispatch_now(request_msg(5, "waits", {"x": 1}))
    assert isinstance(deferred, Deferred) and calls == []  # not even called yet
    assert run(deferred.run()) == {"jsonrpc": "2.0", "id": 5, "result": {"waited": {"x": 1}}}
    assert calls == ["waits"]
    later = d.call_now("waits", 7)
    assert isinstance(later, Deferred) and run(later.run()) == {"waited": 7}  # call_now: the result
    failing = d.dispatch_now(request_msg(6, "async_boom"))
    assert isinstance(failing, Deferred)
    answer = run(failing.run())
    assert answer["id"] == 6 and answer["error"]["code"] == INTERNAL_ERROR
    assert run(d.dispatch_now(request_msg(7, "async_refuse")).run()) == {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32002, "message": "nope"}}
    with pytest.raises(JsonRpcError) as info:
        run(d.call_now("async_refuse", None).run())
    assert info.value.code == -32002
    # A notification with a coroutine handler: deferred, never answered, even failing.
    for method in ("waits", "async_boom", "async_refuse"):
        note = d.dispatch_now(notification_msg(method))
        assert isinstance(note, Deferred) and run(note.run()) is None
    # Dropped before it ran: the handler never runs.
    calls.clear()
    dropped = d.dispatch_now(request_msg(8, "waits"))
    dropped.drop()
    assert calls == []
    # The awaiting forms give the same answers.
    assert run(d.dispatch(request_msg(9, "waits", [1]))) == {"jsonrpc": "2.0", "id": 9, "result": {"waited": [1]}}
    assert run(d.dispatch(request_msg(10, "plain"))) == d.dispatch_now(request_msg(10, "plain"))
    assert run(d.call("waits", 2)) == {"waited": 2}
    assert run(d.dispatch(notification_msg("async_boom"))) is None
    with pytest.raises(JsonRpcError):
        run(d.call("async_boom", None))

    async def cancelled(params: Any, ctx: Any) -> Any:
        raise asyncio.CancelledError()

    d.add("cancelled", cancelled)
    with pytest.raises(asyncio.CancelledError):  # cancellation belongs to the task's owner
        run(d.dispatch_now(request_msg(11, "cancelled")).run())
    fallback = Dispatcher(fallback=waits_fallback)
    assert isinstance(fallback.dispatch_now(request_msg(12, "anything")), Deferred)
    if hasattr(inspect, "markcoroutinefunction"):  # (3.12+) a call to the handler itself is seen
        def marked(params: Any, ctx: Any) -> Any:
            calls.append("marked")
            return waits_fallback(params, ctx)

        d.add("marked", inspect.markcoroutinefunction(marked))
        calls.clear()
        deferred = d.dispatch_now(request_msg(13, "marked"))
        assert isinstance(deferred, Deferred) and calls == []
        deferred.drop()
        assert calls == []
        assert run(d.dispatch_now(request_msg(14, "marked")).run())["result"] == "fallback"
        assert calls == ["marked"]


async def waits_fallback(params: Any, ctx: Any) -> Any:
    return "fallback"


def test_plain_handler_returning_an_awaitable_is_deferred_and_drop_closes_it() -> None:
    started: List[str] = []
    made: List[Any] = []
    d = Dispatcher()

    def returns_coroutine(params: Any, ctx: Any) -> Any:
        async def body() -> Any:
            started.append("body")
            return {"late": params}
        coro = body()
        made.append(coro)
        return coro

    def returns_future(params: Any, ctx: Any) -> Any:
        future = asyncio.get_event_loop().create_future()
        made.append(future)
        return future

    d.add("coro", returns_coroutine)
    d.add("future", returns_future)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        deferred = d.dispatch_now(request_msg(1, "coro", [3]))
        assert isinstance(deferred, Deferred) and len(made) == 1 and started == []
        assert run(deferred.run()) == {"jsonrpc": "2.0", "id": 1, "result": {"late": [3]}}
        assert started == ["body"]
        for dispatch in (lambda: d.dispatch_now(request_msg(2, "coro")), lambda: d.call_now("coro", None),
                         lambda: d.dispatch_now(notification_msg("coro"))):
            dropped = dispatch()
            assert isinstance(dropped, Deferred)
            dropped.drop()
            assert made[-1].cr_frame is None  # closed, never started
        assert started == ["body"]
        del deferred, dropped, made[:]
        gc.collect()
    assert unawaited(records) == []

    async def with_a_future() -> None:
        deferred = d.dispatch_now(request_msg(3, "future"))
        assert isinstance(deferred, Deferred)
        deferred.drop()
        assert made[-1].cancelled()
        resolved = d.dispatch_now(request_msg(4, "future"))
        made[-1].set_result([1])
        assert await resolved.run() == {"jsonrpc": "2.0", "id": 4, "result": [1]}
    run(with_a_future())


# ---------------------------------------------------------------- dumps / loads

RESPONSE_IDS = [0, 7, -3, 2 ** 70, "abc", 'q"\\\n\t\x01\x1f', "\u00e9\u65e5\U0001F600", "</script>\u2028",
                "\ud800", None, True]
RESPONSE_RESULTS = [
    {"content": [{"type": "text", "text": "{\n  \"a\": 1\n}"}]},
    {"t": "caf\u00e9 \u65e5\u672c \U0001F600 \u2028 \"\\"},
    {"t": "lone \ud800 surrogate"},
    {},
]


@pytest.mark.parametrize("msg_id", RESPONSE_IDS, ids=[repr(i)[:12] for i in RESPONSE_IDS])
@pytest.mark.parametrize("result", RESPONSE_RESULTS, ids=[str(i) for i in range(len(RESPONSE_RESULTS))])
def test_dumps_of_a_response_is_json_compact_utf8_or_all_ascii(msg_id: Any, result: Dict[str, Any]) -> None:
    # Compact UTF-8 JSON; when some text holds a lone surrogate (UTF-8 cannot carry
    # it), the whole message with every non-ASCII character escaped.
    response = jsonrpc.result_response(msg_id, result)
    try:
        expected = json.dumps(response, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        expected = json.dumps(response, separators=(",", ":")).encode("ascii")
    assert jsonrpc.dumps(response) == expected
    assert json.loads(expected) == {"jsonrpc": "2.0", "id": msg_id, "result": result}


def test_dumps_works_again_after_a_failure() -> None:
    loop_list: List[Any] = [1]
    loop_list.append(loop_list)
    loop_dict: Dict[str, Any] = {"a": [{"b": None}]}
    loop_dict["a"][0]["b"] = loop_dict
    for circular in (loop_list, loop_dict, [[loop_list]]):
        with pytest.raises(ValueError, match="[Cc]ircular"):
            jsonrpc.dumps(circular)
        with pytest.raises(ValueError):
            jsonrpc.dumps_str(circular)
        assert jsonrpc.dumps({"after": [1, {"x": "\u00e9"}]}) == '{"after":[1,{"x":"\u00e9"}]}'.encode("utf-8")
    # The containers that were being encoded when it failed are not left marked.
    loop_list.pop()
    del loop_dict["a"][0]["b"]
    assert jsonrpc.dumps(loop_list) == b"[1]"
    assert jsonrpc.dumps([loop_dict, loop_dict]) == b'[{"a":[{}]},{"a":[{}]}]'  # shared, not circular
    for bad, error in (([1, {"x": float("nan")}], ValueError), ([{"x": object()}], TypeError)):
        with pytest.raises(error):
            jsonrpc.dumps(bad)
        bad[-1]["x"] = 2
        assert jsonrpc.dumps(bad) == json.dumps(bad, separators=(",", ":")).encode()
    deep: List[Any] = []
    inner = deep
    for _ in range(100000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(RecursionError):
        jsonrpc.dumps(deep)
    deep[0] = 1
    assert jsonrpc.dumps(deep) == b"[1]"


def test_dumps_from_two_threads_at_once() -> None:
    # One encoder serves every call: a second thread encoding while the first is in the
    # middle of an encoding (a thread switch inside it; forced here by a dict subclass
    # whose Python `items` runs the other thread) must not see the first one's state.
    shared: List[Any] = []
    other: List[Any] = []

    class SwitchesThread(dict):  # type: ignore[type-arg]
        switched = False

        def items(self) -> Any:  # type: ignore[override]
            if not SwitchesThread.switched:
                SwitchesThread.switched = True

                def encode() -> None:
                    try:
                        other.append(jsonrpc.dumps(shared))
                    except Exception as exc:  # (reported below)
                        other.append(exc)
                thread = threading.Thread(target=encode)
                thread.start()
                thread.join(10)
            return super().items()

    shared.append(SwitchesThread(a=1))
    try:
        first: Any = jsonrpc.dumps(shared)
    except Exception as exc:
        first = exc
    assert (first, other) == (b'[{"a":1}]', [b'[{"a":1}]'])
    assert jsonrpc.dumps(shared) == b'[{"a":1}]'  # and later calls work


def _old_loads(data: Any) -> Tuple[str, Any]:
    """`jsonrpc.loads` before the fast path (json semantics, NaN/Infinity/1e999 and a
    BOM refused, every failure PARSE_ERROR), as (kind, value or message)."""
    def reject_constant(name: str) -> Any:
        raise ValueError("invalid JSON constant %s" % name)

    def parse_float(text: str) -> float:
        value = float(text)
        if value in (float("inf"), -float("inf")):
            raise ValueError("number out of range: %s" % text[:40])
        return value

    try:
        if not isinstance(data, str):
            data = bytes(data).decode("utf-8")
        if data.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", data, 0)
        return "ok", json.JSONDecoder(parse_constant=reject_constant, parse_float=parse_float).decode(data)
    except (ValueError, RecursionError) as exc:
        return "error", "Parse error: %s" % exc


LOADS_INPUTS = [
    '{}', '{"a":1}', '{"a":[1,2.5,"x",null,true,false,{"b":{}}]}', '{"a":1,"a":2}', '{"\\u00e9":"\\ud800"}',
    '{"a":1} ', '{"a":1}\n', '{"a":1}\r\n\t', ' {"a":1}', '\n{"a":1}\n', '{ "a" : 1 }',
    '{"a":1}x', '{"a":1}{"b":2}', '{"a":1},', '{"a":1}\x00', '{"a":1', '{', '{"a"', '{"a":}', '{"a":1,}',
    "{'a':1}", '{"a":01}', '{"a":"\x01"}', '{"a":"\\x"}', '{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}',
    '{"a":1e999}', '{"a":-1E400}', '{"a":1e308}', '\ufeff{"a":1}', '{"a":' * 100000 + '1' + '}' * 100000,
    '[1]', '"x"', '1', 'null', '', ' ', '{}{}', '{"a":"unterminated}',
    b'{"a":"\xc3\xa9"}', b'{"a":"\xff"}', b'\xef\xbb\xbf{"a":1}', bytearray(b'{"a":1} '), memoryview(b'{"b":2}'),
]


@pytest.mark.parametrize("data", LOADS_INPUTS, ids=["%d" % i for i in range(len(LOADS_INPUTS))])
def test_loads_behaves_as_before(data: Any) -> None:
    expected = _old_loads(data)
    try:
        got: Tuple[str, Any] = ("ok", jsonrpc.loads(data))
    except JsonRpcError as exc:
        assert exc.code == PARSE_ERROR
        got = ("error", exc.message)
    assert got == expected
    if expected[0] == "ok":
        assert jsonrpc.loads(data) == expected[1]  # and again (nothing left over from the last call)


# ======================================================== mcp and the IDE server


def call_app(app: McpApp, method: str, body: Any = None, sid: Optional[str] = None) -> Any:
    """The application's answer to one request, called as the transport calls it."""
    fields = [("Authorization", "Nonce secret"), ("Host", "x")]
    if sid is not None:
        fields.append(("mcp-session-id", sid))
    data = jsonrpc.dumps(body) if body is not None else b""
    return app(http11.Request(method, "/mcp", fields), data, 1)


def test_mcp_answers_closed_unrun_let_go_of_everything() -> None:
    ran: List[str] = []

    async def slow(params: Any, ctx: Any) -> Any:
        ran.append("slow")
        await asyncio.sleep(3600)

    async def async_note(params: Any, ctx: Any) -> None:
        ran.append("async_note")

    def plain_note(params: Any, ctx: Any) -> Any:
        async def body() -> None:
            ran.append("plain_note")
        return body()

    async def main() -> None:
        d = Dispatcher()
        d.add("slow", slow)
        d.add("slow_pending", slow)
        d.add("notifications/async", async_note)
        d.add("notifications/plain", plain_note)
        app = McpApp(d, "secret", streams_early=lambda msg: msg.method == "slow")

        answer = call_app(app, "POST", jsonrpc.request(0, "initialize", {"protocolVersion": "2025-11-25"}))
        assert type(answer) is Reply and answer.status == 200 and answer.chunked
        session, = app.sessions.values()
        sid = session.id
        # A GET stream, given up before the transport took it: the session has no
        # stream any more (so it may idle-expire).
        answer = call_app(app, "GET", sid=sid)
        assert type(answer) is Stream and session.stream is answer.chunks and session.busy
        answer.close()
        assert session.stream is None and not session.busy
        # Requests that wait, given up: no running entry, no active request, never ran.
        for method, kind in (("slow", Stream), ("slow_pending", PendingReply)):
            answer = call_app(app, "POST", jsonrpc.request(5, method, {}), sid)
            assert type(answer) is kind and list(session.running) == [5] and session.active_requests == 1
            answer.close()
            assert session.running == {} and session.active_requests == 0 and not session.busy
        # Async notification handlers (a coroutine function, a plain function returning
        # a coroutine): the 202 waits for them; closed unrun, nothing is left un-awaited.
        for method in ("notifications/async", "notifications/plain"):
            answer = call_app(app, "POST", jsonrpc.notification(method, {}), sid)
            assert type(answer) is PendingReply
            answer.close()
        assert ran == []
        # Run instead of closed, they run and then answer 202.
        for method in ("notifications/async", "notifications/plain"):
            reply = await call_app(app, "POST", jsonrpc.notification(method, {}), sid).run()
            assert (reply.status, reply.body) == (202, b"")
        assert ran == ["async_note", "plain_note"]
        # A request cancelled before it ran: the method never runs, the answer is an
        # empty stream (PROTOCOL.md §3: no answer is due).
        pending = call_app(app, "POST", jsonrpc.request(6, "slow_pending", {}), sid)
        cancel = call_app(app, "POST", jsonrpc.notification("notifications/cancelled", {"requestId": 6}), sid)
        assert type(cancel) is Reply and cancel.status == 202
        reply = await pending.run()
        assert (reply.status, reply.body, reply.chunked) == (200, b"", True)
        assert ran == ["async_note", "plain_note"] and session.running == {} and session.active_requests == 0
        # The same with the session ending first; and for the stream that waits.
        pending = call_app(app, "POST", jsonrpc.request(7, "slow_pending", {}), sid)
        stream = call_app(app, "POST", jsonrpc.request(8, "slow", {}), sid)
        app.end_session(session, "test")
        reply = await pending.run()
        assert (reply.status, reply.body) == (200, b"")
        assert [chunk async for chunk in stream.chunks] == []
        stream.close()
        assert ran == ["async_note", "plain_note"] and session.running == {} and session.active_requests == 0

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        run(main())
        gc.collect()
    assert unawaited(records) == []


def open_diff_message(msg_id: Any, tab: str, path: str) -> Dict[str, Any]:
    return jsonrpc.request(msg_id, "tools/call", {"name": "open_diff", "arguments": {
        "original_file_path": path, "new_file_contents": "new\n", "tab_name": tab}})


async def ready_conn(cli: Cli) -> Conn:
    """A new pooled connection the server has taken up (a ping answered on it)."""
    conn = await cli.new_conn()
    assert await cli.request("ping", conn=conn) == {}
    return conn


@pytest.mark.parametrize("how", ["notifications/cancelled", "DELETE"])
def test_cancelled_before_its_task_started_leaves_nothing(tmp_path: Any, starts_later: bool, how: str) -> None:
    diffs: List[str] = []
    closed: List[str] = []

    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: diffs.append(d.tab_name),
                               on_diff_closed=lambda d, a: closed.append(a["trigger"])) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            session = server.app.sessions[cli.session_id]
            blocked, other = await ready_conn(cli), await ready_conn(cli)
            # Both written now, so both are read in the server's next loop pass, in
            # this order (the selector reports sockets in the order they became
            # readable): the cancellation comes before the request's task can start
            # when tasks start one pass later.
            blocked.send_raw(cli.encode("POST", open_diff_message(70, "t", str(tmp_path / "f"))), expect="POST")
            if how == "DELETE":
                other.send_raw(cli.encode("DELETE"), expect="DELETE")
            else:
                other.send_raw(cli.encode("POST", jsonrpc.notification(how, {"requestId": 70, "reason": "r"})),
                               expect="POST")
            reply = await asyncio.wait_for(blocked.read_reply(), 5)
            assert (await other.read_reply()).status == (200 if how == "DELETE" else 202)
            assert reply.status == 200 and reply.complete and reply.content_type == "text/event-stream"
            # Whether the method had started when the cancellation came depends on the
            # loop's timing; either way nothing is left behind and the answer is whole.
            if not diffs:  # it never ran: the answer is an empty stream
                assert closed == [] and reply.body == b""
            else:  # it had started: the diff was given up
                assert diffs == ["t"] and closed == ["client_disconnected"]
                if how == "DELETE":  # the session's end is answered (PROTOCOL.md §4)
                    assert tool_json(reply.message["result"])["trigger"] == "client_disconnected"
                else:
                    assert reply.body == b""
            assert session.running == {} and session.active_requests == 0 and not session.busy
            assert server.stats()["running_requests"] == 0 and server.stats()["pending_diffs"] == 0
            await until(lambda: server.stats()["connection_tasks"] == 0, what="handler tasks ended")
            if how != "DELETE":  # the session and both connections go on
                assert await cli.request("ping", conn=blocked) == {}
                assert tool_json(await cli.call_tool("update_session_name", {"name": "n"}, conn=other)) == {
                    "success": True}
                assert server.expire_idle_sessions(now=time.monotonic() + server.limits.idle_timeout + 1) == 1
            cli.close()
    run(main())


@platforms.vanishing_peers_counted
def test_dropped_before_its_task_started_leaves_nothing(tmp_path: Any, starts_later: bool) -> None:
    diffs: List[str] = []
    closed: List[str] = []

    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: diffs.append(d.tab_name),
                               on_diff_closed=lambda d, a: closed.append(a["trigger"])) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            session = server.app.sessions[cli.session_id]
            accepted = server.stats()["accepted_connections"]
            # A GET stream and a blocking open_diff, each from a peer gone before the
            # answer's head could be written.
            send_and_vanish(server.socket_path, cli.encode("GET"))
            send_and_vanish(server.socket_path, cli.encode("POST", open_diff_message(9, "t", str(tmp_path / "f"))))
            await until(lambda: server.stats()["accepted_connections"] == accepted + 2
                        and server.stats()["connections"] == 1, what="both connections released")
            assert server.stats()["connection_tasks"] == 0
            # A diff shown (as the timing gives) is reported closed too; the report runs
            # as the IDE's callback, a moment after the connection was released.
            await until(lambda: len(closed) == len(diffs), what="the shown diff reported closed")
            assert (diffs, closed) in (([], []), (["t"], ["client_disconnected"]))
            assert session.stream is None and session.running == {} and session.active_requests == 0
            stats = server.stats()
            assert (stats["streams"], stats["running_requests"], stats["pending_diffs"]) == (0, 0, 0)
            # Not busy any more: the abandoned session expires when idle long enough.
            assert server.expire_idle_sessions(now=time.monotonic() + server.limits.idle_timeout + 1) == 1
            assert server.stats()["sessions"] == 0
            cli.close()
    run(main())


def test_every_request_is_checked_even_with_a_head_seen_before(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)  # on cli.pool[0]
            conn, other = await cli.new_conn(), await cli.new_conn()
            checks: List[Any] = []
            compare = hmac.compare_digest

            def counting(a: Any, b: Any) -> bool:
                checks.append(a)
                return compare(a, b)

            with mock.patch.object(mcp_module.hmac, "compare_digest", counting):
                for _ in range(3):  # the same head bytes each time: the nonce compared each time
                    assert await cli.request("ping", conn=conn) == {}
                assert checks == [server.nonce.encode()] * 3
            # Byte-identical but for the nonce, the Origin, the path or the version:
            # refused, each on a connection that sent the accepted head just before.
            wrong = Cli(server.socket_path, "0" * 32, client_session_id=cli.client_session_id)
            wrong.session_id = cli.session_id
            for data, status in ((wrong.encode("POST", jsonrpc.request(90, "ping")), 401),
                                 (cli.encode("POST", jsonrpc.request(91, "ping"), extra=[("Origin", "http://x")]), 403),
                                 (cli.encode("POST", jsonrpc.request(92, "ping"), target="/other"), 404),
                                 (cli.encode("POST", jsonrpc.request(93, "ping"),
                                             extra=[("mcp-protocol-version", "1999-01-01")]), 400)):
                probe = await cli.new_conn()
                assert await cli.request("ping", conn=probe) == {}
                probe.send_raw(data, expect="POST")
                reply = await probe.read_reply()
                assert reply.status == status and reply.complete
            for _ in range(2):
                assert await cli.request("ping", conn=conn) == {}
            # The session ends (DELETE on another connection): the same head bytes on
            # this one now find no session.
            assert (await cli.delete(conn=other)).status == 200
            for _ in range(2):
                reply = await cli.send_request("ping", conn=conn)
                assert reply.status == 404
                assert reply.message["error"] == {"code": -32001, "message": "Session not found"}
            assert server.stats()["sessions"] == 0
            # A new session with the same id (the CLI's X-Copilot-Session-Id, PROTOCOL.md
            # §3), then replaced by another: the same head bytes reach the live session,
            # never the one that ended.
            await cli.handshake(probes=0)
            old = server.app.sessions[cli.session_id]
            assert await cli.request("ping", conn=conn) == {}
            await cli.handshake(probes=0)  # `old` replaced
            new = server.app.sessions[cli.session_id]
            assert new is not old and old.ended
            assert tool_json(await cli.call_tool("update_session_name", {"name": "fresh"}, conn=conn)) == {
                "success": True}
            assert new.name == "fresh" and old.name is None
            cli.close()
    run(main())


def test_plain_tools_answer_at_once_and_the_selection_result_follows_changes(tmp_path: Any) -> None:
    tasks: List[Tuple[str, Any]] = []

    async def main() -> None:
        async with make_server(tmp_path, debounce=0, on_diff=lambda d: True,
                               on_tool_call=lambda call, sid, result: tasks.append(
                                   (call["name"], asyncio.current_task()))) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]

            async def get_selection(msg_id: Any, arguments: Any = None) -> Tuple[Any, bytes]:
                params: Dict[str, Any] = {"name": "get_selection"}
                if arguments is not None:
                    params["arguments"] = arguments
                reply = await cli.post(jsonrpc.request(msg_id, "tools/call", params), conn=conn)
                assert reply.status == 200 and len(reply.events) == 1
                return reply.message, reply.events[0].data.encode("utf-8")

            def plain_bytes(msg_id: Any, tool_result: Any) -> bytes:
                # What the answer was before the cached rendering: the plain result dict.
                message = jsonrpc.result_response(msg_id, tools.text_result(tool_result))
                return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

            message, data = await get_selection(1, {})
            assert data == plain_bytes(1, None)  # nothing selected yet: the text `null`
            path = str(tmp_path / "ws" / "caf\u00e9.py")
            first = Selection(path, "x = '\u00e9\U0001F600'\n", (0, 0), (1, 0))
            second = Selection(path, "second", (3, 1), (3, 7))
            server.set_selection(first)
            for msg_id in (2, 'q"\\\n\u00e9', 3):  # the cached rendering, spliced under each id
                message, data = await get_selection(msg_id)
                assert data == plain_bytes(msg_id, first.tool_result())
                assert tool_json(message["result"]) == first.tool_result()
            server.set_selection(second)
            message, data = await get_selection(4)
            assert tool_json(message["result"]) == second.tool_result() and data == plain_bytes(4, second.tool_result())
            server.set_selection(None)  # no active editor: the last one, no longer current
            message, data = await get_selection(5)
            assert tool_json(message["result"]) == second.tool_result(current=False)
            assert data == plain_bytes(5, second.tool_result(current=False))
            message, _ = await get_selection(6, {"unexpected": 1})
            assert "unexpected" in tool_error(message["result"])
            # Plain tools ran inside data_received (no task); open_diff waits in one.
            assert tool_json(await cli.call_tool("open_diff", {"original_file_path": path, "new_file_contents": "y",
                                                               "tab_name": "t"}, conn=conn))["result"] == "SAVED"
            assert [name for name, _ in tasks] == ["get_selection"] * 7 + ["open_diff"]
            assert all(task is None for _, task in tasks[:7]) and tasks[7][1] is not None
            cli.close()
    run(main())


def test_an_async_notification_handler_is_answered_after_it_and_in_order(tmp_path: Any, starts_later: bool) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            release = asyncio.Event()
            seen: List[str] = []

            async def slow_note(params: Any, ctx: Any) -> None:
                seen.append("started")
                await release.wait()
                seen.append("done")

            server.dispatcher.add("notifications/slow", slow_note)
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            conn.send_raw(cli.encode("POST", jsonrpc.notification("notifications/slow", {}))
                          + cli.encode("POST", jsonrpc.request(50, "ping")))
            await until(lambda: seen == ["started"], what="handler started")
            await asyncio.sleep(0.02)
            release.set()
            conn.parser.expect("POST")
            first = await conn.read_reply()
            assert (first.status, first.body) == (202, b"") and seen == ["started", "done"]
            conn.parser.expect("POST")
            second = await conn.read_reply()
            assert second.message == {"jsonrpc": "2.0", "id": 50, "result": {}}
            await until(lambda: server.stats()["connection_tasks"] == 0, what="handler task ended")
            cli.close()
    run(main())


def test_a_waiting_tool_given_up_before_it_ran_leaves_nothing(tmp_path: Any, starts_later: bool) -> None:
    # A tool that waits (a coroutine function) runs in the request's task. Cancelled
    # before that task started, nothing of it may be left un-awaited: no "never awaited".
    ran: List[str] = []

    async def main() -> None:
        async with make_server(tmp_path) as server:
            async def work(arguments: Any, ctx: Any) -> Any:
                ran.append("work")
                await asyncio.sleep(3600)

            server.tools.add("custom_wait", work)
            cli = cli_for(server)
            await cli.handshake(probes=0)
            blocked, other = await ready_conn(cli), await ready_conn(cli)
            blocked.send_raw(cli.encode("POST", jsonrpc.request(80, "tools/call", {"name": "custom_wait",
                                                                                  "arguments": {}})), expect="POST")
            other.send_raw(cli.encode("POST", jsonrpc.notification("notifications/cancelled", {"requestId": 80})),
                           expect="POST")
            reply = await asyncio.wait_for(blocked.read_reply(), 5)
            assert (await other.read_reply()).status == 202
            assert (reply.status, reply.body, reply.complete) == (200, b"", True)
            assert ran in ([], ["work"])  # (as the timing gives: closed unrun, or cancelled)
            assert server.stats()["running_requests"] == 0
            cli.close()

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        run(main())
        gc.collect()
    assert unawaited(records) == []
