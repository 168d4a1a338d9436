"""Session lifetime (PROTOCOL.md §3, §7): idle expiry of abandoned sessions, never while a
GET stream or a request is open; shutdown with live sessions."""
from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, List

import pytest

from ide_wire import cli_for, make_server, run, tool_json, until
import platforms


def _far(server: Any) -> float:
    return time.monotonic() + server.limits.idle_timeout + 1


def test_idle_expiry_spares_streams_and_running_requests(tmp_path) -> None:
    async def main() -> None:
        events: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None, idle_timeout=3600,
                               on_session=lambda ev, info: events.append((ev, info["id"], info.get("reason")))) as server:
            streaming, working, idle = cli_for(server), cli_for(server), cli_for(server)
            for cli in (streaming, working, idle):
                await cli.handshake(probes=0)
            _, stream_conn = await streaming.open_stream()
            blocked = asyncio.ensure_future(working.call_tool("open_diff", {
                "original_file_path": str(tmp_path / "a"), "new_file_contents": "x", "tab_name": "t"}))
            await until(lambda: server.stats()["streams"] == 1 and server.stats()["running_requests"] == 1,
                        what="stream and request open")
            # Not yet idle for long enough: nothing expires.
            assert server.expire_idle_sessions() == 0
            # Far in the future: only the session with neither a stream nor a request.
            assert server.expire_idle_sessions(now=_far(server)) == 1
            ids = {s["id"] for s in server.sessions}
            assert ids == {streaming.session_id, working.session_id}
            assert ("disconnected", idle.session_id, "idle") in events
            # Its id is gone: 404 now.
            assert (await idle.send_request("ping")).status == 404
            # Both busy sessions survive repeated reaping.
            for _ in range(3):
                assert server.expire_idle_sessions(now=_far(server)) == 0
            # The stream closes: then that session may expire; the request still runs.
            stream_conn.abort()
            await until(lambda: server.stats()["streams"] == 0, what="stream gone")
            assert server.expire_idle_sessions(now=_far(server)) == 1
            assert {s["id"] for s in server.sessions} == {working.session_id}
            assert not blocked.done()
            server.resolve_diff("t", accept=True)
            assert tool_json(await blocked)["result"] == "SAVED"
            assert server.expire_idle_sessions(now=_far(server)) == 1
            assert server.stats()["sessions"] == 0
            for cli in (streaming, working, idle):
                cli.close()
    run(main())


def test_reaper_expires_abandoned_sessions(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, idle_timeout=0.2) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            _, stream = await cli.open_stream()
            await until(lambda: server.stats()["streams"] == 1, what="stream open")
            await asyncio.sleep(0.5)  # longer than idle_timeout: the stream keeps it alive
            assert server.stats()["sessions"] == 1
            cli.abort()
            await until(lambda: server.stats()["sessions"] == 0, what="session reaped")
            assert server.stats()["connections"] == 0
    run(main())


def test_stop_ends_sessions_resolves_diffs_removes_lock(tmp_path) -> None:
    async def main() -> None:
        closed: List[Any] = []
        server = make_server(tmp_path, on_diff=lambda d: None, on_diff_closed=lambda d, a: closed.append(a))
        await server.start()
        lock, sock = server.lock_path, server.socket_path
        assert lock and os.path.exists(lock) and os.path.exists(sock)
        cli = cli_for(server)
        await cli.handshake(probes=0)
        _, stream = await cli.open_stream()
        blocked = asyncio.ensure_future(cli.send_request("tools/call", {"name": "open_diff", "arguments": {
            "original_file_path": str(tmp_path / "a"), "new_file_contents": "x", "tab_name": "t"}}))
        await until(lambda: server.stats()["pending_diffs"] == 1, what="diff pending")
        await server.stop()
        assert [a["trigger"] for a in closed] == ["client_disconnected"]
        assert not os.path.exists(lock) and not os.path.exists(sock)
        assert platforms.WINDOWS or not os.path.exists(os.path.dirname(sock))  # a socket's private directory
        assert server.stats()["sessions"] == 0 and server.stats()["connections"] == 0
        assert server.stats()["connection_tasks"] == 0
        # The client sees its stream and request end (or the connection close).
        assert await stream.next_sse() is None
        await blocked
        await server.stop()  # idempotent
        cli.close()
    run(main())


