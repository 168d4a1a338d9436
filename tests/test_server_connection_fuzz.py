"""`http11.ServerConnection` under random input: byte streams of requests (good, refused,
malformed, truncated, pipelined, closing) split at random, fed by an owner that makes
random choices (how much to read, when to answer and how, a deadline, the end of input,
an abort), checked after every step against the connection's invariants:

* it never raises on input (`receive_data`, `receive_eof`, `deadline_passed`);
* it answers in order: the requests the application gets come in the order they were
  sent, each with its own body, and every answer written parses as one response per
  request given, in order, `Connection: close` on the last one only;
* it never holds more than its bounds: what waits stays under `max_pending` requests and
  `max_body` bytes of bodies, give or take what one read brought (the owner stops
  reading when `wants_data` turns False), and the parser holds at most one head;
* its `state` agrees with what it says and gives (`next_item`, `needs_deadline`,
  `wants_data`, `answering`, `waiting`);
* after CLOSED it gives nothing, reads nothing and writes nothing.

Without deadlines or an early end, the outcome (what the application is given, what is
written) must not depend on how the bytes were split or when the owner answered: each
case is compared with the same bytes read at once and answered at once.

Seeded (a failure names its seed: `SEED=n pytest -k fuzz` replays it; `FUZZ_CASES=n`
runs more), stdlib only, and fast: a few thousand cases in a few seconds.
"""
from __future__ import annotations

import os
import random
from typing import Dict, List, Optional, Tuple, Union

import pytest

from ide_protocol.wire import http11
from ide_protocol.wire.http11 import Incoming, Refused, Reply, ServerConnection, State

NONCE = "Nonce n"
HEAD_LIMIT = 2048
CASES = int(os.environ.get("FUZZ_CASES", "2500"))

Item = Union[Incoming, Refused]


def judge(request: http11.Request) -> Optional[Reply]:
    """The IDE server's shape of judge: no nonce → 401 and close; a path other than
    /mcp → 404 (closing only when a body follows: `ServerConnection` decides that)."""
    if request.headers.get("authorization") != NONCE:
        return Reply(401, (("Content-Type", "text/plain"),), b"Unauthorized", close_after=True)
    if request.path != "/mcp":
        return Reply(404, (("Content-Type", "text/plain"),), b"Not Found")
    return None


# ------------------------------------------------------------------ the requests


def _request(rng: random.Random, number: int, max_body: int) -> Tuple[bytes, Optional[bytes]]:
    """One request's bytes, and the body the application must get for it when its
    judge lets it through (None: refused, malformed or not a request at all). Its
    number is in its target (`?n=`), so that the order of what is answered shows."""
    kind = rng.random()
    if kind < 0.04:  # garbage: not HTTP at all, or a broken head
        return rng.choice([b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST /mcp HTTP/1.1\r\nBad Field\r\n\r\n",
                           bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))]), None
    if kind < 0.06:  # a head past the limit
        return b"GET /mcp HTTP/1.1\r\nX-Long: " + b"a" * HEAD_LIMIT + b"\r\n\r\n", None
    method = rng.choice(["POST", "POST", "POST", "GET", "DELETE", "HEAD"])
    auth = rng.random() > 0.05 or method == "HEAD"
    path = "/mcp" if rng.random() > 0.08 or method == "HEAD" else "/elsewhere"
    fields = ["Host: x"]
    if auth:
        fields.append("Authorization: " + NONCE)
    version = "HTTP/1.1"
    roll = rng.random()
    if roll < 0.04:
        fields.append("Connection: close")
    elif roll < 0.06:
        version = "HTTP/1.0"
    elif roll < 0.08:
        version = "HTTP/1.0"
        fields.append("Connection: keep-alive")
    body = b""
    framed = b""
    if method == "POST":
        size = rng.choice([0, 1, 2, 10, 100, max_body - 1, max_body, max_body + 1])
        prefix = b"%d:" % number
        body = prefix + bytes(rng.choice(b"abcxyz{}\"") for _ in range(max(0, size - len(prefix))))
        if rng.random() < 0.5:
            fields.append("Content-Length: %d" % len(body))
            framed = body
        else:
            fields.append("Transfer-Encoding: chunked")
            pieces, rest = [], body
            while rest:
                cut = rng.randint(1, len(rest))
                ext = b";e=1" if rng.random() < 0.1 else b""
                pieces.append(b"%x%s\r\n%s\r\n" % (cut, ext, rest[:cut]))
                rest = rest[cut:]
            trailer = b"X-T: 1\r\n" if rng.random() < 0.1 else b""
            framed = b"".join(pieces) + b"0\r\n" + trailer + b"\r\n"
    lead = b"\r\n" if rng.random() < 0.03 else b""  # empty lines before a request are allowed
    head = "%s %s?n=%d %s\r\n%s\r\n\r\n" % (method, path, number, version, "\r\n".join(fields))
    data = lead + head.encode() + framed
    good = auth and path == "/mcp" and len(body) <= max_body
    return data, (body if good else None)


