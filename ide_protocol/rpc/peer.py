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
from typing import Any, Awaitable, Callable, Collection, Dict, NamedTuple, Optional


from ..wire.jsonrpc import (ErrorResponse, Id, Invalid, JsonRpcError, Message, Notification, Response, TransportClosed,
                            error_response, notification, parse_message, request)
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


class Peer:
    """Both directions of JSON-RPC over one message stream (ACP's NDJSON on stdio).

    `send` writes one message (the transport encodes it); the transport calls
    `receive` with each decoded JSON value. Incoming requests run as tasks owned by the
    peer, so a slow handler (a permission prompt waiting for a person) never blocks the
    reading of other messages, and `close` cancels them all.
    """

    def __init__(self, send: Send, dispatcher: Optional[Dispatcher] = None, *,
                 context: Any = None, first_id: int = 0,
                 default_timeout: Optional[float] = None, requests_only: Collection[str] = ()) -> None:
        self._send = send
        #: Methods taken only as requests. One sent without an id (a notification: it
        #: can get no answer) is dropped, because notifications are handled inside the
        #: reading and the handler of a request may wait (for a person, for a process).
        self.requests_only = frozenset(requests_only)
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher()
        self.context = context
        self.outgoing = Outgoing(first_id)
        self.default_timeout = default_timeout
        self._tasks: Dict[Any, "asyncio.Task[None]"] = {}
        self._task_keys = itertools.count()
        self.on_unmatched: Optional[Callable[[Message], None]] = None

    @property
    def handler_tasks(self) -> int:
        """Handlers still running (a finished task may wait a loop turn to be forgotten)."""
        return sum(1 for task in self._tasks.values() if not task.done())

    async def request(self, method: str, params: Any = None, timeout: Optional[float] = -1.0) -> Any:
        """Send a request and wait for its result; raises `JsonRpcError` on an error answer,
        `asyncio.TimeoutError` after `timeout` seconds (the peer may silently drop what it
        cannot parse, ACP.md §1), `TransportClosed` when the transport goes away. The
        timeout covers the sending too: a peer that stops reading must not hold the
        request in the write for ever."""
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

    async def _send_and_wait(self, started: Started) -> Any:
        await self._send(started.message)
        return await started.future

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
            await self._safe_send(error_response(msg.id, msg.error))
            return
        if isinstance(msg, Notification):
            if msg.method in self.requests_only:
                log.warning("dropped %s sent without an id: it is a request", msg.method)
                return
            # Inline, in arrival order: a stream of `session/update` notifications must
            # reach the session before the response that ends the turn (ACP.md §3.3), which
            # separate tasks would not guarantee. Notification handlers must be quick.
            await self.dispatcher.dispatch(msg, self.context)
            return
        key = next(self._task_keys)
        task = asyncio.ensure_future(self._handle(msg))
        self._tasks[key] = task
        task.add_done_callback(functools.partial(self._task_done, key))

    def _task_done(self, key: int, task: "asyncio.Future[Any]") -> None:
        self._tasks.pop(key, None)

    async def receive_error(self, error: JsonRpcError) -> None:
        """The transport could not decode a message: answer -32700 with a null id."""
        await self._safe_send(error_response(None, error))

    def _unmatched(self, msg: Message) -> None:
        if self.on_unmatched is not None:
            self.on_unmatched(msg)
        else:
            log.debug("unmatched %r", msg)

    async def _handle(self, msg: Message) -> None:
        response = await self.dispatcher.dispatch(msg, self.context)
        if response is not None:
            await self._safe_send(response)

    async def _safe_send(self, msg: Dict[str, Any]) -> None:
        try:
            await self._send(msg)
        except (ConnectionError, RuntimeError, OSError) as exc:
            log.debug("could not send %s: %s", msg.get("id"), exc)

    def close(self, exc: Optional[BaseException] = None) -> None:
        """Fail waiting requests and cancel running handlers (the transport is gone)."""
        self.outgoing.fail_all(exc if exc is not None else TransportClosed("transport closed"))
        for task in list(self._tasks.values()):
            task.cancel()

    async def wait_handlers(self) -> None:
        """Wait until no handler runs, including handlers started while waiting."""
        while True:
            running = [task for task in self._tasks.values() if not task.done()]
            if not running:
                return
            await asyncio.gather(*running, return_exceptions=True)
