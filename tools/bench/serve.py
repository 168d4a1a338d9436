"""The Python servers under measurement, each in a process of its own.

    python3 tools/bench/serve.py KIND DIR      (KIND: ours | sdk)

runs one server listening in DIR and prints one JSON line (socket, auth, pid) once it
listens; then it obeys commands on stdin, one per line, answering each with a JSON
line: rss | reset_hwm | trace_start | trace_stop | profile_start | profile_stop PATH.
EOF on stdin stops it. `ours` is this project's `IdeServer`; `sdk` the official MCP
Python SDK under uvicorn, run by the Python of `.bench-venv/` (`make bench-venv`),
with the same nonce check in front. `ServerProc` starts one and holds its channel (the
Node.js peers follow the same start-up line and EOF-on-stdin protocol).
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional

if __package__ in (None, ""):  # run as a script, maybe by another Python (the SDK's venv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tools.bench.common import ROOT, SELECTION, SELECTION_TEXT, proc_status  # noqa: E402


def serve_main(kind: str, directory: str) -> int:
    out_lock = threading.Lock()

    def emit(obj: Any) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    profiler: List[Any] = []

    def command(line: str) -> Any:
        parts = line.split()
        name = parts[0] if parts else ""
        if name == "rss":
            import resource
            st = proc_status(os.getpid())
            return {"rss_kb": st.get("VmRSS"), "hwm_kb": st.get("VmHWM"),
                    "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
        if name == "reset_hwm":
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                return {"ok": True}
            except OSError as exc:
                return {"ok": False, "error": str(exc)}
        if name == "trace_start":
            import tracemalloc
            tracemalloc.start()
            tracemalloc.reset_peak() if hasattr(tracemalloc, "reset_peak") else None
            return {"ok": True}
        if name == "trace_stop":
            import tracemalloc
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return {"current": current, "peak": peak}
        if name == "profile_start":
            import cProfile
            profiler[:] = [cProfile.Profile(time.process_time)]  # CPU, not waits and preemption
            profiler[0].enable()
            return {"ok": True}
        if name == "profile_stop":
            if profiler:
                profiler[0].disable()
                profiler[0].dump_stats(parts[1])
                del profiler[:]
            return {"ok": True}
        return {"error": "unknown command %r" % line}

    loop_holder: List[asyncio.AbstractEventLoop] = []
    stop_event: List[asyncio.Event] = []

    def stdin_thread() -> None:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            # Commands touching the profiler must run on the loop's thread.
            if line.startswith(("profile_", "trace_")) and loop_holder:
                box: List[Any] = []
                done = threading.Event()

                def run(line: str = line) -> None:
                    box.append(command(line))
                    done.set()
                loop_holder[0].call_soon_threadsafe(run)
                done.wait(10)
                emit(box[0] if box else {"error": "timeout"})
            else:
                emit(command(line))
        if loop_holder and stop_event:
            loop_holder[0].call_soon_threadsafe(stop_event[0].set)

    async def main() -> None:
        loop_holder.append(asyncio.get_event_loop())
        stop = asyncio.Event()
        stop_event.append(stop)
        if kind == "ours":
            await _serve_ours(directory, emit, stop)
        elif kind == "sdk":
            await _serve_sdk(directory, emit, stop)
        else:
            raise SystemExit("unknown server kind %r" % kind)

    threading.Thread(target=stdin_thread, daemon=True).start()
    asyncio.run(main())
    return 0


async def _serve_ours(directory: str, emit: Callable[[Any], None], stop: asyncio.Event) -> None:
    sys.path.insert(0, os.environ.get("BENCH_OURS_ROOT") or ROOT)  # --ours-root: another checkout
    from ide_protocol.server.ide_server import IdeServer
    from ide_protocol.common.tools import Selection

    server = IdeServer([os.path.join(directory, "project")], lock_dir=os.path.join(directory, "locks"),
                       socket_dir=directory, on_diff=lambda diff: True)
    await server.start()
    server.set_selection(Selection(SELECTION["filePath"], SELECTION_TEXT, (10, 0), (12, 0)))
    server.flush_pushes()
    import ide_protocol
    emit({"socket": server.socket_path, "auth": "Nonce " + server.nonce, "pid": os.getpid(),
          "root": os.path.dirname(os.path.dirname(os.path.abspath(ide_protocol.__file__)))})
    await stop.wait()
    await server.stop()


async def _serve_sdk(directory: str, emit: Callable[[Any], None], stop: asyncio.Event) -> None:
    import logging

    import uvicorn
    try:
        from mcp.server.mcpserver import MCPServer as Server  # mcp >= 2
        flavour = "MCPServer"
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x
        flavour = "FastMCP"
    try:
        from mcp.server.transport_security import TransportSecuritySettings
        security: Any = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    except ImportError:
        security = None
    mcp_server = Server("bench-sdk")
    logging.disable(logging.INFO)  # the SDK logs every session at INFO
    text = json.dumps(SELECTION, indent=2)

    @mcp_server.tool(description="Get text selection.")
    def get_selection() -> str:
        return text

    kwargs: Dict[str, Any] = {}
    if security is not None:
        kwargs["transport_security"] = security
    try:
        app = mcp_server.streamable_http_app(**kwargs)
    except TypeError:
        app = mcp_server.streamable_http_app()
    nonce = secrets.token_hex(16)
    expected = ("Nonce " + nonce).encode()

    async def with_nonce(scope: Any, receive: Any, send: Any) -> None:
        # The same check as every other server here: a request without the nonce is 401.
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    path = os.path.join(directory, "sdk.sock")
    config = uvicorn.Config(with_nonce, uds=path, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[assignment]
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    import importlib.metadata as md
    emit({"socket": path, "auth": "Nonce " + nonce, "pid": os.getpid(), "flavour": flavour,
          "versions": {p: md.version(p) for p in ("mcp", "uvicorn", "starlette")},
          "http": type(server.servers[0]).__name__ if getattr(server, "servers", None) else ""})
    await stop.wait()
    server.should_exit = True
    await task


class ServerProc:
    """A server subprocess (`serve.py KIND`, or `argv` for a Node.js peer), with its
    command channel."""

    def __init__(self, kind: str, python: str = sys.executable,
                 argv: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None) -> None:
        """`argv` (run with the temporary folder appended) replaces `serve.py KIND`."""
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="b-", dir="/tmp")  # short: sun_path is 107 bytes
        os.makedirs(os.path.join(self.dir, "project"))
        cmd = argv + [self.dir] if argv else [python, os.path.abspath(__file__), kind, self.dir]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     env=env)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.proc.wait(5)
            raise RuntimeError("%s server did not start (exit %s)" % (kind, self.proc.returncode))
        self.info = json.loads(line)
        self.socket = self.info["socket"]
        self.auth = self.info["auth"]
        self.pid = self.proc.pid

    def command(self, line: str) -> Any:
        self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1], sys.argv[2]))
