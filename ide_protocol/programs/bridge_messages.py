"""The editor's messages to the bridge, decoded and checked: pure functions, no I/O.

One table (`FIELDS`) says, for each message type, which fields it has, of which JSON
type, and which are required; docs/BRIDGE.md ("Field types") is the same table for
people, and a test holds the two together. Every field present is checked before a
message is acted on, so a wrong-typed field is an error even where the bridge would
not have read it (`lines` in an `add_file` without positions), and a value the bridge
passes on (a diagnostic's `code`) is never something the wire cannot carry.

What an error says names the field and the JSON type it got, never the value itself:
a value may be megabytes long or nested two hundred deep.

Decoding is `wire.json_text.loads`, the project's one decoder of untrusted JSON: no
`NaN` or infinities (they could not be written back as JSON), a bounded depth. So an
`id`, which is echoed in the reply, is always one the bridge can write.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from ..common.tools import SEVERITIES, normalize_severity
from ..wire import json_text
from ..wire.json_text import json_type

#: The longest line the bridge reads; a longer one is skipped (one `error`).
MAX_LINE = 16 * 1024 * 1024


class MessageError(Exception):
    """A message the bridge cannot use; its text goes back in an `error` message."""


def shown(value: Any) -> str:
    """A value for an error message: a string by its start, a short integer as it is,
    anything else by its type (never its whole text: it may be huge, or deep)."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if _is_int(value) and -10 ** 15 < value < 10 ** 15:
        return str(value)
    return json_type(value, integers=True)