def test_a_session_made_while_the_server_stops_does_not_outlive_the_stop(tmp_path) -> None:
    """The stop ends every session, then lets the answers it caused go out before it
    closes the connections; a client's `initialize` read meanwhile made a session that
    outlived `stop()`: in `sessions` after it, ended by an orphan timer later (its
    `on_session` "disconnected" after the stop, on a loop the server no longer owns; a
    restart within the timer served a session of the last run). The stop ends it too."""
    async def main() -> None:
        events: List[Any] = []
        late = None

        def on_session(event: str, info: Any) -> None:
            events.append((event, info.get("reason")))
            if (event, info.get("reason")) == ("disconnected", "server stopped") and late is not None:
                # The first session's end: another client's initialize arrives now.
                late.send_raw(late_cli.encode("POST", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                       "params": {"protocolVersion": "2025-06-18",
                                                                  "capabilities": {}, "clientInfo": {
                                                                      "name": "late", "version": "1"}}}))

        server = make_server(tmp_path, on_session=on_session, orphan_timeout=0.05)
        await server.start()
        cli = cli_for(server)
        await cli.handshake(probes=0)
        _, stream = await cli.open_stream()  # (its answer is still being written when the stop begins)
        late_cli = cli_for(server)
        late = await late_cli.new_conn()
        await server.stop()
        assert ("connected", None) in events[1:]  # the late session was made during the stop ...
        assert server.stats()["sessions"] == 0  # ... and ended by it
        ended = len(events)
        await asyncio.sleep(0.3)  # past the orphan timeout
        assert events[ended:] == []  # nothing is reported after the stop
        cli.close()
        late_cli.close()
    run(main())


def test_many_sessions_at_once_are_independent(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=0) as server:
            clis = [cli_for(server) for _ in range(20)]
            await asyncio.gather(*(c.handshake(probes=1) for c in clis))
            streams = await asyncio.gather(*(c.open_stream() for c in clis))
            await until(lambda: server.stats()["streams"] == 20, what="20 streams")
            names = await asyncio.gather(*(c.call_tool("update_session_name", {"name": "n%d" % i})
                                           for i, c in enumerate(clis)))
            assert all(tool_json(n) == {"success": True} for n in names)
            assert sorted(s["name"] for s in server.sessions) == sorted("n%d" % i for i in range(20))
            assert server.add_file_reference(str(tmp_path / "x")) == 20
            msgs = await asyncio.gather(*(conn.next_notification() for _, conn in streams))
            assert all(m["method"] == "add_file_reference" for m in msgs)
            replies = await asyncio.gather(*(c.delete() for c in clis))
            assert all(r.status == 200 for r in replies)
            ends = await asyncio.gather(*(conn.next_sse() for _, conn in streams))
            assert ends == [None] * 20
            assert server.stats()["sessions"] == 0 and server.stats()["streams"] == 0
            for c in clis:
                c.close()
    run(main())


def test_session_ends_soon_after_its_client_vanishes(tmp_path) -> None:
    """PROTOCOL.md §3, "When a session ends": once every connection that carried the
    session's requests or its stream is closed (a CLI killed with SIGKILL), the session
    ends within the bound and its pending diff is answered; no idle timeout needed."""
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None, idle_timeout=3600,
                               on_diff_closed=lambda d, a: closed.append(a)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            sid = cli.session_id
            await cli.open_stream()
            blocked = asyncio.ensure_future(cli.call_tool("open_diff", {
                "original_file_path": str(tmp_path / "a"), "new_file_contents": "x", "tab_name": "t"}))
            await until(lambda: server.stats()["pending_diffs"] == 1, what="diff pending")
            cli.abort()  # every connection of that client gone at once
            await until(lambda: server.stats()["sessions"] == 0, what="the vanished client's session ended")
            assert server.stats()["pending_diffs"] == 0 and len(closed) == 1
            blocked.cancel()  # (its connection was aborted: no answer reaches it)
            # Its id is unknown now: 404, on a fresh connection of another client.
            other = cli_for(server)
            other.session_id = sid
            assert (await other.send_request("ping")).status == 404
            other.close()
    run(main())


