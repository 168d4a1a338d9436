"""The JSON-RPC dispatcher: method names to handlers, every outcome to a response.

No exception a handler raises ever escapes into a transport: `JsonRpcError` becomes its
error response, anything else `-32603`. A handler that has to wait comes back as a
`Deferred`, so that whoever owns the task decides where the waiting happens.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable, Dict, NamedTuple, Optional, Union


from ..wire.jsonrpc import (INTERNAL_ERROR, METHOD_NOT_FOUND, Invalid, JsonRpcError, Message, Notification, Request,
                            error_response, result_response)

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------- dispatcher

Handler = Callable[[Any, Any], Any]


class Deferred:
    """A call that has to wait: its handler is a coroutine function, or a plain function
    that returned an awaitable.

    `Dispatcher.dispatch_now` and `call_now` return one instead of an answer, so that
    whoever owns the task decides where the waiting happens (the HTTP server answers
    most requests inside `data_received`, with no task at all). Its interface is two
    methods: `run()` makes the coroutine that finishes the call, when awaited (the
    response to `msg` when it was made for a message, else the result); `drop()` gives
    the call up before it ran. Everything it needs is given when it is made.
    """

    __slots__ = ("_method", "_params", "_context", "_handler", "_awaitable", "_msg")

    def __init__(self, method: str, params: Any, context: Any, handler: Optional[Handler],
                 awaitable: Any = None, msg: Optional[Message] = None) -> None:
        self._method = method
        self._params = params
        self._context = context
        self._handler = handler        # a coroutine function not called yet, or None
        self._awaitable = awaitable    # what a plain handler returned, or None
        self._msg = msg                # the message answered by run(), or None: the result

    async def _result(self) -> Any:
        awaitable, self._awaitable = self._awaitable, None
        try:
            if awaitable is None:
                assert self._handler is not None
                awaitable = self._handler(self._params, self._context)
            return await awaitable
        except (JsonRpcError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise internal_error(self._method, exc) from exc

    async def run(self) -> Any:
        msg = self._msg
        if msg is None:
            return await self._result()
        try:
            result = await self._result()
        except JsonRpcError as exc:
            return error_answer(msg, exc)
        return result_response(msg.id, result) if isinstance(msg, Request) else None

    def drop(self) -> None:
        """Give the call up before `run()`: the handler never runs (an awaitable a plain
        handler returned is closed or cancelled, so nothing is left un-awaited)."""
        awaitable, self._awaitable = self._awaitable, None
        discard(awaitable)


def internal_error(method: str, exc: Exception) -> JsonRpcError:
    """The `-32603` a handler's unexpected exception becomes (logged with its
    traceback): a handler bug must not kill the transport."""
    log.error("handler for %s failed", method, exc_info=exc)
    return JsonRpcError(INTERNAL_ERROR, "Internal error: %s: %s" % (type(exc).__name__, exc))


def error_answer(msg: Message, exc: JsonRpcError) -> Optional[Dict[str, Any]]:
    """The answer to a request or notification whose call failed with `exc`: an error
    response for a request; none for a notification (its failure is logged)."""
    if isinstance(msg, Request):
        return error_response(msg.id, exc)
    if exc.code != METHOD_NOT_FOUND:  # notifications: never answered, failures logged
        log.warning("notification %s failed: %s", getattr(msg, "method", "?"), exc)
    return None


def discard(awaitable: Any) -> None:
    """Give up an awaitable that will never be awaited: a coroutine (or anything with
    `close()`) is closed, so no "never awaited" warning; a future is cancelled."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    elif asyncio.isfuture(awaitable):
        awaitable.cancel()


class Route(NamedTuple):
    """What a method name leads to: its handler, and whether calling it gives a
    coroutine (decided once, when the handler is added)."""

    handler: Handler
    is_async: bool


