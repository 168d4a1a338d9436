"""Checks of PROTOCOL.md §3: the handshake (`server/discover` failing, `initialize`,
`notifications/initialized` with 202), version negotiation, session ids, the plain
JSON-RPC methods (`ping`, unknown methods), and the errors table's session rows (a
vanished client, a cancel, a reconnect). Each says whose rule it tests."""
from __future__ import annotations

import asyncio
import os
import uuid
from typing import Optional

from ...wire import jsonrpc
from ...client import ClientConnection, ServerGone
from .outcomes import CLI, RECOMMENDED, VSCODE, Advise, Differs, Fail, Warn
from .registry import check
from .context import CheckContext, expect_error_code, expect_status


@check("discover.fallback", "§3", "server/discover answered with an error (not 401, not success)", rule=CLI)
async def check_discover(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.rpc("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
        "io.modelcontextprotocol/clientCapabilities": {}}})
    if reply.status == 401:
        raise Fail("401 makes the CLI abort the connection attempt", reply.evidence())
    message = reply.message()
    if isinstance(message, dict) and "result" in message:
        raise Fail("success means the stateless 2026-07-28 protocol, which the server does not speak",
                   reply.evidence())
    if not (isinstance(message, dict) and isinstance(message.get("error"), dict)):
        raise Fail("expected a JSON-RPC error (404 + error, or 200 + -32601)", reply.evidence())
    if reply.status not in (200, 404, 400):
        raise Warn("unusual status %d for the error (the CLI was seen to take 200, 400 and 404)" % reply.status,
                   reply.evidence())
    return None


@check("initialize.result", "§3", "initialize: 200, mcp-session-id, a result (the CLI); protocolVersion, "
                                 "capabilities.tools, serverInfo (VS Code)", rule=CLI)
