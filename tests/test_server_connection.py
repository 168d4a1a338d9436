"""`http11.ServerConnection`, byte by byte: every state, every refusal, pipelining and
its cap, 408, keep-alive and close, the end of input. No socket, no loop: bytes in,
requests out; answers in, bytes out."""
from __future__ import annotations

from typing import Any, List, Optional, Union

import pytest

from ide_protocol.wire import http11
from ide_protocol.wire.http11 import Incoming, Refused, Reply, ServerConnection, State

NONCE = "Nonce n"
OK = Reply(200, (("Content-Type", "text/plain"),), b"ok")


def post(target: str = "/mcp", body: bytes = b"{}", *, auth: bool = True, close: bool = False,
         chunked: bool = False) -> bytes:
    fields = ["Host: x"]
    if auth:
        fields.append("Authorization: " + NONCE)
    if close:
        fields.append("Connection: close")
    if chunked:
        fields.append("Transfer-Encoding: chunked")
        framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    else:
        fields.append("Content-Length: %d" % len(body))
        framed = body
    return ("POST %s HTTP/1.1\r\n%s\r\n\r\n" % (target, "\r\n".join(fields))).encode() + framed


def get(target: str = "/mcp", method: str = "GET", auth: bool = True) -> bytes:
    fields = "Host: x\r\n" + ("Authorization: %s\r\n" % NONCE if auth else "")
    return ("%s %s HTTP/1.1\r\n%s\r\n" % (method, target, fields)).encode()


def judge(request: http11.Request) -> Optional[Reply]:
    """Like the IDE server's: no nonce → 401 closing; a path other than /mcp → 404."""
    if request.headers.get("authorization") != NONCE:
        return Reply(401, (("Content-Type", "text/plain"),), b"Unauthorized", close_after=True)
    if request.path != "/mcp":
        return Reply(404, (("Content-Type", "text/plain"),), b"Not Found")
    return None


def conn(**kw: Any) -> ServerConnection:
    return ServerConnection(judge, **kw)


def take(c: ServerConnection) -> Union[Incoming, Refused]:
    item = c.next_item()
    assert item is not None
    return item