class Dispatcher:
    """Maps method names to handlers; every outcome becomes a response object.

    A handler is called as `handler(params, context)` and may be a plain function or a
    coroutine function. It returns the result, or raises `JsonRpcError` for a specific
    error; any other exception becomes `-32603` (logged with its traceback) so that one
    broken handler never takes a connection down. `asyncio.CancelledError` propagates:
    cancellation belongs to the task's owner.

    Plain handlers run at once: `dispatch_now`/`call_now` answer without an event loop
    when no handler has to wait, and hand back a `Deferred` when one does. `dispatch`
    and `call` are the same with the waiting done for the caller.
    """

    def __init__(self, fallback: Optional[Handler] = None) -> None:
        self._routes: Dict[str, Route] = {}
        self._fallback: Optional[Route] = None
        self.set_fallback(fallback)

    def add(self, method: str, handler: Handler) -> None:
        self._routes[method] = Route(handler, is_async(handler))

    def set_fallback(self, handler: Optional[Handler]) -> None:
        """The handler of every method that has none of its own (None: such methods are
        answered `-32601`)."""
        self._fallback = Route(handler, is_async(handler)) if handler is not None else None

    def method(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator form of `add`."""

        def register(handler: Handler) -> Handler:
            self.add(name, handler)
            return handler

        return register

    def remove(self, method: str) -> None:
        self._routes.pop(method, None)

    def __contains__(self, method: str) -> bool:
        return method in self._routes

    def handler_for(self, method: str) -> Optional[Handler]:
        route = self._routes.get(method, self._fallback)
        return route.handler if route is not None else None

    def call_now(self, method: str, params: Any, context: Any = None) -> Any:
        """Run the handler for `method` if it can answer at once: its result, or a
        `Deferred` when it has to wait. Raises `JsonRpcError` for every failure."""
        return self._call(method, params, context, None)

    def _call(self, method: str, params: Any, context: Any, msg: Optional[Message]) -> Any:
        route = self._routes.get(method, self._fallback)
        if route is None:  # an unknown method (PROTOCOL.md §3, ACP.md §3.5)
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: %s" % method)
        if route.is_async:
            return Deferred(method, params, context, route.handler, None, msg)
        try:
            result = route.handler(params, context)
        except JsonRpcError:
            raise
        except Exception as exc:
            raise internal_error(method, exc) from exc
        if inspect.isawaitable(result):
            return Deferred(method, params, context, None, result, msg)
        return result

    async def call(self, method: str, params: Any, context: Any = None) -> Any:
        """Run the handler for `method`; raises `JsonRpcError` for every failure."""
        result = self.call_now(method, params, context)
        if isinstance(result, Deferred):
            result = await result.run()
        return result

    def dispatch_now(self, msg: Message, context: Any = None) -> "Union[Optional[Dict[str, Any]], Deferred]":
        """Answer a classified message at once: a response dict, None when none is due,
        or a `Deferred` whose `run()` gives the answer when a handler has to wait.

        Requests always get a response. Notifications get none, even when their handler
        fails or is missing. `Invalid` messages get an error response (with a null id when
        no id could be read), as JSON-RPC 2.0 §5 asks.
        """
        if isinstance(msg, (Request, Notification)):
            try:
                result = self._call(msg.method, msg.params, context, msg)
            except JsonRpcError as exc:
                return error_answer(msg, exc)
            if type(result) is Deferred:
                return result
            return result_response(msg.id, result) if isinstance(msg, Request) else None
        if isinstance(msg, Invalid):
            return error_response(msg.id, msg.error)
        return None

    async def dispatch(self, msg: Message, context: Any = None) -> Optional[Dict[str, Any]]:
        """`dispatch_now`, with any waiting done here."""
        answer = self.dispatch_now(msg, context)
        if isinstance(answer, Deferred):
            return await answer.run()
        return answer


def is_async(handler: Any) -> bool:
    """A coroutine function (or an object whose `__call__` is one)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


