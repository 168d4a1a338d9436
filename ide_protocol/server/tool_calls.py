"""The six tools of PROTOCOL.md §4 as `IdeServer` answers them: `tools/call` routing,
argument checks, and the pending diffs (`open_diff`, `close_diff`, and their answers).

`ToolCalls` is a mixin of `IdeServer`, kept apart so that each module has one job: the
server's lifecycle and editor state live in `ide_server.py`, what a tool call does
lives here. It uses the server's state (`_diffs`, `_selection`, `_diagnostics`, the
IDE's callbacks, `max_body`) and nothing else.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set

from .. import __version__, rpc
from ..wire import jsonrpc
from ..common import tools
from .diffs import DiffRequest, load_original
from .sessions import CallContext

log = logging.getLogger("ide_protocol.server.ide_server")  # (one logger for the server's reports)


class _ToolCallAwaitable:
    """An awaitable (a tool's wrapper coroutine) whose `close()` also gives up the
    tool's own awaitable it was made with: a call given up before it ran (cancelled
    before its task started) then leaves nothing un-awaited."""

    __slots__ = ("_outer", "_inner")

    def __init__(self, outer: Any, inner: Any) -> None:
        self._outer = outer
        self._inner = inner

    def __await__(self) -> Any:
        return self._outer.__await__()

    def close(self) -> None:
        self._outer.close()
        rpc.discard(self._inner)


class ToolCalls:
    """The tool handlers of `IdeServer` (a mixin; see the module doc)."""

    def _report(self, name: str, hook: Callable[..., Any], *args: Any) -> None:
        """Run an IDE callback that reports something (no answer expected). A coroutine
        it returns runs as a task this server owns: `stop()` cancels and awaits what is
        still running. An exception is logged, never raised into the protocol."""
        try:
            result = hook(*args)
        except Exception:
            log.exception("%s callback failed", name)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._hook_tasks.add(task)
            task.add_done_callback(lambda done: self._hook_finished(name, done))

    def _hook_finished(self, name: str, task: "asyncio.Future[Any]") -> None:
        self._hook_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s callback failed", name, exc_info=task.exception())

    if TYPE_CHECKING:  # what the mixin reads from the server
        on_tool_call: Any
        on_diff: Any
        on_diff_closed: Any
        ide_name: str
        ide_info: Dict[str, Any]
        instance_id: str
        max_body: int
        _stopping: bool
        _diffs: Dict[int, DiffRequest]
        _hook_tasks: Set["asyncio.Future[Any]"]
        _tool_handlers: Dict[str, Callable[[Dict[str, Any], CallContext], Any]]
        _tool_is_async: Dict[Callable[..., Any], bool]
        _selection: Any
        _selection_json: Any
        _diagnostics: Dict[str, Any]

        def _uri_and_path(self, path_or_uri: str) -> Any: ...

        def _emit_session(self, event: str, session: Any, **extra: Any) -> None: ...

    # ------------------------------------------------------------------------ tools

    @staticmethod
    def _blocks(msg: jsonrpc.Request) -> bool:
        """`open_diff` waits for the user with no time limit (PROTOCOL.md §4)."""
        return msg.method == "tools/call" and isinstance(msg.params, dict) and msg.params.get("name") == "open_diff"

    def _tools_call(self, params: Any, ctx: CallContext) -> Any:
        """`tools/call`: the tool's result at once, or, for a tool that waits (open_diff,
        or a handler that returns an awaitable), a coroutine giving it (the dispatcher
        runs that in the connection's task)."""
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        name = params["name"]
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        handler = self._tool_handlers.get(name)
        if handler is None:
            return self._tool_answer(name, arguments, ctx, tools.error_result("Unknown tool: %s" % name))
        if not isinstance(arguments, dict):
            return self._tool_answer(name, arguments, ctx,
                                     tools.error_result("Invalid arguments for %s: expected an object" % name))
        is_async = self._tool_is_async.get(handler)
        if is_async is None:  # (decided once per handler, not per call)
            is_async = self._tool_is_async[handler] = inspect.iscoroutinefunction(handler)
        if is_async:
            return self._tool_later(name, arguments, ctx, None)
        try:
            value = handler(arguments, ctx)
            if type(value) is tools.RenderedResult:
                result = value  # rendered already (the selection)
            elif not isinstance(value, (dict, list, str)) and inspect.isawaitable(value):  # cheap test first
                return _ToolCallAwaitable(self._tool_later(name, arguments, ctx, value), value)
            else:
                result = tools.text_result(value)
        except Exception as exc:
            result = self._tool_failed(name, exc)
        if self.on_tool_call is None:
            return result
        return self._tool_answer(name, arguments, ctx, result)

    async def _tool_later(self, name: str, arguments: Dict[str, Any], ctx: CallContext, awaitable: Any) -> Dict[str, Any]:
        """A tool that waits: its handler runs (or its awaitable is awaited) here."""
        try:
            if awaitable is None:
                awaitable = self._tool_handlers[name](arguments, ctx)
            result = tools.text_result(await awaitable)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result = self._tool_failed(name, exc)
        return self._tool_answer(name, arguments, ctx, result)

    @staticmethod
    def _tool_failed(name: str, exc: Exception) -> Dict[str, Any]:
        if isinstance(exc, tools.ToolError):
            return tools.error_result(str(exc))
        log.error("tool %s failed", name, exc_info=exc)
        return tools.error_result("%s failed: %s" % (name, exc))

    def _tool_answer(self, name: str, arguments: Any, ctx: CallContext, result: Dict[str, Any]) -> Dict[str, Any]:
        if self.on_tool_call is not None:
            self._report("on_tool_call", self.on_tool_call, {"name": name, "arguments": arguments},
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

    def _get_vscode_info(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        self._string_args(arguments, "get_vscode_info", ())
        info = {
            "version": __version__, "appName": self.ide_name, "appRoot": sys.prefix,
            "language": (os.environ.get("LANG") or "en").split(".")[0].replace("_", "-") or "en",
            "machineId": self.instance_id, "sessionId": ctx.session.id if ctx.session else self.instance_id,
            "uriScheme": "file", "shell": os.environ.get("SHELL") or os.environ.get("COMSPEC") or "",
        }
        info.update(self.ide_info)
        return info

    def _get_selection(self, arguments: Dict[str, Any], ctx: CallContext) -> Any:
        if arguments:  # (checked only when there is something to check: the hot path)
            self._string_args(arguments, "get_selection", ())
        selection = self._selection
        if selection is None:
            return None  # PROTOCOL.md §4: with nothing at all, the text `null`
        cached = self._selection_json
        if cached is None or cached[0] is not selection:  # rendered once per selection
            cached = self._selection_json = (selection, tools.rendered_text_result(selection.tool_result()))
        return cached[1]

    def _get_diagnostics(self, arguments: Dict[str, Any], ctx: CallContext) -> List[Dict[str, Any]]:
        args = self._string_args(arguments, "get_diagnostics", (), ("uri",))
        wanted = args.get("uri")
        if wanted:
            try:
                wanted = self._uri_and_path(wanted)[0]
            except ValueError as exc:
                raise tools.ToolError("Invalid uri %r: %s" % (args["uri"], exc))
        out = []
        for uri, (path, diags) in self._diagnostics.items():
            if diags and (not wanted or uri == wanted):
                out.append({"uri": uri, "filePath": path, "diagnostics": [d.to_json() for d in diags]})
        return out

    def _update_session_name(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "update_session_name", ("name",))
        if ctx.session is not None:
            ctx.session.name = args["name"]
            self._emit_session("renamed", ctx.session)
        return {"success": True}

    def _diff_named(self, tab_name: str) -> Optional[DiffRequest]:
        """The oldest pending diff with this tab name, whichever session opened it
        (PROTOCOL.md §4: as VS Code, one registry for every session)."""
        return next((diff for diff in self._diffs.values() if diff.tab_name == tab_name), None)

    def _close_diff(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "close_diff", ("tab_name",))
        diff = self._diff_named(args["tab_name"])
        found = diff is not None and not diff.done
        if diff is not None:
            self._resolve(diff, False, tools.CLOSED_VIA_TOOL)
        return tools.close_diff_answer(args["tab_name"], found)

    async def _open_diff(self, arguments: Dict[str, Any], ctx: CallContext) -> Dict[str, Any]:
        args = self._string_args(arguments, "open_diff", ("original_file_path", "new_file_contents", "tab_name"))
        tab, path = args["tab_name"], args["original_file_path"]
        try:
            # Read and checked before the diff exists (diffs.py): a failure leaves nothing.
            original, is_new = await load_original(path, self.max_body)
        except asyncio.CancelledError:
            if ctx.session is not None and ctx.session.ended:
                return tools.diff_answer(False, tools.CLIENT_DISCONNECTED, tab, path)
            raise
        if self._stopping or (ctx.session is not None and ctx.session.ended):
            # It ended while the file was read: nobody will show this diff (§4).
            return tools.diff_answer(False, tools.CLIENT_DISCONNECTED, tab, path)
        # A repeated tab name opens a second diff beside the first (§4, as VS Code).
        diff = DiffRequest(self, tab, path, args["new_file_contents"], ctx.session,
                           original_contents=original, is_new_file=is_new)
        self._diffs[id(diff)] = diff
        try:
            if self.on_diff is None:
                log.warning("open_diff %r: no on_diff handler; waiting for resolve_diff()", tab)
            else:
                decision = self.on_diff(diff)
                if inspect.isawaitable(decision):
                    decision = await decision
                self._apply_decision(diff, decision)
            # No server timeout: the user decides (PROTOCOL.md §4).
            return await asyncio.shield(diff.future)
        except asyncio.CancelledError:
            if diff.done and ctx.session is not None and ctx.session.ended:
                # The session ended (DELETE, server stop) and resolved this diff
                # client_disconnected (§4): answer that on the still-open connection
                # instead of ending the response with nothing.
                return diff.future.result()
            # The request was cancelled or its connection dropped: nobody waits any more.
            self._resolve(diff, False, tools.CLIENT_DISCONNECTED)
            raise
        except BaseException:
            # The IDE's on_diff failed: the client gets isError, and no diff stays pending.
            self._resolve(diff, False, tools.CLOSED_VIA_TOOL)
            raise
        finally:
            if diff.done:
                self._diffs.pop(id(diff), None)

    def _apply_decision(self, diff: DiffRequest, decision: Any) -> None:
        if decision is None or diff.done:
            return
        if decision is True or (isinstance(decision, str) and decision.lower() in ("accept", "accepted", "saved", "yes")):
            diff.accept()
        elif decision is False or (isinstance(decision, str) and decision.lower() in ("reject", "rejected", "no")):
            diff.reject()
        else:
            raise ValueError("on_diff returned %r; expected True/False, 'accept'/'reject' or None" % (decision,))

    def _resolve(self, diff: DiffRequest, saved: bool, trigger: str) -> bool:
        if diff.future.done():
            return False
        answer = tools.diff_answer(saved, trigger, diff.tab_name, diff.original_file_path)
        diff.future.set_result(answer)
        self._diffs.pop(id(diff), None)
        if self.on_diff_closed is not None:
            self._report("on_diff_closed", self.on_diff_closed, diff, answer)
        return True

    def pending_diffs(self) -> List[DiffRequest]:
        return list(self._diffs.values())

    def resolve_diff(self, tab_name: Optional[str] = None, accept: bool = True) -> bool:
        """Answer a pending diff by tab name (the oldest with that name; the most
        recent diff when None)."""
        if tab_name is None:
            diff = list(self._diffs.values())[-1] if self._diffs else None
        else:
            diff = self._diff_named(tab_name)
        if diff is None:
            return False
        return diff.accept() if accept else diff.reject()
