"""The IDE server's HTTP layer over a real Unix socket (PROTOCOL.md §2, §7): every status
code, keep-alive, probes, and bad input that must never take the server down."""
from __future__ import annotations

import asyncio
import json
from typing import Any, List

import pytest

from ide_protocol.wire import http11
import ide_wire
import platforms
from ide_wire import Cli, Conn, chunked, cli_for, head, make_server, run, until


async def raw_exchange(path: str, data: bytes, method: str = "POST") -> Any:
    """Send raw bytes on a new connection, read one response."""
    conn = await Conn.open(path)
    conn.send_raw(data, expect=method)
    try:
        return await conn.read_reply(), conn
    except EOFError:
        return None, conn


async def still_works(server: Any) -> None:
    """A fresh well-formed exchange on a new connection succeeds."""
    cli = cli_for(server)
    await cli.handshake(probes=0)
    assert await cli.request("ping") == {}
    assert (await cli.delete()).status == 200
    cli.close()


def test_probe_connections_are_harmless(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            for _ in range(5):
                reader, writer = await ide_wire.open_connection(server.socket_path)
                writer.close()
            # The server notices each probe and lets go of it. (A pipe's server may never
            # accept a probe that is gone at once: nothing to count there.)
            if not platforms.WINDOWS:
                await until(lambda: server.stats()["accepted_connections"] >= 5, what="probes accepted")
            await until(lambda: server.stats()["connections"] == 0, what="probes released")
            await still_works(server)
    run(main())


def test_capture_like_session_statuses_and_headers(tmp_path) -> None:
    """The capture's exchange: discover error, initialize as SSE, 202, GET stream,
    tools/list on another connection at the same time, DELETE, second handshake."""
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.probe(2)
            discover = await cli.send_request("server/discover", {"_meta": {}})
            # PROTOCOL.md §3: an error, never 401, never success.
            assert discover.status in (200, 404)
            assert discover.message["id"] == 0
            assert discover.message["error"]["code"] in (-32601, -32001)
            init = await cli.send_request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                        "clientInfo": {"name": "copilot-cli", "version": "1.0.102"}})
            assert init.status == 200
            assert init.headers.get("content-type") == "text/event-stream"
            assert init.headers.get("cache-control") == "no-cache"
            assert init.headers.get("transfer-encoding") == "chunked"
            assert init.headers.get("content-length") is None
            sid = init.headers.get("mcp-session-id")
            # VS Code reuses X-Copilot-Session-Id (PROTOCOL.md §3)
            assert sid == cli.client_session_id
            assert [e.event for e in init.events] == ["message"]
            assert all(e.id is None for e in init.events)
            assert init.message == {"jsonrpc": "2.0", "id": 1, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "vscode-copilot-cli", "version": "0.0.1", "title": "VS Code Copilot CLI"}}}
            cli.session_id = sid
            first_conn = cli.pool[0]
            initialized = await cli.notify("notifications/initialized")
            assert initialized.status == 202
            assert initialized.headers.get("content-type", "").startswith("text/plain")
            assert initialized.body == b""
            assert len(cli.pool) == 1  # every request so far on the same kept-alive connection

            # GET on the same connection, tools/list on another one, at once.
            get = asyncio.ensure_future(cli.open_stream(first_conn))
            tools_list = asyncio.ensure_future(cli.send_request("tools/list", {"_meta": {"progressToken": 0}}))
            (stream_head, stream_conn), listed = await asyncio.gather(get, tools_list)
            assert stream_conn is first_conn
            assert stream_head.status == 200
            assert stream_head.headers.get("content-type") == "text/event-stream"
            assert stream_head.headers.get("cache-control") == "no-cache, no-transform"
            assert stream_head.headers.get("connection") == "keep-alive"
            assert stream_head.headers.get("mcp-session-id") == sid
            assert listed.status == 200 and len(listed.message["result"]["tools"]) == 6
            assert len(cli.pool) == 2
            await until(lambda: server.stats()["streams"] == 1, what="stream registered")

            # DELETE on the second connection ends the stream on the first (last chunk).
            deleted = await cli.delete()
            assert deleted.status == 200 and deleted.body == b""
            assert await stream_conn.next_sse() is None
            assert not stream_conn.eof  # ended with 0\r\n\r\n, connection kept open
            cli.stream_done(stream_conn)

            # Second handshake (trust reload), same X-Copilot-Session-Id, on the pooled
            # connections — including the one whose stream the server just ended.
            await cli.handshake(probes=1)
            assert cli.session_id == sid
            (stream_head, stream_conn2) = await cli.open_stream(stream_conn)
            assert stream_head.status == 200
            assert stream_conn2 is stream_conn
            assert await cli.request("ping") == {}
            assert (await cli.delete()).status == 200
            assert await stream_conn.next_sse() is None
            # A second DELETE is a harmless 404.
            second = await cli.delete()
            assert second.status == 404
            assert server.stats()["sessions"] == 0
            cli.close()
    run(main())


