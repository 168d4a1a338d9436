"""IdeClient against our IdeServer: discovery, handshake, every tool, every push, the
end of a session, and servers that vanish or hang (clear errors, never a hang)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any, Awaitable, Callable, List, Optional

import pytest

from ide_protocol import client as client_mod
from ide_protocol.wire import jsonrpc
from ide_protocol.common import lockfile, tools
from ide_protocol.client import (ClientConnection, HttpStatusError, IdeClient, IdeTimeout, NoIdeFound, Push,
                                 ServerGone)
from ide_protocol.server.ide_server import IdeServer
from ide_protocol.common.tools import Diagnostic, Selection

import platforms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120  # a guard against hangs only (each program start takes seconds under Wine)


def run(coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(*args), LIMIT))


@pytest.fixture
def workspace(tmp_path: Any) -> Any:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.py").write_text("print('hi')\nx = 1\n")
    return tmp_path


def _server(tmp: Any, **kwargs: Any) -> IdeServer:
    return IdeServer([str(tmp / "project")], lock_dir=str(tmp / "ide"), ide_name="Test IDE", **kwargs)


def test_discovery_finds_the_folder_and_lists_the_others(workspace: Any) -> None:
    async def scenario() -> None:
        other_dir = workspace / "other"
        other_dir.mkdir()
        async with _server(workspace) as server, IdeServer([str(other_dir)], lock_dir=str(workspace / "ide")):
            lock = client_mod.discover(str(workspace / "project"), str(workspace / "ide"))
            assert lock.socket_path == server.socket_path
            assert lock.headers == server.headers
            if not platforms.WINDOWS:  # (Wine 8's realpath does not follow a symlink)
                # A symlink to the folder: the real path matches (PROTOCOL.md §1).
                link = workspace / "link"
                link.symlink_to(workspace / "project")
                assert client_mod.discover(str(link), str(workspace / "ide")).path == server.lock_path
            # A sub-folder does not match (no prefix matching); the others are listed.
            sub = workspace / "project" / "sub"
            sub.mkdir()
            with pytest.raises(NoIdeFound) as err:
                client_mod.discover(str(sub), str(workspace / "ide"))
            assert len(err.value.others) == 2
            assert "other IDE: Test IDE" in str(err.value)
            # A broken lock is skipped, with its reason.
            (workspace / "ide" / "broken.lock").write_text('{"socketPath": 1}')
            with pytest.raises(NoIdeFound) as err:
                client_mod.discover(str(sub), str(workspace / "ide"))
            assert any("socketPath" in reason for _, reason in err.value.rejected)

    run(scenario)


def test_handshake_every_tool_and_teardown(workspace: Any) -> None:
    path = str(workspace / "project" / "a.py")
    decisions: List[Any] = []

    async def on_diff(diff: Any) -> Optional[bool]:
        decisions.append(diff)
        return True if diff.tab_name == "accept me" else None

    async def scenario() -> None:
        seen: List[Push] = []
        async with _server(workspace, on_diff=on_diff) as server:
            client = IdeClient.discover(str(workspace / "project"), str(workspace / "ide"), timeout=10,
                                        on_push=seen.append)
            async with client:
                # Handshake as the CLI: discover refused, then a session.
                assert client.discover_error is not None and client.discover_error["code"] == jsonrpc.METHOD_NOT_FOUND
                assert client.session_id and client.session_id in server.app.sessions
                assert server.app.sessions[client.session_id].initialized
                assert [t["name"] for t in client.tools or []] == list(tools.TOOL_NAMES)
                assert client.server_info["name"] == "vscode-copilot-cli"

                assert await client.get_selection() is None
                server.set_selection(Selection(path, "print", (0, 0), (0, 5)))
                selection = await client.get_selection()
                assert selection["text"] == "print" and selection["current"] is True
                assert selection["selection"]["end"] == {"line": 0, "character": 5}

                assert await client.get_diagnostics() == []
                server.set_diagnostics(path, [Diagnostic("bad", "Warning", (1, 0), (1, 1))])
                diags = await client.get_diagnostics()
                assert diags[0]["filePath"] == platforms.wire_path(path) and diags[0]["diagnostics"][0]["severity"] == "Warning"
                assert await client.get_diagnostics(diags[0]["uri"]) == diags
                assert await client.get_diagnostics("file:///nowhere.py") == []

                info = await client.get_vscode_info()
                assert info["appName"] == "Test IDE" and info["sessionId"] == client.session_id

                assert await client.update_session_name("fix the bug") == {"success": True}
                assert server.app.sessions[client.session_id].name == "fix the bug"

                accepted = await client.open_diff(path, "new\n", "accept me")
                assert accepted["result"] == "SAVED" and accepted["trigger"] == tools.ACCEPTED_VIA_BUTTON
                with open(path) as f:
                    assert f.read() == "print('hi')\nx = 1\n"  # the IDE never writes (§4)

                # open_diff waits for the decision; close_diff on another connection ends it.
                pending = asyncio.ensure_future(client.open_diff(path, "other\n", "close me"))
                while not server.pending_diffs():
                    await asyncio.sleep(0.01)
                closed = await client.close_diff("close me")
                assert closed["already_closed"] is False
                answer = await pending
                assert answer["result"] == "REJECTED" and answer["trigger"] == tools.CLOSED_VIA_TOOL
                assert (await client.close_diff("close me"))["already_closed"] is True

                assert await client.ping() == {}
                with pytest.raises(jsonrpc.JsonRpcError) as err:
                    await client.request("no/such/method")
                assert err.value.code == jsonrpc.METHOD_NOT_FOUND
                with pytest.raises(tools.ToolError):
                    await client.call_tool_json("no_such_tool")
                # Keep-alive: a handful of connections served all of that.
                assert client.connections_opened <= 4
                sid = client.session_id
            assert sid not in server.app.sessions  # DELETE ended it
            assert client.stream_ended and client.stream_error is None
            assert server.stats()["streams"] == 0

    run(scenario)


def test_every_push_is_delivered(workspace: Any) -> None:
    path = str(workspace / "project" / "a.py")

    async def scenario() -> None:
        callback: List[Push] = []
        async with _server(workspace, debounce=0.01) as server:
            server.set_selection(Selection(path, "x", (1, 0), (1, 1)))
            server.flush_pushes()
            async with IdeClient.discover(str(workspace / "project"), str(workspace / "ide"), timeout=10,
                                          on_push=callback.append) as client:
                got: List[Push] = []

                async def collect() -> None:
                    async for push in client.pushes():
                        got.append(push)
                        if len(got) == 5:
                            return

                collector = asyncio.ensure_future(collect())
                await asyncio.sleep(0)
                # The stream opened with the current selection (§5): already in the callback.
                server.set_selection(Selection(path, "print", (0, 0), (0, 5)))
                server.flush_pushes()
                server.set_diagnostics(path, [Diagnostic("bad", "Error", (1, 0), (1, 1))])
                server.flush_pushes()
                server.add_file_reference(path)
                server.add_selection(path, (0, 0), (1, 1), "print('hi')\nx")
                server.add_file_reference(path, (1, 0), (1, 5), "x = 1")
                await collector
                assert [p.method for p in got] == ["selection_changed", "diagnostics_changed", "add_file_reference",
                                                   "add_selection", "add_file_reference"]
                assert got[0].params["text"] == "print" and got[0].params["selection"]["isEmpty"] is False
                assert got[1].params["uris"][0]["diagnostics"][0]["message"] == "bad"
                assert got[2].params["selection"] is None and got[2].params["selectedText"] is None
                assert got[3].params["selectedText"] == "print('hi')\nx"
                assert got[4].params["selection"]["end"] == {"line": 1, "character": 5}
                assert callback[0].method == "selection_changed" and callback[0].params["text"] == "x"
                assert [p.method for p in callback[1:]] == [p.method for p in got]
                # wait_push for a specific method
                queue = client.subscribe()
                server.add_selection(path, (0, 0), (0, 1), "p")
                push = await client.wait_push("add_selection", queue=queue)
                assert push.params["selectedText"] == "p"

    run(scenario)


def test_a_reconnect_follows_only_the_new_sessions_stream(workspace: Any) -> None:
    """`connect()` again (the CLI's reconnect, PROTOCOL.md §3) starts a new session and
    its stream: the old stream is no longer read, so its pushes are not handed out again
    and its end (here the old session deleted) does not end the new one's feed (before,
    the old stream's follower kept running: every push came twice, and its end marked the
    feed ended and put the end marker into the new subscribers' queues)."""
    path = str(workspace / "project" / "a.py")

    async def scenario() -> None:
        async with _server(workspace, debounce=0) as server:
            lock = client_mod.discover(str(workspace / "project"), str(workspace / "ide"))
            async with IdeClient(lock, timeout=10) as client:
                old_session = client.session_id
                queue = client.subscribe()  # made before connect(): it gets the new session's pushes
                client.client_session_id = "another-cli-session"  # (the same one is refused while its stream is open)
                await client.connect()
                assert client.session_id != old_session
                server.add_selection(path, (0, 0), (0, 1), "p1")
                old = IdeClient(lock, timeout=10)
                old.session_id = old_session
                assert await old.delete() == 200  # the server ends the old session's stream
                await old.close()
                for _ in range(200):
                    if server.stats()["streams"] == 1:
                        break
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.5)  # room for the old stream's end to reach the client
                server.add_selection(path, (0, 0), (0, 1), "p2")
                got = []
                while len(got) < 2:
                    item = await asyncio.wait_for(queue.get(), 10)
                    got.append(item if item is IdeClient.END else item.params["selectedText"])
                await asyncio.sleep(0.2)
                assert got == ["p1", "p2"] and queue.empty(), (got, queue.qsize())
                assert client.stream_ended is False and client.stream_error is None

    run(scenario)


