"""JSON-RPC: the sans-IO codec and classifier (`ide_protocol.wire.jsonrpc`), and the
asyncio layer on it (`ide_protocol.rpc`: the dispatcher, outgoing bookkeeping, Peer)."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from ide_protocol import rpc
from ide_protocol.wire import jsonrpc
from ide_protocol.rpc import Dispatcher, Outgoing, Peer
from ide_protocol.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorResponse,
    Invalid,
    JsonRpcError,
    Notification,
    Request,
    Response,
    TransportClosed,
    decode_message,
    dumps,
    loads,
    parse_message,
)


def run(coro):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


# ---------------------------------------------------------------------------- codec


def test_standard_codes():
    assert (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR) == (
        -32700, -32600, -32601, -32602, -32603)
    assert JsonRpcError(INVALID_PARAMS).message == "Invalid params"
    assert JsonRpcError(-32001, "Session not found").to_dict() == {"code": -32001, "message": "Session not found"}
    assert JsonRpcError(5, "custom", {"x": 1}).to_dict() == {"code": 5, "message": "custom", "data": {"x": 1}}
    assert JsonRpcError(12345).message == "Error"


def test_dumps_compact_utf8_non_ascii():
    out = dumps({"a": [1, 2], "t": "caf\u00e9 \u65e5\u672c \U0001F600 \u2028"})
    assert out == '{"a":[1,2],"t":"caf\u00e9 \u65e5\u672c \U0001F600 \u2028"}'.encode("utf-8")
    assert jsonrpc.dumps_str({"t": "\u00e9"}) == '{"t":"\u00e9"}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_dumps_refuses_nan_and_infinity(value):
    with pytest.raises(ValueError):
        dumps({"x": value})


@pytest.mark.parametrize("text", [b"NaN", b"[Infinity]", b'{"x":-Infinity}', b"[1e999]", b"-1E400"])
def test_loads_refuses_non_finite_numbers(text):
    # 1e999 is valid JSON syntax but decodes to inf, which dumps() then refuses: a peer
    # could make us unable to echo its own params (bug found and fixed).
    with pytest.raises(JsonRpcError) as info:
        loads(text)
    assert info.value.code == PARSE_ERROR


def test_lone_surrogates_round_trip_as_escapes():
    # "\ud800" is accepted by loads; dumps used to crash with UnicodeEncodeError.
    obj = loads(b'{"s":"\\ud800x","e":"\\u00e9"}')
    out = dumps(obj)
    assert loads(out) == obj
    assert json.loads(jsonrpc.dumps_str(obj)) == obj


# Short ids: pytest puts the test's id in an environment variable (PYTEST_CURRENT_TEST),
# and Windows refuses one longer than 32 767 characters, as 100 000 brackets would make.
@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", b"[1,]", b"{'a':1}", "\ufeff{}".encode("utf-8"),
                                  b"[" * 100000],
                         ids=["empty", "open-brace", "not-utf8", "trailing-comma", "single-quotes", "bom",
                              "100000-brackets"])
def test_loads_parse_errors(data):
    with pytest.raises(JsonRpcError) as info:
        loads(data)
    assert info.value.code == PARSE_ERROR


def test_loads_accepts_str_bytes_bytearray_memoryview():
    for data in ('{"a":1}', b'{"a":1}', bytearray(b'{"a":1}'), memoryview(b'{"a":1}')):
        assert loads(data) == {"a": 1}


# ------------------------------------------------------------------- classification


@pytest.mark.parametrize("msg_id", [0, 1, -5, 2 ** 53 + 1, "", "abc", "0", "\u00e9"])
def test_request_ids_numbers_strings_and_zero(msg_id):
    msg = parse_message({"jsonrpc": "2.0", "id": msg_id, "method": "m", "params": {"a": 1}})
    assert isinstance(msg, Request) and msg.kind == "request"
    assert msg.id == msg_id and type(msg.id) is type(msg_id)
    assert msg.method == "m" and msg.params == {"a": 1}
    resp = parse_message({"jsonrpc": "2.0", "id": msg_id, "result": None})
    assert isinstance(resp, Response) and resp.id == msg_id and resp.result is None


def test_classification_of_every_kind():
    assert isinstance(parse_message({"jsonrpc": "2.0", "method": "n"}), Notification)
    n = parse_message({"jsonrpc": "2.0", "method": "n", "params": [1]})
    assert n.kind == "notification" and n.params == [1]
    r = parse_message({"jsonrpc": "2.0", "id": 3, "method": "m"})
    assert isinstance(r, Request) and r.params is None
    ok = parse_message({"jsonrpc": "2.0", "id": 3, "result": {"x": 1}})
    assert isinstance(ok, Response) and ok.result == {"x": 1} and ok.kind == "response"
    err = parse_message({"jsonrpc": "2.0", "id": 3, "error": {"code": -32001, "message": "nope", "data": 7}})
    assert isinstance(err, ErrorResponse) and err.kind == "error"
    assert (err.id, err.error.code, err.error.message, err.error.data) == (3, -32001, "nope", 7)
    null_err = parse_message({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert isinstance(null_err, ErrorResponse) and null_err.id is None


@pytest.mark.parametrize("obj, msg_id", [
    ([], None),
    ([{"jsonrpc": "2.0", "method": "batch"}], None),
    ("string", None),
    (None, None),
    (5, None),
    ({}, None),
    ({"id": 1, "method": "m"}, 1),
    ({"jsonrpc": "1.0", "id": 1, "method": "m"}, 1),
    ({"jsonrpc": 2.0, "id": "a", "method": "m"}, "a"),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": "x"}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": None}, 1),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "m"}, None),
    ({"jsonrpc": "2.0", "id": [1], "method": "m"}, None),
    ({"jsonrpc": "2.0", "id": {}, "method": "m"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "m"}, None),
    ({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "x"}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": "bad"}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "x"}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, 1),
    ({"jsonrpc": "2.0", "result": 1}, None),
    ({"jsonrpc": "2.0", "id": None, "result": 1}, None),
    ({"jsonrpc": "2.0", "id": False, "result": 1}, None),
    ({"jsonrpc": "2.0", "id": 2}, 2),
])
def test_invalid_messages(obj, msg_id):
    msg = parse_message(obj)
    assert isinstance(msg, Invalid), msg
    assert msg.kind == "invalid"
    assert msg.error.code == INVALID_REQUEST
    assert msg.id == msg_id
    assert msg.raw is obj


def test_null_id_request_is_answered_not_treated_as_notification():
    # JSON-RPC 2.0 §4: only a request *without* an id member is a notification. MCP and
    # ACP forbid null ids, so this is an invalid request that must get an answer.
    msg = parse_message({"jsonrpc": "2.0", "id": None, "method": "tools/list"})
    assert isinstance(msg, Invalid)
    assert run(Dispatcher().dispatch(msg)) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": msg.error.message}}


def test_decode_message():
    assert isinstance(decode_message(b'{"jsonrpc":"2.0","method":"x"}'), Notification)
    bad = decode_message(b"{nope")
    assert isinstance(bad, Invalid) and bad.error.code == PARSE_ERROR and bad.id is None
    assert decode_message("[]").error.code == INVALID_REQUEST


def test_builders():
    assert jsonrpc.request(0, "m") == {"jsonrpc": "2.0", "id": 0, "method": "m"}
    assert jsonrpc.request("a", "m", {"x": 1})["params"] == {"x": 1}
    assert jsonrpc.notification("n", [1]) == {"jsonrpc": "2.0", "method": "n", "params": [1]}
    assert jsonrpc.result_response(0, None) == {"jsonrpc": "2.0", "id": 0, "result": None}
    assert jsonrpc.error_response(None, JsonRpcError(PARSE_ERROR)) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    for built in (jsonrpc.request(1, "m", {}), jsonrpc.notification("n"), jsonrpc.result_response(1, 2),
                  jsonrpc.error_response(1, {"code": 1, "message": "m"})):
        assert not isinstance(parse_message(built), Invalid)


def test_require_params():
    assert jsonrpc.require_params(None) == {}
    assert jsonrpc.require_params({"a": 1}, ("a",), {"a": int}) == {"a": 1}
    for params, required, types in ([1], (), None), ({}, ("a",), None), ({"a": "x"}, (), {"a": int}), (
            {"a": True}, (), {"a": int}):
        with pytest.raises(JsonRpcError) as info:
            jsonrpc.require_params(params, required, types)
        assert info.value.code == INVALID_PARAMS


# ----------------------------------------------------------------------- dispatcher


def make_dispatcher():
    d = Dispatcher()
    seen = []

    def sync_echo(params, context):
        return {"params": params, "context": context}

    async def async_add(params, context):
        await asyncio.sleep(0)
        return params[0] + params[1]

    def boom(params, context):
        raise KeyError("secret")

    async def async_boom(params, context):
        raise ZeroDivisionError()

    def custom(params, context):
        raise JsonRpcError(-32001, "Session not found", {"hint": 1})

    def record(params, context):
        seen.append(params)

    d.add("echo", sync_echo)
    d.add("add", async_add)
    d.add("boom", boom)
    d.add("async_boom", async_boom)
    d.add("custom", custom)
    d.add("record", record)

    @d.method("decorated")
    def decorated(params, context):
        return "yes"

    return d, seen


def req(id, method, params=None):
    return parse_message(jsonrpc.request(id, method, params))


def test_dispatch_sync_and_async_handlers():
    d, _ = make_dispatcher()
    assert run(d.dispatch(req(1, "echo", {"a": 1}), "ctx")) == {
        "jsonrpc": "2.0", "id": 1, "result": {"params": {"a": 1}, "context": "ctx"}}
    assert run(d.dispatch(req("s", "add", [2, 3]))) == {"jsonrpc": "2.0", "id": "s", "result": 5}
    assert run(d.dispatch(req(0, "decorated")))["result"] == "yes"
    assert "echo" in d and "nope" not in d


def test_dispatch_errors(caplog):
    d, _ = make_dispatcher()
    with caplog.at_level(logging.ERROR, logger="ide_protocol.wire.jsonrpc"):
        out = run(d.dispatch(req(2, "boom")))
    assert out["id"] == 2 and out["error"]["code"] == INTERNAL_ERROR
    assert "KeyError" in out["error"]["message"]
    assert any("boom" in r.getMessage() for r in caplog.records)
    assert run(d.dispatch(req(3, "async_boom")))["error"]["code"] == INTERNAL_ERROR
    assert run(d.dispatch(req(4, "custom")))["error"] == {"code": -32001, "message": "Session not found",
                                                          "data": {"hint": 1}}
    missing = run(d.dispatch(req(5, "missing")))
    assert missing["error"]["code"] == METHOD_NOT_FOUND and missing["id"] == 5
    wrong_signature = Dispatcher()
    wrong_signature.add("x", lambda: None)
    assert run(wrong_signature.dispatch(req(6, "x")))["error"]["code"] == INTERNAL_ERROR


def test_notifications_never_answered():
    d, seen = make_dispatcher()
    for method in ("record", "boom", "async_boom", "custom", "missing", "echo"):
        assert run(d.dispatch(parse_message(jsonrpc.notification(method, {"m": method})))) is None
    assert seen == [{"m": "record"}]


def test_dispatch_invalid_and_responses():
    d, _ = make_dispatcher()
    assert run(d.dispatch(parse_message({"id": 9, "method": "echo"})))["error"]["code"] == INVALID_REQUEST
    assert run(d.dispatch(parse_message({"id": 9, "method": "echo"})))["id"] == 9
    assert run(d.dispatch(decode_message(b"garbage")))["error"]["code"] == PARSE_ERROR
    assert run(d.dispatch(parse_message(jsonrpc.result_response(1, 1)))) is None


def test_fallback_handler_and_remove():
    d = Dispatcher(fallback=lambda params, context: "fallback")
    assert run(d.dispatch(req(1, "anything")))["result"] == "fallback"
    d.add("x", lambda p, c: "x")
    d.remove("x")
    assert run(d.dispatch(req(1, "x")))["result"] == "fallback"


def test_set_fallback_replaces_and_removes_it():
    d = Dispatcher()
    assert run(d.dispatch(req(1, "y")))["error"]["code"] == METHOD_NOT_FOUND

    async def later(params, context):
        return "later"

    d.set_fallback(later)
    assert run(d.dispatch(req(2, "y")))["result"] == "later"
    assert d.handler_for("y") is later
    d.set_fallback(None)
    assert run(d.dispatch(req(3, "y")))["error"]["code"] == METHOD_NOT_FOUND
    assert d.handler_for("y") is None


def test_cancelled_error_propagates():
    d = Dispatcher()

    async def cancelled(params, context):
        raise asyncio.CancelledError()

    d.add("c", cancelled)
    with pytest.raises(asyncio.CancelledError):
        run(d.dispatch(req(1, "c")))


def test_dispatch_results_are_always_encodable():
    d, _ = make_dispatcher()
    for msg in (req(1, "echo", {"t": "\u00e9\ud800"}), decode_message(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1e999]}')):
        out = run(d.dispatch(msg))
        assert loads(dumps(out))["id"] in (1, None)


# ------------------------------------------------------------------------- outgoing


def test_outgoing_ids_match_out_of_order_and_strings():
    async def main():
        out = Outgoing()
        ids = []
        futures = []
        for i in range(3):
            msg_id, msg, future = out.start("m%d" % i, {"i": i})
            assert msg == {"jsonrpc": "2.0", "id": msg_id, "method": "m%d" % i, "params": {"i": i}}
            ids.append(msg_id)
            futures.append(future)
        assert ids == [0, 1, 2] and len(out) == 3
        assert out.method_of(1) == "m1"
        assert out.resolve(parse_message(jsonrpc.result_response(2, "two")))
        assert out.resolve(parse_message(jsonrpc.error_response(0, JsonRpcError(-32001, "x"))))
        # Matched by value and type: "1" (or true) is not request 1's id.
        assert not out.resolve(parse_message(jsonrpc.result_response("1", "forged")))
        assert not out.resolve(jsonrpc.Response({"id": True}, True, "forged"))  # type: ignore[arg-type]
        assert out.resolve(parse_message(jsonrpc.result_response(1, "one")))
        assert await futures[2] == "two" and await futures[1] == "one"
        with pytest.raises(JsonRpcError) as info:
            await futures[0]
        assert info.value.code == -32001
        assert len(out) == 0
        assert not out.resolve(parse_message(jsonrpc.result_response(2, "again")))
        assert not out.resolve(parse_message(jsonrpc.result_response(99, None)))
        assert not out.resolve(parse_message(jsonrpc.request(5, "m")))
        assert not out.resolve(parse_message(jsonrpc.error_response(None, JsonRpcError(PARSE_ERROR))))
        assert Outgoing(first_id=10).start("m").id == 10

    run(main())


@pytest.mark.parametrize("odd_id", ["\u00b2", "\u0661", "1" * 5000, "-1", " 1", "", "1.0"])
def test_outgoing_odd_string_ids_never_crash(odd_id):
    # "²".isdigit() is True but int("²") raises; a huge digit string raises on 3.11+.
    async def main():
        out = Outgoing()
        out.start("m")
        out.start("m")
        assert out.resolve(parse_message(jsonrpc.result_response(odd_id, None))) is False
        assert len(out) == 2

    run(main())


def test_outgoing_cancel_and_fail_all():
    async def main():
        out = Outgoing()
        id0, _, f0 = out.start("a")
        id1, _, f1 = out.start("b")
        out.cancel(id0)
        assert f0.cancelled()
        assert not out.resolve(parse_message(jsonrpc.result_response(id0, "late")))
        out.cancel(12345)  # unknown: harmless
        err = TransportClosed("gone")
        out.fail_all(err)
        assert out.closed is err and len(out) == 0
        with pytest.raises(TransportClosed):
            await f1
        with pytest.raises(TransportClosed):
            out.start("c")

    run(main())


# ----------------------------------------------------------------------------- Peer


class Pipe:
    """Two peers connected back to back through JSON text (as a transport would)."""

    def __init__(self):
        self.sent_a = []
        self.sent_b = []
        self.a = None
        self.b = None

    async def send_from_a(self, msg):
        self.sent_a.append(msg)
        await self.b.receive(json.loads(dumps(msg).decode("utf-8")))

    async def send_from_b(self, msg):
        self.sent_b.append(msg)
        await self.a.receive(json.loads(dumps(msg).decode("utf-8")))


def make_pair():
    pipe = Pipe()
    da, db = Dispatcher(), Dispatcher()
    pipe.a = Peer(pipe.send_from_a, da, context="A")
    pipe.b = Peer(pipe.send_from_b, db, context="B")
    return pipe, da, db


def test_peer_both_directions():
    async def main():
        pipe, da, db = make_pair()
        notes = []

        async def ask_back(params, context):
            # B, while handling A's request, asks A something and waits for it.
            answer = await pipe.b.request("whoami")
            return {"b_context": context, "a_said": answer}

        db.add("ask", ask_back)
        da.add("whoami", lambda params, context: context)
        da.add("note", lambda params, context: notes.append(params))
        result = await pipe.a.request("ask", {"x": 1})
        assert result == {"b_context": "B", "a_said": "A"}
        await pipe.b.notify("note", {"n": 1})
        await pipe.a.wait_handlers()
        assert notes == [{"n": 1}]
        with pytest.raises(JsonRpcError) as info:
            await pipe.a.request("missing")
        assert info.value.code == METHOD_NOT_FOUND

    run(main())


def test_peer_out_of_order_responses():
    async def main():
        sent = []
        peer = Peer(lambda msg: _append(sent, msg))
        t1 = asyncio.ensure_future(peer.request("slow"))
        t2 = asyncio.ensure_future(peer.request("fast"))
        await asyncio.sleep(0)
        assert [m["id"] for m in sent] == [0, 1]
        await peer.receive(jsonrpc.result_response(1, "fast"))
        await peer.receive(jsonrpc.result_response(0, "slow"))
        assert await t1 == "slow" and await t2 == "fast"

    run(main())


async def _append(lst, msg):
    lst.append(msg)


def test_peer_timeout_then_late_response_is_unmatched():
    async def main():
        unmatched = []
        peer = Peer(lambda msg: _append([], msg))
        peer.on_unmatched = unmatched.append
        with pytest.raises(asyncio.TimeoutError):
            await peer.request("m", timeout=0.01)
        assert len(peer.outgoing) == 0
        await peer.receive(jsonrpc.result_response(0, "late"))
        assert [m.id for m in unmatched] == [0]

    run(main())


def test_peer_answers_invalid_requests_but_never_responses():
    async def main():
        sent = []
        unmatched = []
        peer = Peer(lambda msg: _append(sent, msg))
        peer.on_unmatched = unmatched.append
        await peer.receive({"jsonrpc": "2.0", "id": 7, "method": 3})
        await peer.receive([1, 2])
        await peer.receive_error(JsonRpcError(PARSE_ERROR))
        assert [(m["id"], m["error"]["code"]) for m in sent] == [
            (7, INVALID_REQUEST), (None, INVALID_REQUEST), (None, PARSE_ERROR)]
        del sent[:]
        # Malformed responses are never answered (JSON-RPC 2.0 §5) — bug found: one
        # with an id used to get an error response back.
        await peer.receive({"jsonrpc": "2.0", "id": 99, "result": 1, "error": {"code": 1, "message": "x"}})
        await peer.receive({"jsonrpc": "2.0", "result": 1})
        await peer.receive({"jsonrpc": "2.0", "id": 98, "error": "bad"})
        assert sent == []
        assert len(unmatched) == 3

    run(main())


def test_peer_malformed_response_fails_its_waiter():
    async def main():
        peer = Peer(lambda msg: _append([], msg))
        task = asyncio.ensure_future(peer.request("m"))
        await asyncio.sleep(0)
        await peer.receive({"jsonrpc": "2.0", "id": 0, "error": {"message": "no code"}})
        with pytest.raises(JsonRpcError) as info:
            # (the bound only keeps a regression from hanging the suite)
            await asyncio.wait_for(task, 30)
        assert info.value.code == INVALID_REQUEST

    run(main())


def test_peer_close_fails_waiters_and_cancels_handlers():
    async def main():
        sent = []
        peer = Peer(lambda msg: _append(sent, msg))
        started = asyncio.Event()

        async def forever(params, context):
            started.set()
            await asyncio.sleep(3600)

        peer.dispatcher.add("forever", forever)
        waiter = asyncio.ensure_future(peer.request("m"))
        await peer.receive(jsonrpc.request(5, "forever"))
        await started.wait()
        assert peer.handler_tasks == 1
        peer.close()
        with pytest.raises(TransportClosed):
            await waiter
        await peer.wait_handlers()
        assert peer.handler_tasks == 0
        assert [m.get("id") for m in sent] == [0]  # the cancelled handler answered nothing
        with pytest.raises(TransportClosed):
            await peer.request("after")

    run(main())


def test_peer_send_failure_does_not_leak_waiter():
    async def main():
        async def broken(msg):
            raise ConnectionResetError("gone")

        peer = Peer(broken)
        with pytest.raises(ConnectionResetError):
            await peer.request("m")
        assert len(peer.outgoing) == 0
        # Answers to incoming requests that cannot be sent are dropped quietly.
        peer.dispatcher.add("x", lambda p, c: 1)
        await peer.receive(jsonrpc.request(1, "x"))
        await peer.wait_handlers()

    run(main())


def test_peer_handles_notifications_in_order_before_a_later_response():
    # ACP.md §3: the updates of a turn arrive before the response that ends it; a peer
    # that ran each notification as its own task let the response overtake them.
    seen = []

    async def main():
        sent = []

        async def send(msg):
            sent.append(msg)

        dispatcher = rpc.Dispatcher()

        async def update(params, ctx):
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            seen.append(params["n"])

        dispatcher.add("update", update)
        peer = rpc.Peer(send, dispatcher)
        call = asyncio.ensure_future(peer.request("prompt", {}))
        await asyncio.sleep(0)
        for n in range(3):
            await peer.receive({"jsonrpc": "2.0", "method": "update", "params": {"n": n}})
        await peer.receive({"jsonrpc": "2.0", "id": sent[0]["id"], "result": "done"})
        result = await call
        return result, list(seen)

    result, seen_at_response = run(main())
    assert result == "done"
    assert seen_at_response == [0, 1, 2]


def test_answers_finds_the_response_to_an_id_and_nothing_else() -> None:
    assert jsonrpc.answers({"jsonrpc": "2.0", "id": 3, "result": {}}, 3)
    assert jsonrpc.answers({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "x"}}, 3)
    assert not jsonrpc.answers({"jsonrpc": "2.0", "id": 4, "result": {}}, 3)
    # A request from the peer that happens to carry the same id is not the answer.
    assert not jsonrpc.answers({"jsonrpc": "2.0", "id": 3, "method": "ping"}, 3)
    assert not jsonrpc.answers([{"jsonrpc": "2.0", "id": 3, "result": {}}], 3)
    assert not jsonrpc.answers(None, 3)


def test_peer_cancel_method_both_ways():
    """With `cancel_method`, a request given up on is named to the other side, and a
    received cancel ends the matching handler with -32800; without it (the default)
    neither happens."""
    async def main():
        sent = []
        peer = Peer(lambda msg: _append(sent, msg), cancel_method="$/cancel_request")
        with pytest.raises(asyncio.TimeoutError):
            await peer.request("slow", timeout=0.01)
        await peer.settle(1.0)
        assert sent[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}

        started = asyncio.Event()

        async def forever(params, context):
            started.set()
            await asyncio.sleep(3600)

        peer.dispatcher.add("forever", forever)
        await peer.receive(jsonrpc.request(7, "forever"))
        await peer.receive(jsonrpc.request("7", "forever"))
        await started.wait()
        await peer.receive(jsonrpc.notification("$/cancel_request", {"requestId": 7}))
        await asyncio.sleep(0.05)
        assert sent[-1] == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
        assert peer.handler_tasks == 1  # "7" is another id: still running
        peer.close()
        await peer.wait_handlers()
        assert sent[-1]["id"] == 7  # closing answers nothing

        plain_sent = []
        plain = Peer(lambda msg: _append(plain_sent, msg))  # the default: no cancel_method
        with pytest.raises(asyncio.TimeoutError):
            await plain.request("slow", timeout=0.01)
        plain.dispatcher.add("forever", forever)
        await plain.receive(jsonrpc.request(1, "forever"))
        await plain.receive(jsonrpc.notification("$/cancel_request", {"requestId": 1}))
        await asyncio.sleep(0.05)
        assert [m.get("method") for m in plain_sent] == ["slow"] and plain.handler_tasks == 1
        plain.close()

    run(main())


def test_peer_post_answers_without_waiting_and_replaces_what_does_not_fit():
    """With `post`, an answer never waits for the transport; one it refuses becomes the
    small error, and while it is backlogged a request gets that error without running."""
    async def main():
        posted = []
        room = {"answers": True, "backlogged": False}

        def post(msg, force=False):
            if not force and not room["answers"]:
                return False
            posted.append(msg)
            return True

        async def never(msg):
            raise AssertionError("answers are posted, not sent")

        ran = []
        peer = Peer(never, post=post, backlogged=lambda: room["backlogged"])
        peer.dispatcher.add("big", lambda params, context: ran.append(1) or "x" * 100)
        await peer.receive(jsonrpc.request(1, "big"))
        await peer.wait_handlers()
        room["answers"] = False
        await peer.receive(jsonrpc.request(2, "big"))
        await peer.wait_handlers()
        room["backlogged"] = True
        await peer.receive(jsonrpc.request(3, "big"))
        await peer.receive_error(JsonRpcError(PARSE_ERROR))
        await peer.wait_handlers()
        assert [m["id"] for m in posted] == [1, 2, 3, None]
        assert posted[0]["result"] == "x" * 100
        assert posted[1]["error"]["message"] == posted[2]["error"]["message"] == rpc.NO_ROOM_MESSAGE
        assert ran == [1, 1]  # the backlogged request ran no handler
        assert peer.refused_answers == 3  # (the parse error too: no room for anything large)

    run(main())
