"""Caps before authentication, over real sockets: what an unauthenticated or idle peer
can make an `IdeServer` hold.

* A request is judged by its head (Origin, nonce, path, method) before its body is
  read: a refused one is answered at once and its connection closed, the body never
  buffered (the 401 arrives although the body was never sent).
* Connections idle between requests are closed after a timeout; streams are not idle.
* Connections and sessions are bounded: the one idle longest makes room, else 503 with
  a reason.
* With RLIMIT_NOFILE lowered (in a subprocess), a flood of connections neither floods
  the log with tracebacks nor makes `open_diff` show an existing file as new.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any, List, Tuple

import pytest

import ide_wire
from ide_protocol.wire import jsonrpc
from ide_wire import Cli, Conn, cli_for, make_server, run, tool_error, tool_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 20.0


async def raw(path: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await ide_wire.open_connection(path)  # a Unix socket, a named pipe on Windows


async def read_all(reader: asyncio.StreamReader, timeout: float = WAIT) -> bytes:
    """Everything until the server closes the connection (fails on a timeout); b"" when
    the server reset it (it closed with our unread bytes still in its buffer)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    except (ConnectionResetError, BrokenPipeError):
        return b""


async def closed_by_server(reader: asyncio.StreamReader, timeout: float = WAIT) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(), timeout)
    except asyncio.TimeoutError:
        return False
    except ConnectionError:
        return True
    return data == b"" or data.endswith(b"\n")


# ------------------------------------------------------ the head judged before the body


@pytest.mark.parametrize("case,status", [("no nonce", 401), ("wrong nonce", 401), ("origin", 403),
                                         ("path", 404), ("method", 405)])
def test_refused_head_is_answered_before_its_body_and_closed(tmp_path: Any, case: str, status: int) -> None:
    """A 60 MB body announced and never sent: the refusal still comes, and the connection
    closes. Before, the server waited for (and buffered) the whole body first."""
    async def main() -> None:
        async with make_server(tmp_path) as server:
            headers = [("Host", "localhost"), ("Content-Type", "application/json"), ("Content-Length", "60000000")]
            if case != "no nonce":
                headers.append(("Authorization", "Nonce " + ("0" * 32 if case == "wrong nonce" else server.nonce)))
            if case == "origin":
                headers.append(("Origin", "http://evil.example"))
            method = "PUT" if case == "method" else "POST"
            target = "/elsewhere" if case == "path" else "/mcp"
            reader, writer = await raw(server.socket_path)
            writer.write(ide_wire.head(method, target, headers) + b'{"jsonrpc":"2.0",')
            answer = await read_all(reader)  # the server closes: read() returns
            assert answer.startswith(b"HTTP/1.1 %d " % status), answer
            assert b"connection: close" in answer.lower()
            writer.close()
            assert server.stats()["sessions"] == 0

    run(main())


def test_unauthenticated_bodies_are_not_buffered(tmp_path: Any) -> None:
    """Ten peers without a nonce each try to push 6 MB: each is refused after its head,
    and cannot push much more before the connection is gone."""
    async def main() -> None:
        async with make_server(tmp_path) as server:
            async def push() -> int:
                reader, writer = await raw(server.socket_path)
                writer.write(ide_wire.head("POST", "/mcp", [("Host", "localhost"),
                                                            ("Transfer-Encoding", "chunked")]))
                sent = 0
                piece = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
                try:
                    for _ in range(96):
                        writer.write(piece)
                        await asyncio.wait_for(writer.drain(), WAIT)
                        sent += len(piece)
                except (ConnectionError, OSError):
                    pass
                answer = await read_all(reader)
                assert answer == b"" or answer.startswith(b"HTTP/1.1 401 "), answer
                writer.close()
                return sent

            sent = await asyncio.gather(*(push() for _ in range(10)))
            assert min(sent) < 6 * 1024 * 1024, sent  # the server stopped reading: not buffered
            cli = cli_for(server)
            await cli.handshake()  # and it still serves
            cli.close()

    run(main(), timeout=120)


# ------------------------------------------------------------------ idle connections


def test_idle_connections_are_closed_and_streams_are_not(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path, connection_idle_timeout=0.5) as server:
            silent_reader, silent = await raw(server.socket_path)  # connects, sends nothing
            cli = cli_for(server)
            await cli.handshake(probes=0)
            _, stream = await cli.open_stream()
            used = await cli.new_conn()  # a keep-alive connection after one request
            assert await cli.request("ping", conn=used) == {}
            assert await closed_by_server(silent_reader)
            assert await used.wait_closed()
            await asyncio.sleep(1.5)  # three timeouts: the stream is busy, never idle
            server.set_selection(ide_wire_selection(server))
            server.flush_pushes()
            note = await asyncio.wait_for(stream.next_notification(), WAIT)
            assert note is not None and note["method"] == "selection_changed"
            silent.close()
            cli.close()

    run(main())


