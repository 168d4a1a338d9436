"""What the command line shows of a session: the agent's text streamed to stdout, its
`Error:` text to stderr, each tool call as one line when it ends (with an edit's diff),
plans; and `fail`, the one way an error is said. Every string the agent chose is
escaped before it reaches the terminal."""
from __future__ import annotations

import sys
from typing import Any, Dict, Set

from . import render
from ._core import jsonrpc, safe_text
from .console import write_stderr
from .errors import NotAdvertised
from .exit_status import EXIT_ERROR, EXIT_USAGE
from .options import OptionError
from .session import FINAL_TOOL_STATUSES, Session, Turn, text_of


class Output:
    """Streams one session's updates as text: message text to stdout, `Error:` text to
    stderr, each tool call once as a line when it reaches a final status."""

    def __init__(self, session: Session, out: Any = None, err: Any = None) -> None:
        self.session = session
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.at_line_start = True
        self.printed: Set[str] = set()
        self.in_error = False

    def _write(self, stream: Any, text: str) -> None:
        if not text:
            return
        if stream is self.err and not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True
        stream.write(safe_text(text))  # the agent's text never drives the terminal
        stream.flush()
        if stream is self.out:
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """A whole line on stdout, starting on a fresh line."""
        if not self.at_line_start:
            self._write(self.out, "\n")
        self._write(self.out, text if text.endswith("\n") else text + "\n")

    def newline(self) -> None:
        if not self.at_line_start:
            self._write(self.out, "\n")

    def start_turn(self) -> None:
        self.in_error = False

    def show(self, update: Dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            text = text_of(update)
            if not self.in_error and text.lstrip().startswith("Error:"):
                self.in_error = True  # ACP.md §6: the error is message text
            self._write(self.err if self.in_error else self.out, text)
        elif kind in ("tool_call", "tool_call_update"):
            call_id = update.get("toolCallId")
            call = self.session.tool_calls.get(call_id) if isinstance(call_id, str) else None
            if isinstance(call_id, str) and call is not None and call.get("status") in FINAL_TOOL_STATUSES \
                    and call_id not in self.printed:
                self.printed.add(call_id)
                self.line(render.tool_call_block(call).rstrip("\n"))
        elif kind == "plan":
            entries = update.get("entries") or []
            marks = {"completed": "x", "in_progress": ">", "pending": " "}
            self.line("[plan] " + "  ".join("[%s] %s" % (marks.get(str(e.get("status")), " "), e.get("content", ""))
                                            for e in entries if isinstance(e, dict)))

    def end_turn(self, turn: Turn) -> None:
        for call_id in turn.tool_call_ids:  # a call left without a final status still gets its line
            call = self.session.tool_calls.get(call_id)
            if call is not None and call_id not in self.printed:
                self.printed.add(call_id)
                self.line(render.tool_call_block(call, with_diff=False).rstrip("\n"))
        self.newline()
        if self.in_error:
            self.err.write("\n")
            self.err.flush()


def fail(message: str, status: int = EXIT_ERROR) -> int:
    write_stderr("Error: %s\n" % safe_text(message))  # may quote the agent: never drives the terminal
    return status


def failure(exc: BaseException, what: str) -> int:
    """The one way a failed request becomes an exit status (ACP.md §9): what the agent
    does not offer (`NotAdvertised`, `OptionError`) is a usage error; the agent's own
    refusal (a JSON-RPC error) is said after `what`; anything else (a lost agent, a
    timeout) as it is."""
    if isinstance(exc, (NotAdvertised, OptionError)):
        return fail(str(exc), EXIT_USAGE)
    if isinstance(exc, jsonrpc.JsonRpcError):
        return fail("%s: %s" % (what, render.error_text(exc)))
    return fail(str(exc))