def stream_of(rng: random.Random, max_body: int) -> Tuple[bytes, Dict[int, bytes]]:
    count = rng.choice([1, 2, 3, 5, 12, 30])
    parts, bodies = [], {}
    for number in range(count):
        data, body = _request(rng, number, max_body)
        parts.append(data)
        if body is not None:
            bodies[number] = body
    data = b"".join(parts)
    if rng.random() < 0.3:  # cut short: the peer leaves a request half sent
        data = data[:rng.randint(0, len(data))]
    return data, bodies


def number_of(request: http11.Request) -> int:
    return int(request.target.rsplit("?n=", 1)[1])


# ------------------------------------------------------------------ the invariants


def check_state(c: ServerConnection) -> None:
    """What the state says agrees with what the connection says and will give (asked
    without changing it: `next_item` is only asked where the answer must be None)."""
    state = c.state
    assert c.wants_data == (not c._held)  # the owner stops reading only while bytes are held
    if c._held:  # (at the cap: the rest of a request may be held, read by our choice later)
        assert state is State.ANSWERING and not c.needs_deadline and c.waiting > 0
    if c.needs_deadline:
        assert state in (State.RECEIVING, State.ANSWERING), state
    if c._parser.state in ("CLOSED", "DEAD"):  # (its last request read, or a malformed one)
        assert state in (State.LAST, State.CLOSED), state
    if state is State.IDLE:
        assert not c.answering and c.waiting == 0 and not c.needs_deadline and c.wants_data
        assert c.next_item() is None
    elif state is State.RECEIVING:
        assert not c.answering and c.waiting == 0 and c.needs_deadline
        assert c.next_item() is None
    elif state in (State.ANSWERING, State.LAST):
        assert c.answering or c.waiting > 0, state
        if c.answering:
            assert c.next_item() is None  # one at a time
        if state is State.LAST:
            assert not c.needs_deadline
    else:
        assert state is State.CLOSED
        assert not c.answering and c.waiting == 0 and not c.needs_deadline and c.next_item() is None


def check_closed_gives_nothing(c: ServerConnection) -> None:
    c.receive_data(b"POST /mcp HTTP/1.1\r\nAuthorization: Nonce n\r\nContent-Length: 0\r\n\r\n")
    c.deadline_passed()
    c.receive_eof()
    assert c.state is State.CLOSED and c.next_item() is None and c.waiting == 0
    for send in (lambda: c.send_reply(Reply(200)), lambda: c.send_head(200, ()), lambda: c.send_chunk(b"x"),
                 lambda: c.send_end()):
        with pytest.raises(RuntimeError):
            send()


