"""Elicitation (ACP.md §12): the agent asks the person for information, in a form (a
flat schema of typed fields) or by a URL the person opens themselves.

Pure functions of the agent's request: `ElicitationRequest.from_params` reads and
checks it, `Field` says what one form field takes and turns typed text into a value,
`check_content` validates an answer against the schema before it is sent (all
but `pattern`: the agent's regular expression is not run here), and
`url_notes` says what a person should know about a URL before opening it. Asking is
the host's (`askers.ElicitationAsker` on a terminal); the client never opens a URL.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import urlsplit

from ._core import jsonrpc

Value = Union[str, int, float, bool, List[str]]
ACTIONS = ("accept", "decline", "cancel")


def _invalid(message: str) -> jsonrpc.JsonRpcError:
    return jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: %s" % message)


class Field:
    """One property of a form's `requestedSchema`: `name`, `kind` (`string`, `number`,
    `integer`, `boolean`, `array` of strings), `title`, `required`, `default`, and for
    a choice its `choices` as (value, label) pairs."""

    __slots__ = ("name", "kind", "title", "description", "required", "default", "choices", "schema")

    def __init__(self, name: str, schema: Dict[str, Any], required: bool) -> None:
        kind = schema.get("type")
        if kind not in ("string", "number", "integer", "boolean", "array"):
            raise _invalid("field %s: a type this client cannot ask for: %r" % (name, kind))
        self.name = name
        self.kind: str = kind
        self.schema = schema
        self.required = required
        title, description = schema.get("title"), schema.get("description")
        self.title = title if isinstance(title, str) and title else name
        self.description = description if isinstance(description, str) else None
        self.default = schema.get("default")
        self.choices = _choices(schema.get("items") if kind == "array" else schema)
        if kind == "array" and not self.choices:
            raise _invalid("field %s: a list needs its items' choices" % name)

    def parse(self, text: str) -> Value:
        """The value typed text means (a list: its choices separated by commas); a
        ValueError saying what the field takes when it means none."""
        text = text.strip()
        if self.kind == "boolean":
            if text.lower() in ("y", "yes", "true"):
                return True
            if text.lower() in ("n", "no", "false"):
                return False
            raise ValueError("answer yes or no")
        if self.kind == "array":
            picked = [self._choice(part) for part in text.split(",") if part.strip()]
            self.check(picked)
            return picked
        if self.choices:
            return self._choice(text)
        value: Value
        if self.kind == "integer":
            try:
                value = int(text)
            except ValueError:
                raise ValueError("a whole number") from None
        elif self.kind == "number":
            try:
                value = float(text)
            except ValueError:
                raise ValueError("a number") from None
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("a finite number")
        else:
            value = text
        self.check(value)
        return value

    def _choice(self, text: str) -> str:
        text = text.strip()
        for number, (value, label) in enumerate(self.choices, 1):
            if text in (value, label, str(number)):
                return value
        raise ValueError("one of: %s" % ", ".join(label for _, label in self.choices))

    def check(self, value: Any) -> None:
        """A ValueError when `value` does not fit the field's schema."""
        s = self.schema
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError("yes or no")
        elif self.kind == "array":
            allowed = {v for v, _ in self.choices}
            if not (isinstance(value, list) and all(isinstance(v, str) and v in allowed for v in value)):
                raise ValueError("some of: %s" % ", ".join(label for _, label in self.choices))
            _bounds(len(value), s.get("minItems"), s.get("maxItems"), "choices")
        elif self.kind in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, int if self.kind == "integer" else (int, float)):
                raise ValueError("a whole number" if self.kind == "integer" else "a number")
            _bounds(value, s.get("minimum"), s.get("maximum"), "")
        else:
            if not isinstance(value, str):
                raise ValueError("text")
            if self.choices and value not in {v for v, _ in self.choices}:
                raise ValueError("one of: %s" % ", ".join(label for _, label in self.choices))
            _bounds(len(value), s.get("minLength"), s.get("maxLength"), "characters")
            # A `pattern` is left to the agent, which checks the answer again: a regular
            # expression of its making could take any time to run here ("(a+)+$").


def _choices(schema: Any) -> List[Tuple[str, str]]:
    """A field's choices: `enum` (values), `oneOf`/`anyOf` of `{const, title}`."""
    if not isinstance(schema, dict):
        return []
    if isinstance(schema.get("enum"), list):
        return [(v, v) for v in schema["enum"] if isinstance(v, str)]
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return [(o["const"], str(o.get("title") or o["const"])) for o in schema[key]
                    if isinstance(o, dict) and isinstance(o.get("const"), str)]
    return []


