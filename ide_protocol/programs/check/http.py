"""Checks of PROTOCOL.md §2: HTTP/1.1 over the socket.

Authentication on every request, paths and methods, both body framings, large bodies,
the format of an answer, keep-alive after an ended stream, the refusals (bad JSON, a
batch), DELETE, and the GET stream's head; then one `errors.*` check per row of the
errors and edge cases table, and the framing rows. Each says whose rule it tests (the
CLI's, security's, VS Code's or ours, as the contract labels it)."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, Optional, Sequence, Tuple

from ...wire import http11, jsonrpc
from ...client import ClientConnection, IdeTimeout, ServerGone
from .outcomes import CLI, RECOMMENDED, SECURITY, VSCODE, Advise, Differs, Fail
from .registry import check
from .context import (ANSWER_LIMIT, CheckContext, Reply, expect_error_code, expect_status, read_reply,
                      sent_chunked)


def plain_refusal(reply: Reply, what: str, body: Optional[bytes] = None) -> None:
    """A refusal of the head or of the framing is `text/plain`, saying in words what is
    wrong (`body`: those exact words): our recommendation (PROTOCOL.md §2, "Errors and
    edge cases"; VS Code's are Express's HTML pages, or Node's empty 400)."""
    if reply.content_type != "text/plain" or (body is not None and reply.body.strip() != body):
        raise Advise("%s should be text/plain%s" % (what, "" if body is None else " \"%s\"" % body.decode()),
                     reply.evidence())


@check("auth.missing", "§2", "401 without the Authorization header", rule=SECURITY)
async def check_auth_missing(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", auth=False))
    expect_status(reply, 401, "a request without the lock's Authorization header")
    plain_refusal(reply, "the 401", b"Unauthorized")
    return None


@check("auth.wrong_nonce", "§2", "401 with a wrong nonce", rule=SECURITY)
async def check_auth_wrong(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", authorization="Nonce " + uuid.uuid4().hex))
    expect_status(reply, 401, "a request with a wrong nonce")
    return None


@check("auth.origin", "§2", "403 when an Origin header is present", rule=RECOMMENDED)
async def check_origin(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", extra=[("Origin", "http://evil.example")]))
    expect_status(reply, 403, "a request with an Origin header")
    return None


@check("http.path", "§2", "404 for a path other than /mcp (text/plain: ours)", rule=VSCODE)
async def check_path(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, target="/not-mcp")
    expect_status(reply, 404, "POST /not-mcp")
    plain_refusal(reply, "the 404 (errors row \"path\")", b"Not Found")
    return None


@check("http.method", "§2", "405 with Allow: GET, POST, DELETE for other methods", rule=RECOMMENDED)
async def check_method(ctx: CheckContext) -> Optional[str]:
    reply = await ctx.send("PUT", b"{}", headers=ctx.headers("POST"))
    expect_status(reply, 405, "PUT /mcp")
    allow = set(reply.headers.tokens("allow"))
    if not {"get", "post", "delete"} <= allow:
        raise Fail("405 without Allow: GET, POST, DELETE", reply.evidence())
    plain_refusal(reply, "the 405 (errors row \"method\")", b"Method Not Allowed")
    return None


@check("http.content_length", "§2", "a POST with Content-Length (not chunked) is accepted", rule=VSCODE)
async def check_content_length(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize(chunked=False)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("initialize sent with Content-Length was not answered", reply.evidence())
    return None


#: The body `http.large_body` sends, envelope included: 10 MB, the size the contract asks
#: a server to accept (§2, Size), within VS Code's limit (`express.json({limit:'10mb'})`:
#: 10 MiB).
LARGE_BODY = 10 * 1000 * 1000


def padded_ping(request_id: int, size: int) -> bytes:
    """A ping whose body is `size` bytes: its `_meta` padded."""
    empty = jsonrpc.dumps(jsonrpc.request(request_id, "ping", {"_meta": {"padding": ""}}))
    return jsonrpc.dumps(jsonrpc.request(request_id, "ping", {"_meta": {"padding": "x" * (size - len(empty))}}))


@check("http.large_body", "§2", "a 10 MB request body is accepted", rule=VSCODE)
async def check_large_body(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    rid = ctx.next_id()
    reply = await ctx.send("POST", padded_ping(rid, LARGE_BODY), session=sid)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("a POST of 10 MB (10 000 000 bytes) was refused: open_diff carries whole files, and the CLI "
                   "shows no diff in the IDE for a file the server refuses", reply.evidence())
    return None


@check("http.response_format", "§2", "request answered as SSE (or application/json) holding the answer; "
                                    "VS Code's headers, one event", rule=CLI)
async def check_response_format(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply, rid = await ctx.rpc("ping", {}, session=sid)
    expect_status(reply, 200, "ping in a session")
    if reply.content_type not in ("text/event-stream", "application/json"):
        raise Fail("Content-Type must be text/event-stream or application/json: the CLI refuses any other",
                   reply.evidence())
    if reply.answer(rid) is None:
        raise Fail("the body does not hold the JSON-RPC answer", reply.evidence())
    if reply.content_type == "application/json":
        return "application/json answer (the CLI takes it)"
    problems = []
    if "no-cache" not in reply.headers.tokens("cache-control"):
        problems.append("no Cache-Control: no-cache")
    if reply.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id header")
    if len(reply.events) != 1:
        problems.append("%d events instead of one" % len(reply.events))
    elif reply.events[0].event != "message":
        problems.append("event type %r instead of \"message\"" % reply.events[0].event)
    if problems:
        raise Differs("; ".join(problems), reply.evidence())
    return None


@check("http.keep_alive_after_stream", "§2", "a request on the connection of an ended GET stream is answered",
       rule=CLI)
async def check_keep_alive(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn, response = await ctx.open_stream(sid)
    deleted = await ctx.delete(sid)
    if deleted.status != 200:
        raise Fail("DELETE answered %d" % deleted.status, deleted.evidence())
    try:
        await read_reply(response, "GET /mcp", ctx.timeout)
    except IdeTimeout:
        raise Differs("the GET stream did not end after DELETE")
    except ServerGone:
        raise Differs("the server closed the stream's connection instead of ending the stream with 0\\r\\n\\r\\n")
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


@check("jsonrpc.parse_error", "§2", "unparsable JSON answered 400 with -32700", rule=RECOMMENDED)
async def check_parse_error(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", b'{"jsonrpc": "2.0", "id": 1, "method": ', session=sid)
    expect_status(reply, 400, "an unparsable body")
    expect_error_code(reply, jsonrpc.PARSE_ERROR, "an unparsable body")
    return None


@check("jsonrpc.batch", "§2", "a JSON array (batch) answered 400", rule=RECOMMENDED)
async def check_batch(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", [jsonrpc.request(1, "ping", {})], session=sid)
    expect_status(reply, 400, "a batch")
    return None


@check("delete.session", "§2", "DELETE 200 ends the stream (VS Code); a second DELETE 404 (ours)", rule=VSCODE)
async def check_delete(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn = await ctx.connect()
    stream = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    first = await ctx.delete(sid)
    expect_status(first, 200, "DELETE of a live session")
    try:
        await read_reply(stream, "GET /mcp", ctx.timeout)
    except (IdeTimeout, ServerGone) as exc:
        raise Fail("the session's GET stream did not end cleanly after DELETE: %s" % exc)
    second = await ctx.delete(sid)
    expect_status(second, 404, "a second DELETE of the same session", RECOMMENDED)
    after, _ = await ctx.rpc("tools/list", {}, session=sid)
    expect_status(after, 404, "a request in a deleted session", RECOMMENDED)
    return None


#: How long `stream.get` watches a GET stream for its end, and how much it reads of it.
STREAM_WATCH = 1.0


@check("stream.get", "§2", "GET stream: 200, text/event-stream, kept open; VS Code's headers (no-cache, "
                          "no-transform, mcp-session-id, chunked)", rule=CLI)
async def check_stream(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    head = "HTTP %d %s %r" % (response.status, response.reason, response.headers.raw)
    if response.status != 200:
        reply = await read_reply(response, "GET /mcp", ctx.timeout)
        raise Fail("GET /mcp answered %d: the CLI receives no notification" % response.status, reply.evidence())
    if not response.is_sse:
        raise Fail("Content-Type is not text/event-stream: the CLI reads no notification from it", head)
    await ctx.call("ping", session=sid)  # a round trip on another connection, then look
    loop = asyncio.get_event_loop()
    until, seen = loop.time() + STREAM_WATCH, 0
    try:
        while seen <= ANSWER_LIMIT and loop.time() < until:  # events (a selection) are fine; the end is not
            data = await response.next_data(max(until - loop.time(), 0.01))
            if data is None:
                raise Fail("the GET stream ended instead of staying open", head)
            seen += len(data)
    except IdeTimeout:
        pass  # nothing more: the stream is open and idle, as it should be
    except ServerGone:
        raise Fail("the server closed the GET stream's connection", head)
    problems = []
    if response.headers.get("cache-control") != "no-cache, no-transform":
        problems.append("Cache-Control %r, not \"no-cache, no-transform\"" % response.headers.get("cache-control"))
    if response.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id")
    if not sent_chunked(response):
        problems.append("not chunked")
    if problems:
        raise Differs("; ".join(problems), head)
    return None


# ------------------------------------------------ §2, "Errors and edge cases": one check per row


async def _raw(ctx: CheckContext, method: str, target: str = "/mcp", *, auth: bool = True, origin: bool = False,
               announce: Optional[int] = None, conn: Optional[ClientConnection] = None
               ) -> Tuple[Reply, ClientConnection]:
    """A hand-made request whose head alone decides its answer: `announce` sends a
    `Content-Length` but not the body (a server must judge the head first)."""
    if conn is None:
        conn = await ctx.connect()
    headers = ctx.headers("DELETE", auth=auth, extra=[("Origin", "http://evil.example")] if origin else ())
    if announce is not None:
        headers = headers[:-2] + [("Content-Type", "application/json"), ("Content-Length", str(announce))] + headers[-2:]
    await conn.send(http11.write_request(method, target, headers, None))
    wait = ctx.brief if announce is not None else ctx.timeout  # (an answer from the head comes at once)
    response = await conn.read_response(method, wait)
    return await read_reply(response, "%s %s" % (method, target), ctx.timeout), conn


async def _expect_closed(ctx: CheckContext, conn: ClientConnection, after: str) -> None:
    """The server must close the connection after `after` (the row says so): it closes
    it at once, so the wait is brief."""
    try:
        data = await asyncio.wait_for(conn.reader.read(1), ctx.brief)
    except asyncio.TimeoutError:
        raise Fail("the connection stayed open after %s; the row says it closes" % after) from None
    except (ConnectionError, OSError):
        return
    if data:
        raise Fail("unexpected bytes after %s: %r" % (after, data))


def expect_json_error(reply: Reply, status: int, code: int, request_id: Any, what: str,
                      status_rule: Optional[str] = None) -> None:
    """A refusal past the head's checks: a JSON-RPC error in an application/json body,
    the connection kept (PROTOCOL.md §2, "Errors and edge cases"). The status is graded
    by `status_rule` (default: the check's own rule), the rest of the answer by the
    check's own rule."""
    expect_status(reply, status, what, status_rule)
    if reply.content_type != "application/json":
        raise Fail("%s: expected Content-Type application/json, got %r" % (what, reply.content_type),
                   reply.evidence())
    expect_error_code(reply, code, what)
    if reply.message().get("id", "missing") != request_id:
        raise Fail("%s: the error's id must be %s" % (what, json.dumps(request_id)), reply.evidence())
    if not reply.response.conn.keep_alive:
        raise Fail("%s: the connection must stay open after a JSON-RPC refusal" % what, reply.evidence())


@check("errors.order_origin_first", "§2", "errors row \"Origin\": 403 before the nonce, path and method are judged",
       rule=RECOMMENDED)
async def check_order_origin(ctx: CheckContext) -> Optional[str]:
    reply, _ = await _raw(ctx, "PUT", "/not-mcp", auth=False, origin=True)
    expect_status(reply, 403, "PUT /not-mcp with an Origin header and no nonce")
    return None


@check("errors.order_nonce_before_path", "§2", "errors row \"no or wrong nonce\": 401 before the path and method",
       rule=RECOMMENDED)
async def check_order_nonce(ctx: CheckContext) -> Optional[str]:
    reply, _ = await _raw(ctx, "PUT", "/not-mcp", auth=False)
    expect_status(reply, 401, "PUT /not-mcp without the nonce")
    return None


@check("errors.order_path_before_method", "§2", "errors row \"path\": 404 before the method is judged",
       rule=RECOMMENDED)
async def check_order_path(ctx: CheckContext) -> Optional[str]:
    reply, _ = await _raw(ctx, "PUT", "/not-mcp")
    expect_status(reply, 404, "PUT /not-mcp with the nonce")
    return None


@check("errors.refused_before_body", "§2", "check order: a 401 is answered from the head, before any body byte",
       rule=RECOMMENDED)
async def check_refused_before_body(ctx: CheckContext) -> Optional[str]:
    await _refused_from_the_head(ctx, "/mcp", 10 * 1024 * 1024, 401, "without the nonce, announcing 10 MB",
                                 auth=False)
    return None


async def _refused_from_the_head(ctx: CheckContext, target: str, announce: int, status: int, what: str,
                                 auth: bool = True) -> None:
    """A POST whose head announces `announce` bytes it never sends is refused with
    `status` from the head alone, at once, and its connection closed (the framing of
    what would follow is unknown)."""
    try:
        reply, conn = await _raw(ctx, "POST", target, auth=auth, announce=announce)
    except IdeTimeout:
        raise Fail("POST %s %s: no answer within %g s before the body came; a refusal is answered from the "
                   "head, its body never read" % (target, what, ctx.brief)) from None
    expect_status(reply, status, "POST %s %s (the body never sent)" % (target, what))
    await _expect_closed(ctx, conn, "a %d whose body was not read" % status)


@check("errors.close_after_401", "§2", "errors row \"no or wrong nonce\": 401 (security) text/plain, connection "
                                      "closed (ours)", rule=RECOMMENDED)
async def check_close_after_401(ctx: CheckContext) -> Optional[str]:
    reply, conn = await _raw(ctx, "GET", auth=False)
    expect_status(reply, 401, "GET /mcp without the nonce", SECURITY)
    plain_refusal(reply, "the 401", b"Unauthorized")
    await _expect_closed(ctx, conn, "a 401")
    return None


@check("errors.close_after_403", "§2", "errors row \"Origin\": 403 text/plain, connection closed", rule=RECOMMENDED)
async def check_close_after_403(ctx: CheckContext) -> Optional[str]:
    reply, conn = await _raw(ctx, "GET", origin=True)
    expect_status(reply, 403, "GET /mcp with an Origin header")
    plain_refusal(reply, "the 403")
    await _expect_closed(ctx, conn, "a 403")
    return None


async def _answered_again(ctx: CheckContext, method: str, target: str, status: int) -> None:
    reply, conn = await _raw(ctx, method, target)
    expect_status(reply, status, "%s %s" % (method, target))
    try:
        again, _ = await _raw(ctx, method, target, conn=conn)
    except (ServerGone, IdeTimeout) as exc:
        raise Fail("the connection did not stay open after a %d without a body (%s)" % (status, exc)) from None
    expect_status(again, status, "the same request again on that connection")


@check("errors.open_after_404", "§2", "errors row \"path\": 404 without a body keeps the connection open",
       rule=VSCODE)
async def check_open_after_404(ctx: CheckContext) -> Optional[str]:
    await _answered_again(ctx, "GET", "/not-mcp", 404)
    return None


@check("errors.open_after_405", "§2", "errors row \"method\": 405 without a body keeps the connection open",
       rule=RECOMMENDED)
async def check_open_after_405(ctx: CheckContext) -> Optional[str]:
    await _answered_again(ctx, "PUT", "/mcp", 405)
    return None


@check("errors.body_limit", "§2", "errors row \"body over the limit\": 413 from the head, connection closed",
       rule=RECOMMENDED)
async def check_body_limit(ctx: CheckContext) -> Optional[str]:
    await _refused_from_the_head(ctx, "/mcp", 1 << 40, 413, "announcing a 1 TiB body")
    return None


@check("errors.parse_error_body", "§2", "errors row \"body not JSON\": 400 application/json, -32700, id null",
       rule=RECOMMENDED)
async def check_parse_error_body(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", b"{not json", session=sid)
    expect_json_error(reply, 400, jsonrpc.PARSE_ERROR, None, "an unparsable body")
    return None


@check("errors.batch_body", "§2", "errors row \"batch\": 400 application/json, -32600, id null", rule=RECOMMENDED)
async def check_batch_body(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", [jsonrpc.request(1, "ping", {})], session=sid)
    expect_json_error(reply, 400, jsonrpc.INVALID_REQUEST, None, "a batch")
    return None


@check("errors.invalid_message", "§2", "errors row \"not a JSON-RPC message\": 400 application/json, -32600, its id",
       rule=RECOMMENDED)
async def check_invalid_message(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", {"jsonrpc": "2.0", "id": 7}, session=sid)
    expect_json_error(reply, 400, jsonrpc.INVALID_REQUEST, 7, "a message with neither method nor result")
    return None


@check("errors.missing_session_body", "§2", "errors row \"no mcp-session-id\": 400 (VS Code) application/json, "
                                           "-32600, id null (ours)", rule=RECOMMENDED)
async def check_missing_session_body(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {})
    expect_json_error(reply, 400, jsonrpc.INVALID_REQUEST, None, "tools/list without a session id", VSCODE)
    return None


@check("errors.unknown_session_body", "§2", "errors row \"unknown session\": 404 application/json, -32001, id null",
       rule=RECOMMENDED)
async def check_unknown_session_body(ctx: CheckContext) -> Optional[str]:
    unknown = "no-such-session-" + uuid.uuid4().hex
    reply, _ = await ctx.rpc("tools/list", {}, session=unknown)
    expect_json_error(reply, 404, jsonrpc.SESSION_NOT_FOUND, None, "tools/list with an unknown session id")
    deleted = await ctx.delete(unknown)
    expect_json_error(deleted, 404, jsonrpc.SESSION_NOT_FOUND, None, "DELETE of an unknown session")
    return None


@check("errors.second_stream", "§2", "errors row \"second GET stream\": 409 (VS Code) application/json, -32600 "
                                     "(ours)", rule=RECOMMENDED)
async def check_second_stream(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    await ctx.open_stream(sid)  # the first stream, kept open
    second = await ctx.send("GET", None, session=sid)
    expect_json_error(second, 409, jsonrpc.INVALID_REQUEST, None, "a second GET stream of one session", VSCODE)
    return None


@check("errors.stream_accept", "§2", "errors row \"GET whose Accept excludes text/event-stream\": 406 (VS Code) "
                                     "application/json, -32600 (ours)", rule=RECOMMENDED)
async def check_stream_accept(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    headers = [(k, v) for k, v in ctx.headers("GET", sid) if k.lower() != "accept"]
    reply = await ctx.send("GET", None, headers=headers[:-2] + [("Accept", "application/json")] + headers[-2:])
    expect_json_error(reply, 406, jsonrpc.INVALID_REQUEST, None, "a GET stream that accepts only JSON", VSCODE)
    return None


@check("errors.close_after_404_with_body", "§2", "errors row \"path\": a 404 whose head announces a body is "
                                                 "answered from the head, connection closed", rule=RECOMMENDED)
async def check_close_after_404_with_body(ctx: CheckContext) -> Optional[str]:
    await _refused_from_the_head(ctx, "/not-mcp", 1024, 404, "announcing a body")
    return None


@check("errors.malformed_http", "§2", "errors row \"malformed HTTP\": 400, connection closed (VS Code); text/plain "
                                      "(ours)", rule=VSCODE)
async def check_malformed_http(ctx: CheckContext) -> Optional[str]:
    conn = await ctx.connect()
    await conn.send(b"NOT AN HTTP REQUEST AT ALL\r\n\r\n")
    response = await conn.read_response("POST", ctx.timeout)
    reply = await read_reply(response, "NOT AN HTTP REQUEST AT ALL", ctx.timeout)
    expect_status(reply, 400, "a request line that is not HTTP")
    await _expect_closed(ctx, conn, "malformed HTTP")
    plain_refusal(reply, "the refusal of malformed HTTP, saying what is wrong,")
    return None


# ------------------------------------------ §2, "Errors and edge cases": the framing rows


def _head_bytes(ctx: CheckContext, session: str, fields: Sequence[Tuple[str, str]] = (),
                drop: Sequence[str] = ()) -> bytes:
    """The head of a POST /mcp in `session` as the CLI writes it, with `fields` added
    before `Host` and the fields named in `drop` left out (the body is the caller's)."""
    headers = [(k, v) for k, v in ctx.headers("POST", session) if k.lower() not in drop]
    headers = headers[:-1] + list(fields) + headers[-1:]
    return http11.write_request("POST", "/mcp", headers, None, keep_alive=True)


def _ping(request_id: int) -> bytes:
    return jsonrpc.dumps(jsonrpc.request(request_id, "ping", {}))


async def _ping_by_hand(ctx: CheckContext) -> Tuple[str, ClientConnection, int, bytes]:
    """A session, a connection of its own, and a ping's id and body, to be sent by hand."""
    sid = await ctx.session()
    conn = await ctx.connect()
    rid = ctx.next_id()
    return sid, conn, rid, _ping(rid)


async def _answered(ctx: CheckContext, conn: ClientConnection, request_id: int, what: str) -> Reply:
    """Read the next answer on `conn`; Fail unless it is a 200 answering `request_id`."""
    try:
        response = await conn.read_response("POST", ctx.timeout)
        reply = await read_reply(response, what, ctx.timeout)
    except ServerGone as exc:
        raise Fail("%s: the server closed the connection instead of answering (%s)" % (what, exc)) from None
    except IdeTimeout:
        raise Fail("%s: no answer within %s s" % (what, ctx.timeout)) from None
    if reply.status != 200 or reply.answer(request_id) is None:
        raise Fail("%s: expected a 200 answering id %d" % (what, request_id), reply.evidence())
    return reply


@check("framing.chunk_extensions", "§2", "framing row \"chunk extensions\": ignored, the request answered",
       rule=VSCODE)
async def check_chunk_extensions(ctx: CheckContext) -> Optional[str]:
    sid, conn, rid, body = await _ping_by_hand(ctx)
    await conn.send(_head_bytes(ctx, sid, [("Transfer-Encoding", "chunked")])
                    + b"%x;ide-check=1\r\n%s\r\n0;last\r\n\r\n" % (len(body), body))
    await _answered(ctx, conn, rid, "a chunked ping whose chunk-size lines carry extensions")
    return None


@check("framing.trailers", "§2", "framing row \"trailers\": read and dropped, the connection goes on", rule=VSCODE)
async def check_trailers(ctx: CheckContext) -> Optional[str]:
    sid, conn, rid, body = await _ping_by_hand(ctx)
    await conn.send(_head_bytes(ctx, sid, [("Transfer-Encoding", "chunked")])
                    + b"%x\r\n%s\r\n0\r\nX-Ide-Check: trailer\r\n\r\n" % (len(body), body))
    await _answered(ctx, conn, rid, "a chunked ping with a trailer field")
    # The trailer section was consumed whole: the next request on the connection is read.
    after, after_id = await ctx.rpc("ping", {}, session=sid, conn=conn)
    if after.status != 200 or after.answer(after_id) is None:
        raise Fail("the request after one with trailers was not answered", after.evidence())
    return None


@check("framing.length_and_chunked", "§2", "framing row \"Content-Length with Transfer-Encoding\": 400, "
                                           "connection closed (VS Code); text/plain (ours)", rule=VSCODE)
async def check_length_and_chunked(ctx: CheckContext) -> Optional[str]:
    sid, conn, _, body = await _ping_by_hand(ctx)
    await conn.send(_head_bytes(ctx, sid, [("Content-Length", str(len(body))), ("Transfer-Encoding", "chunked")])
                    + http11.encode_chunked_body(body))
    try:
        response = await conn.read_response("POST", ctx.timeout)
        reply = await read_reply(response, "POST /mcp with Content-Length and chunked", ctx.timeout)
    except ServerGone:
        raise Fail("the server closed the connection without answering 400") from None
    expect_status(reply, 400, "a POST with both Content-Length and Transfer-Encoding: chunked")
    await _expect_closed(ctx, conn, "a request whose body's end is ambiguous")
    plain_refusal(reply, "the refusal of an ambiguous framing, saying why,")
    return None


@check("framing.expect_continue", "§2", "framing row \"Expect: 100-continue\": the body is read when it comes, "
                                        "the request answered as usual", rule=VSCODE)
async def check_expect_continue(ctx: CheckContext) -> Optional[str]:
    sid, conn, rid, body = await _ping_by_hand(ctx)
    await conn.send(_head_bytes(ctx, sid, [("Expect", "100-continue"), ("Content-Length", str(len(body)))]))
    await asyncio.sleep(0.05)  # a client that does not wait long for `100 Continue` (curl waits a second)
    await conn.send(body)
    await _answered(ctx, conn, rid, "a ping sent with Expect: 100-continue")  # (an interim 100 is skipped)
    return None


@check("framing.pipelining", "§2", "framing row \"pipelining\": requests sent back to back on one connection "
                                   "are answered in order", rule=VSCODE)
async def check_pipelining(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    conn = await ctx.connect()
    ids = [ctx.next_id() for _ in range(3)]
    data = b""
    for rid in ids:
        body = _ping(rid)
        data += _head_bytes(ctx, sid, [("Content-Length", str(len(body)))]) + body
    await conn.send(data)  # all three in one write, before any answer is read
    for n, rid in enumerate(ids, 1):
        await _answered(ctx, conn, rid, "pipelined request %d of %d" % (n, len(ids)))
    return None


@check("framing.optional_headers", "§2", "framing row \"no Content-Type, no Accept\": a POST without them is "
                                         "served", rule=RECOMMENDED)
async def check_optional_headers(ctx: CheckContext) -> Optional[str]:
    sid, conn, rid, body = await _ping_by_hand(ctx)
    await conn.send(_head_bytes(ctx, sid, [("Content-Length", str(len(body)))], drop=("content-type", "accept"))
                    + body)
    await _answered(ctx, conn, rid, "a ping without Content-Type and Accept")
    return None
