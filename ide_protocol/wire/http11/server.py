"""The server's side of one HTTP/1.1 connection, sans-IO: bytes in, requests out;
answers in, bytes out (the role h11's `Connection` plays for a server).

Whoever owns the socket (the IDE server's `HttpConnection`, the relay's CLI half) feeds
the connection what arrives (`receive_data`, `receive_eof`, and `deadline_passed` when
its clock says a request took too long) and asks it what to answer next
(`next_item`): either a request for the application (`Incoming`), or an answer the
connection gave by itself (`Refused`: its bytes, to be written). The application's
answer goes back through the connection (`send_reply`, or `send_head`, `send_chunk`,
`send_end` for a body that comes later), which returns the bytes to write. The owner
moves bytes and owns tasks and timers; every HTTP rule around the parser is decided
here, once:

* answers in request order, one at a time (RFC 9112 §9.3.2; PROTOCOL.md §2): a request
  that completes while another is answered waits its turn;
* the pipelining cap: while `max_pending` complete requests wait, or their bodies hold
  `max_body` bytes, what arrives next (one read) is held as it came, and `wants_data`
  turns False: the owner stops reading until a request has been taken, and the held
  bytes are read then (so a connection holds at most about twice `max_body` and one
  read: what waits, the request being received, what is held). That one read more is
  how a peer that pipelined and went is seen to go: its end of input follows its
  requests, and a stopped reader would not see it;
* the judge, called once per request as soon as its head arrives (PROTOCOL.md §2,
  "Errors and edge cases"): a refusal that closes the connection, or one with a body
  following, is answered without reading that body and nothing more is read; another
  refusal is answered in turn;
* a malformed request: its error (`ParseError.status`) in turn, then close;
* 408 for a request not complete by the owner's deadline (`needs_deadline` says when
  one runs: only while a request is partly received), then close;
* keep-alive or close after each answer (`rules.keeps_alive_after`): after a request
  that says `Connection: close` nothing more is read;
* the end of the input: the peer has gone (the CLI never half-closes, PROTOCOL.md §2),
  so what is waiting is dropped, except that a request it left half sent is answered
  with its error when nothing else is in progress.

Where the connection is, is one value, `state`:

    IDLE       between requests: nothing received in part, nothing to answer
    RECEIVING  part of a request has arrived (its deadline runs); nothing to answer yet
    ANSWERING  a request is being answered or waits to be; more may arrive
    LAST       as ANSWERING, but the input is over: after those answers, CLOSED
    CLOSED     nothing more is read or written: the owner closes the socket

    IDLE --bytes--> RECEIVING --complete request--> ANSWERING --answer, keep-alive--> IDLE
    ANSWERING --Connection: close, refusal, error, 408--> LAST --last answer--> CLOSED
    any --answer that closes, end of input, close()--> CLOSED
"""
from __future__ import annotations

import collections
import enum
from typing import Callable, Deque, NamedTuple, Optional, Sequence, Tuple, Union

from .events import Data, EndOfMessage, ParseError, Request
from .readers import RequestParser
from .rules import DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD, has_body, keeps_alive_after
from .writers import LAST_CHUNK, encode_chunk, write_response, write_response_head

__all__ = ["Incoming", "Judge", "MAX_PENDING", "Refused", "Reply", "ServerConnection", "State"]

#: Complete requests that may wait behind the one being answered (a pipelining peer)
#: before the owner stops reading (after one read more, held); reading resumes when one
#: has been taken. (The CLI never pipelines: PROTOCOL.md §2.)
MAX_PENDING = 8

#: Header fields of an answer: (name, value) pairs. A tuple that does not change (a
#: session's SSE fields) lets the writer reuse the head it encoded for it.
Fields = Sequence[Tuple[str, str]]

_TEXT = (("Content-Type", "text/plain; charset=utf-8"),)


