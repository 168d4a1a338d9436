"""Checks of PROTOCOL.md §2: HTTP/1.1 over the socket.

Authentication on every request, paths and methods, both body framings, large bodies,
the format of an answer, keep-alive after an ended stream, the refusals (bad JSON, a
batch), DELETE, and the GET stream's head."""
from __future__ import annotations

import uuid
from typing import Optional

from ...wire import jsonrpc
from ...client import IdeTimeout, ServerGone
from .registry import Fail, Warn, check
from .context import CheckContext, expect_error_code, expect_status, sent_chunked


@check("auth.missing", "§2", "401 without the Authorization header")
async def check_auth_missing(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", auth=False))
    expect_status(reply, 401, "a request without the lock's Authorization header")
    if reply.content_type != "text/plain":
        raise Warn("401 should be text/plain \"Unauthorized\"", reply.evidence())
    return None


@check("auth.wrong_nonce", "§2", "401 with a wrong nonce")
async def check_auth_wrong(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", authorization="Nonce " + uuid.uuid4().hex))
    expect_status(reply, 401, "a request with a wrong nonce")
    return None


@check("auth.origin", "§2", "403 when an Origin header is present")
async def check_origin(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", extra=[("Origin", "http://evil.example")]))
    expect_status(reply, 403, "a request with an Origin header")
    return None


@check("http.path", "§2", "404 for a path other than /mcp")
async def check_path(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, target="/not-mcp")
    expect_status(reply, 404, "POST /not-mcp")
    return None


@check("http.method", "§2", "405 with Allow: GET, POST, DELETE for other methods")
async def check_method(ctx: CheckContext) -> Optional[str]:
    reply = await ctx.send("PUT", b"{}", headers=ctx.headers("POST"))
    expect_status(reply, 405, "PUT /mcp")
    allow = set(reply.headers.tokens("allow"))
    if not {"get", "post", "delete"} <= allow:
        raise Fail("405 without Allow: GET, POST, DELETE", reply.evidence())
    return None


@check("http.content_length", "§2", "a POST with Content-Length (not chunked) is accepted")
async def check_content_length(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize(chunked=False)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("initialize sent with Content-Length was not answered", reply.evidence())
    return None


@check("http.large_body", "§2", "a 10 MB request body is accepted")
async def check_large_body(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply, rid = await ctx.rpc("ping", {"_meta": {"padding": "x" * (10 * 1024 * 1024)}}, session=sid)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("a 10 MB POST was refused (open_diff carries whole files)", reply.evidence())
    return None


@check("http.response_format", "§2", "request answered as one SSE event (or application/json)")
async def check_response_format(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply, rid = await ctx.rpc("ping", {}, session=sid)
    expect_status(reply, 200, "ping in a session")
    if reply.content_type == "application/json":
        if reply.answer(rid) is None:
            raise Fail("application/json body is not the answer", reply.evidence())
        return "application/json answer (accepted by the CLI)"
    if reply.content_type != "text/event-stream":
        raise Fail("Content-Type must be text/event-stream (or application/json)", reply.evidence())
    problems = []
    if "no-cache" not in reply.headers.tokens("cache-control"):
        problems.append("no Cache-Control: no-cache")
    if reply.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id header")
    if not sent_chunked(reply.response):
        problems.append("not chunked")
    if len(reply.events) != 1:
        problems.append("%d events instead of one" % len(reply.events))
    elif reply.events[0].event != "message":
        problems.append("event type %r instead of \"message\"" % reply.events[0].event)
    if reply.answer(rid) is None:
        problems.append("the event is not the JSON-RPC answer")
    if problems:
        raise Fail("; ".join(problems), reply.evidence())
    return None


@check("http.keep_alive_after_stream", "§2", "a request on the connection of an ended GET stream is answered")
async def check_keep_alive(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    if response.status != 200:
        raise Fail("GET stream refused: %d" % response.status)
    deleted = await ctx.delete(sid)
    if deleted.status != 200:
        raise Fail("DELETE answered %d" % deleted.status, deleted.evidence())
    try:
        await response.read_body(ctx.timeout)
    except IdeTimeout:
        raise Fail("the GET stream did not end after DELETE")
    except ServerGone:
        raise Fail("the server closed the stream's connection instead of ending the stream with 0\\r\\n\\r\\n")
    try:
        reply, rid = await ctx.initialize(conn=conn)
    except ServerGone as exc:
        raise Fail("the server closed the connection after ending the stream; the CLI reuses it (%s)" % exc)
    except IdeTimeout:
        raise Fail("the server stopped reading the connection after ending the stream "
                   "(the CLI waits 60 s for such a request)")
    if reply.status != 200:
        raise Fail("the request on the reused connection failed", reply.evidence())
    return None


@check("jsonrpc.parse_error", "§2", "unparsable JSON answered 400 with -32700")
async def check_parse_error(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", b'{"jsonrpc": "2.0", "id": 1, "method": ', session=sid)
    expect_status(reply, 400, "an unparsable body")
    expect_error_code(reply, jsonrpc.PARSE_ERROR, "an unparsable body")
    return None


@check("jsonrpc.batch", "§2", "a JSON array (batch) answered 400")
async def check_batch(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", [jsonrpc.request(1, "ping", {})], session=sid)
    expect_status(reply, 400, "a batch")
    return None


@check("delete.session", "§2", "DELETE 200 ends the stream; a second DELETE 404")
async def check_delete(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn = await ctx.connect()
    stream = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    first = await ctx.delete(sid)
    expect_status(first, 200, "DELETE of a live session")
    try:
        await stream.read_body(ctx.timeout)
    except (IdeTimeout, ServerGone) as exc:
        raise Fail("the session's GET stream did not end cleanly after DELETE: %s" % exc)
    second = await ctx.delete(sid)
    expect_status(second, 404, "a second DELETE of the same session")
    after, _ = await ctx.rpc("tools/list", {}, session=sid)
    expect_status(after, 404, "a request in a deleted session")
    return None


@check("stream.get", "§2", "GET stream: 200, text/event-stream, no-cache, mcp-session-id, chunked, kept open")
async def check_stream(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    head = "HTTP %d %s %r" % (response.status, response.reason, response.headers.raw)
    if response.status != 200:
        body = await response.read_body(ctx.timeout)
        raise Fail("GET /mcp answered %d" % response.status, head + "\n" + body.decode("utf-8", "replace"))
    problems = []
    if not response.is_sse:
        problems.append("Content-Type is not text/event-stream")
    if "no-cache" not in response.headers.tokens("cache-control"):
        problems.append("no Cache-Control: no-cache")
    if response.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id")
    if not sent_chunked(response):
        problems.append("not chunked")
    if problems:
        raise Fail("; ".join(problems), head)
    await ctx.call("ping", session=sid)  # a round trip on another connection, then look
    try:
        while True:  # events (a selection) are fine; the end of the body is not
            if await response.next_data(0.3) is None:
                raise Fail("the GET stream ended instead of staying open", head)
    except IdeTimeout:
        pass  # nothing more: the stream is open and idle, as it should be
    except ServerGone:
        raise Fail("the server closed the GET stream's connection", head)
    if response.headers.get("cache-control") != "no-cache, no-transform":
        raise Warn("Cache-Control %r (VS Code sends \"no-cache, no-transform\")" % response.headers.get("cache-control"))
    return None
