"""JSON-RPC 2.0, shared by the MCP server (over HTTP) and the ACP client (over NDJSON).

The module has three parts, from pure to loop-aware:

* a codec and classifier (`dumps`, `loads`, `parse_message`) that never touch a loop;
* a `Dispatcher` that maps method names to handlers and turns every outcome of a handler
  into a response object (so no exception ever escapes into a transport);
* outgoing bookkeeping (`Outgoing`) and a transport-neutral `Peer` that combines both
  directions for bidirectional streams such as ACP's stdio.

The HTTP server uses only the first two parts: over Streamable HTTP every request has
its own response, so there is nothing to match.  ACP needs all of it.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined server errors live in -32000..-32099; MCP uses -32001 for an
# unknown session (PROTOCOL.md §3, the capture's answer to `server/discover`).
SESSION_NOT_FOUND = -32001
REQUEST_CANCELLED = -32800  # LSP's convention, used by several MCP/ACP peers.

STANDARD_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}

Id = Union[int, str]

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# Only for text holding lone surrogates (which `loads` accepts from "\\ud800" escapes
# and UTF-8 cannot encode): the same JSON with every non-ASCII character escaped.
_ascii_encoder = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))
_decoder = json.JSONDecoder()


class JsonRpcError(Exception):
    """An error that becomes (or came from) a JSON-RPC error object.

    Raise it from a handler to answer with a specific code; `Peer.request` raises it when
    the other side answers with an error.
    """

    def __init__(self, code: int, message: Optional[str] = None, data: Any = None) -> None:
        self.code = int(code)
        self.message = message if message is not None else STANDARD_MESSAGES.get(code, "Error")
        self.data = data
        super().__init__("%s (%d)" % (self.message, self.code))

    def to_dict(self) -> Dict[str, Any]:
        error: Dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_dict(cls, error: Any) -> "JsonRpcError":
        if isinstance(error, dict):
            code = error.get("code")
            message = error.get("message")
            return cls(code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                       message if isinstance(message, str) else None, error.get("data"))
        return cls(INTERNAL_ERROR, "malformed error object", error)


class TransportClosed(ConnectionError):
    """The transport went away while a request was waiting for its response."""


# ---------------------------------------------------------------------------- codec


def _make_text_encoder() -> Callable[[Any], str]:
    """`_encoder.encode`, reusing C encoders rather than making one per call (what
    `JSONEncoder.iterencode` does: about a tenth of encoding a short answer, issue 6).
    A small pool: each call takes an encoder of its own, so threads and nested calls
    never share one's circular-reference markers."""
    try:
        from _json import make_encoder  # CPython's accelerator; absent elsewhere
        from json.encoder import encode_basestring
    except ImportError:
        return _encoder.encode
    def new() -> Any:
        # Its own markers (circular-reference detection, as json's): an encoder is
        # never used by two calls at once.
        return make_encoder({}, _encoder.default, encode_basestring, None, ":", ",", False, False, False)

    idle: List[Any] = []  # encoders not in use; list.pop/append are atomic

    def encode(obj: Any) -> str:
        try:
            c_encode = idle.pop()
        except IndexError:
            c_encode = new()  # the first call, another thread's, or a nested one
        text = "".join(c_encode(obj, 0))
        # (Not returned after an exception: it may have left containers marked.)
        if len(idle) < 4:
            idle.append(c_encode)
        return text

    return encode


_encode_text = _make_text_encoder()


class Encoded(dict):  # type: ignore[type-arg]
    """A JSON object whose encoding is known already: `dumps` of a response carrying
    one as its result splices `encoded` in instead of encoding it again (a result
    rendered once and sent many times, such as the current selection, issue 6). It is
    the dict it encodes, for whoever reads it; do not change it."""

    __slots__ = ("encoded",)

    def __init__(self, value: Dict[str, Any]) -> None:
        super().__init__(value)
        # None when it holds a lone surrogate: the whole answer must then be escaped
        # to ASCII, as `dumps` does, so nothing is spliced.
        self.encoded: Optional[bytes] = _utf8_json(value)