def _bounds(value: Union[int, float], low: Any, high: Any, unit: str) -> None:
    number = (int, float)
    if isinstance(low, number) and not isinstance(low, bool) and value < low:
        raise ValueError("at least %s %s" % (low, unit) if unit else "at least %s" % low)
    if isinstance(high, number) and not isinstance(high, bool) and value > high:
        raise ValueError("at most %s %s" % (high, unit) if unit else "at most %s" % high)


class ElicitationRequest:
    """An `elicitation/create` from the agent: `mode` (`form` or `url`), `message`,
    the form's `fields`, or the `url` and its `elicitation_id`; `session_id` and
    `tool_call_id` (session scope) or `request_id` (request scope)."""

    __slots__ = ("mode", "message", "fields", "url", "elicitation_id", "session_id", "tool_call_id",
                 "request_id", "raw")

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.raw = raw
        mode, message = raw.get("mode"), raw.get("message")
        if mode not in ("form", "url"):
            raise _invalid("mode must be form or url, not %r" % (mode,))
        if not isinstance(message, str):
            raise _invalid("message must be a string")
        self.mode: str = mode
        self.message = message
        session_id, tool_call_id = raw.get("sessionId"), raw.get("toolCallId")
        self.session_id = session_id if isinstance(session_id, str) else None
        self.tool_call_id = tool_call_id if isinstance(tool_call_id, str) else None
        self.request_id = raw.get("requestId")
        self.fields: List[Field] = []
        self.url: Optional[str] = None
        self.elicitation_id: Optional[str] = None
        if mode == "form":
            self.fields = form_fields(raw.get("requestedSchema"))
        else:
            url, elicitation_id = raw.get("url"), raw.get("elicitationId")
            if not isinstance(url, str) or not isinstance(elicitation_id, str):
                raise _invalid("a url elicitation needs url and elicitationId strings")
            self.url, self.elicitation_id = url, elicitation_id

    @classmethod
    def from_params(cls, params: Any) -> "ElicitationRequest":
        return cls(jsonrpc.require_params(params))


def form_fields(schema: Any) -> List[Field]:
    """The fields of a flat `requestedSchema` (`{type: object, properties, required}`),
    in the agent's order; -32602 for anything else."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise _invalid("requestedSchema must be an object schema")
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _invalid("requestedSchema: properties must be an object, required a list")
    fields = []
    for name, property_schema in properties.items():
        if not isinstance(property_schema, dict):
            raise _invalid("field %s: its schema must be an object" % name)
        fields.append(Field(name, property_schema, name in required))
    return fields


def check_content(fields: List[Field], content: Any) -> Dict[str, Value]:
    """An accepted form's `content`, checked against the schema (ACP: clients should
    validate before sending): every required field given, every value fitting. A
    ValueError names the first field that does not."""
    if not isinstance(content, dict):
        raise ValueError("the answer must be an object")
    known = {field.name: field for field in fields}
    for name in content:
        if name not in known:
            raise ValueError("%s: not a field of the form" % name)
    for field in fields:
        if field.name not in content:
            if field.required:
                raise ValueError("%s: required" % field.name)
            continue
        try:
            field.check(content[field.name])
        except ValueError as exc:
            raise ValueError("%s: %s" % (field.name, exc)) from None
    return dict(content)


def url_notes(url: str) -> List[str]:
    """What a person should know before opening `url`: its host, and warnings (not
    HTTPS, a Punycode or non-ASCII host that may imitate another, credentials in the
    URL). Nothing is fetched."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return ["this is not a URL that can be read: do not open it"]
    notes = ["host: %s" % (host or "(none)")]
    if parts.scheme != "https":
        notes.append("warning: not HTTPS (%s)" % (parts.scheme or "no scheme"))
    if "xn--" in host or any(ord(char) > 127 for char in host):
        notes.append("warning: the host name is Punycode or not plain ASCII, it may imitate another")
    if parts.username or parts.password:
        notes.append("warning: the URL carries a user name or password")
    return notes


def answer(action: str, content: Optional[Dict[str, Value]] = None) -> Dict[str, Any]:
    """The response: `{action}`, with `content` for an accepted form."""
    if action not in ACTIONS:
        raise ValueError("an elicitation is answered accept, decline or cancel, not %r" % action)
    response: Dict[str, Any] = {"action": action}
    if action == "accept" and content is not None:
        response["content"] = content
    return response