def decode(raw: bytes) -> Dict[str, Any]:
    """One line from the editor as a message object (MessageError: not one)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError("not UTF-8: %s" % exc)
    try:
        message = json_text.loads(text)
    except json_text.JsonTextError as exc:
        raise MessageError("not JSON: %s" % exc)
    if not isinstance(message, dict):
        raise MessageError("a message must be a JSON object, not %s" % json_type(message, integers=True))
    return message


# ------------------------------------------------------------------ kinds of field


class Kind:
    """What a field's value must be: `what` it is, for the error, and `problem(value)`,
    None when the value is one, else where inside it the fault is (a suffix of the
    field's name: "" for the value itself, ".line", "[2]"), what is wanted there and
    the value found there."""

    def __init__(self, what: str, accepts: Callable[[Any], bool],
                 inside: Optional[Callable[[Any], Optional[Tuple[str, str, Any]]]] = None) -> None:
        self.what = what
        self.accepts = accepts
        self.inside = inside

    def problem(self, value: Any) -> Optional[Tuple[str, str, Any]]:
        if self.inside is not None:
            found = self.inside(value)
            if found is not None:
                return found
        return None if self.accepts(value) else ("", self.what, value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_path(value: Any) -> bool:
    return isinstance(value, str) and value != "" and "\x00" not in value


def _position_inside(value: Any) -> Optional[Tuple[str, str, Any]]:
    if isinstance(value, dict):
        for key in ("line", "character"):
            if not (_is_int(value.get(key)) and value[key] >= 0):
                return "." + key, "an integer >= 0", value.get(key)
    return None


def _lines_inside(value: Any) -> Optional[Tuple[str, str, Any]]:
    if isinstance(value, dict):
        for key, text in value.items():
            if not isinstance(text, str):
                return "[%s]" % json.dumps(key[:40]), "a string (the text of that line)", text
    return None


def _folders_inside(value: Any) -> Optional[Tuple[str, str, Any]]:
    if isinstance(value, list):
        for index, folder in enumerate(value):
            if not _is_path(folder):
                return "[%d]" % index, "a folder path (a string, not empty, without NUL)", folder
    return None


def _is_severity(value: Any) -> bool:
    try:
        return isinstance(value, str) and bool(normalize_severity(value))
    except ValueError:
        return False


STRING = Kind("a string", lambda v: isinstance(v, str))
INTEGER = Kind("an integer", _is_int)
BOOLEAN = Kind("true or false", lambda v: isinstance(v, bool))
PATH = Kind("a file path (a string, not empty, without NUL)", _is_path)
POSITION = Kind('a position {"line": L, "character": C}', lambda v: isinstance(v, dict), _position_inside)
LINES = Kind('an object {"LINE": "text of that line"}', lambda v: isinstance(v, dict), _lines_inside)
FOLDERS = Kind("a non-empty array of folder paths", lambda v: isinstance(v, list) and bool(v), _folders_inside)
SEVERITY = Kind("one of %s (any case)" % ", ".join(SEVERITIES), _is_severity)
CODE = Kind("a string or an integer", lambda v: isinstance(v, str) or _is_int(v))
DIAGNOSTICS = Kind("an array of diagnostic objects (empty: clear the file's)", lambda v: isinstance(v, list))

#: A field: its name, its kind, whether it is required. Absent and null are the same.
Field = Tuple[str, Kind, bool]

#: The fields of each item of `diagnostics` (docs/BRIDGE.md).
DIAGNOSTIC_FIELDS: Sequence[Field] = (
    ("message", STRING, True), ("severity", SEVERITY, False), ("start", POSITION, True),
    ("end", POSITION, False), ("source", STRING, False), ("code", CODE, False))

#: The fields of each message type from the editor (docs/BRIDGE.md, "From the editor"
#: and "Field types"). `id` may be added to any, of any JSON type.
FIELDS: Dict[str, Sequence[Field]] = {
    "hello": (("protocol", INTEGER, True), ("unit", STRING, True), ("name", STRING, False),
              ("unified_diff", BOOLEAN, False)),
    # (`path` null or absent: no active editor; then nothing else is read)
    "selection": (("path", PATH, False), ("text", STRING, False), ("start", POSITION, True),
                  ("end", POSITION, False), ("lines", LINES, False)),
    "diagnostics": (("path", PATH, True), ("diagnostics", DIAGNOSTICS, True), ("lines", LINES, False)),
    "clear_diagnostics": (),
    "add_file": (("path", PATH, True), ("start", POSITION, False), ("end", POSITION, False),
                 ("text", STRING, False), ("lines", LINES, False)),
    "add_selection": (("path", PATH, True), ("start", POSITION, True), ("end", POSITION, False),
                      ("text", STRING, False), ("lines", LINES, False)),
    "folders": (("folders", FOLDERS, True),),
    "diff_answer": (("diff", INTEGER, True), ("accept", BOOLEAN, True)),
    "status": (),
    "stop": (),
}


def message_type(message: Dict[str, Any]) -> str:
    kind = message.get("type")
    if not isinstance(kind, str):
        raise MessageError('a message needs a "type" (a string), not %s' % json_type(kind, integers=True))
    if kind not in FIELDS:
        raise MessageError("unknown message type %s (known: %s)" % (shown(kind), ", ".join(FIELDS)))
    return kind


def _check_fields(kind: str, where: str, obj: Dict[str, Any], fields: Sequence[Field],
                  skip_required: bool = False) -> None:
    for name, field_kind, required in fields:
        value = obj.get(name)
        if value is None:
            if required and not skip_required:
                raise MessageError("%s: '%s%s' is required: %s" % (kind, where, name, field_kind.what))
            continue
        problem = field_kind.problem(value)
        if problem is not None:
            suffix, wanted, found = problem
            raise MessageError("%s: '%s%s%s' must be %s, not %s" % (kind, where, name, suffix, wanted, shown(found)))


def check(kind: str, message: Dict[str, Any]) -> None:
    """Every field of `message` (of type `kind`) of its documented type (MessageError:
    the first that is not)."""
    no_editor = kind == "selection" and message.get("path") is None
    _check_fields(kind, "", message, FIELDS[kind], skip_required=no_editor)
    if kind == "diagnostics":
        for index, item in enumerate(message["diagnostics"]):
            where = "diagnostics[%d]" % index
            if not isinstance(item, dict):
                raise MessageError("%s: '%s' must be a diagnostic object, not %s"
                                   % (kind, where, json_type(item, integers=True)))
            _check_fields(kind, where + ".", item, DIAGNOSTIC_FIELDS)


def path_of(message: Dict[str, Any]) -> str:
    """The message's (checked) `path`, absolute."""
    return os.path.abspath(message["path"])


def optional(message: Dict[str, Any], name: str) -> Optional[Any]:
    """A checked optional field's value (None: absent)."""
    return message.get(name)