class Reply:
    """A complete answer, as a value. `chunked`: the body goes as one chunk of a chunked
    body (the SSE answers of PROTOCOL.md §2), else with `Content-Length`. `close_after`:
    this is the last answer on its connection (a peer without the nonce, a browser).
    `reason`: the status line's text, when not the usual one (a relayed answer).
    The framing fields and `Connection` are the writers': a reply sets none of them."""

    __slots__ = ("status", "headers", "body", "chunked", "close_after", "reason")

    def __init__(self, status: int, headers: Fields = (), body: bytes = b"", chunked: bool = False,
                 close_after: bool = False, reason: Optional[str] = None) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.chunked = chunked
        self.close_after = close_after
        self.reason = reason

    def as_last(self) -> "Reply":
        """The same answer, as the last one on its connection."""
        if self.close_after:
            return self
        return Reply(self.status, self.headers, self.body, self.chunked, True, self.reason)

    def __repr__(self) -> str:
        return "Reply(%d, %r, <%d bytes>%s%s)" % (self.status, self.headers, len(self.body),
                                                   ", chunked" if self.chunked else "",
                                                   ", close_after" if self.close_after else "")


#: The judge of a request by its head alone: the refusal to answer with, or None to let
#: the application have it. A pure function of the head (no memory between calls).
Judge = Callable[[Request], Optional[Reply]]


class Incoming(NamedTuple):
    """A complete request its judge passed: the application answers it (`send_reply`,
    or `send_head` ... `send_end`)."""
    request: Request
    body: bytes


class Refused(NamedTuple):
    """A request the connection answered by itself (refused by its head, malformed, or
    not complete in time): `data` is that answer, to be written as it is."""
    status: int
    data: bytes


class State(enum.Enum):
    """Where a connection is (see the module's doc)."""
    IDLE = "IDLE"
    RECEIVING = "RECEIVING"
    ANSWERING = "ANSWERING"
    LAST = "LAST"
    CLOSED = "CLOSED"


# The states by their names, for the code below: a connection's state is compared a
# dozen times per request, and an `enum.Enum` member's lookup (`State.IDLE`) costs
# about 70 ns more than a module global's on CPython 3.8-3.11 (tools/bench_cost.py).
IDLE, RECEIVING, ANSWERING, LAST, CLOSED = State.IDLE, State.RECEIVING, State.ANSWERING, State.LAST, State.CLOSED

#: What waits its turn: a complete request (its head, its body, its judge's refusal or
#: None), or the error that ended the input.
_Waiting = Union[Tuple[Request, bytes, Optional[Reply]], ParseError]

_INTERNAL_ERROR = Reply(500, (("Content-Type", "text/plain"),), b"Internal Server Error", close_after=True)


