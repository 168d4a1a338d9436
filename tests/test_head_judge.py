"""The head judge: one pure function of a request's head (PROTOCOL.md §2: Origin,
nonce, path, method), called by the transport exactly once for every request, before
its body is read; the application sees only the requests it passed.

* the judge remembers nothing: judging a head changes no state, the same head (the
  same object, or byte-identical bytes on a kept-alive connection) is judged in full
  again, and a judgement can change between two identical heads;
* the transport calls it once per request, and never hands a refused request to the
  application;
* the nonce is compared (in constant time) on every request.
"""
from __future__ import annotations

import hmac
from typing import Any, List

from ide_protocol.server import mcp
from ide_protocol.wire import http11
from ide_wire import cli_for, head, make_server, run


def test_judging_a_head_changes_nothing_and_gives_the_same_verdict_again(tmp_path: Any) -> None:
    server = make_server(tmp_path)
    app = server.app
    good = http11.Request("POST", "/mcp", [("Authorization", "Nonce " + server.nonce)])
    bad = http11.Request("POST", "/mcp", [("Authorization", "Nonce not-it")])
    state = dict(vars(app))
    for _ in range(2):
        assert app.judge_head(good) is None
        assert app.judge_head(bad).status == 401 and app.judge_head(bad).close_after
    assert vars(app) == state  # (no memory: not even of the head it passed last)
    assert app.judge_head(http11.Request("PUT", "/mcp", good.headers)).status == 405
    assert app.judge_head(http11.Request("POST", "/x", good.headers)).status == 404
    origin = http11.Request("POST", "/mcp", list(good.headers) + [("Origin", "http://example.com")])
    assert app.judge_head(origin).status == 403 and app.judge_head(origin).close_after


def test_each_request_is_judged_once_and_an_identical_head_again(tmp_path: Any, monkeypatch: Any) -> None:
    server = make_server(tmp_path)
    compared: List[Any] = []
    real_compare = hmac.compare_digest
    monkeypatch.setattr(mcp.hmac, "compare_digest", lambda a, b: (compared.append(a), real_compare(a, b))[1])

    async def main() -> None:
        await server.start()
        listener = server.listener
        judged: List[http11.Request] = []
        served: List[http11.Request] = []
        real_judge, real_app = listener.judge, listener.app
        assert real_judge is not None
        listener.judge = lambda request: (judged.append(request), real_judge(request))[1]
        listener.app = lambda request, body, number: (served.append(request), real_app(request, body, number))[1]
        try:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            assert judged == served and len(judged) == len(compared) >= 2  # initialize, initialized
            conn = await cli.new_conn()
            del judged[:], served[:], compared[:]
            for _ in range(3):  # byte-identical heads on one kept-alive connection
                await cli.call_tool("get_selection", conn=conn)
            assert len(judged) == 3 and judged == served and len({id(r) for r in judged}) == 3
            assert all(r.headers == judged[0].headers for r in judged)
            assert len(compared) == 3  # the nonce compared for each of them
            # The same head again after the judgement changed (a new nonce): refused,
            # never handed to the application.
            server.app._nonce = b"another nonce"
            conn.send_raw(cli.encode("POST", {"jsonrpc": "2.0", "id": 99, "method": "ping"}), expect="POST")
            reply = await conn.read_reply()
            assert reply.status == 401 and reply.headers.get("connection") == "close"
            assert len(judged) == 4 and len(served) == 3 and judged[3].headers == judged[0].headers
            assert await conn.wait_closed()
            # A refusal with no body is judged once too, and answered in turn.
            server.app._nonce = server.nonce.encode("utf-8")
            other = await cli.new_conn()
            other.send_raw(head("GET", "/elsewhere", cli.headers("GET")), expect="GET")
            reply = await other.read_reply()
            assert reply.status == 404 and reply.headers.get("connection") == "keep-alive"
            assert len(judged) == 5 and len(served) == 3 and len(compared) == 5
            cli.close()
        finally:
            await server.stop()

    run(main())