class Owner:
    """An owner of one `ServerConnection`, keeping what it was given and what it wrote.

    How it answers each request is decided by that request's place in the order alone
    (`plan`): an owner that reads the same bytes split otherwise, and answers at other
    moments, must be given the same requests and write the same answers."""

    def __init__(self, seed: int, max_body: int, max_pending: int) -> None:
        self.seed = seed
        self.c = ServerConnection(judge, max_head=HEAD_LIMIT, max_body=max_body, max_pending=max_pending)
        self.max_body, self.max_pending = max_body, max_pending
        self.out: List[bytes] = []
        self.given: List[Tuple[str, Item, int]] = []  # (the request's method, the item, its answer's status)
        self.chunks_left = -1  # pieces still to send of an answer whose body comes later (-1: none)
        self.closed_by_answer = False

    def outcome(self) -> List[Tuple[str, int, int]]:
        """What was given, comparable between runs: its kind, its request's number, its status."""
        return [("refused", -1, status) if isinstance(item, Refused) else ("incoming", number_of(item.request), status)
                for _, item, status in self.given]

    def feed(self, data: bytes) -> None:
        c = self.c
        assert c.wants_data  # (the owner reads only then)
        before_state, before_waiting, before_answering = c.state, c.waiting, c.answering
        before_held = (c.waiting, c._waiting_bytes, len(c._body), c._parser.buffered)
        c.receive_data(data)
        if before_state in (State.LAST, State.CLOSED):  # the input is over: nothing is read
            assert (c.state, c.waiting, c.answering, c._body) == (before_state, before_waiting, before_answering, b"")
        elif c._held:  # at the cap: held as it came, nothing read
            assert c._held == data and (c.waiting, c._waiting_bytes, len(c._body), c._parser.buffered) == before_held
        else:
            self.check_bounds(before_waiting, len(data))

    def check_bounds(self, before_waiting: int, read: int) -> None:
        """What one read (`read` bytes, or the held bytes read when a request is taken)
        can make the connection hold: the owner reads only while `wants_data`, so what
        waits was under `max_pending` requests and `max_body` bytes of bodies, or the read
        is held as it came; one read may complete several requests (the shortest is 16
        bytes) and the one being received (at most `max_body` more)."""
        c = self.c
        assert c.waiting <= max(before_waiting, self.max_pending - 1) + read // 16 + 1
        assert c._waiting_bytes + len(c._body) <= 2 * self.max_body + read
        assert c._parser.buffered <= HEAD_LIMIT + read
        assert len(c._held) <= read

    def eof(self) -> None:
        c = self.c
        before = c.state
        c.receive_eof()
        if before is State.RECEIVING and c.state is State.LAST:  # a half-sent request's error, alone
            assert c.waiting == 1 and not c.answering
        else:
            assert c.state is State.CLOSED, (before, c.state)

    def busy(self) -> bool:
        """Whether an answer is under way (its body still to come)."""
        return self.chunks_left >= 0

    def take(self) -> bool:
        """Ask for the next item and answer it (or begin to); False when there is none."""
        c = self.c
        state, before_waiting, held = c.state, c.waiting, len(c._held)
        item = c.next_item()
        if item is None:
            return False
        assert state in (State.ANSWERING, State.LAST), state
        if held and not c._held:  # a request taken made room: what was held was read
            self.check_bounds(before_waiting, held)
        if isinstance(item, Refused):
            # (Its bytes say nothing of its request; only HEAD's answer reads otherwise,
            # and the generator refuses no HEAD.)
            self.out.append(item.data)
            self.given.append(("GET", item, item.status))
            return True
        method = item.request.method
        plan = random.Random(self.seed * 7919 + len(self.given))
        roll = plan.random()
        if roll < 0.45:
            reply = Reply(200, (("Content-Type", "text/plain"),), b"ok %d" % number_of(item.request))
            self.out.append(c.send_reply(reply))
            self.given.append((method, item, 200))
        elif roll < 0.55:
            reply = Reply(202, (("Content-Type", "text/event-stream"),), b"data: x\n\n", chunked=True)
            self.out.append(c.send_reply(reply))
            self.given.append((method, item, 202))
        elif roll < 0.62:
            self.out.append(c.send_reply(Reply(200, (), b"bye", close_after=True)))
            self.given.append((method, item, 200))
            self.closed_by_answer = True
        elif roll < 0.67:
            taken = c.state
            with pytest.raises(ValueError):  # the writer refuses: nothing changes
                c.send_reply(Reply(200, (("X-Bad", "a\r\nb"),), b""))
            assert c.answering and c.state is taken
            self.out.append(c.send_internal_error())
            self.given.append((method, item, 500))
            self.closed_by_answer = True
        else:
            closing = plan.random() < 0.1
            self.out.append(c.send_head(200, (("Content-Type", "text/event-stream"),), close_after=closing))
            self.given.append((method, item, 200))
            self.closed_by_answer = closing
            self.chunks_left = plan.randint(0, 3)
        return True

    def stream_step(self) -> None:
        """One more piece of the answer under way, or its end."""
        c = self.c
        if self.chunks_left > 0:
            self.out.append(c.send_chunk(b"data: %d\n\n" % self.chunks_left))
            self.chunks_left -= 1
        else:
            self.out.append(c.send_end())
            self.chunks_left = -1

    def answer_all(self) -> None:
        while True:
            if self.busy():
                self.stream_step()
            elif not self.take():
                return


