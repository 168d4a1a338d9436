"""`IdeTools`: the six tools of PROTOCOL.md §4 — `tools/call` routing, argument checks,
and what each tool does — as an object its `IdeServer` holds.

Its dependencies are handed to it, and it touches nothing else of the server: the
editor's state (`EditorState`: the selection and diagnostics the IDE reported), the
pending diffs (`PendingDiffs`), the runner of the IDE's reporting callbacks
(`Reports`), and the options the tools answer with.

A tool is a handler `handler(arguments, ctx)`. Whether it waits is decided once, when
it is added: a coroutine function waits (its call becomes a coroutine that the
dispatcher runs in the request's task), anything else answers at once.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .. import __version__, rpc
from ..wire import jsonrpc
from ..common import tools
from ..common.tools import Selection
from .callbacks import Reports
from .diffs import DiffRequest, PendingDiffs, load_original
from .editor_state import EditorState, uri_and_path
from .sessions import CallContext, Session

log = logging.getLogger("ide_protocol.server.ide_server")  # (one logger for the server's reports)

ToolHandler = Callable[[Dict[str, Any], CallContext], Any]


class Tool(NamedTuple):
    """A tool's handler, and whether calling it gives a coroutine (decided once)."""

    handler: ToolHandler
    waits: bool


class IdeTools:
    """The tools an `IdeServer` answers (see the module doc).

    `on_diff(diff)` shows an `open_diff` and may return the decision (see
    `DiffRequest.decide`); `on_tool_call(call, session_id, result)` hears of every tool
    answered; `on_renamed(session)` of `update_session_name`. `max_file` bounds the
    original file `open_diff` reads."""

    def __init__(self, state: EditorState, diffs: PendingDiffs, reports: Reports, *,
                 ide_name: str, ide_info: Dict[str, Any], instance_id: str, max_file: int,
                 on_diff: Optional[Callable[[DiffRequest], Any]] = None,
                 on_tool_call: Optional[Callable[[Dict[str, Any], str, Any], Any]] = None,
                 on_renamed: Optional[Callable[[Session], None]] = None) -> None:
        self.state = state
        self.diffs = diffs
        self.reports = reports
        self.ide_name = ide_name
        self.ide_info = ide_info
        self.instance_id = instance_id
        self.max_file = max_file
        self.on_diff = on_diff
        self.on_tool_call = on_tool_call
        self.on_renamed = on_renamed
        self._selection_result: Optional[Tuple[Selection, Any]] = None  # get_selection's, per selection
        self._tools: Dict[str, Tool] = {}
        for name, handler in (("get_vscode_info", self.get_vscode_info), ("get_selection", self.get_selection),
                              ("open_diff", self.open_diff), ("close_diff", self.close_diff),
                              ("get_diagnostics", self.get_diagnostics),
                              ("update_session_name", self.update_session_name)):
            self.add(name, handler)

    def add(self, name: str, handler: ToolHandler) -> None:
        """Answer the tool `name` with `handler` (replacing the one it had): a coroutine
        function for a tool that waits, a plain function for one that answers at once."""
        self._tools[name] = Tool(handler, rpc.is_async(handler))

    def handler(self, name: str) -> Optional[ToolHandler]:
        tool = self._tools.get(name)
        return tool.handler if tool is not None else None

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    @staticmethod
    def blocks(msg: jsonrpc.Request) -> bool:
        """`open_diff` waits for the user with no time limit (PROTOCOL.md §4)."""
        return msg.method == "tools/call" and isinstance(msg.params, dict) and msg.params.get("name") == "open_diff"

    # ------------------------------------------------------------------ tools/call

    def call(self, params: Any, ctx: CallContext) -> Any:
        """The `tools/call` handler: the tool's result at once, or, for a tool that
        waits, a coroutine giving it (the dispatcher runs that in the request's task)."""
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        tool = self._tools.get(name)
        if tool is None:
            return self._answered(name, arguments, ctx, tools.error_result("Unknown tool: %s" % name))
        if not isinstance(arguments, dict):
            return self._answered(name, arguments, ctx,
                                  tools.error_result("Invalid arguments for %s: expected an object" % name))
        if tool.waits:
            return self._call_waiting(name, tool.handler, arguments, ctx)
        try:
            result = tools.text_result(tool.handler(arguments, ctx))
        except Exception as exc:
            result = self._failed(name, exc)
        if self.on_tool_call is None:
            return result
        return self._answered(name, arguments, ctx, result)

    async def _call_waiting(self, name: str, handler: ToolHandler, arguments: Dict[str, Any],
                            ctx: CallContext) -> Dict[str, Any]:
        # The handler is called here, when this coroutine runs: given up before that,
        # nothing of the tool exists to be given up.
        try:
            result = tools.text_result(await handler(arguments, ctx))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result = self._failed(name, exc)
        return self._answered(name, arguments, ctx, result)

    @staticmethod
    def _failed(name: str, exc: Exception) -> Dict[str, Any]:
        if isinstance(exc, tools.ToolError):
            return tools.error_result(str(exc))
        log.error("tool %s failed", name, exc_info=exc)
        return tools.error_result("%s failed: %s" % (name, exc))

    def _answered(self, name: str, arguments: Any, ctx: CallContext, result: Dict[str, Any]) -> Dict[str, Any]:
        if self.on_tool_call is not None:
            self.reports.report("on_tool_call", self.on_tool_call, {"name": name, "arguments": arguments},
                                ctx.session.id if ctx.session else "", result)
        return result

    @staticmethod
    def _string_args(arguments: Dict[str, Any], tool: str, required: Sequence[str],
                     optional: Sequence[str] = ()) -> Dict[str, str]:
        allowed = set(required) | set(optional)
        extra = sorted(set(arguments) - allowed)
        if extra:
            raise tools.ToolError("Invalid arguments for %s: unexpected %s" % (tool, ", ".join(extra)))
        for key in required:
            if key not in arguments:
                raise tools.ToolError("Invalid arguments for %s: missing required %s" % (tool, key))
        for key in allowed:
            if key in arguments and not isinstance(arguments[key], str):
                raise tools.ToolError("Invalid arguments for %s: %s must be a string" % (tool, key))
        return arguments

    # ----------------------------------------------------------------- the six tools

    def get_vscode_info(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        self._string_args(arguments, "get_vscode_info", ())
        info = {
            "version": __version__, "appName": self.ide_name, "appRoot": sys.prefix,
            "language": (os.environ.get("LANG") or "en").split(".")[0].replace("_", "-") or "en",
            "machineId": self.instance_id, "sessionId": ctx.session.id if ctx.session else self.instance_id,
            "uriScheme": "file", "shell": os.environ.get("SHELL") or os.environ.get("COMSPEC") or "",
        }
        info.update(self.ide_info)
        return info

    def get_selection(self, arguments: Dict[str, Any], ctx: CallContext) -> Any:
        if arguments:  # (checked only when there is something to check: the usual call has none)
            self._string_args(arguments, "get_selection", ())
        selection = self.state.selection
        if selection is None:
            return None  # PROTOCOL.md §4: with nothing at all, the text `null`
        cached = self._selection_result
        # Rendered once per selection: the pretty-printed text is most of a call's cost
        # (a tools/call takes 167 000 instructions so, 355 000 when rendered each time:
        # tools/bench_cost.py, 2026-12-06).
        if cached is None or cached[0] is not selection:
            cached = self._selection_result = (selection, tools.rendered_text_result(selection.tool_result()))
        return cached[1]

    def get_diagnostics(self, arguments: Dict[str, Any], ctx: CallContext) -> List[Dict[str, Any]]:
        args = self._string_args(arguments, "get_diagnostics", (), ("uri",))
        wanted = args.get("uri")
        if wanted:
            try:
                wanted = uri_and_path(wanted)[0]
            except ValueError as exc:
                raise tools.ToolError("Invalid uri %r: %s" % (args["uri"], exc))
        return self.state.diagnostics_result(wanted)

    def update_session_name(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "update_session_name", ("name",))
        if ctx.session is not None:
            ctx.session.name = args["name"]
            if self.on_renamed is not None:
                self.on_renamed(ctx.session)
        return {"success": True}

    def close_diff(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "close_diff", ("tab_name",))
        diff = self.diffs.get(args["tab_name"])
        found = diff is not None and not diff.done
        if diff is not None:
            self.diffs.resolve(diff, False, tools.CLOSED_VIA_TOOL)
        return tools.close_diff_answer(args["tab_name"], found)

    async def open_diff(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "open_diff", ("original_file_path", "new_file_contents", "tab_name"))
        tab, path = args["tab_name"], args["original_file_path"]
        try:
            # Read and checked before the diff exists (diffs.py): a failure leaves nothing.
            original, is_new, exact = await load_original(path, self.max_file)
        except asyncio.CancelledError:
            if ctx.session is not None and ctx.session.ended:
                return tools.diff_answer(False, tools.CLIENT_DISCONNECTED, tab, path)
            raise
        if not self.diffs.open or (ctx.session is not None and ctx.session.ended):
            # It ended while the file was read: nobody will show this diff (§4).
            return tools.diff_answer(False, tools.CLIENT_DISCONNECTED, tab, path)
        diff = DiffRequest(self.diffs, tab, path, args["new_file_contents"], ctx.session,
                           original_contents=original, is_new_file=is_new, original_is_exact=exact)
        self.diffs.add(diff)  # (beside any other of that tab name, §4, as VS Code)
        try:
            if self.on_diff is None:
                log.warning("open_diff %r: no on_diff handler; waiting for resolve_diff()", tab)
            else:
                decision = self.on_diff(diff)
                if inspect.isawaitable(decision):
                    decision = await decision
                diff.decide(decision)
            # No server timeout: the user decides (PROTOCOL.md §4).
            return await asyncio.shield(diff.future)
        except asyncio.CancelledError:
            if diff.done and ctx.session is not None and ctx.session.ended:
                # The session ended (DELETE, server stop) and resolved this diff
                # client_disconnected (§4): answer that on the still-open connection
                # instead of ending the response with nothing.
                return diff.future.result()
            # The request was cancelled or its connection dropped: nobody waits any more.
            self.diffs.resolve(diff, False, tools.CLIENT_DISCONNECTED)
            raise
        except BaseException:
            # The IDE's on_diff failed: the client gets isError, and no diff stays pending.
            self.diffs.resolve(diff, False, tools.CLOSED_VIA_TOOL)
            raise
        finally:
            self.diffs.forget(diff)
