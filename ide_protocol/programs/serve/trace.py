"""What `serve` shows of the traffic: one-line summaries of tool calls, and `--trace`.

Everything here produces text from what a client sent; it is printed through
`terminal.output.Output`, which escapes it for the terminal.
"""
from __future__ import annotations

import json
from typing import Any, Dict

from ...common import tools
from ...server.answers import PendingReply, Reply, Stream
from ..terminal.output import Output


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
    """`--trace`: prints each HTTP request (Authorization redacted) and the status of its
    answer, around the real application (`server.answers`: an app is a plain function
    giving a Reply, a Stream or a PendingReply)."""

    def __init__(self, app: Any, out: Output, judge: Any = None) -> None:
        self.app = app
        self.out = out
        self.judge = judge  # (the listener's judge, wrapped: refusals stay early under --trace)

    def judge_head(self, request: Any) -> Any:
        refusal = self.judge(request) if self.judge is not None else None
        if refusal is not None:
            self.out.line(self.out.paint("  [#?] %s %s refused by its head -> %d"
                                         % (request.method, request.target, refusal.status), "dim"))
        return refusal

    def __call__(self, request: Any, body: bytes, connection: int) -> Any:
        headers = "; ".join("%s: %s" % (k, "<redacted>" if k.lower() == "authorization" else v)
                            for k, v in request.headers)
        self.out.line(self.out.paint("  [#%d] %s %s (%d bytes) %s" % (connection, request.method, request.target,
                                                                      len(body), headers), "dim"))
        return self._traced(self.app(request, body, connection), connection)

    def _status(self, connection: int, status: int, headers: Any, stream: bool) -> None:
        shown = "; ".join("%s: %s" % (k, v) for k, v in (headers or ()))
        self.out.line(self.out.paint("  [#%d] -> %d%s %s" % (connection, status, " (stream)" if stream else "", shown),
                                     "dim"))

    def _traced(self, answer: Any, connection: int) -> Any:
        if isinstance(answer, Reply):
            self._status(connection, answer.status, answer.headers, answer.chunked)
            return answer
        if isinstance(answer, Stream):
            self._status(connection, answer.status, answer.headers, True)

            def ended() -> None:
                self.out.line(self.out.paint("  [#%d] -> end of stream" % connection, "dim"))
                answer.close()

            return Stream(answer.status, answer.headers, answer.chunks, ended)
        if isinstance(answer, PendingReply):
            async def run() -> Reply:
                return self._traced(await answer.run(), connection)

            return PendingReply(run, answer.close)
        return answer