def test_a_coroutine_on_push_is_run_and_ends_with_the_client(workspace: Any) -> None:
    """An async `on_push` runs as a task the client owns: close() cancels and awaits it,
    so nothing outlives the client."""
    async def scenario() -> None:
        started: List[str] = []
        cancelled: List[str] = []

        async def on_push(push: Push) -> None:
            started.append(push.method)
            try:
                await asyncio.Event().wait()  # a callback that never finishes by itself
            except asyncio.CancelledError:
                cancelled.append(push.method)
                raise

        path = str(workspace / "project" / "a.py")
        async with _server(workspace) as server:
            client = IdeClient.discover(str(workspace / "project"), str(workspace / "ide"), timeout=10,
                                        on_push=on_push)
            async with client:
                queue = client.subscribe()
                server.add_file_reference(path)
                await client.wait_push("add_file_reference", queue=queue)
                await asyncio.sleep(0)
                assert started == ["add_file_reference"] and cancelled == []
            assert cancelled == ["add_file_reference"]
            leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and
                         "on_push" in repr(t.get_coro())]
            assert leftovers == []

    run(scenario)


def test_server_disappearing_mid_stream_gives_a_clear_error(workspace: Any) -> None:
    async def scenario() -> None:
        server = _server(workspace)
        await server.start()
        client = IdeClient.discover(str(workspace / "project"), str(workspace / "ide"), timeout=5)
        await client.connect()
        try:
            iterator_error: List[BaseException] = []

            async def follow() -> None:
                try:
                    async for _ in client.pushes():
                        pass
                except ServerGone as exc:
                    iterator_error.append(exc)

            follower = asyncio.ensure_future(follow())
            await asyncio.sleep(0)
            pending = asyncio.ensure_future(client.open_diff(str(workspace / "project" / "a.py"), "x", "tab"))
            while not server.pending_diffs():
                await asyncio.sleep(0.01)
            await server.listener.close()  # the server goes away: sockets closed mid-stream
            await follower
            assert iterator_error and "closed connection" in str(iterator_error[0])
            with pytest.raises(ServerGone) as err:
                await pending
            assert "closed connection" in str(err.value)
            with pytest.raises(ServerGone):
                await client.wait_stream_end()
            with pytest.raises(ServerGone) as err:
                await client.get_selection()
            assert "cannot connect" in str(err.value)
        finally:
            await client.close()
            await server.stop()

    run(scenario)