def reference(seed: int, data: bytes, max_body: int, max_pending: int) -> Owner:
    """The same bytes read at once, everything answered at once, then the end of input."""
    owner = Owner(seed, max_body, max_pending)
    owner.feed(data)
    owner.answer_all()
    if owner.c.state is not State.CLOSED:
        owner.eof()
        owner.answer_all()
    return owner


def run_case(seed: int) -> None:
    rng = random.Random(seed)
    chaos = rng.random() < 0.5  # also deadlines, an early end of input, an abort
    max_body = rng.choice([16, 64, 1000])
    max_pending = rng.choice([1, 2, 3, 8])
    data, bodies = stream_of(rng, max_body)
    owner = Owner(seed, max_body, max_pending)
    c = owner.c
    pos = 0
    steps = 0
    while c.state is not State.CLOSED:
        steps += 1
        assert steps < 20000, "stuck in %s" % c.state
        check_state(c)
        roll = rng.random()
        if roll < 0.4 and (owner.stream_step() if owner.busy() else owner.take()) is not False:
            continue
        if chaos and roll > 0.97:
            if not c.needs_deadline and rng.random() < 0.3:
                before = (c.state, c.waiting, c.answering)
                c.deadline_passed()  # a timer that fires late changes nothing
                assert (c.state, c.waiting, c.answering) == before, before
            elif c.needs_deadline and rng.random() < 0.5:
                c.deadline_passed()
            elif rng.random() < 0.5:
                owner.eof()
            else:
                c.close()
            continue
        if pos < len(data) and c.wants_data:  # the owner reads only while the connection wants data
            size = rng.choice([1, 2, 5, 17, 64, 300, len(data)])
            owner.feed(data[pos:pos + size])
            pos += size
            continue
        # Nothing to read, or reading paused: answer what waits, else the input ends
        # (when all was read: the end of input; otherwise the deadline passes).
        if owner.busy():
            owner.stream_step()
        elif not owner.take():
            if pos >= len(data):
                owner.eof()
            elif c.needs_deadline:
                c.deadline_passed()
            else:
                raise AssertionError("nothing to answer, nothing to read in %s" % c.state)
    check_state(c)
    check_closed_gives_nothing(c)
    check_answers(owner, bodies, seed)
    if not chaos:  # however split and whenever answered, the outcome is the same
        assert owner.outcome() == reference(seed, data, max_body, max_pending).outcome()


def check_answers(owner: Owner, bodies: Dict[int, bytes], seed: int) -> None:
    # In order: the requests given to the application came as they were sent, each with
    # its own body.
    numbers = [number_of(item.request) for _, item, _ in owner.given if isinstance(item, Incoming)]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), numbers
    for _, item, _ in owner.given:
        if isinstance(item, Incoming):
            number = number_of(item.request)
            assert number in bodies and item.body == bodies[number], number
    # What was written parses as one response per item given, in order, with the status
    # chosen, and only the last may close the connection.
    parser = http11.ResponseParser()
    for method, _, _ in owner.given:
        parser.expect(method)
    events = parser.feed(b"".join(owner.out))
    responses = [e for e in events if isinstance(e, http11.Response)]
    assert not [e for e in events if isinstance(e, http11.ParseError)], events
    assert [r.status for r in responses] == [status for _, _, status in owner.given]
    ends = [e for e in events if isinstance(e, http11.EndOfMessage)]
    assert len(ends) >= len(responses) - 1  # (the last may be cut off by the end of input)
    for response in responses[:-1]:
        assert response.keep_alive
    if owner.closed_by_answer:
        assert responses and not responses[-1].keep_alive


def test_fuzz_server_connection() -> None:
    only = os.environ.get("SEED")
    seeds = [int(only)] if only else range(CASES)
    for seed in seeds:
        try:
            run_case(seed)
        except AssertionError as exc:
            raise AssertionError("seed %d: %s" % (seed, exc)) from exc
        except Exception as exc:  # it must never raise on input
            raise AssertionError("seed %d raised %r" % (seed, exc)) from exc
