"""Checks of PROTOCOL.md §4: the six tools.

The listing (names, descriptions, schemas, `execution`), each tool's result shape, the
refusal of an unknown tool, and the diff life cycle: `open_diff` blocks until
`close_diff`, a second `open_diff` with the same tab replaces the first, and (with a
person at the IDE, `--with-diff`) an accepted diff answers SAVED without the IDE
writing the file."""
from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ...wire import jsonrpc
from ...common import tools
from ..progname import program_name
from .outcomes import CLI, INTERACTIVE_TIMEOUT, RECOMMENDED, VSCODE, Advise, Differs, Fail, Skip
from .registry import check
from .context import CheckContext, PendingCall, Reply, is_position, selection_problems, shape


TAB_PREFIX = "[ide-check]"


_REFERENCE = {t["name"]: t for t in tools.TOOLS}


async def _tool_list(ctx: CheckContext) -> Tuple[Reply, List[Dict[str, Any]]]:
    reply, answer = await ctx.call("tools/list", {"_meta": {"progressToken": 0}})
    result = answer.get("result")
    listed = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
        raise Fail("tools/list result has no tools array", reply.evidence())
    return reply, listed


@check("tools.names", "§4", "tools/list names the six tools (the CLI calls them by name), no other (VS Code)",
       rule=CLI)
async def check_tool_names(ctx: CheckContext) -> Optional[str]:
    reply, listed = await _tool_list(ctx)
    names = [t.get("name") for t in listed]
    missing = [n for n in tools.TOOL_NAMES if n not in names]
    extra = [n for n in names if n not in tools.TOOL_NAMES]
    dupes = sorted({n for n in names if names.count(n) > 1}, key=str)
    if missing:
        raise Fail("missing %s: the CLI calls each of the six by name" % missing, "listed: %s" % names)
    if extra or dupes:
        raise Differs("unexpected %s, repeated %s" % (extra or "none", dupes or "none"), "listed: %s" % names)
    return None


