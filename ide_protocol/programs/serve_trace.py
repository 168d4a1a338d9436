"""What `serve` shows of the traffic: one-line summaries of tool calls, and `--trace`.

Everything here produces text from what a client sent; it is printed through
`serve_output.Output`, which escapes it for the terminal.
"""
from __future__ import annotations

import json
from typing import Any, Dict

from ..common import tools
from .serve_output import Output


def short(session_id: Any) -> str:
    return str(session_id)[:8] if session_id else "-"


def summarize(value: Any, limit: int = 60) -> str:
    if isinstance(value, str) and (len(value) > limit or "\n" in value):
        return "<%d characters>" % len(value)
    return json.dumps(value, ensure_ascii=False)


def summarize_result(name: Any, result: Dict[str, Any]) -> str:
    try:
        value = tools.parse_text_result(result)
    except tools.ToolError as exc:
        return "error: %s" % exc
    if name == "open_diff" and isinstance(value, dict):
        return "%s (%s)" % (value.get("result"), value.get("trigger"))
    if name == "get_selection":
        if not isinstance(value, dict):
            return "no selection"
        rng = value.get("selection") or {}
        start, end = rng.get("start") or {}, rng.get("end") or {}
        return "%s %s:%s-%s:%s%s" % (value.get("filePath"), start.get("line"), start.get("character"),
                                      end.get("line"), end.get("character"),
                                      "" if value.get("current") else " (cached)")
    if name == "get_diagnostics" and isinstance(value, list):
        return "%d file%s" % (len(value), "" if len(value) == 1 else "s")
    if name == "close_diff" and isinstance(value, dict):
        return str(value.get("message"))
    return "ok"


class TracingApp:
    """`--trace`: prints each HTTP request (Authorization redacted) and its status, then
    runs the real application with a responder that reports what is sent."""

    def __init__(self, app: Any, out: Output) -> None:
        self.app = app
        self.out = out

    def __call__(self, request: Any, body: bytes, responder: Any) -> Any:
        number = responder.connection_number
        headers = "; ".join("%s: %s" % (k, "<redacted>" if k.lower() == "authorization" else v)
                            for k, v in request.headers)
        self.out.line(self.out.paint("  [#%d] %s %s (%d bytes) %s" % (number, request.method, request.target,
                                                                      len(body), headers), "dim"))
        # The wrapped application's own answer (None, or what it leaves to wait for).
        return self.app(request, body, _TracingResponder(responder, self.out, number))


class _TracingResponder:
    """Delegates everything to the real `transport.Responder`, printing the status line
    of whatever starts a response (any method called with an `int` status first:
    `send`, `start`, ...) and the end of streams. Generic on purpose, so the trace
    keeps working when the responder grows new ways to answer."""

    def __init__(self, inner: Any, out: Output, number: int) -> None:
        self._inner = inner
        self._out = out
        self._number = number

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value) or name.startswith("_") or name.startswith("chunk"):
            return value

        def traced(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                headers = args[1] if len(args) > 1 else kwargs.get("headers")
                shown = "; ".join("%s: %s" % (k, v) for k, v in (headers or []))
                self._out.line(self._out.paint("  [#%d] -> %d%s %s" % (
                    self._number, args[0], "" if name.startswith("send") and "chunked" not in name else " (stream)",
                    shown), "dim"))
            elif name.startswith("end") and getattr(self._inner, "streaming", False) and not self._inner.finished:
                self._out.line(self._out.paint("  [#%d] -> end of stream" % self._number, "dim"))
            return value(*args, **kwargs)

        return traced