def status_of(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


def parse(data: bytes, method: str = "POST") -> List[http11.Event]:
    parser = http11.ResponseParser()
    parser.expect(method)
    return parser.feed(data)


def test_a_request_goes_idle_receiving_answering_idle() -> None:
    c = conn()
    assert c.state is State.IDLE and c.idle and not c.needs_deadline and c.next_item() is None
    raw = post(body=b'{"a":1}')
    c.receive_data(raw[:10])
    assert c.state is State.RECEIVING and c.needs_deadline and c.next_item() is None
    c.receive_data(raw[10:])
    assert c.state is State.ANSWERING and not c.needs_deadline and c.waiting == 1
    item = take(c)
    assert isinstance(item, Incoming) and item.body == b'{"a":1}' and item.request.target == "/mcp"
    assert c.answering and c.waiting == 0 and c.next_item() is None  # one at a time
    data = c.send_reply(OK)
    assert data.startswith(b"HTTP/1.1 200 ") and b"Connection: keep-alive\r\n" in data and data.endswith(b"ok")
    assert c.state is State.IDLE and not c.answering


def test_the_outcome_does_not_depend_on_how_the_bytes_are_split() -> None:
    stream = post(body=b"one", chunked=True) + get() + post(body=b"two") + get("/elsewhere")
    expected = None
    for size in (1, 2, 3, 7, 50, len(stream)):
        c = conn()
        seen = []
        for i in range(0, len(stream), size):
            c.receive_data(stream[i:i + size])
            while True:
                item = c.next_item()
                if item is None:
                    break
                if isinstance(item, Incoming):
                    seen.append((item.request.method, item.body, c.send_reply(OK)))
                else:
                    seen.append(("refused", item.status, item.data))
        assert c.state is State.IDLE
        if expected is None:
            expected = seen
        assert seen == expected, size
    assert [s[0] for s in expected] == ["POST", "GET", "POST", "refused"]


def test_pipelined_requests_wait_and_are_answered_in_order() -> None:
    c = conn()
    c.receive_data(post(body=b"1") + post(body=b"2") + post(body=b"3"))
    assert c.state is State.ANSWERING and c.waiting == 3
    bodies = []
    for _ in range(3):
        item = take(c)
        assert isinstance(item, Incoming) and c.next_item() is None
        bodies.append(item.body)
        c.send_reply(OK)
    assert bodies == [b"1", b"2", b"3"] and c.state is State.IDLE


def test_the_pipelining_cap_counts_requests_and_bytes() -> None:
    c = conn(max_pending=3)
    c.receive_data(post() * 2)
    assert c.wants_data
    c.receive_data(post())
    assert c.waiting == 3 and c.wants_data  # three wait: one read more is taken ...
    c.receive_data(post(body=b"4") + post(body=b"5")[:30])
    assert c.waiting == 3 and not c.wants_data  # ... and held, unread: the owner stops reading
    assert not c.needs_deadline  # (the rest of a request may be in what is held: no deadline of ours)
    take(c)
    assert c.waiting == 3 and c.needs_deadline and c.wants_data  # one taken: what was held is read
    c.send_reply(OK)
    c.receive_data(post(body=b"5")[30:])  # three wait again: held
    assert c.waiting == 3 and not c.wants_data and not c.needs_deadline
    big = conn(max_body=100)
    big.receive_data(post(body=b"x" * 60))
    assert big.wants_data
    big.receive_data(post(body=b"y" * 60))
    assert big.wants_data and big.waiting == 2  # 120 bytes of bodies wait: past the body limit
    big.receive_data(post(body=b"z"))
    assert not big.wants_data and big.waiting == 2  # held
    take(big)
    assert big.waiting == 2 and big.wants_data  # 60 bytes wait: room, what was held is read


def test_a_peer_that_goes_at_the_cap_is_seen_to_go() -> None:
    """The read held at the cap is how the end of a pipelining peer's input is seen
    (an owner that stopped reading would not see it): the connection closes, dropping
    what waits."""
    c = conn(max_pending=2)
    c.receive_data(post() * 3)
    take(c)
    assert c.waiting == 2 and c.wants_data
    c.receive_eof()
    assert c.state is State.CLOSED and c.waiting == 0 and not c.answering


def test_a_refusal_that_closes_is_answered_from_the_head_and_nothing_more_is_read() -> None:
    c = conn()
    c.receive_data(post(body=b"x" * 1000, auth=False)[:120])  # the head and a little body
    assert c.state is State.LAST and not c.needs_deadline
    c.receive_data(b"more body, and another request" + post())  # never read
    item = take(c)
    assert isinstance(item, Refused) and item.status == 401
    assert b"Connection: close\r\n" in item.data and item.data.endswith(b"Unauthorized")
    assert c.state is State.CLOSED and c.next_item() is None


def test_a_refusal_with_a_body_following_is_answered_from_the_head_and_closes() -> None:
    c = conn()
    c.receive_data(post("/elsewhere", b"x" * 1000)[:100])
    assert c.state is State.LAST
    item = take(c)
    assert isinstance(item, Refused) and item.status == 404 and b"Connection: close" in item.data
    assert c.state is State.CLOSED


def test_a_bodiless_refusal_is_answered_in_turn_and_the_connection_stays() -> None:
    c = conn()
    c.receive_data(post(body=b"first") + get("/elsewhere") + post(body=b"after"))
    first = take(c)
    assert isinstance(first, Incoming) and c.next_item() is None  # the refusal waits its turn
    c.send_reply(OK)
    refused = take(c)
    assert isinstance(refused, Refused) and refused.status == 404 and b"keep-alive" in refused.data
    after = take(c)
    assert isinstance(after, Incoming) and after.body == b"after"


def test_a_refusal_is_answered_after_what_is_ahead_of_it() -> None:
    c = conn()
    c.receive_data(post(body=b"first"))
    assert isinstance(take(c), Incoming)
    c.receive_data(get(auth=False))
    assert c.state is State.LAST and c.next_item() is None  # still answering the first
    c.send_reply(OK)
    refused = take(c)
    assert isinstance(refused, Refused) and refused.status == 401 and c.state is State.CLOSED


def test_a_malformed_request_is_answered_with_its_error_in_turn_then_closes() -> None:
    c = conn()
    c.receive_data(post(body=b"first") + b"GARBAGE\r\n\r\n")
    assert c.state is State.LAST
    assert isinstance(take(c), Incoming)
    c.send_reply(OK)
    error = take(c)
    assert isinstance(error, Refused) and error.status == 400
    events = parse(error.data)
    assert isinstance(events[0], http11.Response) and not events[0].keep_alive
    assert c.state is State.CLOSED


def test_a_body_past_the_limit_is_413() -> None:
    c = conn(max_body=10)
    c.receive_data(post(body=b"x" * 11))
    error = take(c)
    assert isinstance(error, Refused) and error.status == 413 and c.state is State.CLOSED


def test_408_when_the_deadline_passes_on_a_partial_request() -> None:
    c = conn()
    c.receive_data(post()[:20])
    assert c.needs_deadline
    c.deadline_passed()
    assert c.state is State.LAST and not c.needs_deadline
    c.receive_data(b"the rest, too late")
    error = take(c)
    assert isinstance(error, Refused) and error.status == 408 and c.state is State.CLOSED


def test_each_partial_request_is_told_apart_for_its_own_deadline() -> None:
    """A pipelining peer's reads end inside a request again and again: `needs_deadline`
    stays True, and `received` says which request it is for (a new one, a new
    deadline)."""
    c = conn()
    raw = post()
    c.receive_data(raw[:20])
    assert c.needs_deadline and c.received == 0
    c.receive_data(raw[20:] + raw[:20])  # the rest of the first, the start of the second
    assert c.needs_deadline and c.received == 1
    c.receive_data(raw[20:])
    assert not c.needs_deadline and c.received == 2


def test_408_waits_behind_an_answer_under_way() -> None:
    c = conn()
    c.receive_data(post(body=b"slow"))
    assert isinstance(take(c), Incoming)
    c.receive_data(post()[:15])  # a pipelined request, half sent
    assert c.state is State.ANSWERING and c.needs_deadline
    c.deadline_passed()
    assert c.state is State.LAST and c.next_item() is None
    head = c.send_head(200, (("Content-Type", "text/event-stream"),))
    assert b"Transfer-Encoding: chunked" in head and b"keep-alive" in head
    assert c.send_chunk(b"event") == b"5\r\nevent\r\n" and c.send_chunk(b"") == b""
    assert c.send_end() == b"0\r\n\r\n"
    error = take(c)
    assert isinstance(error, Refused) and error.status == 408 and c.state is State.CLOSED


def test_an_idle_connection_has_no_deadline_and_ignores_a_late_one() -> None:
    c = conn()
    c.receive_data(post())
    take(c)
    c.send_reply(OK)
    assert c.state is State.IDLE and not c.needs_deadline
    # A timer that fires after its request completed (its owner's race) changes nothing:
    # not between requests, nor while one is answered with nothing partial behind it.
    c.deadline_passed()
    assert c.state is State.IDLE and c.next_item() is None
    c.receive_data(post())
    take(c)
    c.deadline_passed()
    assert c.state is State.ANSWERING and c.waiting == 0
    data = c.send_reply(OK)
    assert b"Connection: keep-alive" in data and c.state is State.IDLE and c.next_item() is None


def test_connection_close_in_a_request_makes_it_the_last() -> None:
    c = conn()
    c.receive_data(post(close=True) + post())
    assert c.state is State.LAST and c.waiting == 1
    take(c)
    data = c.send_reply(OK)
    assert b"Connection: close\r\n" in data and c.state is State.CLOSED


def test_an_answer_that_closes_drops_what_waits() -> None:
    c = conn()
    c.receive_data(post(body=b"1") + post(body=b"2"))
    take(c)
    data = c.send_reply(Reply(200, (), b"bye", close_after=True))
    assert b"Connection: close\r\n" in data and c.state is State.CLOSED and c.next_item() is None
    c.receive_data(post())  # nothing more is read
    assert c.next_item() is None


def test_the_end_of_input_answers_a_half_sent_request_with_its_error() -> None:
    c = conn()
    c.receive_data(post(body=b"xyz")[:-1])
    c.receive_eof()
    error = take(c)
    assert isinstance(error, Refused) and error.status == 400 and c.state is State.CLOSED


def test_the_end_of_input_while_answering_closes_and_drops_what_waits() -> None:
    c = conn()
    c.receive_data(post() + post())
    take(c)
    c.receive_eof()  # the CLI never half-closes: it has gone
    assert c.state is State.CLOSED and c.next_item() is None and not c.answering


def test_the_end_of_input_between_requests_closes() -> None:
    c = conn()
    c.receive_eof()
    assert c.state is State.CLOSED


def test_a_chunked_reply_and_head_get_no_body() -> None:
    c = conn()
    c.receive_data(post())
    take(c)
    data = c.send_reply(Reply(200, (("Content-Type", "text/event-stream"),), b"data: x\n\n", chunked=True))
    assert data.endswith(b"9\r\ndata: x\n\n\r\n0\r\n\r\n")
    h = ServerConnection()
    h.receive_data(get(method="HEAD"))
    take(h)
    head_only = h.send_reply(Reply(200, (), b"body"))
    assert head_only.endswith(b"\r\n\r\n") and b"Content-Length: 4" in head_only and b"body" not in head_only
    h.receive_data(get(method="HEAD"))
    take(h)
    assert h.send_head(200, ()).endswith(b"\r\n\r\n")
    assert h.send_chunk(b"x") == b"" and h.send_end() == b"" and h.state is State.IDLE


def test_an_answer_the_writer_refuses_changes_nothing_then_500_closes() -> None:
    c = conn()
    c.receive_data(post())
    take(c)
    with pytest.raises(ValueError):
        c.send_reply(Reply(200, (("X-Bad", "a\r\nb"),), b""))
    assert c.answering and c.state is State.ANSWERING
    data = c.send_internal_error()
    assert status_of(data) == 500 and b"Connection: close" in data and c.state is State.CLOSED


def test_answering_without_a_request_is_the_owners_bug() -> None:
    c = conn()
    for send in (lambda: c.send_reply(OK), lambda: c.send_head(200, ()), lambda: c.send_end()):
        with pytest.raises(RuntimeError):
            send()


def test_close_drops_everything() -> None:
    c = conn()
    c.receive_data(post() + post()[:10])
    c.close()
    assert c.state is State.CLOSED and not c.needs_deadline and c.waiting == 0 and c.next_item() is None