def _utf8_json(value: Any) -> Optional[bytes]:
    """The UTF-8 JSON of a value, or None when UTF-8 cannot carry it."""
    try:
        return _encode_text(value).encode("utf-8")
    except UnicodeEncodeError:
        return None


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. NaN and infinities are refused (not valid JSON)."""
    if type(obj) is dict and len(obj) == 3:
        result = obj.get("result")
        if type(result) is Encoded and result.encoded is not None and obj.get("jsonrpc") == "2.0" and "id" in obj:
            # A response carrying an Encoded result: the bytes of encoding it all (with
            # the members in the usual order, whatever order the dict has them in).
            msg_id = obj["id"]
            id_json = str(msg_id).encode() if type(msg_id) is int else (
                _utf8_json(msg_id) if type(msg_id) is str else None)
            if id_json is not None:
                # (Joined, not %-formatted: one exact allocation and less code run, issue 6.)
                return b"".join((b'{"jsonrpc":"2.0","id":', id_json, b',"result":', result.encoded, b"}"))
    text = _encode_text(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_encoder.encode(obj).encode("ascii")


def dumps_str(obj: Any) -> str:
    text = _encode_text(obj)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_encoder.encode(obj)
    return text


def _reject_constant(name: str) -> Any:
    raise ValueError("invalid JSON constant %s" % name)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):  # "1e999": valid JSON, but not a number we could send back
        raise ValueError("number out of range: %s" % text[:40])
    return value


_INF = float("inf")


_strict_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float)
_scan_once = _strict_decoder.scan_once


def loads(data: Union[bytes, bytearray, memoryview, str]) -> Any:
    """Decode one JSON document; any failure is a `JsonRpcError(PARSE_ERROR)`.

    `NaN`/`Infinity` are rejected too: they are not JSON, and echoing them back would
    make us emit invalid JSON.
    """
    try:
        # (UTF-8 is the default of decode(); naming it costs a lookup. And bytes(data)
        # only where needed: what a request runs is what it costs, issue 6.)
        data = data.decode() if type(data) is bytes else (
            data if isinstance(data, str) else bytes(data).decode())
        # What json.loads(data, parse_constant=..., parse_float=...) does, without
        # building a new decoder and scanner for every message (issue 6): a message
        # with no whitespace around it (the usual) is decoded by the C scanner alone.
        try:
            obj, end = _scan_once(data, 0)
        except StopIteration:
            pass  # not even the start of a value here: decode() below says what is wrong
        else:
            if end == len(data):
                return obj
        if data.startswith("\ufeff"):  # as json.loads does
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", data, 0)
        return _strict_decoder.decode(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise JsonRpcError(PARSE_ERROR, "Parse error: %s" % exc) from None


# ------------------------------------------------------------------ classification


class Message:
    """Base of the classified message kinds; `raw` is the decoded JSON object."""

    __slots__ = ("raw",)
    kind = "message"

    def __init__(self, raw: Any) -> None:
        self.raw = raw


class Request(Message):
    __slots__ = ("id", "method", "params")
    kind = "request"

    def __init__(self, raw: Any, id: Id, method: str, params: Any) -> None:
        self.raw = raw
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return "Request(id=%r, method=%r)" % (self.id, self.method)


class Notification(Message):
    __slots__ = ("method", "params")
    kind = "notification"

    def __init__(self, raw: Any, method: str, params: Any) -> None:
        super().__init__(raw)
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return "Notification(method=%r)" % (self.method,)


class Response(Message):
    __slots__ = ("id", "result")
    kind = "response"

    def __init__(self, raw: Any, id: Id, result: Any) -> None:
        super().__init__(raw)
        self.id = id
        self.result = result

    def __repr__(self) -> str:
        return "Response(id=%r)" % (self.id,)


class ErrorResponse(Message):
    __slots__ = ("id", "error")
    kind = "error"

    def __init__(self, raw: Any, id: Optional[Id], error: JsonRpcError) -> None:
        super().__init__(raw)
        self.id = id
        self.error = error

    def __repr__(self) -> str:
        return "ErrorResponse(id=%r, code=%r)" % (self.id, self.error.code)


class Invalid(Message):
    """Something that is not a valid JSON-RPC message; `error` is what to answer with."""

    __slots__ = ("id", "error")
    kind = "invalid"

    def __init__(self, raw: Any, id: Optional[Id], error: JsonRpcError) -> None:
        super().__init__(raw)
        self.id = id
        self.error = error

    def __repr__(self) -> str:
        return "Invalid(id=%r, %s)" % (self.id, self.error.message)


def _valid_id(value: Any) -> bool:
    # Ids are strings or integers (numbers with fractions are discouraged by the spec;
    # we accept integral numbers only). bool is an int subclass in Python: refuse it.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_message(obj: Any) -> Message:
    """Classify one decoded JSON value. Never raises.

    Batches (lists) are classified `Invalid`: neither MCP over this transport
    (PROTOCOL.md §2: a batch gets `400`) nor ACP uses them.
    """
    if not isinstance(obj, dict):
        return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object"))
    # The usual message, a well-formed request, in one test (issue 6); anything else is
    # classified with care below.
    raw_id = obj.get("id")
    method = obj.get("method")
    if (type(raw_id) is int or type(raw_id) is str) and type(method) is str and obj.get("jsonrpc") == "2.0":
        params = obj.get("params")
        if type(params) is dict or type(params) is list or "params" not in obj:
            return Request(obj, raw_id, method, params)
    has_id = "id" in obj and raw_id is not None
    # (_valid_id, inline: this runs for every message)
    msg_id = raw_id if type(raw_id) is int or type(raw_id) is str or _valid_id(raw_id) else None
    # A request with `"id": null` is not a notification (JSON-RPC 2.0 §4: a notification
    # has no id member); MCP and ACP forbid null ids, so it is answered as invalid.
    null_id_request = "id" in obj and raw_id is None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
    if "method" in obj:
        if not isinstance(method, str):
            return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: method must be a string"))
        params = obj.get("params")
        if "params" in obj and not isinstance(params, (dict, list)):
            return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: params must be an object or array"))
        if null_id_request:
            return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: id must not be null"))
        if has_id:
            if msg_id is None:
                return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer"))
            return Request(obj, msg_id, method, params)
        return Notification(obj, method, params)
    if "result" in obj or "error" in obj:
        if "result" in obj and "error" in obj:
            return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Response: both result and error"))
        if "error" in obj:
            error = obj["error"]
            if not (isinstance(error, dict) and isinstance(error.get("code"), int)
                    and isinstance(error.get("message"), str)):
                return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Response: malformed error object"))
            if has_id and msg_id is None:
                return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Response: bad id"))
            return ErrorResponse(obj, msg_id, JsonRpcError.from_dict(error))
        if msg_id is None:
            return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Response: missing id"))
        return Response(obj, msg_id, obj["result"])
    return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: no method, result or error"))


def decode_message(data: Union[bytes, str]) -> Message:
    """`loads` + `parse_message`; unparsable input becomes `Invalid` with `-32700`."""
    try:
        obj = loads(data)
    except JsonRpcError as exc:
        return Invalid(None, None, exc)
    return parse_message(obj)


# ------------------------------------------------------------------------ builders


def request(id: Id, method: str, params: Any = None) -> Dict[str, Any]:
    msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: Any = None) -> Dict[str, Any]:
    msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result_response(id: Optional[Id], result: Any) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_response(id: Optional[Id], error: Union[JsonRpcError, Dict[str, Any]]) -> Dict[str, Any]:
    if isinstance(error, JsonRpcError):
        error = error.to_dict()
    return {"jsonrpc": "2.0", "id": id, "error": error}


# ---------------------------------------------------------------------- dispatcher

Handler = Callable[[Any, Any], Any]

#: Results that are never awaitable: checked first, so a plain result costs no
#: `inspect.isawaitable` call.
_PLAIN = (dict, list, str, int, float, bool, type(None))


class Deferred:
    """A call that has to wait: its handler is a coroutine function, or a plain function
    that returned an awaitable.

    `Dispatcher.dispatch_now` and `call_now` return one instead of an answer, so that
    whoever owns the task decides where the waiting happens (the HTTP server answers
    most requests inside `data_received`, with no task at all, issue 6). `run()` makes
    the coroutine that finishes the call, when awaited: the response for a message,
    the result for `call_now`. `drop()` gives the call up before it ran.
    """

    __slots__ = ("dispatcher", "method", "params", "context", "handler", "awaitable", "msg")

    def __init__(self, dispatcher: "Dispatcher", method: str, params: Any, context: Any,
                 handler: Optional[Handler], awaitable: Any = None) -> None:
        self.dispatcher = dispatcher
        self.method = method
        self.params = params
        self.context = context
        self.handler = handler        # a coroutine function not called yet, or None
        self.awaitable = awaitable    # what a plain handler returned, or None
        self.msg: Optional[Message] = None  # set by dispatch_now: run() answers it

    async def _result(self) -> Any:
        awaitable, self.awaitable = self.awaitable, None
        try:
            if awaitable is None:
                assert self.handler is not None
                awaitable = self.handler(self.params, self.context)
            return await awaitable
        except (JsonRpcError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise self.dispatcher._internal_error(self.method, exc) from exc

    async def run(self) -> Any:
        msg = self.msg
        if msg is None:
            return await self._result()
        try:
            result = await self._result()
        except JsonRpcError as exc:
            return self.dispatcher._error_answer(msg, exc)
        return result_response(msg.id, result) if isinstance(msg, Request) else None

    def drop(self) -> None:
        """Give the call up before `run()`: the handler never runs (an awaitable a plain
        handler returned is closed or cancelled, so nothing is left un-awaited)."""
        awaitable, self.awaitable = self.awaitable, None
        discard(awaitable)


def discard(awaitable: Any) -> None:
    """Give up an awaitable that will never be awaited: a coroutine (or anything with
    `close()`) is closed, so no "never awaited" warning; a future is cancelled."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    elif asyncio.isfuture(awaitable):
        awaitable.cancel()


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
        # method -> (handler, is a coroutine function): decided once, at `add`.
        self._handlers: Dict[str, Tuple[Handler, bool]] = {}
        self._fallback = fallback
        self._fallback_async = _is_async(fallback) if fallback is not None else False

    def add(self, method: str, handler: Handler) -> None:
        self._handlers[method] = (handler, _is_async(handler))

    def method(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator form of `add`."""

        def register(handler: Handler) -> Handler:
            self.add(name, handler)
            return handler

        return register

    def remove(self, method: str) -> None:
        self._handlers.pop(method, None)

    def __contains__(self, method: str) -> bool:
        return method in self._handlers

    def handler_for(self, method: str) -> Optional[Handler]:
        entry = self._handlers.get(method)
        return entry[0] if entry is not None else self._fallback

    def _internal_error(self, method: str, exc: Exception) -> JsonRpcError:
        # A handler bug must not kill the transport.
        log.error("handler for %s failed", method, exc_info=exc)
        return JsonRpcError(INTERNAL_ERROR, "Internal error: %s: %s" % (type(exc).__name__, exc))

    def call_now(self, method: str, params: Any, context: Any = None) -> Any:
        """Run the handler for `method` if it can answer at once: its result, or a
        `Deferred` when it has to wait. Raises `JsonRpcError` for every failure."""
        entry = self._handlers.get(method)
        if entry is not None:
            handler, is_async = entry
        elif self._fallback is not None:
            handler, is_async = self._fallback, self._fallback_async
        else:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: %s" % method)
        if is_async:
            return Deferred(self, method, params, context, handler)
        try:
            result = handler(params, context)
        except JsonRpcError:
            raise
        except Exception as exc:
            raise self._internal_error(method, exc) from exc
        if not isinstance(result, _PLAIN) and inspect.isawaitable(result):
            return Deferred(self, method, params, context, None, result)
        return result

    async def call(self, method: str, params: Any, context: Any = None) -> Any:
        """Run the handler for `method`; raises `JsonRpcError` for every failure."""
        result = self.call_now(method, params, context)
        if isinstance(result, Deferred):
            result = await result.run()
        return result

    def _error_answer(self, msg: Message, exc: JsonRpcError) -> Optional[Dict[str, Any]]:
        if isinstance(msg, Request):
            return error_response(msg.id, exc)
        if exc.code != METHOD_NOT_FOUND:  # notifications: never answered, failures logged
            log.warning("notification %s failed: %s", getattr(msg, "method", "?"), exc)
        return None

    def dispatch_now(self, msg: Message, context: Any = None) -> "Union[Optional[Dict[str, Any]], Deferred]":
        """Answer a classified message at once: a response dict, None when none is due,
        or a `Deferred` whose `run()` gives the answer when a handler has to wait.

        Requests always get a response. Notifications get none, even when their handler
        fails or is missing. `Invalid` messages get an error response (with a null id when
        no id could be read), as JSON-RPC 2.0 §5 asks.
        """
        if isinstance(msg, (Request, Notification)):
            try:
                result = self.call_now(msg.method, msg.params, context)
            except JsonRpcError as exc:
                return self._error_answer(msg, exc)
            if isinstance(result, Deferred):
                result.msg = msg
                return result
            # (result_response, inline: this runs for every request)
            return {"jsonrpc": "2.0", "id": msg.id, "result": result} if isinstance(msg, Request) else None
        if isinstance(msg, Invalid):
            return error_response(msg.id, msg.error)
        return None

    async def dispatch(self, msg: Message, context: Any = None) -> Optional[Dict[str, Any]]:
        """`dispatch_now`, with any waiting done here."""
        answer = self.dispatch_now(msg, context)
        if isinstance(answer, Deferred):
            return await answer.run()
        return answer


def _is_async(handler: Any) -> bool:
    """A coroutine function (or an object whose `__call__` is one)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


def require_params(params: Any, required: Tuple[str, ...] = (), types: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Check that params is an object with the given keys and types, or raise -32602."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: expected an object")
    for key in required:
        if key not in params:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: missing %r" % key)
    for key, kind in (types or {}).items():
        if key in params and params[key] is not None:
            value = params[key]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
                raise JsonRpcError(INVALID_PARAMS, "Invalid params: %r has the wrong type" % key)
    return params


# --------------------------------------------------------------- outgoing requests


class Outgoing:
    """Bookkeeping for requests we send: ids, waiters, and failing them all at once.

    Ids are integers counting up from `first_id`; responses are matched by id (they may
    come out of order, ACP.md §2), and a string id that looks like one of ours is matched
    too because some peers echo ids as strings.
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

    def start(self, method: str, params: Any = None) -> Tuple[Id, Dict[str, Any], "asyncio.Future[Any]"]:
        """Allocate an id and a waiter; returns (id, message to send, future)."""
        if self._closed is not None:
            raise TransportClosed(str(self._closed) or "transport closed")
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        self._methods[msg_id] = method
        return msg_id, request(msg_id, method, params), future

    def method_of(self, msg_id: Id) -> Optional[str]:
        return self._methods.get(msg_id)

    def _pop(self, msg_id: Any) -> Optional["asyncio.Future[Any]"]:
        future = self._waiting.pop(msg_id, None)
        if (future is None and isinstance(msg_id, str) and 0 < len(msg_id) <= 18
                and all("0" <= c <= "9" for c in msg_id)):
            msg_id = int(msg_id)
            future = self._waiting.pop(msg_id, None)
        self._methods.pop(msg_id, None)
        return future

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
                 default_timeout: Optional[float] = None) -> None:
        self._send = send
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
        cannot parse, ACP.md §1), `TransportClosed` when the transport goes away."""
        if timeout is not None and timeout < 0:
            timeout = self.default_timeout
        msg_id, msg, future = self.outgoing.start(method, params)
        try:
            await self._send(msg)
            if timeout is None:
                return await future
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        finally:
            if not future.done() or future.cancelled():
                self.outgoing.cancel(msg_id)

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
            # Inline, in arrival order: a stream of `session/update` notifications must
            # reach the session before the response that ends the turn (ACP.md §3), which
            # separate tasks would not guarantee. Notification handlers must be quick.
            await self.dispatcher.dispatch(msg, self.context)
            return
        key = next(self._task_keys)
        task = asyncio.ensure_future(self._handle(msg))
        self._tasks[key] = task
        task.add_done_callback(lambda _t, key=key: self._tasks.pop(key, None))

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