def ide_wire_selection(server: Any) -> Any:
    from ide_protocol.common.tools import Selection

    return Selection(os.path.join(server.workspace_folders[0], "a.py"), "x", (0, 0), (0, 1))


# ------------------------------------------------------------- connection limit


def test_equally_idle_connections_go_in_the_order_they_were_opened(tmp_path: Any) -> None:
    """Under Windows's clock (15.6 ms steps) connections opened together are equally
    idle; the first opened must go first (it was whichever a set gave, under Wine)."""
    async def main() -> None:
        async with make_server(tmp_path, max_connections=4) as server:
            idle = [await raw(server.socket_path) for _ in range(4)]
            await ide_wire.until(lambda: server.stats()["connections"] == 4, what="four connections")
            for conn in server.listener.connections:
                conn.last_active = 1.0  # one tick of a coarse clock for all
            cli = cli_for(server)
            await cli.handshake(probes=0)
            assert await closed_by_server(idle[0][0])
            cli.close()
            for _, w in idle:
                w.close()

    run(main(), timeout=90)


def test_connection_limit_evicts_the_longest_idle_then_refuses(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path, max_connections=4) as server:
            idle = [await raw(server.socket_path) for _ in range(4)]
            await ide_wire.until(lambda: server.stats()["connections"] == 4, what="four connections")
            cli = cli_for(server)
            await cli.handshake(probes=0)  # room made by closing idle ones, oldest first
            assert await closed_by_server(idle[0][0])
            # Now every connection busy: four open_diffs waiting for a person.
            waiting = []
            for n in range(4):
                conn = await cli.new_conn()
                waiting.append(asyncio.ensure_future(cli.call_tool("open_diff", {
                    "original_file_path": str(tmp_path / ("new%d.txt" % n)), "new_file_contents": "x",
                    "tab_name": "t%d" % n}, conn=conn)))
            await ide_wire.until(lambda: server.stats()["pending_diffs"] == 4, what="four diffs waiting")
            for reader, _ in idle[1:]:
                assert await closed_by_server(reader)  # made room for the busy ones
            reader, writer = await raw(server.socket_path)
            answer = await read_all(reader)
            assert answer.startswith(b"HTTP/1.1 503 ") and b"too many connections (limit 4)" in answer
            writer.close()
            for n in range(4):
                server.resolve_diff("t%d" % n, accept=False)
            for result in await asyncio.gather(*waiting):
                assert tool_json(result)["result"] == "REJECTED"
            for _, w in idle:
                w.close()
            cli.close()

    run(main(), timeout=90)


# ------------------------------------------------------------------ session limit


def test_a_limit_of_0_is_no_limit(tmp_path: Any) -> None:
    # LIMITS.md: "None / 0: no limit", for the keywords as for serve's options.
    async def main() -> None:
        async with make_server(tmp_path, max_sessions=0, max_connections=0) as server:
            clis = [cli_for(server) for _ in range(3)]
            for cli in clis:
                await cli.handshake(probes=0)
            assert server.stats()["sessions"] == 3 and server.stats()["connections"] >= 3
            for cli in clis:
                assert (await cli.send_request("ping")).status == 200
                cli.close()
    run(main(), timeout=90)


def test_session_limit_evicts_the_longest_idle_then_refuses(tmp_path: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path, max_sessions=2) as server:
            first, second, third = cli_for(server), cli_for(server), cli_for(server)
            await first.handshake(probes=0)
            await second.handshake(probes=0)
            await third.handshake(probes=0)  # the first (idle longest) made room
            assert server.stats()["sessions"] == 2
            reply = await first.send_request("ping")
            assert reply.status == 404
            _, s2 = await second.open_stream()  # both remaining sessions busy now
            _, s3 = await third.open_stream()
            fourth = cli_for(server)
            reply = await fourth.send_request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                             "clientInfo": {"name": "x", "version": "1"}})
            assert reply.status == 503
            assert "too many sessions (limit 2)" in reply.message["error"]["message"]
            assert server.stats()["sessions"] == 2
            for cli in (first, second, third, fourth):
                cli.close()

    run(main())


# -------------------------------------------- file descriptors run out (RLIMIT_NOFILE)