class ServerConnection:
    """One connection's HTTP/1.1 state, for a server (see the module's doc)."""

    def __init__(self, judge: Optional[Judge] = None, *, max_head: int = DEFAULT_MAX_HEAD,
                 max_body: Optional[int] = DEFAULT_MAX_BODY, max_pending: int = MAX_PENDING) -> None:
        self.state = IDLE
        self._parser = RequestParser(max_head, max_body)
        self._judge = judge
        self.max_pending = max_pending
        self._waiting: Deque[_Waiting] = collections.deque()
        self._waiting_bytes = 0  # the bodies of the requests that wait
        self._held = b""  # read past the cap, not parsed yet (see the module's doc)
        #: Requests received in whole so far: the one partly received is the next, and
        #: its deadline is its own (`needs_deadline`: the owner starts a new one when
        #: this changes).
        self.received = 0
        # The request being received: its head, its judge's refusal (answered in turn:
        # no body follows), its body so far (the first piece as it came, then one
        # growing buffer rather than a list of pieces).
        self._head: Optional[Request] = None
        self._refusal: Optional[Reply] = None
        self._body: Union[bytes, bytearray] = b""
        # The request being answered, and (once `send_head` wrote the head of an answer
        # whose body comes later) whether the connection stays open after it and
        # whether that answer has a body at all.
        self._answering: Optional[Request] = None
        self._keep_open = True
        self._with_body = True

    # ---------------------------------------------------------------- what arrives

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer. Once the input is over (LAST, CLOSED) they are ignored:
        a peer cannot make us hold what we will not read. At the pipelining cap they
        are held, to be read when a request has been taken (`wants_data` is False)."""
        if self.state is LAST or self.state is CLOSED:
            return
        if self._held or (self._waiting and self._at_cap()):
            self._held += data
            return
        for event in self._parser.feed(data):
            if type(event) is Data:
                if not self._body:
                    self._body = event.data
                elif isinstance(self._body, bytearray):
                    self._body += event.data
                else:
                    self._body = bytearray(self._body) + event.data
            elif type(event) is Request:
                refusal = self._judge(event) if self._judge is not None else None
                if refusal is not None and (refusal.close_after or event.body_follows):
                    # Refused from its head: the body is never read, nor anything after
                    # it (PROTOCOL.md §2, "Errors and edge cases").
                    self._waiting.append((event, b"", refusal.as_last()))
                    self._end_input()
                    break
                self._head, self._refusal = event, refusal
            elif type(event) is EndOfMessage:
                request, refusal = self._head, self._refusal
                body = bytes(self._body) if isinstance(self._body, bytearray) else self._body
                self._head = self._refusal = None
                self._body = b""
                if request is not None:
                    self._waiting.append((request, body, refusal))
                    self._waiting_bytes += len(body)
                    self.received += 1
                    if not request.keep_alive:  # `Connection: close`: the last request read
                        self._end_input()
                        break
            elif isinstance(event, ParseError):
                self._waiting.append(event)
                self._end_input()
                break
        self._settle()

    def receive_eof(self) -> None:
        """The peer closed its side: it has gone, nobody reads what is waiting. A request
        it left half sent is still answered with its error when nothing else is in
        progress (RECEIVING); otherwise the connection is CLOSED."""
        if self.state is CLOSED:
            return
        errors = [event for event in self._parser.feed_eof() if type(event) is ParseError]
        if errors and self.state is RECEIVING:
            self._waiting.append(errors[0])
            self._end_input()
            self._settle()
        else:
            self.close()

    def deadline_passed(self) -> None:
        """The owner's request deadline passed (it runs while `needs_deadline`): a slow
        or stuck peer must not hold a connection with half a request. 408 after what
        is ahead of it, then close. A deadline that passes when no request is partly
        received (a timer that fired after its request completed) changes nothing."""
        if not self.needs_deadline:
            return
        self._waiting.append(ParseError(408, "request not completed in time"))
        self._end_input()
        self._settle()

    @property
    def needs_deadline(self) -> bool:
        """Whether a request is partly received: the owner's deadline should run (and
        only then: an idle keep-alive connection waits for its next request without
        one, as the CLI keeps connections open between prompts, PROTOCOL.md §2; nor
        while the rest of it may be in what is held, unread by our choice). Each request
        has its own: a new one when `received` has changed (a peer that pipelines
        always has one partly here)."""
        return ((self._head is not None or not self._parser.idle) and not self._held
                and self.state is not LAST and self.state is not CLOSED)

    @property
    def wants_data(self) -> bool:
        """False while bytes are held at the pipelining cap: the owner stops reading
        (and so bounds what a pipelining peer makes us hold) until a request has been
        taken (`next_item`)."""
        return not self._held

    def _at_cap(self) -> bool:
        """Whether as many requests wait as may (`max_pending`, or `max_body` bytes of
        their bodies)."""
        limit = self._parser.max_body
        return len(self._waiting) >= self.max_pending or (limit is not None and self._waiting_bytes >= limit)

    @property
    def answering(self) -> bool:
        """Whether a request's answer is under way (taken by `next_item`, not complete)."""
        return self._answering is not None

    @property
    def waiting(self) -> int:
        """How many requests wait behind the one being answered."""
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        return self.state is IDLE

    # -------------------------------------------------------------- what to answer

    def next_item(self) -> Optional[Union[Incoming, Refused]]:
        """The next request to answer, or None while one is being answered or none
        waits. A `Refused` one is answered already (its bytes are in it)."""
        if self._answering is not None or not self._waiting or self.state is CLOSED:
            return None
        item = self._waiting.popleft()
        if isinstance(item, ParseError):
            data = write_response(item.status, _TEXT, ("%s\n" % item.message).encode("utf-8"), keep_alive=False)
            self.close()
            return Refused(item.status, data)
        request, body, refusal = item
        self._waiting_bytes -= len(body)
        self._answering = request
        if self._held:  # room again: what was held is read now (held again if still no room)
            held, self._held = self._held, b""
            self.receive_data(held)
        if refusal is not None:
            return Refused(refusal.status, self.send_reply(refusal))
        return Incoming(request, body)

    # ----------------------------------------------------------------- the answers

    def send_reply(self, reply: Reply) -> bytes:
        """The whole answer to the request being answered, as bytes. Raises ValueError
        (nothing changes) for what the writers refuse: an application's bug, which the
        owner answers with `send_internal_error`."""
        request = self._answering
        if request is None:
            raise RuntimeError("no request is being answered")  # an owner's bug, not the peer's
        keep_open = keeps_alive_after(request.keep_alive, reply.close_after)
        if reply.chunked:
            # The head, the body as one chunk (none when empty), the last chunk; the
            # head only where no body goes (`rules.has_body`: HEAD, 204, 304).
            data = write_response_head(reply.status, reply.headers, reply.reason, keep_alive=keep_open)
            if has_body(request.method, reply.status):
                data = b"".join((data, encode_chunk(reply.body), LAST_CHUNK))
        else:
            data = write_response(reply.status, reply.headers, reply.body, reply.reason,
                                  request_method=request.method, keep_alive=keep_open)
        self._answered(keep_open)
        return data

    def send_head(self, status: int, headers: Fields, *, close_after: bool = False,
                  reason: Optional[str] = None) -> bytes:
        """The head of an answer whose body comes later, in `send_chunk` pieces, ended
        by `send_end`. Raises ValueError (nothing changes) for what the writer refuses."""
        request = self._request()
        keep_open = keeps_alive_after(request.keep_alive, close_after)
        data = write_response_head(status, headers, reason, keep_alive=keep_open)
        self._keep_open = keep_open
        self._with_body = has_body(request.method, status)
        return data

    def send_chunk(self, data: bytes) -> bytes:
        """One piece of that body (nothing for an empty piece, or an answer without a body)."""
        self._request()
        return encode_chunk(data) if data and self._with_body else b""

    def send_end(self) -> bytes:
        """The end of that body; the answer is complete."""
        self._request()
        data = LAST_CHUNK if self._with_body else b""
        self._answered(self._keep_open)
        return data

    def send_internal_error(self) -> bytes:
        """500 instead of an answer the application failed to give (it raised, or gave
        what the writers refuse), then close."""
        self._answering = None
        data = write_response(_INTERNAL_ERROR.status, _INTERNAL_ERROR.headers, _INTERNAL_ERROR.body, keep_alive=False)
        self.close()
        return data

    def close(self) -> None:
        """Nothing more is read or written (the peer went, the owner closed or aborted
        the connection, or the last answer said so): what waits is dropped."""
        self.state = CLOSED
        self._waiting.clear()
        self._waiting_bytes = 0
        self._held = b""
        self._answering = self._head = self._refusal = None
        self._body = b""

    # ----------------------------------------------------------------- the states

    def _request(self) -> Request:
        request = self._answering
        if request is None:
            raise RuntimeError("no request is being answered")  # an owner's bug, not the peer's
        return request

    def _answered(self, keep_open: bool) -> None:
        self._answering = None
        self._keep_open = self._with_body = True
        if keep_open:
            self._settle()
        else:
            self.close()

    def _end_input(self) -> None:
        """Nothing more is read (LAST until what waits is answered)."""
        self._head = self._refusal = None
        self._body = b""
        if self.state is not CLOSED:
            self.state = LAST

    def _settle(self) -> None:
        """The state after a change: answering while something is answered or waits,
        else receiving while part of a request is here, else idle; after the input is
        over, CLOSED once nothing is left to answer."""
        state = self.state
        if state is CLOSED:
            return
        if self._answering is not None or self._waiting:
            if state is not LAST:
                self.state = ANSWERING
        elif state is LAST:
            self.close()
        elif self._head is not None or not self._parser.idle:
            self.state = RECEIVING
        else:
            self.state = IDLE