def test_session_lives_while_one_carrying_connection_is_open(tmp_path) -> None:
    """The stream's connection closes, but a pooled connection that carried a request
    stays open: the client has not vanished, the session goes on (PROTOCOL.md §3)."""
    async def main() -> None:
        async with make_server(tmp_path, idle_timeout=3600, orphan_timeout=0.05) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            _, stream = await cli.open_stream()
            assert await cli.request("ping") == {}
            stream.abort()
            await until(lambda: server.stats()["streams"] == 0, what="stream gone")
            await asyncio.sleep(0.3)  # several times the bound: it would have ended by now
            assert server.stats()["sessions"] == 1
            assert await cli.request("ping") == {}
            cli.close()
    run(main())


def test_a_session_whose_idle_connection_the_server_closed_is_not_abandoned(tmp_path) -> None:
    """The server closes a pooled connection idle between requests (its own limit, not
    the client leaving): that is no vanished client, so the session outlives the
    orphan bound and answers on the client's next connection (PROTOCOL.md §3)."""
    async def main() -> None:
        async with make_server(tmp_path, idle_timeout=3600, orphan_timeout=0.05,
                               connection_idle_timeout=0.2) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            await until(lambda: server.stats()["connections"] == 0, what="the idle connections closed by the server")
            await asyncio.sleep(0.5)  # ten times the orphan bound
            assert server.stats()["sessions"] == 1
            assert await cli.request("ping", conn=await cli.new_conn()) == {}  # as a pool reconnects
            cli.close()
    run(main())


_KILLED_CLIENT = r'''
import json, socket, sys, time
path, nonce, original = sys.argv[1:4]
def post(sock, body, sid=None):
    data = json.dumps(body).encode()
    head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Nonce %s\r\n" % nonce
    head += "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    if sid:
        head += "mcp-session-id: %s\r\n" % sid
    sock.sendall((head + "Content-Length: %d\r\n\r\n" % len(data)).encode() + data)
def head_of(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    return data
first = socket.socket(socket.AF_UNIX)
first.connect(path)
post(first, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
sid = [l.split(b":", 1)[1].strip().decode() for l in head_of(first).split(b"\r\n")
       if l.lower().startswith(b"mcp-session-id:")][0]
stream = socket.socket(socket.AF_UNIX)
stream.connect(path)
stream.sendall(("GET /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Nonce %s\r\n"
                "Accept: text/event-stream\r\nmcp-session-id: %s\r\n\r\n" % (nonce, sid)).encode())
head_of(stream)
diff = socket.socket(socket.AF_UNIX)
diff.connect(path)
post(diff, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "open_diff", "arguments": {
    "original_file_path": original, "new_file_contents": "x", "tab_name": "t"}}}, sid)
print(sid, flush=True)
time.sleep(3600)
'''


@pytest.mark.skipif(sys.platform == "win32", reason="the client script speaks over a Unix socket")
def test_session_of_a_killed_client_process_ends(tmp_path) -> None:
    """A real client process killed (SIGKILL: no DELETE, no FIN of its own choosing)
    during an open_diff: its session ends soon and the diff is answered
    client_disconnected (PROTOCOL.md §2, "When a session ends"; §4)."""
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None, idle_timeout=3600,
                               on_diff_closed=lambda d, a: closed.append(a)) as server:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _KILLED_CLIENT, server.socket_path, server.nonce, str(tmp_path / "a"),
                stdout=asyncio.subprocess.PIPE)
            try:
                assert proc.stdout is not None
                sid = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
                assert sid in server.app.sessions
                await until(lambda: server.stats()["pending_diffs"] == 1, what="diff pending")
            finally:
                proc.kill()
                await proc.wait()
            await until(lambda: server.stats()["sessions"] == 0, what="the killed client's session ended")
            assert [a["trigger"] for a in closed] == ["client_disconnected"]
    run(main())