async def check_initialize(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize()
    expect_status(reply, 200, "initialize")
    if not reply.headers.get("mcp-session-id"):
        raise Fail("no mcp-session-id header", reply.evidence())
    answer = reply.answer(rid)
    result = answer.get("result") if answer else None
    if not isinstance(result, dict):
        raise Fail("no result", reply.evidence())
    if result.get("protocolVersion") != "2025-11-25":
        raise Differs("protocolVersion %r, expected the requested 2025-11-25" % result.get("protocolVersion"),
                      reply.evidence())
    caps = result.get("capabilities")
    if not isinstance(caps, dict) or not isinstance(caps.get("tools"), dict):
        raise Differs("capabilities.tools missing", reply.evidence())
    info = result.get("serverInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        raise Differs("serverInfo.name/version missing", reply.evidence())
    return None


@check("initialize.versions", "§3", "requested version echoed when supported, else 2025-11-25", rule=VSCODE)
async def check_versions(ctx: CheckContext) -> Optional[str]:
    for asked, expected in (("2025-06-18", "2025-06-18"), ("1999-01-01", "2025-11-25")):
        ctx.client_session_id = str(uuid.uuid4())
        reply, rid = await ctx.initialize(asked)
        answer = reply.answer(rid)
        result = answer.get("result") if answer else None
        got = result.get("protocolVersion") if isinstance(result, dict) else None
        if got != expected:
            raise Fail("initialize asking %s answered %r, expected %s" % (asked, got, expected), reply.evidence())
    return None


@check("initialized.202", "§3", "notifications/initialized answered 202 (the CLI opens its stream only then)",
       rule=CLI)
async def check_initialized(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize()
    sid = reply.headers.get("mcp-session-id")
    if not sid:
        raise Fail("initialize gave no session", reply.evidence())
    note, _ = await ctx.rpc("notifications/initialized", session=sid, notification=True)
    expect_status(note, 202, "notifications/initialized")
    if note.body:
        raise Differs("202 should have an empty body", note.evidence())
    return None


@check("session.unknown", "§3", "404 for an unknown mcp-session-id", rule=RECOMMENDED)
async def check_unknown_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {}, session="no-such-session-" + uuid.uuid4().hex)
    expect_status(reply, 404, "tools/list with an unknown session id")
    return None


@check("session.missing", "§3", "400 for a request without mcp-session-id", rule=VSCODE)
async def check_missing_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {})
    expect_status(reply, 400, "tools/list without a session id")
    return None


@check("jsonrpc.ping", "§3", "ping answered {}", rule=VSCODE)
async def check_ping(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("ping")
    if answer.get("result") != {}:
        raise Fail("ping must answer {}", reply.evidence())
    return None


@check("jsonrpc.unknown_method", "§3", "unknown method answered -32601", rule=VSCODE)
async def check_unknown_method(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("no/such/method", {})
    expect_error_code(reply, jsonrpc.METHOD_NOT_FOUND, "an unknown method")
    return None


# ------------------------------------------- PROTOCOL.md §2, "Errors and edge cases": §3's rows

#: How long after its last connection closed a session must have ended (the contract's
#: bound, 1 s), plus room for a loaded machine.
VANISHED_BOUND = 1.0 + 3.0


async def _stream(ctx: CheckContext, sid: str) -> ClientConnection:
    """A GET stream of `sid` on a connection of its own (returned, open)."""
    conn, _ = await ctx.open_stream(sid)
    return conn


async def _alive(ctx: CheckContext, sid: str) -> bool:
    """Whether the session still answers (a ping on a fresh connection, closed after)."""
    conn = await ClientConnection.open(ctx.lock.socket_path)
    try:
        reply, _ = await ctx.rpc("ping", {}, session=sid, conn=conn)
    finally:
        conn.close()
    return reply.status == 200


@check("session.initialize_no_steal", "§3", "errors row \"initialize reusing a live session's id\": 409, the "
                                            "live session goes on (VS Code); -32600 with the request's id (ours)",
       rule=VSCODE)
async def check_initialize_no_steal(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    stream = await _stream(ctx, sid)
    try:
        reply, rid = await ctx.initialize()  # the same X-Copilot-Session-Id again
        new_sid = reply.headers.get("mcp-session-id")
        if reply.status == 200 and new_sid == sid:
            raise Fail("initialize took over a live session (its GET stream is open): expected 409",
                       reply.evidence())
        expect_status(reply, 409, "initialize reusing the client session id of a live session")
        if not await _alive(ctx, sid):
            raise Fail("the live session stopped answering after another initialize with its client id")
        message = reply.message()
        error = message.get("error") if isinstance(message, dict) else None
        if (reply.content_type != "application/json" or not isinstance(error, dict)
                or error.get("code") != jsonrpc.INVALID_REQUEST or message.get("id", "missing") != rid):
            raise Advise("the 409 should be an application/json JSON-RPC error -32600 with the request's id "
                         "(errors row \"initialize reusing a live session's id\")", reply.evidence())
    finally:
        stream.close()
    return None


@check("session.reconnect_after_stream_closed", "§3", "reconnect rule: a session whose stream closed is "
                                                     "taken over by initialize with the same client id, not 409",
       rule=RECOMMENDED, situation="when a CLI that crashed resumes its session (same X-Copilot-Session-Id) "
       "while the IDE still holds the old one: a 409 leaves it unable to connect")
async def check_reconnect(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    stream = await _stream(ctx, sid)
    stream.close()
    deadline = asyncio.get_event_loop().time() + VANISHED_BOUND
    while True:  # (the server notices the closed stream after a moment)
        reply, rid = await ctx.initialize()
        if reply.status == 200 and reply.answer(rid) is not None:
            return None
        if reply.status != 409 or asyncio.get_event_loop().time() > deadline:
            raise Fail("initialize after the old stream closed was refused; the contract says take over",
                       reply.evidence())
        await asyncio.sleep(0.1)


@check("session.ends_when_client_vanishes", "§3", "session end: all its connections closed, the session "
                                                 "ends within 1 s (404 after)", rule=RECOMMENDED,
       situation="when a CLI vanished without DELETE (killed, crashed): its session, and the diffs it left "
       "waiting, stay open in the IDE")
async def check_vanished_client(ctx: CheckContext) -> Optional[str]:
    # A client of its own connections, all closed at once as by SIGKILL.
    conn = await ClientConnection.open(ctx.lock.socket_path)
    reply, rid = await ctx.initialize(conn=conn)
    sid = reply.headers.get("mcp-session-id")
    if reply.status != 200 or not sid:
        conn.close()
        raise Fail("initialize failed", reply.evidence())
    await ctx.rpc("notifications/initialized", session=sid, notification=True, conn=conn)
    stream = await _stream(ctx, sid)
    conn.close()
    stream.close()
    deadline = asyncio.get_event_loop().time() + VANISHED_BOUND
    while await _alive(ctx, sid):
        if asyncio.get_event_loop().time() > deadline:
            raise Fail("the session still answers %.0f s after every connection that carried it closed"
                       % VANISHED_BOUND)
        await asyncio.sleep(0.1)
    return None


@check("session.cancel_ends_request", "§3", "cancel rule: notifications/cancelled 202, the request's answer "
                                           "ends with no event", rule=RECOMMENDED,
       situation="when the CLI gives up a request (after 60 s): the work and its connection are left to the IDE")
async def check_cancel(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path = ctx.scratch_path()
    tab = "[Copilot CLI] - %s (%s)" % (os.path.basename(path), uuid.uuid4().hex[:6])
    pending = await ctx.start_tool("open_diff", {"original_file_path": path, "new_file_contents": "cancelled\n",
                                                 "tab_name": tab}, sid)
    try:
        await pending.started()
        await ctx.call("ping", session=sid)
        if pending.task.done():
            raise Warn("open_diff was answered before it could be cancelled (an IDE that decides at once): "
                       "the cancel rule needs a request that waits")
        note, _ = await ctx.rpc("notifications/cancelled", {"requestId": pending.rid, "reason": "check"},
                                session=sid, notification=True)
        expect_status(note, 202, "notifications/cancelled")
        done, _ = await asyncio.wait({pending.task}, timeout=ctx.brief)
        if not done:
            raise Fail("the cancelled open_diff is still open %g s after notifications/cancelled" % ctx.brief)
        error = pending.task.exception()
        if error is None:
            raise Fail("a cancelled request must end without an answer", pending.task.result()[0].evidence())
        if isinstance(error, ServerGone):
            raise Fail("the server closed the cancelled request's connection; it ends the answer and keeps it")
        if not isinstance(error, Fail):
            raise error
        # (Fail from reading the tool's answer: the body ended with no answer, as it should.)
    finally:
        await pending.cancel()
    return None