SERVER_SCRIPT = textwrap.dedent("""
    import asyncio, json, os, resource, sys
    from ide_protocol import IdeServer
    limit = int(sys.argv[2])
    max_connections = int(sys.argv[3]) or None
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def on_diff(diff):
        print(json.dumps({"diff": diff.tab_name, "is_new_file": diff.is_new_file,
                          "original": diff.original_contents}), flush=True)
        return False

    async def main():
        limits = {"max_connections": max_connections} if max_connections else {}
        server = IdeServer([sys.argv[1]], lock_dir=os.path.join(sys.argv[1], "locks"), on_diff=on_diff, **limits)
        await server.start()
        print(json.dumps({"socket": server.socket_path, "nonce": server.nonce}), flush=True)
        loop = asyncio.get_event_loop()
        await loop.run_in_executor(None, sys.stdin.readline)
        print(json.dumps({"stats": server.stats()}), flush=True)
        await server.stop()

    asyncio.run(main())
""")


class FdLimitedServer:
    def __init__(self, tmp_path: Any, nofile: int, max_connections: int) -> None:
        self.folder = str(tmp_path)
        script = os.path.join(self.folder, "server.py")
        with open(script, "w") as f:
            f.write(SERVER_SCRIPT)
        self.stderr_path = os.path.join(self.folder, "stderr.txt")
        env = dict(os.environ, PYTHONPATH=REPO)
        self.proc = subprocess.Popen([sys.executable, script, self.folder, str(nofile), str(max_connections)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), env=env)
        first = json.loads(self.proc.stdout.readline())
        self.socket_path, self.nonce = first["socket"], first["nonce"]

    def finish(self) -> Tuple[List[dict], str]:
        out, _ = self.proc.communicate(b"\n", timeout=60)
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            err = f.read()
        return [json.loads(line) for line in out.decode().splitlines() if line.strip()], err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs the resource module's RLIMIT_NOFILE")
@pytest.mark.parametrize("max_connections", [24, 0])
def test_file_descriptors_running_out(tmp_path: Any, max_connections: int) -> None:
    """RLIMIT_NOFILE 48. With a connection limit below it (24), 80 idle connections are
    bounded (idle ones make room) and the server keeps serving; with none (0), the
    descriptors run out: open_diff of an existing file then answers an error (never the
    file as new and empty), the log gets at most a few lines, and service comes back."""
    original = os.path.join(str(tmp_path), "exists.txt")
    with open(original, "w") as f:
        f.write("the real contents\n")
    server = FdLimitedServer(tmp_path, 48, max_connections)
    try:
        async def main() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()  # held from before the flood
            flood = []
            for _ in range(80):
                try:
                    flood.append(await asyncio.wait_for(raw(server.socket_path), 5))
                except (OSError, asyncio.TimeoutError):
                    break
            await asyncio.sleep(1.0)
            if max_connections:  # idle connections made room for the flood: ours too, maybe
                conn = await cli.new_conn()
            result = await asyncio.wait_for(cli.call_tool("open_diff", {
                "original_file_path": original, "new_file_contents": "changed\n", "tab_name": "t"}, conn=conn),
                WAIT)
            if result.get("isError"):
                assert "Too many open files" in tool_error(result)
            else:
                assert tool_json(result)["result"] == "REJECTED"
            if max_connections:
                assert not result.get("isError")  # the limit kept descriptors free
            for _, writer in flood:
                writer.close()
            # Served again: the handshake waits in the listen backlog until the server,
            # which retries accepting after a second, takes the connection.
            again = Cli(server.socket_path, server.nonce)
            await asyncio.wait_for(again.handshake(probes=0), WAIT)
            again.close()
            cli.close()

        run(main(), timeout=120)
        events, err = server.finish()
        for event in events:
            if "diff" in event:  # shown: then with its real contents
                assert event["is_new_file"] is False and event["original"] == "the real contents\n"
        stats = [e["stats"] for e in events if "stats" in e][0]
        if max_connections:
            assert stats["connections"] <= max_connections
        assert err.count("Traceback") <= 5, err[-3000:]
        assert len(err.splitlines()) <= 200, err[-3000:]
    finally:
        server.kill()


def test_the_server_installs_nothing_in_the_loop_it_runs_in(tmp_path: Any) -> None:
    """The library is a guest in its host's loop: starting and stopping a server sets
    no exception handler there (running out of descriptors is the listener's own
    business, above), and leaves no timer behind."""
    async def main() -> None:
        loop = asyncio.get_event_loop()
        server = make_server(tmp_path)
        await server.start()
        try:
            assert loop.get_exception_handler() is None
            cli = cli_for(server)
            await cli.handshake(probes=0)
            cli.close()
        finally:
            await server.stop()
        assert loop.get_exception_handler() is None
        acceptor = server.listener.acceptor   # (None on Windows: a named pipe's server)
        assert acceptor is None or not acceptor.paused

    run(main())