@platforms.unix_sockets
def test_a_hanging_server_times_out_and_a_refusal_is_explained(tmp_path: Any) -> None:
    """A server that accepts and never answers: the configured timeout, no hang. A
    server that answers 401: HttpStatusError with the evidence."""

    async def scenario() -> None:
        sock = str(tmp_path / "s.sock")
        mode = {"answer": b""}
        connections: List[Any] = []

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(writer)
            await reader.read(65536)
            if mode["answer"]:
                writer.write(mode["answer"])
                await writer.drain()
            await reader.read(65536)

        listener = await asyncio.start_unix_server(handler, path=sock)
        try:
            lock = lockfile.LockInfo.new(sock, {"Authorization": "Nonce x"}, [str(tmp_path)], "Hang")
            client = IdeClient(lock, timeout=0.5)
            with pytest.raises(IdeTimeout) as err:
                await client.connect()
            assert "0.5 s" in str(err.value)
            await client.close()
            mode["answer"] = b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nUnauthorized"
            client = IdeClient(lock, timeout=5)
            with pytest.raises(HttpStatusError) as err2:
                await client.connect()
            assert err2.value.status == 401 and "Unauthorized" in str(err2.value)
            await client.close()
            # Half a response then the server closes: ServerGone, not a hang.
            mode["answer"] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nev"
            conn = await ClientConnection.open(sock)
            response = await conn.request("POST", "/mcp", [("Host", "localhost")], b"{}")
            for w in connections:
                w.close()
            with pytest.raises(ServerGone):
                await response.read_body(5)
            conn.close()
        finally:
            for w in connections:
                w.close()
            listener.close()

    run(scenario)


