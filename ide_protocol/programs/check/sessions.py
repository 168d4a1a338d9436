"""Checks of PROTOCOL.md §3: the handshake (`server/discover` failing, `initialize`,
`notifications/initialized` with 202), version negotiation, session ids, and the
plain JSON-RPC methods (`ping`, unknown methods)."""
from __future__ import annotations

import uuid
from typing import Optional

from ...wire import jsonrpc
from .registry import Fail, Warn, check
from .context import CheckContext, expect_error_code, expect_status


@check("discover.fallback", "§3", "server/discover answered with an error (not 401, not success)")
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
        raise Warn("unusual status %d for the error" % reply.status, reply.evidence())
    return None


@check("initialize.result", "§3", "initialize: 200, mcp-session-id, protocolVersion, capabilities.tools, serverInfo")
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
        raise Fail("protocolVersion %r, expected the requested 2025-11-25" % result.get("protocolVersion"),
                   reply.evidence())
    caps = result.get("capabilities")
    if not isinstance(caps, dict) or not isinstance(caps.get("tools"), dict):
        raise Fail("capabilities.tools missing", reply.evidence())
    info = result.get("serverInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        raise Fail("serverInfo.name/version missing", reply.evidence())
    return None


@check("initialize.versions", "§3", "requested version echoed when supported, else 2025-11-25")
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


@check("initialized.202", "§3", "notifications/initialized answered 202 (the CLI opens its stream only then)")
async def check_initialized(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize()
    sid = reply.headers.get("mcp-session-id")
    if not sid:
        raise Fail("initialize gave no session", reply.evidence())
    note, _ = await ctx.rpc("notifications/initialized", session=sid, notification=True)
    expect_status(note, 202, "notifications/initialized")
    if note.body:
        raise Warn("202 should have an empty body", note.evidence())
    return None


@check("session.unknown", "§3", "404 for an unknown mcp-session-id")
async def check_unknown_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {}, session="no-such-session-" + uuid.uuid4().hex)
    expect_status(reply, 404, "tools/list with an unknown session id")
    return None


@check("session.missing", "§3", "400 for a request without mcp-session-id")
async def check_missing_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {})
    expect_status(reply, 400, "tools/list without a session id")
    return None


@check("jsonrpc.ping", "§3", "ping answered {}")
async def check_ping(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("ping")
    if answer.get("result") != {}:
        raise Fail("ping must answer {}", reply.evidence())
    return None


@check("jsonrpc.unknown_method", "§3", "unknown method answered -32601")
async def check_unknown_method(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("no/such/method", {})
    expect_error_code(reply, jsonrpc.METHOD_NOT_FOUND, "an unknown method")
    return None