@check("tools.descriptions", "§4", "tool descriptions VS Code's, word for word (they reach the model)", rule=VSCODE)
async def check_tool_descriptions(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    differ = []
    for tool in listed:
        name, text = tool.get("name"), tool.get("description")
        if not isinstance(text, str) or not text.strip():
            raise Fail("%s has no description" % name, shape(tool))
        ref = _REFERENCE.get(name)
        if ref is not None and text != ref["description"]:
            differ.append("%s: %r" % (name, text))
    if differ:
        raise Fail("descriptions differ from VS Code's (the model reads them: fine unless you want the same "
                   "model behaviour)", "\n".join(differ))
    return None


@check("tools.schemas", "§4", "inputSchema: properties, string types, required, additionalProperties, $schema",
       rule=VSCODE)
async def check_tool_schemas(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    for tool in listed:
        ref = _REFERENCE.get(tool.get("name"))
        if ref is None:
            continue
        schema = tool.get("inputSchema")
        want = ref["inputSchema"]
        if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
            raise Fail("%s: inputSchema must be an object schema with properties" % tool["name"], shape(tool))
        props = schema["properties"]
        if set(props) != set(want["properties"]):
            raise Fail("%s: properties %s, expected %s" % (tool["name"], sorted(props), sorted(want["properties"])),
                       shape(schema))
        for key, prop in props.items():
            if not isinstance(prop, dict) or prop.get("type") != "string":
                raise Fail("%s: property %s must be type string" % (tool["name"], key), shape(schema))
        if sorted(schema.get("required") or []) != sorted(want.get("required") or []):
            raise Fail("%s: required %s, expected %s" % (tool["name"], schema.get("required"), want.get("required")),
                       shape(schema))
        if want["properties"]:
            if schema.get("additionalProperties") is not False:
                raise Fail("%s: additionalProperties must be false" % tool["name"], shape(schema))
            if schema.get("$schema") != want["$schema"]:
                raise Fail("%s: $schema must be %s" % (tool["name"], want["$schema"]), shape(schema))
    return None


@check("tools.execution", "§4", "every tool carries execution: {taskSupport: forbidden}, nested", rule=VSCODE)
async def check_tool_execution(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    for tool in listed:
        execution = tool.get("execution")
        if not isinstance(execution, dict) or execution.get("taskSupport") != "forbidden":
            raise Fail("%s: execution.taskSupport must be \"forbidden\"" % tool.get("name"), shape(tool))
        if "taskSupport" in tool:
            raise Fail("%s: taskSupport must be nested in execution, not top-level" % tool.get("name"), shape(tool))
    return None


@check("tool.get_selection", "§4", "get_selection result shape", rule=VSCODE)
async def check_get_selection(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_selection")
    if value is None:
        raise Skip("get_selection answered null (no selection in the IDE, which is allowed): select some text to "
                   "check the shape of a selection")
    problems = selection_problems(value, True)
    if problems:
        raise Fail("; ".join(problems), reply.evidence())
    return None


@check("tool.get_diagnostics", "§4", "get_diagnostics result shape and uri filter (VS Code); capitalised "
                                   "severities (ours)", rule=VSCODE)
async def check_get_diagnostics(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_diagnostics")
    if not isinstance(value, list):
        raise Fail("the result must be an array", reply.evidence())
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("uri"), str) or not isinstance(
                entry.get("filePath"), str) or not isinstance(entry.get("diagnostics"), list):
            raise Fail("each entry needs uri, filePath, diagnostics[]", shape(entry))
        if not entry["diagnostics"]:
            raise Fail("files without diagnostics must be left out", shape(entry))
        for diag in entry["diagnostics"]:
            rng = diag.get("range") if isinstance(diag, dict) else None
            if (not isinstance(diag, dict) or not isinstance(diag.get("message"), str) or not isinstance(rng, dict)
                    or not is_position(rng.get("start")) or not is_position(rng.get("end"))):
                raise Fail("a diagnostic needs message and range {start, end}", shape(diag))
    if not value:
        raise Skip("no diagnostics in the IDE to inspect (an empty list is allowed): open a file with a problem to "
                   "check their shape")
    uri = value[0]["uri"]
    reply2, only = await ctx.tool("get_diagnostics", {"uri": uri})
    if not isinstance(only, list) or [e.get("uri") for e in only if isinstance(e, dict)] != [uri]:
        raise Fail("get_diagnostics {uri: %s} must answer that file only" % uri, reply2.evidence())
    severities = sorted({d.get("severity") for e in value for d in e["diagnostics"]} - set(tools.SEVERITIES), key=str)
    if severities:
        raise Advise("severities %s: send %s; the CLI's summary of the tool's answer counts only these (VS Code "
                     "sends them in lower case)" % (severities, ", ".join(tools.SEVERITIES)), shape(value[0]))
    return None


@check("tool.get_vscode_info", "§4", "get_vscode_info result keys", rule=VSCODE)
async def check_vscode_info(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_vscode_info")
    keys = ("version", "appName", "appRoot", "language", "machineId", "sessionId", "uriScheme", "shell")
    if not isinstance(value, dict):
        raise Fail("the result must be an object", reply.evidence())
    missing = [k for k in keys if k not in value]
    if missing:
        raise Fail("missing %s" % ", ".join(missing), reply.evidence())
    return None


@check("tool.update_session_name", "§4", "update_session_name answers {\"success\": true}", rule=VSCODE)
async def check_update_session_name(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("update_session_name", {"name": "ide-check session"})
    if not isinstance(value, dict) or value.get("success") is not True:
        raise Fail("expected {\"success\": true}", reply.evidence())
    return None


@check("tool.close_diff_unknown", "§4", "close_diff on an unknown tab: success, already_closed true", rule=VSCODE)
async def check_close_unknown(ctx: CheckContext) -> Optional[str]:
    tab = "%s no such tab %s" % (TAB_PREFIX, uuid.uuid4().hex[:6])
    reply, value = await ctx.tool("close_diff", {"tab_name": tab})
    if not isinstance(value, dict) or value.get("success") is not True or value.get("already_closed") is not True:
        raise Fail("expected success: true, already_closed: true", reply.evidence())
    if value.get("tab_name") != tab or not isinstance(value.get("message"), str):
        raise Fail("tab_name and message expected too", reply.evidence())
    return None


@check("tool.unknown", "§4", "an unknown tool gives an isError result or -32602, not a crash", rule=VSCODE)
async def check_unknown_tool(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    if "error" in answer:
        if isinstance(answer["error"], dict) and answer["error"].get("code") == jsonrpc.INVALID_PARAMS:
            return "JSON-RPC error -32602 (VS Code answers an isError result)"
        raise Fail("expected an isError result (VS Code's) or the JSON-RPC error -32602", reply.evidence())
    result = answer.get("result")
    if not isinstance(result, dict) or result.get("isError") is not True:
        raise Fail("an unknown tool must not succeed", reply.evidence())
    return None


def _diff_answer_problems(value: Any, result: str, trigger: str, tab: str) -> List[str]:
    if not isinstance(value, dict):
        return ["not an object"]
    problems = []
    for key in ("success", "result", "trigger", "message"):
        if key not in value:
            problems.append("%s missing (the CLI ignores the answer)" % key)
    if "success" in value and value.get("success") is not True:
        problems.append("success %r, expected true (a rejection is a success of the tool, §4)"
                        % (value.get("success"),))
    if "message" in value and not isinstance(value.get("message"), str):
        problems.append("message %r is not a string" % (value.get("message"),))
    if value.get("result") != result:
        problems.append("result %r, expected %s" % (value.get("result"), result))
    if value.get("trigger") != trigger:
        problems.append("trigger %r, expected %s" % (value.get("trigger"), trigger))
    if value.get("tab_name") not in (None, tab):
        problems.append("tab_name %r" % value.get("tab_name"))
    return problems


def _scratch_diff(ctx: CheckContext) -> Tuple[str, str]:
    """A path in the workspace that does not exist and a tab name of this checker for it,
    new for every diff, as the CLI names its tabs (§4)."""
    path = ctx.scratch_path()
    return path, "%s - %s (%s)" % (TAB_PREFIX, os.path.basename(path), uuid.uuid4().hex[:6])


def _diff_args(path: str, tab: str) -> Dict[str, Any]:
    return {"original_file_path": path, "new_file_contents": "written by ide-check\n", "tab_name": tab}


async def _close_until_found(ctx: CheckContext, sid: str, tab: str, pending: PendingCall) -> Tuple[Reply, Any]:
    """close_diff, retried while the server has not registered the open_diff yet (it
    travels on another connection and may be read later)."""
    for _ in range(20):
        reply, closed = await ctx.tool("close_diff", {"tab_name": tab}, session=sid)
        if not (isinstance(closed, dict) and closed.get("already_closed") is True) or pending.task.done():
            return reply, closed
        await asyncio.sleep(0.1)
    return reply, closed


@check("diff.close_via_tool", "§4", "open_diff blocks, the IDE writes no file (the CLI); close_diff resolves it "
                                  "REJECTED/closed_via_tool (VS Code)", rule=CLI)
async def check_diff_close(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path, tab = _scratch_diff(ctx)
    pending = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
    try:
        await pending.started()
        await ctx.call("ping", session=sid)
        if pending.task.done():
            raise Fail("open_diff answered before anyone decided: it must block until the user decides",
                       pending.task.result()[0].evidence())
        reply, closed = await _close_until_found(ctx, sid, tab, pending)
        if os.path.exists(path):
            raise Fail("the IDE wrote %s: it must never write the file (the CLI does)" % path)
        if not isinstance(closed, dict) or closed.get("already_closed") is not False or closed.get("success") is not True:
            raise Differs("close_diff of an open tab must answer success: true, already_closed: false",
                          reply.evidence())
        try:
            opened_reply, answer = await pending.result(ctx.timeout)
        except Fail as exc:
            raise Differs(exc.message, exc.evidence) from None
        problems = _diff_answer_problems(answer, "REJECTED", tools.CLOSED_VIA_TOOL, tab)
        if problems:
            raise Differs("open_diff answer: " + "; ".join(problems), opened_reply.evidence())
    finally:
        await pending.cancel()
    if os.path.exists(path):
        raise Fail("the IDE wrote %s: it must never write the file (the CLI does)" % path)
    return None


@check("diff.same_tab", "§4", "a second open_diff with the same tab_name opens beside the first; close_diff "
                             "closes the older", rule=VSCODE)
async def check_diff_same_tab(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path, tab = _scratch_diff(ctx)
    first = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
    second: Optional[PendingCall] = None
    try:
        await first.started()
        second = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
        await second.started()
        await ctx.call("ping", session=sid)
        if first.task.done():
            raise Fail("a second open_diff with the same tab_name answered the first; VS Code keeps both open",
                       first.task.result()[0].evidence())
        reply, closed = await _close_until_found(ctx, sid, tab, first)
        if not isinstance(closed, dict) or closed.get("already_closed") is not False:
            raise Fail("close_diff did not find the diffs named %r" % tab, reply.evidence())
        reply, answer = await first.result(ctx.timeout)
        problems = _diff_answer_problems(answer, "REJECTED", tools.CLOSED_VIA_TOOL, tab)
        if problems:
            raise Fail("close_diff must close the older of two diffs with one name: " + "; ".join(problems),
                       reply.evidence())
        reply, closed = await _close_until_found(ctx, sid, tab, second)
        if not isinstance(closed, dict) or closed.get("already_closed") is not False:
            raise Fail("the second open_diff with the same tab_name was no longer open after one close_diff",
                       reply.evidence())
        await second.result(ctx.timeout)
    finally:
        await first.cancel()
        if second is not None:
            await second.cancel()
    return None


@check("diff.accept", "§4", "a diff accepted by the user: SAVED/accepted_via_button, file not written",
       rule=CLI, interactive=True)
async def check_diff_accept(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path, tab = _scratch_diff(ctx)
    ctx.prompt("%s: a diff %r opens in the IDE: please ACCEPT it." % (program_name("check"), tab))
    reply, answer = await ctx.tool("open_diff", _diff_args(path, tab), session=sid,
                                   timeout=INTERACTIVE_TIMEOUT if ctx.interactive else ctx.timeout)
    problems = _diff_answer_problems(answer, "SAVED", tools.ACCEPTED_VIA_BUTTON, tab)
    if problems:
        raise Fail("open_diff answer: " + "; ".join(problems), reply.evidence())
    if os.path.exists(path):
        raise Fail("the IDE wrote %s: on SAVED the CLI writes the file, never the IDE" % path, reply.evidence())
    return None


# ------------------------------------------ PROTOCOL.md §2, "Errors and edge cases": §4's rows


def _is_error_result(answer: Dict[str, Any]) -> Optional[str]:
    """The text of an `isError` tool result, or None when the answer is something else."""
    result = answer.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(result, dict) or result.get("isError") is not True or not isinstance(content, list) \
            or not content or not isinstance(content[0], dict) or not isinstance(content[0].get("text"), str):
        return None
    return content[0]["text"]


@check("tool.arguments", "§4", "framing row \"arguments\": a missing or a mistyped argument is an isError result "
                               "(VS Code); an extra one too, named (ours); never a JSON-RPC error", rule=VSCODE)
async def check_tool_arguments(ctx: CheckContext) -> Optional[str]:
    path = ctx.scratch_path()
    # (VS Code's rule first: the recommendation about extra arguments is reported only
    # when the rest holds.)
    cases = (("open_diff", {"original_file_path": path, "new_file_contents": "x\n"}, "a missing tab_name", None,
              VSCODE),
             ("close_diff", {"tab_name": 5}, "a tab_name that is not a string", None, VSCODE),
             ("get_selection", {"ide_check_extra": 1}, "an argument the tool does not list", "ide_check_extra",
              RECOMMENDED))
    for name, arguments, what, named, rule in cases:
        reply, answer = await ctx.call("tools/call", {"name": name, "arguments": arguments})
        text = _is_error_result(answer)
        if text is None:
            raise Fail("%s of %s must be a tool result with isError: true (%s)"
                       % (what, name, "a JSON-RPC error" if "error" in answer else "it was accepted"),
                       reply.evidence(), rule)
        if named is not None and named not in text:
            raise Fail("the isError result for %s must name it (%s)" % (what, named), reply.evidence(), rule)
    if os.path.exists(path):
        raise Fail("the IDE wrote %s for an open_diff it refused" % path, rule=CLI)
    return None


@check("diff.session_end", "§4", "open_diff rejection \"its session ends\": DELETE answers a waiting open_diff "
                                 "REJECTED/client_disconnected", rule=RECOMMENDED)
async def check_diff_session_end(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    path, tab = _scratch_diff(ctx)
    pending = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
    try:
        # The DELETE must come after the server took the open_diff (on a connection of
        # its own): a server that sends the answer's head at once proves it at once.
        await pending.started(grace=ctx.timeout)
        await ctx.call("ping", session=sid)
        if pending.task.done():
            raise Fail("open_diff answered before anyone decided: it must block until the user decides",
                       pending.task.result()[0].evidence())
        deleted = await ctx.delete(sid)
        if deleted.status != 200:
            raise Fail("DELETE of the session answered %d" % deleted.status, deleted.evidence())
        try:
            reply, answer = await pending.result(ctx.timeout)
        except Fail as exc:
            raise Fail("the open_diff of a deleted session must be answered REJECTED/client_disconnected: %s"
                       % exc.message, exc.evidence) from None
        problems = _diff_answer_problems(answer, "REJECTED", tools.CLIENT_DISCONNECTED, tab)
        if problems:
            raise Fail("open_diff answer after its session was deleted: " + "; ".join(problems), reply.evidence())
    finally:
        await pending.cancel()
    return None
