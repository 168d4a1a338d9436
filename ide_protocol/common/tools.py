"""The six IDE tools of PROTOCOL.md §4: their definitions and the shapes of their results.

Everything here is data and pure functions, shared by the server (which answers with
these shapes), the client (which reads them) and the conformance checker (which
compares a server's `tools/list` with `TOOLS`).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from ..wire import json_text
from .paths import path_to_uri, wire_file_path

# ------------------------------------------------------------------ definitions §4

_EXECUTION = {"taskSupport": "forbidden"}
_SCHEMA_URL = "http://json-schema.org/draft-07/schema#"


def _schema(properties: Dict[str, str], required: Tuple[str, ...]) -> Dict[str, Any]:
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "additionalProperties": False,
        "$schema": _SCHEMA_URL,
    }
    if required:
        schema["required"] = list(required)
    return schema


def _tool(name: str, description: str, schema: Dict[str, Any]) -> Dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema, "execution": dict(_EXECUTION)}


_EMPTY = {"type": "object", "properties": {}}

#: `tools/list` exactly as PROTOCOL.md §4 gives it (VS Code's names and descriptions:
#: the descriptions of get_selection and get_diagnostics reach the model verbatim).
TOOLS: List[Dict[str, Any]] = [
    _tool("get_vscode_info", "Get information about the current VS Code instance", dict(_EMPTY)),
    _tool("get_selection",
          "Get text selection. Returns current selection if an editor is active, otherwise returns the "
          "latest cached selection. The \"current\" field indicates if this is from the active editor "
          "(true) or cached (false).", dict(_EMPTY)),
    _tool("open_diff",
          "Opens a diff view comparing original file content with new content. Blocks until user accepts, "
          "rejects, or closes the diff.",
          _schema({"original_file_path": "Path to the original file",
                   "new_file_contents": "The new file contents to compare against",
                   "tab_name": "Name for the diff tab"},
                  ("original_file_path", "new_file_contents", "tab_name"))),
    _tool("close_diff",
          "Closes a diff tab by its tab name. Use this when the client rejects an edit to close the "
          "corresponding diff view.",
          _schema({"tab_name": "The tab name of the diff to close (must match the tab_name used when "
                               "opening the diff)"}, ("tab_name",))),
    _tool("get_diagnostics", "Gets language diagnostics (errors, warnings, hints) from VS Code",
          _schema({"uri": "File URI to get diagnostics for. Optional. If not provided, returns diagnostics "
                          "for all files."}, ())),
    _tool("update_session_name", "Update the display name for the current CLI session",
          _schema({"name": "The new session name"}, ("name",))),
]

TOOL_NAMES = tuple(tool["name"] for tool in TOOLS)

#: The severities the CLI counts (PROTOCOL.md §4: capitalised names only).
SEVERITIES = ("Error", "Warning", "Information", "Hint")
_SEVERITY_ALIASES = {"error": "Error", "warning": "Warning", "warn": "Warning", "information": "Information",
                     "info": "Information", "hint": "Hint", "0": "Error", "1": "Warning", "2": "Information",
                     "3": "Hint"}

# Triggers of an open_diff answer (PROTOCOL.md §4).
ACCEPTED_VIA_BUTTON = "accepted_via_button"
REJECTED_VIA_BUTTON = "rejected_via_button"
CLOSED_VIA_TOOL = "closed_via_tool"
CLIENT_DISCONNECTED = "client_disconnected"
TRIGGERS = (ACCEPTED_VIA_BUTTON, REJECTED_VIA_BUTTON, CLOSED_VIA_TOOL, CLIENT_DISCONNECTED)


class ToolError(Exception):
    """A tool failed in a way the caller should see: becomes an `isError` result."""


# ---------------------------------------------------------------------- positions


def position(line: int, character: int) -> Dict[str, int]:
    """A wire position: 0-based line, 0-based UTF-16 character (PROTOCOL.md intro)."""
    return {"line": int(line), "character": int(character)}


def normalize_severity(severity: Any) -> str:
    """Map any common spelling to the capitalised name the CLI counts."""
    if isinstance(severity, str) and severity in SEVERITIES:
        return severity
    name = _SEVERITY_ALIASES.get(str(severity).strip().lower())
    if name is None:
        raise ValueError("unknown severity %r (use one of %s)" % (severity, ", ".join(SEVERITIES)))
    return name


def file_fields(file_path: str) -> Dict[str, str]:
    """`filePath` and `fileUrl` of an editor's absolute path, as every push and tool
    result carries them (PROTOCOL.md §6: on Windows both with a lower-case drive letter)."""
    return {"filePath": wire_file_path(file_path), "fileUrl": path_to_uri(file_path)}


class Selection:
    """The editor's selection: a file, 0-based (line, UTF-16 character) start and end,
    and the selected text. `current` is False for a cached selection (no active editor).
    """

    __slots__ = ("file_path", "text", "start", "end", "current")

    def __init__(self, file_path: str, text: str = "", start: Tuple[int, int] = (0, 0),
                 end: Optional[Tuple[int, int]] = None, current: bool = True) -> None:
        self.file_path = file_path
        self.text = text
        self.start = (int(start[0]), int(start[1]))
        self.end = (int(end[0]), int(end[1])) if end is not None else self.start
        self.current = current

    @property
    def is_empty(self) -> bool:
        return self.start == self.end

    def range(self, with_empty: bool = True) -> Dict[str, Any]:
        rng: Dict[str, Any] = {"start": position(*self.start), "end": position(*self.end)}
        if with_empty:
            rng["isEmpty"] = self.is_empty
        return rng

    def notification_params(self) -> Dict[str, Any]:
        """`selection_changed` params (PROTOCOL.md §5)."""
        return {"text": self.text, **file_fields(self.file_path), "selection": self.range()}

    def tool_result(self, current: Optional[bool] = None) -> Dict[str, Any]:
        """`get_selection` result (PROTOCOL.md §4)."""
        result = self.notification_params()
        result["current"] = self.current if current is None else current
        return result

    def with_current(self, current: bool) -> "Selection":
        return Selection(self.file_path, self.text, self.start, self.end, current)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Selection) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __repr__(self) -> str:
        return "Selection(%r, %r, %r, %r, current=%r)" % (self.file_path, self.text, self.start, self.end, self.current)


class Diagnostic:
    """One diagnostic of a file (0-based positions, capitalised severity)."""

    __slots__ = ("message", "severity", "start", "end", "source", "code")

    def __init__(self, message: str, severity: str = "Error", start: Tuple[int, int] = (0, 0),
                 end: Optional[Tuple[int, int]] = None, source: Optional[str] = None,
                 code: Any = None) -> None:
        self.message = message
        self.severity = normalize_severity(severity)
        self.start = (int(start[0]), int(start[1]))
        self.end = (int(end[0]), int(end[1])) if end is not None else self.start
        self.source = source
        self.code = code

    def to_json(self) -> Dict[str, Any]:
        return {"message": self.message, "severity": self.severity,
                "range": {"start": position(*self.start), "end": position(*self.end)},
                "source": self.source, "code": self.code}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Diagnostic) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return "Diagnostic(%r, %r, %r)" % (self.message, self.severity, self.start)


def reference_params(file_path: str, start: Optional[Tuple[int, int]] = None,
                     end: Optional[Tuple[int, int]] = None, selected_text: Optional[str] = None) -> Dict[str, Any]:
    """`add_file_reference` / `add_selection` params: both keys present even when null
    (PROTOCOL.md §5)."""
    selection = None
    if start is not None:
        end = end if end is not None else start
        selection = {"start": position(*start), "end": position(*end)}
    return {**file_fields(file_path), "selection": selection, "selectedText": selected_text}


# ------------------------------------------------------------------------- results


class RenderedResult(dict):
    """A tool result made already (`rendered_text_result`): `text_result` and the
    tool layer return it as it is. Do not change it: it is shared by every answer
    made from the same value."""

    __slots__ = ()


def text_result(value: Any) -> Dict[str, Any]:
    """A tool result carrying JSON as text, pretty-printed as VS Code does (§4). A
    result from `rendered_text_result` is returned as it is."""
    if type(value) is RenderedResult:
        return value
    return {"content": [{"type": "text", "text": json.dumps(value, indent=2, ensure_ascii=False)}]}


def rendered_text_result(value: Any) -> RenderedResult:
    """`text_result(value)`, made once for many answers (the selection's, until it
    changes): `json.dumps` with `indent` runs the pure-Python encoder, the costliest
    step of a `get_selection`. A pure function of `value`, kept by its owner."""
    return RenderedResult(text_result(value))


def error_result(message: str) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def diff_answer(saved: bool, trigger: str, tab_name: str, path: str) -> Dict[str, Any]:
    """The `open_diff` answer; the CLI ignores it unless `success`, `result`, `trigger`
    and `message` are all present (§4)."""
    return {"success": True, "result": "SAVED" if saved else "REJECTED", "trigger": trigger,
            "tab_name": tab_name,
            "message": ("User accepted changes for %s" if saved else "User rejected changes for %s") % path}


def close_diff_answer(tab_name: str, found: bool) -> Dict[str, Any]:
    if found:
        return {"success": True, "already_closed": False, "tab_name": tab_name,
                "message": 'Diff "%s" closed successfully' % tab_name}
    return {"success": True, "already_closed": True, "tab_name": tab_name,
            "message": 'No active diff found with tab name "%s" (may already be closed)' % tab_name}


def parse_text_result(result: Any) -> Any:
    """Client side: the JSON inside a tool result's first text block (or the raw text).
    Raises ToolError for an `isError` result."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        raise ToolError("malformed tool result: %s" % repr(result)[:300])
    texts = [c.get("text") for c in result["content"] if isinstance(c, dict) and c.get("type") == "text"]
    text = texts[0] if texts else None
    if result.get("isError"):
        raise ToolError(text if isinstance(text, str) and text else "tool failed")
    if not isinstance(text, str):
        return None
    try:
        return json_text.loads(text)
    except json_text.JsonTextError:
        return text
