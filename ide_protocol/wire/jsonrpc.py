"""JSON-RPC 2.0 messages: the codec, the classifier, the error codes and the builders.

Shared by the MCP server (over HTTP, PROTOCOL.md §2–3) and the ACP client (over NDJSON,
ACP.md §1–2). Everything here is a pure function of bytes or objects; the dispatcher
and the asyncio peer that build on it live in `ide_protocol.rpc`.

The rules, each stated once:

* encoding (`dumps`): compact UTF-8 JSON, never NaN or infinities; text that UTF-8
  cannot carry (lone surrogates) is sent with every non-ASCII character escaped;
* decoding (`loads`): strict JSON, NaN/Infinity and out-of-range numbers refused, every
  failure a `PARSE_ERROR`;
* classification (`parse_message`): what a decoded value is (request, notification,
  response, error response) or why it is invalid, and the id to answer it with;
* builders: the four message shapes.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple, Union

from . import json_text


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined server errors live in -32000..-32099; MCP uses -32001 for an
# unknown session (PROTOCOL.md §3: the answer to `server/discover` in the capture).
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


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. NaN and infinities are refused (not valid JSON). The `json`
    module's public encoder, on the whole message every time: a response is built by
    `result_response` or `error_response` and encoded here, nowhere else."""
    text = _encoder.encode(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_encoder.encode(obj).encode("ascii")


def dumps_str(obj: Any) -> str:
    text = _encoder.encode(obj)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_encoder.encode(obj)
    return text


def loads(data: Union[bytes, bytearray, memoryview, str]) -> Any:
    """Decode one JSON document; any failure is a `JsonRpcError(PARSE_ERROR)`.

    The rules for untrusted JSON text (no `NaN`/`Infinity`, which echoing back would
    make invalid JSON; no byte-order mark; a bounded depth) are `json_text.loads`'s.
    """
    try:
        return json_text.loads(data)
    except json_text.JsonTextError as exc:
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
    # Ids are strings or integers (numbers with fractions are discouraged by JSON-RPC;
    # we accept integral numbers only). bool is an int subclass in Python: refuse it.
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def parse_message(obj: Any) -> Message:
    """Classify one decoded JSON value. Never raises.

    Batches (lists) are classified `Invalid`: neither MCP over this transport
    (PROTOCOL.md §2: a batch gets `400`) nor ACP uses them. The id an `Invalid` carries
    is the one to answer with (None when no usable id could be read).
    """
    if not isinstance(obj, dict):
        return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object"))
    raw_id = obj.get("id")
    msg_id = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
    if "method" not in obj:
        if "result" in obj or "error" in obj:
            return _parse_answer(obj, raw_id, msg_id)
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: no method, result or error"))
    # A message with a `method`: a request (it has an id) or a notification.
    method = obj["method"]
    if not isinstance(method, str):
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: method must be a string"))
    params = obj.get("params")
    if params is None and "params" in obj or params is not None and not isinstance(params, (dict, list)):
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Request: params must be an object or array"))
    if raw_id is None:
        if "id" not in obj:
            return Notification(obj, method, params)
        # `"id": null` does not make a notification (a notification has no id member);
        # MCP and ACP forbid null ids, so it is answered as invalid.
        return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: id must not be null"))
    if msg_id is None:
        return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer"))
    return Request(obj, msg_id, method, params)


def _parse_answer(obj: Dict[str, Any], raw_id: Any, msg_id: Optional[Id]) -> Message:
    """A message with a `result` or an `error`: a response to one of our requests."""
    if "result" in obj and "error" in obj:
        return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Response: both result and error"))
    if "error" in obj:
        error = obj["error"]
        if not (isinstance(error, dict) and isinstance(error.get("code"), int)
                and isinstance(error.get("message"), str)):
            return Invalid(obj, msg_id, JsonRpcError(INVALID_REQUEST, "Invalid Response: malformed error object"))
        if raw_id is not None and msg_id is None:
            return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Response: bad id"))
        return ErrorResponse(obj, msg_id, JsonRpcError.from_dict(error))
    if msg_id is None:
        return Invalid(obj, None, JsonRpcError(INVALID_REQUEST, "Invalid Response: missing id"))
    return Response(obj, msg_id, obj["result"])


def answers(message: Any, request_id: Any) -> bool:
    """Whether a raw decoded `message` is the response to the request `request_id`: an
    object with that id and a `result` or an `error` (JSON-RPC 2.0, "Response object").
    A caller reading a stream of messages (an SSE body) uses it to find its answer among
    notifications and requests the peer sends on the way."""
    return isinstance(message, dict) and message.get("id") == request_id and (
        "result" in message or "error" in message)


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


def require_params(params: Any, required: Tuple[str, ...] = (), types: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Check that params is an object with the given keys and types, or raise -32602.
    An optional key may be null (as if absent); a required key with a type may not."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: expected an object")
    for key in required:
        if key not in params:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: missing %r" % key)
        if params[key] is None and types is not None and key in types:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: %r is null" % key)
    for key, kind in (types or {}).items():
        if key in params and params[key] is not None:
            value = params[key]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
                raise JsonRpcError(INVALID_PARAMS, "Invalid params: %r has the wrong type" % key)
    return params


