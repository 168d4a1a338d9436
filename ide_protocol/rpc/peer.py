"""The asyncio JSON-RPC peer: outgoing requests, their waiters, and both directions.

`Outgoing` allocates ids and matches answers to waiters; `Peer` combines it with a
`Dispatcher` over any message transport whose messages go both ways (ACP's NDJSON over
stdio or TCP). Over Streamable HTTP every request has its own response, so the MCP
server needs only the dispatcher.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from typing import Any, Awaitable, Callable, Collection, Dict, NamedTuple, Optional, Set, Tuple


from ..wire.jsonrpc import (INTERNAL_ERROR, REQUEST_CANCELLED, ErrorResponse, Id, Invalid, JsonRpcError, Message,
                            Notification, Request, Response, TransportClosed, error_response, notification,
                            parse_message, request)
from .dispatch import Dispatcher

log = logging.getLogger(__name__)

# --------------------------------------------------------------- outgoing requests


class Started(NamedTuple):
    """A request just registered by `Outgoing.start`: the id it was given, the message
    to send, and the future its answer will resolve."""

    id: Id
    message: Dict[str, Any]
    future: "asyncio.Future[Any]"


class Outgoing:
    """Bookkeeping for requests we send: ids, waiters, and failing them all at once.

    Ids are integers counting up from `first_id`; responses are matched by id (they may
    come out of order, ACP.md §2), by value and type: a response with `"id": "2"` does not
    answer request 2 (JSON-RPC 2.0 §5: the same value as the request's), so a forged or
    confused answer cannot end a request it does not belong to.
    """

    def __init__(self, first_id: int = 0) -> None:
        self._ids = itertools.count(first_id)
        self._waiting: Dict[Id, "asyncio.Future[Any]"] = {}
        self._methods: Dict[Id, str] = {}
        self._closed: Optional[BaseException] = None

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def closed(self) -> Optional[BaseException]:
        return self._closed

    def start(self, method: str, params: Any = None) -> Started:
        """Allocate an id and a waiter for a request to send."""
        if self._closed is not None:
            raise TransportClosed(str(self._closed) or "transport closed")
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        self._methods[msg_id] = method
        return Started(msg_id, request(msg_id, method, params), future)

    def method_of(self, msg_id: Id) -> Optional[str]:
        return self._methods.get(msg_id)

    def _pop(self, msg_id: Any) -> Optional["asyncio.Future[Any]"]:
        if type(msg_id) is not int:  # ours are ints; True == 1 and "1" are other ids
            return None
        self._methods.pop(msg_id, None)
        return self._waiting.pop(msg_id, None)

    def resolve(self, msg: Message) -> bool:
        """Deliver a Response/ErrorResponse to its waiter; False if nobody waits for it."""
        if not isinstance(msg, (Response, ErrorResponse)) or msg.id is None:
            return False
        future = self._pop(msg.id)
        if future is None or future.done():
            return False
        if isinstance(msg, Response):
            future.set_result(msg.result)
        else:
            future.set_exception(msg.error)
        return True

    def cancel(self, msg_id: Id) -> None:
        """Forget a request (timed out or cancelled); a late response is then ignored."""
        future = self._pop(msg_id)
        if future is not None and not future.done():
            future.cancel()

    def fail_all(self, exc: BaseException) -> None:
        """The transport is gone: every waiter fails with `exc`, later starts too."""
        self._closed = exc
        waiting, self._waiting = self._waiting, {}
        self._methods.clear()
        for future in waiting.values():
            if not future.done():
                future.set_exception(exc)
                # Mark retrieved so an abandoned waiter does not log "never retrieved".
                future.exception()


# ------------------------------------------------------------------------- the peer

Send = Callable[[Dict[str, Any]], Awaitable[None]]
#: Writes one answer without waiting: True when the transport took it, False when it
#: refused it for lack of room (`force` makes it take a small one all the same, up to
#: a hard limit of its own).
Post = Callable[..., bool]

#: What an answer becomes when the transport has no room for it: small, whatever the
#: answer was. Its size is what an answer that does not fit may still cost.
NO_ROOM_MESSAGE = "Answer not sent: the peer has not read what was sent to it before"


class Peer:
    """Both directions of JSON-RPC over one message stream (ACP's NDJSON on stdio).

    `send` writes one message (the transport encodes it) and may wait until the
    transport has room; the transport calls `receive` with each decoded JSON value.
    Incoming requests run as tasks owned by the peer, so a slow handler (a permission
    prompt waiting for a person) never blocks the reading of other messages, and
    `close` cancels them all.

    Two options a transport may give:

    * `post` (with `backlogged`): answers are written without waiting, so that a peer
      that sends while it does not read never stalls the reading (which would stall
      the peer in turn). A transport past its limit of unsent bytes refuses a large
      answer, and the peer sends a small error in its place; while it is backlogged,
      a new request gets that small error at once, without running its handler. So
      what piles up for a peer that stopped reading stays bounded.
    * `cancel_method`: the notification by which either side gives up on a request
      (`$/cancel_request {requestId}` in ACP, as LSP's `$/cancelRequest`). Sent when
      a request of ours times out or its caller is cancelled; received, it cancels
      the matching handler, which is then answered `-32800` (Request cancelled).
    """

    def __init__(self, send: Send, dispatcher: Optional[Dispatcher] = None, *,
                 context: Any = None, first_id: int = 0,
                 default_timeout: Optional[float] = None, requests_only: Collection[str] = (),
                 post: Optional[Post] = None, backlogged: Optional[Callable[[], bool]] = None,
                 cancel_method: Optional[str] = None) -> None:
        self._send = send
        self._post = post
        self._backlogged = backlogged
        self.cancel_method = cancel_method
        #: Methods taken only as requests. One sent without an id (a notification: it
        #: can get no answer) is dropped, because notifications are handled inside the
        #: reading and the handler of a request may wait (for a person, for a process).
        self.requests_only = frozenset(requests_only)
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher()
        self.context = context
        self.outgoing = Outgoing(first_id)
        self.default_timeout = default_timeout
        #: Running handlers by key, with the id of the request each answers.
        self._tasks: Dict[int, Tuple[Id, "asyncio.Task[None]"]] = {}
        self._task_keys = itertools.count()
        self._given_up: Set[int] = set()  # keys of handlers cancelled by the other side
        self._notices: Set["asyncio.Task[None]"] = set()  # `cancel_method` notifications on their way
        self.refused_answers = 0  # answers replaced by the small error for lack of room
        self.dropped_answers = 0  # answers not sent at all (no room even for the small error)
        self.on_unmatched: Optional[Callable[[Message], None]] = None

    @property
    def handler_tasks(self) -> int:
        """Handlers still running (a finished task may wait a loop turn to be forgotten)."""
        return sum(1 for _, task in self._tasks.values() if not task.done())

    async def request(self, method: str, params: Any = None, timeout: Optional[float] = -1.0) -> Any:
        """Send a request and wait for its result; raises `JsonRpcError` on an error answer,
        `asyncio.TimeoutError` after `timeout` seconds (the peer may silently drop what it
        cannot parse, ACP.md §1), `TransportClosed` when the transport goes away. The
        timeout covers the sending too: a peer that stops reading must not hold the
        request in the write for ever. A request given up on (timed out, or its caller
        cancelled) is forgotten, and the other side is told (`cancel_method`)."""
        if timeout is not None and timeout < 0:
            timeout = self.default_timeout
        started = self.outgoing.start(method, params)
        future = started.future
        try:
            if timeout is None:
                return await self._send_and_wait(started)
            return await asyncio.wait_for(self._send_and_wait(started), timeout)
        finally:
            if not future.done() or future.cancelled():
                self.outgoing.cancel(started.id)
                self._give_up(started.id)

    async def _send_and_wait(self, started: Started) -> Any:
        await self._send(started.message)
        return await started.future

    def _give_up(self, msg_id: Id) -> None:
        """Tell the other side we no longer wait for request `msg_id`. In a task of its
        own (owned here): the caller is being cancelled, or timed out, and must not wait
        for a transport that may have no room."""
        if self.cancel_method is None or self.outgoing.closed is not None:
            return
        task = asyncio.ensure_future(self._safe_send(notification(self.cancel_method, {"requestId": msg_id})))
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def notify(self, method: str, params: Any = None) -> None:
        await self._send(notification(method, params))

    async def receive(self, obj: Any) -> None:
        """Handle one decoded incoming value. Never raises for bad input."""
        msg = parse_message(obj)
        if isinstance(msg, (Response, ErrorResponse)):
            if not self.outgoing.resolve(msg):
                self._unmatched(msg)
            return
        if isinstance(msg, Invalid):
            if isinstance(obj, dict) and "method" not in obj and ("result" in obj or "error" in obj):
                # A malformed response: never answer a response (JSON-RPC 2.0 §5), but
                # do not leave the request it answers waiting forever either.
                if msg.id is None or not self.outgoing.resolve(ErrorResponse(obj, msg.id, msg.error)):
                    self._unmatched(msg)
                return
            await self._answer(error_response(msg.id, msg.error))
            return
        if isinstance(msg, Notification):
            if msg.method in self.requests_only:
                log.warning("dropped %s sent without an id: it is a request", msg.method)
                return
            if self.cancel_method is not None and msg.method == self.cancel_method:
                self._cancel_handler(msg.params)
                return
            # Inline, in arrival order: a stream of `session/update` notifications must
            # reach the session before the response that ends the turn (ACP.md §3.3), which
            # separate tasks would not guarantee. Notification handlers must be quick.
            await self.dispatcher.dispatch(msg, self.context)
            return
        assert isinstance(msg, Request)
        if self._backlogged is not None and self._backlogged():
            await self._answer(self._no_room(msg.id))  # no handler runs for it
            return
        key = next(self._task_keys)
        task = asyncio.ensure_future(self._handle(key, msg))
        self._tasks[key] = (msg.id, task)
        task.add_done_callback(functools.partial(self._task_done, key))

    def _task_done(self, key: int, task: "asyncio.Future[Any]") -> None:
        self._tasks.pop(key, None)
        self._given_up.discard(key)

    def _cancel_handler(self, params: Any) -> None:
        """The other side gave up on its request `params.requestId`: cancel the handlers
        answering that id (matched by value and type, as answers are). Unknown ids, and
        requests already answered, are ignored."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            log.debug("ignored %s without a usable requestId", self.cancel_method)
            return
        for key, (msg_id, task) in list(self._tasks.items()):
            if msg_id == request_id and type(msg_id) is type(request_id) and not task.done():
                self._given_up.add(key)
                task.cancel()

    async def receive_error(self, error: JsonRpcError) -> None:
        """The transport could not decode a message: answer -32700 with a null id."""
        await self._answer(error_response(None, error))

    def _unmatched(self, msg: Message) -> None:
        if self.on_unmatched is not None:
            self.on_unmatched(msg)
        else:
            log.debug("unmatched %r", msg)

    async def _handle(self, key: int, msg: Request) -> None:
        try:
            response = await self.dispatcher.dispatch(msg, self.context)
        except asyncio.CancelledError:
            if key not in self._given_up:
                raise  # cancelled by `close`: the transport is gone, nothing to answer
            response = error_response(msg.id, JsonRpcError(REQUEST_CANCELLED, "Request cancelled"))
        if response is not None:
            await self._answer(response)

    async def _answer(self, response: Dict[str, Any]) -> None:
        """Send an answer: posted without waiting when the transport allows it (the
        small error in its place when it has no room), else sent."""
        if self._post is None:
            await self._safe_send(response)
        elif not self._safe_post(response):
            self.refused_answers += 1
            if not self._safe_post(self._no_room(response.get("id")), force=True):
                if not self.dropped_answers:
                    log.warning("the peer reads nothing: answers are dropped")
                self.dropped_answers += 1  # past even the transport's hard limit

    @staticmethod
    def _no_room(msg_id: Optional[Id]) -> Dict[str, Any]:
        return error_response(msg_id, JsonRpcError(INTERNAL_ERROR, NO_ROOM_MESSAGE))

    def _safe_post(self, msg: Dict[str, Any], force: bool = False) -> bool:
        assert self._post is not None
        try:
            return self._post(msg, force=force)
        except (ConnectionError, RuntimeError, OSError) as exc:
            log.debug("could not send %s: %s", msg.get("id"), exc)
            return True  # (not for lack of room: there is nobody to answer)

    async def _safe_send(self, msg: Dict[str, Any]) -> None:
        try:
            await self._send(msg)
        except (ConnectionError, RuntimeError, OSError) as exc:
            log.debug("could not send %s: %s", msg.get("id"), exc)

    def close(self, exc: Optional[BaseException] = None) -> None:
        """Fail waiting requests and cancel running handlers (the transport is gone)."""
        self.outgoing.fail_all(exc if exc is not None else TransportClosed("transport closed"))
        for _, task in list(self._tasks.values()):
            task.cancel()
        for notice in list(self._notices):
            notice.cancel()

    async def settle(self, timeout: float) -> None:
        """Give the notifications of requests given up on (`cancel_method`) up to
        `timeout` seconds to be written, before the transport closes."""
        if self._notices:
            await asyncio.wait(set(self._notices), timeout=timeout)

    async def wait_handlers(self) -> None:
        """Wait until no handler runs, including handlers started while waiting."""
        while True:
            running = [task for _, task in self._tasks.values() if not task.done()]
            if not running:
                return
            await asyncio.gather(*running, return_exceptions=True)