def test_a_reset_leaves_no_error_for_the_garbage_collector_to_print(tmp_path: Any, monkeypatch: Any) -> None:
    """A server that closes with our request unread resets the connection: the client
    says ServerGone, and takes the error asyncio also keeps in the stream's close
    future. Left there, the garbage collector prints it as "Future exception was never
    retrieved" when it finalises the future before the stream's protocol (one reference
    cycle, any order); that order is made certain here by turning the protocol's
    finaliser off."""
    import gc
    import socket
    import threading
    if platforms.WINDOWS:
        pytest.skip("a Unix socket's reset; Windows's named pipes have none")
    monkeypatch.setattr(asyncio.StreamReaderProtocol, "__del__", lambda self: None, raising=False)
    path = str(tmp_path / "s.sock")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(path)
    listening.listen(1)

    def serve() -> None:
        conn, _ = listening.accept()
        conn.recv(10)  # the rest of the request stays unread: closing now resets
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nev")
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reports: List[Any] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reports.append(context))
        conn = await ClientConnection.open(path)
        response = await conn.request("POST", "/mcp", [("Host", "localhost")], b"{}" * 5000)
        with pytest.raises(ServerGone) as err:
            await response.read_body(5)
        if sys.platform.startswith("linux"):  # (where closing with unread data resets)
            assert "reset" in str(err.value).lower()
        conn.close()

    try:
        run(scenario)
    finally:
        thread.join(10)
        listening.close()
    gc.collect()  # (the loop is gone: what it still held is collected now)
    assert not reports, [context.get("message") for context in reports]


def test_wire_bytes_match_the_cli(workspace: Any) -> None:
    """Header order and case as in the capture of the real CLI (PROTOCOL.md §2)."""

    async def scenario() -> None:
        sent: List[bytes] = []
        async with _server(workspace) as server:
            client = IdeClient.discover(str(workspace / "project"), str(workspace / "ide"), timeout=5,
                                        on_wire=lambda conn, d, data: sent.append(data) if d == "C>S" else None)
            async with client:
                pass
        heads = [data.split(b"\r\n\r\n")[0].decode() for data in sent]
        post = heads[0].split("\r\n")
        assert post[0] == "POST /mcp HTTP/1.1"
        assert [h.split(":")[0] for h in post[1:]] == [
            "X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization", "accept",
            "content-type", "Host", "Connection", "Transfer-Encoding"]
        assert "Transfer-Encoding: chunked" in post
        get = [h for h in heads if h.startswith("GET")][0].split("\r\n")
        assert [h.split(":")[0] for h in get[1:]] == [
            "X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization", "accept",
            "mcp-session-id", "Host", "Connection"]
        delete = [h for h in heads if h.startswith("DELETE")][0].split("\r\n")
        assert [h.split(":")[0] for h in delete[1:]] == [
            "X-Copilot-Session-Id", "X-Copilot-PID", "X-Copilot-Parent-PID", "Authorization", "mcp-session-id",
            "Host", "Connection"]
        methods = [json.loads(data.split(b"\r\n\r\n", 1)[1].split(b"\r\n")[1])["method"]
                   for data in sent if data.startswith(b"POST")]
        assert methods[:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]

    run(scenario)


