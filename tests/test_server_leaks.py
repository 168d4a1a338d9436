"""No leak (issue #3 acceptance): 1 000 sessions opened and deleted, 1 000 abandoned
without DELETE (connections dropped mid-stream and mid-request, then the idle timeout
passes); the server then holds nothing of them, checked through `stats()` and by the
garbage collector."""
from __future__ import annotations

import asyncio
import gc
import time
import weakref
from typing import Any, Dict

from ide_wire import Cli, cli_for, make_server, run, tool_json, until

N = 1000
BATCH = 50


def _held(server: Any) -> dict:
    stats = server.stats()
    return {k: stats[k] for k in ("sessions", "streams", "running_requests", "pending_diffs", "connections",
                                  "connection_tasks")}


NOTHING = {"sessions": 0, "streams": 0, "running_requests": 0, "pending_diffs": 0, "connections": 0,
           "connection_tasks": 0}


def test_no_leak_after_2000_sessions(tmp_path) -> None:
    async def main() -> None:
        refs: Dict[str, Any] = {}
        async with make_server(tmp_path, on_diff=lambda d: None, debounce=0, idle_timeout=3600) as server:
            def remember() -> None:
                for session in server.app.sessions.values():
                    refs.setdefault(session.id, weakref.ref(session))

            baseline_tasks = len(asyncio.all_tasks())

            async def polite(i: int) -> None:
                cli = cli_for(server)
                await cli.handshake(probes=1)
                _, stream = await cli.open_stream()
                assert tool_json(await cli.call_tool("update_session_name", {"name": "s%d" % i})) == {"success": True}
                remember()
                assert (await cli.delete()).status == 200
                assert await stream.next_sse() is None
                cli.close()

            for start in range(0, N, BATCH):
                await asyncio.gather(*(polite(i) for i in range(start, start + BATCH)))
            await until(lambda: _held(server) == NOTHING, what="deleted sessions released")

            async def rude(i: int) -> Cli:
                cli = cli_for(server)
                await cli.handshake(probes=0)
                _, stream = await cli.open_stream()
                if i % 2 == 0:
                    # A blocking open_diff on another connection, dropped with the rest.
                    conn = await cli.new_conn()
                    conn.send_raw(cli.encode("POST", {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                        "name": "open_diff", "arguments": {"original_file_path": "/nonexistent/%d" % i,
                                                           "new_file_contents": "x", "tab_name": "tab%d" % i}}}),
                                  expect="POST")
                return cli

            for start in range(0, N, BATCH):
                clis = await asyncio.gather(*(rude(i) for i in range(start, start + BATCH)))
                await until(lambda: server.stats()["pending_diffs"] == BATCH // 2, what="diffs pending")
                remember()
                for cli in clis:
                    cli.abort()
                await until(lambda: server.stats()["pending_diffs"] == 0, what="diffs resolved")
            await until(lambda: server.stats()["connections"] == 0 and server.stats()["streams"] == 0
                        and server.stats()["running_requests"] == 0, what="connections released")
            # Abandoned: every connection that carried them closed, so they end soon
            # (PROTOCOL.md §3, "When a session ends"), long before the idle timeout.
            await until(lambda: server.stats()["sessions"] == 0, what="abandoned sessions ended")
            assert server.expire_idle_sessions(now=time.monotonic() + server.limits.idle_timeout + 1) == 0
            assert _held(server) == NOTHING
            await until(lambda: len(asyncio.all_tasks()) <= baseline_tasks, what="tasks finished")
            assert len(asyncio.all_tasks()) == baseline_tasks
            assert server.stats()["accepted_connections"] >= 4 * N
            # A fresh client still works.
            cli = cli_for(server)
            await cli.handshake(probes=0)
            assert await cli.request("ping") == {}
            cli.close()
        gc.collect()
        alive = [r for r in refs.values() if r() is not None]
        assert len(refs) == 2 * N
        assert alive == [], "%d sessions still referenced" % len(alive)
    run(main(), timeout=600)  # a guard against hangs only: 2000 sessions take minutes under Wine