def test_request_on_connection_whose_sse_response_ended(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()
            for _ in range(5):
                reply, used = await cli.exchange("POST", {"jsonrpc": "2.0", "id": cli.new_id(), "method": "ping"},
                                                 conn=conn)
                assert reply.status == 200 and reply.complete
                assert reply.headers.get("content-type") == "text/event-stream"
                assert reply.message["result"] == {}
                assert used is conn and not conn.eof
            cli.close()
    run(main())


def test_json_response_option(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, json_response=True) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            reply = await cli.send_request("ping")
            assert reply.status == 200
            assert reply.headers.get("content-type") == "application/json"
            assert reply.headers.get("content-length") == str(len(reply.body))
            assert reply.message == {"jsonrpc": "2.0", "id": reply.message["id"], "result": {}}
            assert (await cli.notify("notifications/initialized")).status == 202
            cli.close()
    run(main())


def test_auth_origin_path_method_statuses(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            good = cli_for(server)
            await good.handshake(probes=0)
            ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}

            for auth in (None, "Nonce wrong", "Nonce " + server.nonce[:-1], "Bearer " + server.nonce, ""):
                bad = Cli(server.socket_path, auth=auth, client_session_id=good.client_session_id)
                bad.session_id = good.session_id
                for method, body in (("POST", ping), ("GET", None), ("DELETE", None)):
                    reply, _ = await bad.exchange(method, body)
                    assert reply.status == 401, (auth, method, reply)
                    assert reply.headers.get("content-type", "").startswith("text/plain")
                    assert reply.body == b"Unauthorized"
                bad.close()
            # The session survived the unauthorised DELETEs.
            assert server.stats()["sessions"] == 1

            reply, _ = await good.exchange("POST", ping, extra=[("Origin", "http://evil.example")])
            assert reply.status == 403
            bad = Cli(server.socket_path, auth=None)
            reply, _ = await bad.exchange("POST", ping, extra=[("Origin", "null")])
            assert reply.status == 403
            bad.close()

            for target in ("/other", "/mcp/x", "/mcpx", "/api/mcp"):
                reply, _ = await good.exchange("POST", ping, target=target)
                assert reply.status == 404, target
            # "/" is accepted as well as /mcp, with a query string too.
            for target in ("/", "/mcp?x=1"):
                reply, _ = await good.exchange("POST", dict(ping, id=8), target=target)
                assert reply.status == 200 and reply.message["result"] == {}, target

            for method in ("PUT", "PATCH", "HEAD", "OPTIONS"):
                conn = await good.new_conn()
                headers = good.headers("GET")
                if method in ("PUT", "PATCH"):
                    data = head(method, "/mcp", headers + [("Content-Length", "2")]) + b"{}"
                else:
                    data = head(method, "/mcp", headers)
                conn.send_raw(data, expect=method)
                reply = await conn.read_reply()
                assert reply.status == 405, method
                allow = [m.strip() for m in reply.headers.get("allow", "").split(",")]
                assert sorted(allow) == ["DELETE", "GET", "POST"], reply
            good.close()
            await still_works(server)
    run(main())


def test_session_statuses(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            # A non-initialize request without mcp-session-id: 400.
            reply = await cli.send_request("tools/list")
            assert reply.status == 400
            assert reply.message["error"]["code"] < 0
            reply, _ = await cli.exchange("GET")
            assert reply.status == 400
            reply, _ = await cli.exchange("DELETE")
            assert reply.status == 400
            # An unknown session id: 404 for POST, GET, DELETE.
            cli.session_id = "no-such-session"
            assert (await cli.send_request("tools/list")).status == 404
            assert (await cli.notify("notifications/initialized")).status == 404
            assert (await cli.exchange("GET"))[0].status == 404
            assert (await cli.delete()).status == 404

            await cli.handshake(probes=0)
            # Batch: 400.
            batch = [{"jsonrpc": "2.0", "id": 50, "method": "ping"}, {"jsonrpc": "2.0", "id": 51, "method": "ping"}]
            reply = await cli.post(batch)
            assert reply.status == 400
            # Unparsable JSON: 400 with -32700.
            for body in (b"{not json", b"", b"\xff\xfe", b"[1,", b'{"jsonrpc":"2.0","id":1,"method":"ping"'):
                reply = await cli.post(body)
                assert reply.status == 400, body
                assert reply.message["error"]["code"] == -32700, (body, reply)
            # Valid JSON that is no JSON-RPC message: 400 with an error object.
            for obj in ({}, {"jsonrpc": "1.0", "id": 1, "method": "ping"}, 42, "x", None,
                        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}):
                reply = await cli.post(json.dumps(obj).encode())
                assert reply.status == 400, obj
                assert "error" in reply.message
            # A client's JSON-RPC response (no method): 202.
            reply = await cli.post({"jsonrpc": "2.0", "id": 99, "result": {}})
            assert reply.status == 202
            # Unknown notification: 202 as well.
            assert (await cli.notify("notifications/whatever", {"x": 1})).status == 202
            # Unknown method: -32601; ping: {}.
            reply = await cli.send_request("no/such/method", {})
            assert reply.status == 200 and reply.message["error"]["code"] == -32601
            assert await cli.request("ping") == {}
            # A supported mcp-protocol-version header is fine, an unsupported one 400.
            reply = await cli.send_request("ping", extra=[("mcp-protocol-version", "2025-06-18")])
            assert reply.status == 200
            reply = await cli.send_request("ping", extra=[("mcp-protocol-version", "1999-01-01")])
            assert reply.status == 400
            # A GET that does not accept SSE is refused.
            conn = await cli.new_conn()
            conn.send_raw(head("GET", "/mcp", cli.headers("GET", accept="application/json")), expect="GET")
            assert (await conn.read_reply()).status == 406
            cli.close()
            await still_works(server)
    run(main())


def test_initialize_versions_and_409(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            for asked, answered in (("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                                    ("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
                                    ("2099-01-01", "2025-11-25"), ("2026-07-28", "2025-11-25")):
                cli = cli_for(server)
                result = await cli.handshake(probes=0, version=asked)
                assert result["protocolVersion"] == answered
                assert (await cli.delete()).status == 200
                cli.close()

            # Reusing an X-Copilot-Session-Id whose session has its GET stream open: 409.
            first = cli_for(server, client_session_id="shared-id")
            await first.handshake(probes=0)
            head_, stream = await first.open_stream()
            assert head_.status == 200
            await until(lambda: server.stats()["streams"] == 1, what="stream open")
            second = cli_for(server, client_session_id="shared-id")
            reply = await second.send_request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
            assert reply.status == 409
            # The CLI recognises VS Code's words and, connecting by itself, then shows no
            # "Failed to connect to IDE" (PROTOCOL.md §2's errors table).
            assert "A connection for this session already exists" in reply.message["error"]["message"]
            # A second GET stream for the same session: 409 too.
            second.session_id = first.session_id
            reply, _ = await second.exchange("GET")
            assert reply.status == 409
            # The first session is untouched.
            assert await first.request("ping") == {}
            # Once its stream is gone, the stale session may be taken over.
            stream.abort()
            await until(lambda: server.stats()["streams"] == 0, what="stream closed")
            result = await second.handshake(probes=0)
            assert second.session_id == "shared-id"
            assert result["protocolVersion"] == "2025-11-25"
            assert server.stats()["sessions"] == 1
            first.close()
            second.close()
    run(main())


# ----------------------------------------------------------------- HTTP-level errors


def _cli_head(server: Any, method: str = "POST", extra: Any = ()) -> List[Any]:
    return Cli(server.socket_path, server.nonce).headers(method, extra=extra)


@pytest.mark.parametrize("name", ["bad-request-line", "bad-header", "broken-chunk-size", "chunk-too-long",
                                  "both-lengths", "bad-length", "header-too-big", "http2", "http-2.0",
                                  "gzip", "too-big-length", "too-big-chunks"])
def test_http_parse_errors_reach_the_client(tmp_path, name: str) -> None:
    async def main() -> None:
        async with make_server(tmp_path, max_body=1024 * 1024) as server:
            ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            h = _cli_head(server)
            no_te = [p for p in h if p[0] != "Transfer-Encoding"]
            cases = {
                "bad-request-line": (b"NONSENSE\r\n\r\n", 400),
                "bad-header": (head("POST", "/mcp", h) .replace(b"Host: localhost", b"Host localhost") + chunked(ping), 400),
                "broken-chunk-size": (head("POST", "/mcp", h) + b"zz\r\n" + ping + b"\r\n0\r\n\r\n", 400),
                "chunk-too-long": (head("POST", "/mcp", h) + b"5\r\n" + ping + b"\r\n0\r\n\r\n", 400),
                "both-lengths": (head("POST", "/mcp", h + [("Content-Length", str(len(ping)))]) + chunked(ping), 400),
                "bad-length": (head("POST", "/mcp", no_te + [("Content-Length", "-5")]) + ping, 400),
                "header-too-big": (head("POST", "/mcp", h + [("X-Big", "a" * 70000)]) + chunked(ping), 431),
                "http2": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
                "http-2.0": (head("POST", "/mcp", h).replace(b"HTTP/1.1", b"HTTP/2.0", 1) + chunked(ping), 505),
                "gzip": (head("POST", "/mcp", no_te + [("Transfer-Encoding", "gzip, chunked")]) + chunked(ping), 501),
                "too-big-length": (head("POST", "/mcp", no_te + [("Content-Length", str(10 ** 12))]), 413),
                "too-big-chunks": (head("POST", "/mcp", h) + (b"10000\r\n" + b"x" * 0x10000 + b"\r\n") * 17, 413),
            }
            data, status = cases[name]
            reply, conn = await raw_exchange(server.socket_path, data)
            assert reply is not None, "no response at all"
            assert reply.status == status, reply
            assert reply.headers.get("connection") == "close"
            # The server closes the connection after a parse error.
            assert await conn.wait_closed()
            conn.close()
            await until(lambda: server.stats()["connections"] == 0, what="connection released")
            await still_works(server)
    run(main())


def test_huge_body_accepted(tmp_path) -> None:
    """open_diff carries a whole file: at least 10 MB must go through (PROTOCOL.md §2)."""
    async def main() -> None:
        seen: List[int] = []

        def on_diff(diff: Any) -> bool:
            seen.append(len(diff.new_file_contents))
            return True

        async with make_server(tmp_path, on_diff=on_diff) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            contents = "0123456789abcdef" * (11 * 1024 * 1024 // 16)
            result = await cli.call_tool("open_diff", {"original_file_path": str(tmp_path / "big.txt"),
                                                       "new_file_contents": contents, "tab_name": "big"})
            assert json.loads(result["content"][0]["text"])["result"] == "SAVED"
            assert seen == [len(contents)]
            cli.close()
    run(main())


def test_content_length_posts_accepted(tmp_path) -> None:
    """Other clients send Content-Length instead of chunked: accept both."""
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            body = b'{"jsonrpc":"2.0","id":5,"method":"ping"}'
            h = [p for p in cli.headers("POST") if p[0] != "Transfer-Encoding"] + [("Content-Length", str(len(body)))]
            conn = await cli.new_conn()
            conn.send_raw(head("POST", "/mcp", h) + body, expect="POST")
            reply = await conn.read_reply()
            assert reply.status == 200 and reply.message == {"jsonrpc": "2.0", "id": 5, "result": {}}
            # Pipelined: two requests in one write, answered in order.
            two = (head("POST", "/mcp", cli.headers("POST")) + chunked(b'{"jsonrpc":"2.0","id":6,"method":"ping"}')
                   + head("POST", "/mcp", cli.headers("POST")) + chunked(b'{"jsonrpc":"2.0","id":7,"method":"ping"}'))
            conn.send_raw(two)
            conn.parser.expect("POST")
            conn.parser.expect("POST")
            assert (await conn.read_reply()).message["id"] == 6
            assert (await conn.read_reply()).message["id"] == 7
            cli.close()
    run(main())


def test_slow_peer_times_out(tmp_path) -> None:
    """A partial request must not hold a connection forever: 408, then closed."""
    async def main() -> None:
        async with make_server(tmp_path, request_timeout=0.3) as server:
            h = _cli_head(server)
            for partial in (b"POST /mcp HTTP/1.1\r\nHost: loc", head("POST", "/mcp", h) + b"40\r\n{\"jsonrpc\""):
                conn = await Conn.open(server.socket_path)
                conn.send_raw(partial, expect="POST")
                reply = await conn.read_reply()
                assert reply.status == 408
                assert await conn.wait_closed()
                conn.close()
            # An idle keep-alive connection (nothing partial) is not timed out: it still
            # serves a request after more than request_timeout.
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = cli.pool[0]
            await asyncio.sleep(0.6)
            assert not conn.eof
            reply, used = await cli.exchange("POST", {"jsonrpc": "2.0", "id": 9, "method": "ping"}, conn=conn)
            assert reply.status == 200 and used is conn
            cli.close()
            await still_works(server)
    run(main())


def test_vanishing_peers_and_garbage(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            h = _cli_head(server)
            ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            garbage = [b"\x00" * 100, b"\r\n" * 50, bytes(range(256)) * 4, b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5,
                       head("POST", "/mcp", h) + b"ff\r\n" + ping[:10],  # then vanish mid-body
                       head("POST", "/mcp", h)[:30]]
            for data in garbage:
                for vanish in (False, True):
                    conn = await Conn.open(server.socket_path)
                    conn.send_raw(data)
                    await conn.writer.drain()
                    if vanish or not conn.writer.can_write_eof():  # (a named pipe has no half-close)
                        conn.abort()
                    else:
                        conn.writer.write_eof()
                        try:
                            await conn.wait_closed()
                        except EOFError:
                            pass
                        conn.close()
            await until(lambda: server.stats()["connections"] == 0, what="connections released")
            # Wrong params and odd requests inside a session.
            cli = cli_for(server)
            await cli.handshake(probes=0)
            for params in ([1, 2], {"name": 5}, {"name": "get_selection", "arguments": [1]}, None):
                reply = await cli.send_request("tools/call", params)
                assert reply.status == 200
                msg = reply.message
                assert "error" in msg or msg["result"].get("isError") is True, (params, msg)
            for params in ("x", 5):  # not a JSON-RPC message at all (params must be structured)
                reply = await cli.send_request("tools/call", params)
                assert reply.status == 400 and reply.message["error"]["code"] == -32600
            assert (await cli.send_request("initialize", {"protocolVersion": 5})).status == 200
            assert (await cli.notify("notifications/cancelled", ["bad"])).status == 202
            assert (await cli.notify("notifications/cancelled", {"requestId": 12345})).status == 202
            cli.close()
            await still_works(server)
    run(main())


def test_head_405_has_no_body_and_connection_stays_usable(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()
            conn.send_raw(head("HEAD", "/mcp", cli.headers("GET")), expect="HEAD")
            reply = await conn.read_reply()
            assert reply.status == 405 and reply.body == b""
            # The next request on the same connection parses cleanly.
            reply, used = await cli.exchange("POST", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, conn=conn)
            assert used is conn and reply.status == 200 and reply.message == {"jsonrpc": "2.0", "id": 3, "result": {}}
            cli.close()
    run(main())


def test_connection_close_request_header(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()
            h = [(k, "close" if k == "Connection" else v) for k, v in cli.headers("POST")]
            conn.send_raw(head("POST", "/mcp", h) + chunked(b'{"jsonrpc":"2.0","id":4,"method":"ping"}'),
                          expect="POST")
            reply = await conn.read_reply()
            assert reply.status == 200 and reply.message["result"] == {}
            assert reply.headers.get("connection") == "close"
            assert await conn.wait_closed()
            cli.close()
    run(main())


def test_stream_reader_that_never_reads_is_dropped(tmp_path) -> None:
    """Pushes to a GET stream whose peer stopped reading must not pile up without
    bound: past the transport's limit the connection is dropped."""
    async def main() -> None:
        from ide_protocol.server import transport

        async with make_server(tmp_path, debounce=0) as server:
            stuck = cli_for(server)
            await stuck.handshake(probes=0)
            _, stuck_conn = await stuck.open_stream()
            await until(lambda: server.stats()["streams"] == 1, what="stream open")
            text = "x" * (1024 * 1024)
            pushes = 0
            while server.stats()["streams"] == 1:
                server.add_selection(str(tmp_path / "f"), (0, 0), (0, 1), text)
                pushes += 1
                assert pushes * len(text) < 4 * transport.MAX_WRITE_BUFFER + 64 * 1024 * 1024, "never dropped"
                await asyncio.sleep(0)
            await until(lambda: server.stats()["connections"] == 0, what="stuck connection dropped")
            assert server.stats()["sessions"] == 1  # the session itself is not ended
            stuck.close()
            await still_works(server)
    run(main())