def test_command_line_list_call_watch(workspace: Any) -> None:
    async def scenario() -> None:
        async with _server(workspace, debounce=0.01) as server:
            path = str(workspace / "project" / "a.py")
            server.set_selection(Selection(path, "print", (0, 0), (0, 5)))
            server.flush_pushes()
            env = dict(os.environ, PYTHONPATH=ROOT)
            base = [sys.executable, "-m", "ide_protocol", "client", "--folder", str(workspace / "project"),
                    "--lock-dir", str(workspace / "ide")]
            loop = asyncio.get_event_loop()

            def call(args: List[str]) -> subprocess.CompletedProcess:
                return subprocess.run(base + args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      timeout=LIMIT, universal_newlines=True)

            listed = await loop.run_in_executor(None, call, ["--json", "list"])
            assert listed.returncode == 0, listed.stderr
            assert [t["name"] for t in json.loads(listed.stdout)] == list(tools.TOOL_NAMES)
            text = await loop.run_in_executor(None, call, ["list"])
            assert "open_diff" in text.stdout and "original_file_path" in text.stdout
            sel = await loop.run_in_executor(None, call, ["--json", "call", "get_selection"])
            assert json.loads(sel.stdout)["text"] == "print"
            bad = await loop.run_in_executor(None, call, ["call", "no_such_tool"])
            assert bad.returncode == 1 and "Unknown tool" in bad.stdout
            # watch: the stream opens with the current selection (one push, --count 1).
            watched = await loop.run_in_executor(None, call, ["--json", "watch", "--count", "1"])
            assert json.loads(watched.stdout)["method"] == "selection_changed"
            missing = subprocess.run([sys.executable, "-m", "ide_protocol", "client", "--folder", str(workspace),
                                      "--lock-dir", str(workspace / "ide"), "list"], env=env, cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=LIMIT,
                                     universal_newlines=True)
            assert missing.returncode == 1 and "no IDE lock" in missing.stderr

    run(scenario)


def test_a_push_queue_drops_its_oldest_pushes_past_its_bounds_never_the_end() -> None:
    async def scenario() -> None:
        from ide_protocol.client import PushQueue
        from ide_protocol.client.pushes import END

        def push(n: int) -> Push:
            return Push("selection_changed", {"n": n}, {})

        by_count = PushQueue(max_items=3)
        for n in range(5):
            by_count.offer(push(n), 1)
        by_count.put_nowait(END)  # the end marker goes in whatever the bounds
        got = [by_count.get_nowait() for _ in range(by_count.qsize())]
        assert [p.params["n"] for p in got[:-1]] == [2, 3, 4] and got[-1] is END
        assert by_count.dropped == 2

        by_size = PushQueue(max_bytes=10)
        by_size.offer(push(0), 6)
        by_size.offer(push(1), 4)   # 10 bytes: both fit
        by_size.offer(push(2), 6)   # 16: the oldest goes
        assert by_size.dropped == 1 and by_size.qsize() == 2
        by_size.offer(push(3), 50)  # larger than the bound alone: kept, as the only one
        assert by_size.qsize() == 1 and by_size.get_nowait().params["n"] == 3
        by_size.offer(push(4), 10)  # the queue's byte count went down with the get
        assert by_size.qsize() == 1 and by_size.dropped == 3

    asyncio.run(scenario())
