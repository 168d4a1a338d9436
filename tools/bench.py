#!/usr/bin/env python3
"""Benchmarks of the `/ide` server against baselines measured in the same run.

    python3 tools/bench.py                  # everything; table on stdout, bench-results.json
    python3 tools/bench.py --quick          # a fast end-to-end pass (used by the test suite)
    python3 tools/bench.py --only rt,push   # some groups: rt, throughput, push, diff, startup
    python3 tools/bench.py --only throughput --quick   # ours beside the VS Code stack, ~40 s
    python3 tools/bench.py --ours-root DIR  # our server imported from another checkout
    python3 tools/bench.py --json PATH      # where the JSON goes (default bench-results.json)
    python3 tools/bench.py --profile DIR    # also cProfile our server during the rt runs

Groups (each against a baseline measured in the same run; medians of several repetitions;
the round trip's target is the median of the ratios paired within each repetition):

1. rt: `tools/call get_selection` round trip over a Unix socket, as Copilot CLI sends it
   (chunked POST, SSE answer, keep-alive), p50/p99 latency and throughput at concurrency 1
   and 16, for our server and the floor (a minimal asyncio Unix-socket server answering
   each request with a fixed pre-built response). Every server runs in its own process;
   the load generator is this process. Its own ceiling is shown as requests per second
   of its CPU time.
1b. throughput: req/s of `tools/call get_selection` at concurrency 1 and 16, driven by
   one Node.js load generator (tools/bench_node/loadgen.js, speaking as the CLI) for
   every server in turn: ours; the VS Code stack (Express 5 + the MCP TypeScript SDK,
   tools/bench_node/vscode_stack.js, `make bench-node`); the official MCP Python SDK
   under uvicorn (`make bench-venv`); a bare node:http handler. Servers interleaved,
   ratios of the medians.
2. push: `set_selection` (debounce 0) to arrival on the client's GET stream, 1 and 100
   sessions; the server runs here, the clients in another process (a bare epoll loop);
   CLOCK_MONOTONIC is shared by all processes (Linux), so `time.monotonic()` stamps are
   comparable. The floor, the measuring side's own ceiling: the same clients fed by a
   plain `send()` loop of a pre-built chunk. Measured with the server (or floor writer)
   and the clients pinned to different CPUs, and again where the scheduler puts them.
3. diff: `open_diff` with 10 MB of `new_file_contents`, chunked in 16 KiB pieces: time,
   and peak memory in the server process (tracemalloc, and the VmHWM / ru_maxrss rise).
4. startup: `import ide_protocol`, `serve` to lock file, idle RSS, RSS with 100 sessions,
   against a bare `python3 -c "import asyncio, json"`.

Only the baselines use anything beyond the standard library: the Python SDK from
`.bench-venv/`, run by that environment's Python; Node.js and the packages in
`.bench-node/` for the throughput group, which is skipped, saying why, without them.
Linux only (reads /proc); loopback and Unix sockets only; every run is bounded in time.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SDK_PYTHON = os.path.join(ROOT, ".bench-venv", "bin", "python")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# What the CLI sends (tests/captures/copilot-cli-1.0.102-ide-session.log), in its order.
CLI_SESSION = "dd2a8913-a676-4133-b217-36b97d0ac572"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}}}
SELECTION_TEXT = "def main():\n    return 42\n"
SELECTION = {"text": SELECTION_TEXT, "filePath": "/work/project/src/app.py",
             "fileUrl": "file:///work/project/src/app.py",
             "selection": {"start": {"line": 10, "character": 0}, "end": {"line": 12, "character": 0},
                           "isEmpty": False}, "current": True}


# ----------------------------------------------------------------- wire helpers


def encode_chunked(body: bytes, chunk_size: int = 0) -> bytes:
    if not chunk_size or chunk_size >= len(body):
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + chunk_size]), body[i:i + chunk_size])
             for i in range(0, len(body), chunk_size)]
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def cli_request(method: str, auth: Optional[str], body: Optional[bytes] = None, session: Optional[str] = None,
                extra: Tuple[Tuple[str, str], ...] = (), chunk_size: int = 0, accept: Optional[str] = None,
                client_session: str = CLI_SESSION) -> bytes:
    """A request with the CLI's header order; POST bodies always chunked (PROTOCOL.md §2)."""
    lines = ["%s /mcp HTTP/1.1" % method, "X-Copilot-Session-Id: " + client_session, "X-Copilot-PID: 32748",
             "X-Copilot-Parent-PID: 32746"]
    if auth:
        lines.append("Authorization: " + auth)
    lines.append("accept: " + (accept or ("text/event-stream" if method == "GET"
                                          else "application/json, text/event-stream")))
    if body is not None:
        lines.append("content-type: application/json")
    if session:
        lines.append("mcp-session-id: " + session)
    lines.extend("%s: %s" % kv for kv in extra)
    lines += ["Host: localhost", "Connection: keep-alive"]
    if body is not None:
        lines.append("Transfer-Encoding: chunked")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (encode_chunked(body, chunk_size) if body is not None else b"")


def response_end(buf: bytes, start: int = 0) -> int:
    """End offset of the complete HTTP response starting at `start`, or -1. Minimal on
    purpose (the load generator must be cheap): Content-Length or chunked framing."""
    he = buf.find(b"\r\n\r\n", start)
    if he < 0:
        return -1
    body = he + 4
    head = bytes(buf[start:he]).lower()
    i = head.find(b"\r\ncontent-length:")
    if i >= 0:
        j = head.find(b"\r\n", i + 2)
        n = int(head[i + 17:j if j >= 0 else len(head)])
        return body + n if len(buf) >= body + n else -1
    if b"chunked" not in head:
        return -1  # read-until-close bodies are not used here
    pos = body
    size_line_end = buf.find
    while True:
        nl = size_line_end(b"\r\n", pos)
        if nl < 0:
            return -1
        size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
        if size == 0:
            return nl + 4 if len(buf) >= nl + 4 else -1  # no trailers from any server here
        pos = nl + 2 + size + 2
        if pos > len(buf):
            return -1


def split_response(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    """Status, lower-cased headers and decoded body of one complete response."""
    he = raw.find(b"\r\n\r\n")
    lines = raw[:he].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = raw[he + 4:]
    if "chunked" in headers.get("transfer-encoding", ""):
        out, pos = [], 0
        while True:
            nl = body.find(b"\r\n", pos)
            size = int(body[pos:nl].split(b";")[0], 16)
            if size == 0:
                break
            out.append(body[nl + 2:nl + 2 + size])
            pos = nl + 2 + size + 2
        body = b"".join(out)
    return status, headers, body


def sse_json(body: bytes) -> Any:
    """The JSON of the (last) data line of an SSE body, or the body itself as JSON."""
    text = body.decode("utf-8")
    datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    datas = [d for d in datas if d]
    return json.loads(datas[-1] if datas else text)


class BlockingConn:
    """A keep-alive client connection with a blocking socket (lowest-overhead client)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = bytearray()

    def roundtrip(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        buf = self.buf
        recv = self.sock.recv
        while True:
            end = response_end(buf) if buf else -1
            if end >= 0:
                raw = bytes(buf[:end])
                del buf[:end]
                return raw
            data = recv(262144)
            if not data:
                raise ConnectionError("server closed the connection")
            buf += data

    def close(self) -> None:
        self.sock.close()


# ----------------------------------------------------------- process measurements


def proc_status(pid: int) -> Dict[str, int]:
    """VmRSS, VmHWM (kB) of a process, from /proc."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def proc_cpu(pid: int) -> float:
    """utime + stime of a process in seconds (clock-tick resolution)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return float("nan")


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[k]


def median(values: List[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


# ============================================================== server processes
#
# `bench.py _serve KIND DIR` runs one server and prints one JSON line (socket, auth, pid)
# when it listens; then it obeys commands on stdin, one per line, answering each with a
# JSON line: rss | reset_hwm | trace_start | trace_stop | profile_start | profile_stop PATH.
# EOF on stdin stops it.


def _serve_main(kind: str, directory: str, extra: List[str]) -> int:
    cmds: "List[Tuple[str, threading.Event, List[Any]]]" = []
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
            await _serve_ours(directory, emit, stop, extra)
        elif kind == "floor":
            await _serve_floor(directory, emit, stop, extra)
        elif kind == "sdk":
            await _serve_sdk(directory, emit, stop, extra)
        else:
            raise SystemExit("unknown server kind %r" % kind)

    threading.Thread(target=stdin_thread, daemon=True).start()
    asyncio.run(main())
    return 0


async def _serve_ours(directory: str, emit: Callable[[Any], None], stop: asyncio.Event, extra: List[str]) -> None:
    sys.path.insert(0, os.environ.get("BENCH_OURS_ROOT") or ROOT)  # --ours-root: another checkout
    from ide_protocol.server.ide_server import IdeServer
    from ide_protocol.common.tools import Selection

    server = IdeServer([os.path.join(directory, "project")], lock_dir=os.path.join(directory, "locks"),
                       socket_dir=directory, on_diff=lambda diff: True)
    await server.start()
    server.set_selection(Selection(SELECTION["filePath"], SELECTION_TEXT, (10, 0), (12, 0)))
    server.flush_pushes()
    emit({"socket": server.socket_path, "auth": "Nonce " + server.nonce, "pid": os.getpid()})
    await stop.wait()
    await server.stop()


class _FloorProtocol(asyncio.Protocol):
    """What Python cannot beat: find the end of each request, answer a fixed response."""

    response = b""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        while True:
            i = buf.find(b"\r\n0\r\n\r\n")
            if i < 0:
                break
            buf = buf[i + 7:]
            self.transport.write(self.response)
        self.buf = buf


async def _serve_floor(directory: str, emit: Callable[[Any], None], stop: asyncio.Event, extra: List[str]) -> None:
    with open(extra[0], "rb") as f:
        _FloorProtocol.response = f.read()
    path = os.path.join(directory, "floor.sock")
    server = await asyncio.get_event_loop().create_unix_server(_FloorProtocol, path)
    emit({"socket": path, "auth": None, "pid": os.getpid()})
    await stop.wait()
    server.close()


async def _serve_sdk(directory: str, emit: Callable[[Any], None], stop: asyncio.Event, extra: List[str]) -> None:
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
        if security is not None:
            mcp_server.settings.transport_security = security  # type: ignore[attr-defined]
        app = mcp_server.streamable_http_app()
    path = os.path.join(directory, "sdk.sock")
    config = uvicorn.Config(app, uds=path, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[assignment]
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    import importlib.metadata as md
    emit({"socket": path, "auth": None, "pid": os.getpid(), "flavour": flavour,
          "versions": {p: md.version(p) for p in ("mcp", "uvicorn", "starlette")},
          "http": type(server.servers[0]).__name__ if getattr(server, "servers", None) else ""})
    await stop.wait()
    server.should_exit = True
    await task


class ServerProc:
    """A server subprocess started with `_serve`, with its command channel."""

    def __init__(self, kind: str, python: str = sys.executable, extra: Tuple[str, ...] = (),
                 argv: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None) -> None:
        """`argv` (run with the temporary folder appended) replaces `bench.py _serve KIND`:
        the Node.js servers follow the same start-up line and EOF-on-stdin protocol."""
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="b-", dir="/tmp")  # short: sun_path is 107 bytes
        os.makedirs(os.path.join(self.dir, "project"))
        cmd = (argv + [self.dir] if argv else
               [python, os.path.abspath(__file__), "_serve", kind, self.dir] + list(extra))
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


# ============================================================ sessions (clients)


def handshake(path: str, auth: Optional[str], sdk: bool = False) -> Tuple[str, Tuple[Tuple[str, str], ...]]:
    """initialize + notifications/initialized as the CLI does; returns the session id and
    the extra headers later requests need (the SDK wants its protocol version header)."""
    conn = BlockingConn(path)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "copilot-cli", "version": "1.0.102"}}}
        # Each CLI process has its own session UUID (our server reuses it as the MCP id).
        raw = conn.roundtrip(cli_request("POST", auth, json.dumps(init, separators=(",", ":")).encode(),
                                         client_session=str(uuid.uuid4())))
        status, headers, body = split_response(raw)
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError("initialize failed: %d %r" % (status, raw[:300]))
        sid = headers["mcp-session-id"]
        result = sse_json(body)["result"]
        extra: Tuple[Tuple[str, str], ...] = ()
        if sdk:
            extra = (("mcp-protocol-version", result["protocolVersion"]),)
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        raw = conn.roundtrip(cli_request("POST", auth, note, session=sid, extra=extra))
        status = split_response(raw)[0]
        if status not in (200, 202):
            raise RuntimeError("notifications/initialized failed: %r" % raw[:300])
        return sid, extra
    finally:
        conn.close()


def get_selection_request(auth: Optional[str], sid: Optional[str], extra: Tuple[Tuple[str, str], ...],
                          rid: int) -> bytes:
    meta = dict(META)
    meta["progressToken"] = rid
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"_meta": meta, "arguments": {}, "name": "get_selection"}}
    return cli_request("POST", auth, json.dumps(body, separators=(",", ":")).encode(), session=sid, extra=extra)


def check_selection_response(raw: bytes) -> None:
    status, headers, body = split_response(raw)
    if status != 200:
        raise RuntimeError("get_selection answered %d: %r" % (status, raw[:300]))
    msg = sse_json(body)
    text = msg["result"]["content"][0]["text"]
    if json.loads(text)["text"] != SELECTION_TEXT:
        raise RuntimeError("get_selection answered %r" % text[:200])


class Target:
    """A server under the round-trip test: its socket and pre-encoded requests."""

    def __init__(self, name: str, proc: ServerProc, requests: List[List[bytes]]) -> None:
        self.name = name
        self.proc = proc
        self.requests = requests  # per connection: a ring of requests with distinct ids


def make_target(name: str, proc: ServerProc, conns: int = 16, ring: int = 64) -> Target:
    sid: Optional[str] = None
    extra: Tuple[Tuple[str, str], ...] = ()
    if name != "floor":
        sid, extra = handshake(proc.socket, proc.auth, sdk=(name == "sdk"))
    requests = [[get_selection_request(proc.auth, sid, extra, 100 + c * ring + k) for k in range(ring)]
                for c in range(conns)]
    conn = BlockingConn(proc.socket)
    try:
        for _ in range(3):
            raw = conn.roundtrip(requests[0][0])
            if name != "floor":
                check_selection_response(raw)
    finally:
        conn.close()
    return Target(name, proc, requests)


# ========================================================= group 1: round trip


def run_c1(target: Target, duration: float) -> Dict[str, Any]:
    """Concurrency 1: one keep-alive connection, blocking socket, back-to-back requests."""
    conn = BlockingConn(target.proc.socket)
    ring = target.requests[0]
    lat: List[float] = []
    errors = 0
    perf = time.perf_counter
    # warm-up (not counted)
    for i in range(50):
        conn.roundtrip(ring[i % len(ring)])
    cpu0, scpu0 = time.process_time(), proc_cpu(target.proc.pid)
    t_start = perf()
    deadline = t_start + duration
    i = 0
    while True:
        t0 = perf()
        raw = conn.roundtrip(ring[i % len(ring)])
        t1 = perf()
        lat.append(t1 - t0)
        if not raw.startswith(b"HTTP/1.1 200"):
            errors += 1
        i += 1
        if t1 >= deadline:
            break
    wall = perf() - t_start
    cpu, scpu = time.process_time() - cpu0, proc_cpu(target.proc.pid) - scpu0
    conn.close()
    return _rt_result(lat, wall, cpu, scpu, errors)


def _rt_result(lat: List[float], wall: float, cpu: float, scpu: float, errors: int) -> Dict[str, Any]:
    n = len(lat)
    return {"n": n, "errors": errors, "p50_us": pct(lat, 50) * 1e6, "p99_us": pct(lat, 99) * 1e6,
            "rps": n / wall if wall else 0.0, "gen_cpu_util": cpu / wall if wall else 0.0,
            "gen_ceiling_rps": n / cpu if cpu > 0 else float("inf"),
            "server_cpu_util": scpu / wall if wall else 0.0,
            "server_cpu_us_per_req": scpu / n * 1e6 if n else float("nan")}


class _LoadProtocol(asyncio.Protocol):
    def __init__(self, ring: List[bytes], state: Dict[str, Any], done: "asyncio.Future[None]") -> None:
        self.ring = ring
        self.state = state
        self.done = done
        self.buf = bytearray()
        self.i = 0
        self.t0 = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def fire(self) -> None:
        self.t0 = time.perf_counter()
        self.transport.write(self.ring[self.i % len(self.ring)])
        self.i += 1

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        end = response_end(buf)
        if end < 0:
            return
        t1 = time.perf_counter()
        state = self.state
        if not buf.startswith(b"HTTP/1.1 200"):
            state["errors"] += 1
        del buf[:end]
        if state["counting"]:
            state["lat"].append(t1 - self.t0)
        if t1 < state["deadline"]:
            self.fire()
        else:
            state["active"] -= 1
            if state["active"] == 0 and not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Any) -> None:
        if not self.done.done() and self.state["deadline"] > time.perf_counter():
            self.done.set_exception(ConnectionError("server closed a connection"))


async def _run_cn(target: Target, conc: int, duration: float) -> Dict[str, Any]:
    loop = asyncio.get_event_loop()
    conns = []
    for c in range(conc):
        done = loop.create_future()
        conns.append(done)
    state: Dict[str, Any] = {"lat": [], "errors": 0, "counting": False, "active": conc,
                             "deadline": time.perf_counter() + 0.3}
    done = loop.create_future()
    protos = []
    for c in range(conc):
        _, proto = await loop.create_unix_connection(
            lambda c=c: _LoadProtocol(target.requests[c % len(target.requests)], state, done), target.proc.socket)
        protos.append(proto)
    for p in protos:  # warm-up round, then the measured one
        p.fire()
    await asyncio.wait_for(done, 30)
    done = loop.create_future()
    for p in protos:
        p.done = done
    state.update(lat=[], errors=0, counting=True, active=conc)
    cpu0, scpu0 = time.process_time(), proc_cpu(target.proc.pid)
    t_start = time.perf_counter()
    state["deadline"] = t_start + duration
    for p in protos:
        p.fire()
    await asyncio.wait_for(done, duration + 30)
    wall = time.perf_counter() - t_start
    cpu, scpu = time.process_time() - cpu0, proc_cpu(target.proc.pid) - scpu0
    for p in protos:
        p.transport.close()
    return _rt_result(state["lat"], wall, cpu, scpu, state["errors"])


def run_cn(target: Target, conc: int, duration: float) -> Dict[str, Any]:
    return asyncio.run(_run_cn(target, conc, duration))


def group_rt(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    procs: List[ServerProc] = []
    targets: List[Target] = []
    result: Dict[str, Any] = {"servers": {}}
    try:
        ours = ServerProc("ours")
        procs.append(ours)
        targets.append(make_target("ours", ours))
        # The floor answers with the very bytes our server sends for this request.
        conn = BlockingConn(ours.socket)
        response = conn.roundtrip(targets[0].requests[0][0])
        conn.close()
        resp_file = os.path.join(ours.dir, "floor-response.bin")
        with open(resp_file, "wb") as f:
            f.write(response)
        floor = ServerProc("floor", extra=(resp_file,))
        procs.append(floor)
        targets.insert(0, make_target("floor", floor))
        result["response_bytes"] = len(response)
        result["request_bytes"] = len(targets[1].requests[0][0])
        runs: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
        # Each repetition measures every server at one concurrency back to back, so the
        # ratio of ours to the floor within a repetition compares two runs a second or
        # two apart: the median of those paired ratios leaves out most of the drift of
        # a shared machine between repetitions (the ratio of the medians keeps it).
        for rep in range(args.reps):
            for conc in (1, 16):
                for t in targets:
                    prof = args.profile and t.name == "ours" and rep == 0
                    if prof:
                        t.proc.command("profile_start")
                    r = run_c1(t, args.duration) if conc == 1 else run_cn(t, conc, args.duration)
                    if prof:
                        t.proc.command("profile_stop %s" % os.path.join(args.profile, "ours-c%d.prof" % conc))
                    runs.setdefault((t.name, conc), []).append(r)
            log("  rt rep %d/%d done" % (rep + 1, args.reps))
        for conc in (1, 16):
            pairs = [o["p50_us"] / f["p50_us"] for o, f in zip(runs[("ours", conc)], runs[("floor", conc)])]
            result.setdefault("paired_p50_ratios", {})["c%d" % conc] = [round(x, 3) for x in pairs]
        for (name, conc), rs in runs.items():
            agg = {k: median([r[k] for r in rs]) for k in rs[0] if k not in ("n", "errors")}
            agg["n"] = sum(r["n"] for r in rs)
            agg["errors"] = sum(r["errors"] for r in rs)
            agg["reps"] = [{k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()} for r in rs]
            result["servers"].setdefault(name, {})["c%d" % conc] = agg
    finally:
        for p in procs:
            p.close()
    return result


# ================================================ group 1b: throughput side by side
#
# One load generator for every server (tools/bench_node/loadgen.js, Node.js: a client
# that costs the same whichever server it drives, and is not the Python under test),
# keep-alive connections over a Unix socket, `tools/call get_selection` after a real
# handshake, at concurrency 1 and 16. The servers, all started once and kept running
# (so the JIT of the Node.js ones is warm, as in an editor that has been open a while):
#   ours    IdeServer, the selection set, in a process of its own (`bench.py _serve ours`);
#   vscode  what VS Code runs: Express 5 + the MCP TypeScript SDK (tools/bench_node/vscode_stack.js);
#   vscode124  the same with the SDK's 1.24.3, whose Node.js transport was cheaper;
#   sdk     the official MCP Python SDK's Streamable HTTP app under uvicorn (.bench-venv/);
#   bare    a bare node:http handler (tools/bench_node/bare_http.js): Node's own HTTP floor.
# Each repetition runs every server once per concurrency, in an order rotated from one
# repetition to the next, so drift of the shared machine falls on all of them alike;
# the ratios reported are ratios of the medians over the repetitions.

NODE_DIR = os.path.join(HERE, "bench_node")
NODE_MODULES = os.path.join(ROOT, ".bench-node", "node_modules")
TP_SERVERS = ("ours", "ours_b", "vscode", "vscode124", "sdk", "bare")
TP_LABELS = {"ours": "ours (IdeServer)", "ours_b": "ours from --compare-root",
             "vscode": "VS Code stack (Express 5 + MCP TS SDK)",
             "vscode124": "VS Code stack, MCP TS SDK 1.24.3", "sdk": "MCP Python SDK (uvicorn)",
             "bare": "bare node:http"}
# The VS Code stack's SDK package: the pinned release, and 1.24.3 installed beside it (an
# npm alias) as the last release before its Node.js transport went through @hono/node-server.
TS_SDK_PACKAGES = {"vscode": "@modelcontextprotocol/sdk", "vscode124": "@modelcontextprotocol/sdk-1.24"}


def _node() -> Optional[str]:
    return shutil.which("node")


def _start_tp_server(name: str, args: argparse.Namespace) -> Tuple[Optional[ServerProc], str]:
    """The server, or None and why it is skipped."""
    node = _node()
    env = dict(os.environ, BENCH_SELECTION=json.dumps(SELECTION))
    if name == "ours":
        return ServerProc("ours"), ""  # from --ours-root when given (BENCH_OURS_ROOT)
    if name == "ours_b":
        return ServerProc("ours", env=dict(os.environ, BENCH_OURS_ROOT=os.path.abspath(args.compare_root))), ""
    if name == "sdk":
        if not args.sdk:
            return None, "skipped (--no-sdk)"
        if not os.path.exists(SDK_PYTHON):
            return None, "not installed (make bench-venv)"
        return ServerProc("sdk", python=SDK_PYTHON), ""
    if not args.node:
        return None, "skipped (--no-node)"
    if not node:
        return None, "node not found"
    if name == "bare":
        return ServerProc("bare", argv=[node, os.path.join(NODE_DIR, "bare_http.js")], env=env), ""
    package = TS_SDK_PACKAGES[name]
    if not os.path.isdir(os.path.join(NODE_MODULES, *package.split("/"))):
        return None, "not installed (make bench-node)"
    env.update(NODE_PATH=NODE_MODULES, BENCH_MCP_TS_SDK=package)
    return ServerProc(name, argv=[node, os.path.join(NODE_DIR, "vscode_stack.js")], env=env), ""


def run_loadgen(proc: ServerProc, conc: int, duration: float, warmup: float) -> Dict[str, Any]:
    """One run of the Node.js load generator against one server (its own handshake and
    session, `warmup` seconds not counted, `duration` seconds counted)."""
    cfg = {"socket": proc.socket, "auth": proc.auth, "concurrency": conc, "duration": duration,
           "warmup": warmup, "serverPid": proc.pid, "clkTck": CLK_TCK, "expectText": SELECTION_TEXT,
           # No mcp-protocol-version header, as the CLI sends none (PROTOCOL.md §2); every
           # server here accepts that.
           "protocolHeader": False}
    out = subprocess.run([_node() or "node", os.path.join(NODE_DIR, "loadgen.js"), json.dumps(cfg)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=duration + warmup + 60)
    try:
        result = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError("load generator failed (exit %d): %s %s" % (out.returncode, out.stdout[-500:],
                                                                         out.stderr[-1500:]))
    if out.returncode != 0 or "error" in result:
        raise RuntimeError("load generator against %s: %s" % (proc.kind, result.get("error", out.stderr[-1500:])))
    return result


def group_throughput(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"servers": {}, "skipped": {}, "versions": {}, "loadgen": "tools/bench_node/loadgen.js",
                              "reps": args.tp_reps, "duration_s": args.tp_duration, "warmup_s": args.tp_warmup}
    servers = [name for name in TP_SERVERS if (name != "ours_b" or args.compare_root)
               and (not args.servers or name in args.servers.split(","))]
    if not args.node or not _node():
        why = "skipped (--no-node)" if not args.node else "node not found: the load generator is Node.js"
        result["skipped"] = {name: why for name in servers}
        log("  throughput: %s" % why)
        return result
    procs: Dict[str, ServerProc] = {}
    try:
        for name in servers:
            try:
                proc, why = _start_tp_server(name, args)
            except Exception as exc:  # report, do not fail the whole run
                proc, why = None, "failed to start: %s" % exc
            if proc is None:
                result["skipped"][name] = why
                log("  throughput: %s %s" % (name, why))
                continue
            procs[name] = proc
            info = proc.info.get("versions")
            if info:
                result["versions"][name] = info
        result["versions"]["loadgen_node"] = subprocess.run(
            [_node() or "node", "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
        # Runs not counted, at both concurrencies: V8 takes a few thousand requests to
        # compile the VS Code stack's hot paths (its req/s rose for ~5 s in trials).
        for name in list(procs):
            try:
                for conc, seconds in ((16, args.tp_prime * 2 / 3), (1, args.tp_prime / 3)):
                    run_loadgen(procs[name], conc, seconds, 0.0)
            except Exception as exc:  # report, do not fail the whole run
                result["skipped"][name] = "failed: %s" % exc
                log("  throughput: %s failed: %s" % (name, exc))
                procs.pop(name).close()
        names = list(procs)
        runs: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
        for rep in range(args.tp_reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for conc in (1, 16):
                for name in order:
                    if name in result["skipped"]:
                        continue
                    try:
                        runs.setdefault((name, conc), []).append(
                            run_loadgen(procs[name], conc, args.tp_duration, args.tp_warmup))
                    except Exception as exc:  # this server is out of the comparison, the run goes on
                        result["skipped"][name] = "failed in repetition %d: %s" % (rep + 1, exc)
                        log("  throughput: %s failed: %s" % (name, exc))
            log("  throughput rep %d/%d: %s" % (rep + 1, args.tp_reps, ", ".join(
                "%s %.0f/%.0f" % (n, runs[(n, 1)][-1]["rps"], runs[(n, 16)][-1]["rps"])
                for n in names if n not in result["skipped"])))
        names = [n for n in names if n not in result["skipped"]]
        runs = {k: v for k, v in runs.items() if k[0] in names}
        for (name, conc), rs in runs.items():
            agg: Dict[str, Any] = {k: median([r[k] for r in rs if isinstance(r.get(k), (int, float))])
                                   for k in ("rps", "p50_us", "p99_us", "server_cpu_util", "server_cpu_us_per_req",
                                             "gen_cpu_util", "gen_ceiling_rps")}
            agg["n"] = sum(r["n"] for r in rs)
            agg["errors"] = sum(r["errors"] for r in rs)
            agg["rep_rps"] = [round(r["rps"]) for r in rs]
            result["servers"].setdefault(name, {})["c%d" % conc] = agg
        for name in names:  # after every run (each ended its session with DELETE)
            result["servers"][name]["rss_kb"] = proc_status(procs[name].pid).get("VmRSS")
        ours = result["servers"].get("ours")
        for name in names:
            if name == "ours" or not ours:
                continue
            base = result["servers"][name]
            result.setdefault("ratios", {})[name] = {
                c: ours[c]["rps"] / base[c]["rps"] if base[c]["rps"] else None for c in ("c1", "c16")}
            # For reading the noise: the ratio within each repetition (the two runs close in time).
            result.setdefault("paired_ratios", {})[name] = {
                "c%d" % conc: [round(o["rps"] / b["rps"], 2) if b["rps"] else None
                               for o, b in zip(runs[("ours", conc)], runs[(name, conc)])] for conc in (1, 16)}
    finally:
        for p in procs.values():
            p.close()
    return result



# ============================================================ group 2: pushes
#
# The server under test runs in this process; the sessions' GET streams are read by
# client processes (`_pushclient`), each a bare epoll loop over non-blocking sockets.
# Each event's selection text carries its sequence number ("bench-000042"); this process
# stamps `time.monotonic()` just before `set_selection`, a client stamps each read just
# after `recv_into` returns; both are CLOCK_MONOTONIC, shared by all processes on Linux.
# The floor is the same clients fed by a trivial writer in this process, which sends a
# pre-built chunk of the same size to every socket with plain `send` calls: what the
# measuring side costs, the latency no server could beat on this machine.

PUSH_MARK = b'"text":"bench-'
PUSH_MARK_WIDTH = len(PUSH_MARK) + 6


def _arrivals(parts: List[Tuple[float, bytes]]) -> List[Tuple[int, float]]:
    """(event index, arrival time) of each event in one stream's reads: the stamp of the
    read that completed the event's sequence number."""
    out: List[Tuple[int, float]] = []
    carry = b""
    for when, data in parts:
        data = carry + data
        pos = 0
        while True:
            i = data.find(PUSH_MARK, pos)
            if i < 0 or i + PUSH_MARK_WIDTH > len(data):
                break
            out.append((int(data[i + len(PUSH_MARK):i + PUSH_MARK_WIDTH]), when))
            pos = i + PUSH_MARK_WIDTH
        carry = data[max(pos, len(data) - PUSH_MARK_WIDTH):]
    return out


def _push_client_main(path: str, auth: str, sessions: int, opts: str = "") -> int:
    """`bench.py _pushclient SOCKET AUTH N [OPTS]`: N sessions with open GET streams;
    prints `ready`, then, at EOF on stdin, its arrival stamps and read count as JSON.
    OPTS, comma-separated: `raw` (no MCP handshake: GET only, for the floor writer),
    `spin` (poll without sleeping: no wake-up latency, one core busy), `cpu=N` (pin).
    The loop only stamps and keeps what it reads (parsed afterwards), so its per-read
    cost, which adds to every session's latency after the first, stays minimal."""
    import select

    flags = set(o for o in opts.split(",") if o)
    for o in flags:
        if o.startswith("cpu="):
            os.sched_setaffinity(0, {int(o[4:])})
    socks: Dict[int, socket.socket] = {}
    heads: Dict[int, bytes] = {}
    for _ in range(sessions):
        sid = None if "raw" in flags else handshake(path, auth)[0]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(cli_request("GET", auth, session=sid))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("GET stream closed")
            head += chunk
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit("GET stream refused: %r" % head[:200])
        s.setblocking(False)
        socks[s.fileno()] = s
        heads[s.fileno()] = head
    ep = select.epoll()
    recv_into = {}
    for fd, s in socks.items():
        ep.register(fd, select.EPOLLIN)
        recv_into[fd] = s.recv_into
    stdin_fd = sys.stdin.fileno()
    ep.register(stdin_fd, select.EPOLLIN)
    buf = bytearray(1 << 16)
    reads: List[Tuple[int, float, bytes]] = []
    append = reads.append
    now = time.monotonic
    poll = ep.poll
    # spin: never sleep; spin=MS: after a read, poll without sleeping for MS ms (a burst
    # of writes then costs no wake-up per read); neither: sleep in epoll_wait.
    spin = float("inf") if "spin" in flags else 0.0
    for o in flags:
        if o.startswith("spin="):
            spin = float(o[5:]) / 1e3
    spin_until = 0.0
    gc_was = __import__("gc").isenabled()
    __import__("gc").disable()  # no collection pauses while measuring
    cpu0 = time.process_time()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    running = True
    t = 0.0
    while running:
        for fd, _ in poll(0 if spin_until > now() else 1.0):
            if fd == stdin_fd:
                if not os.read(stdin_fd, 4096):
                    running = False
                continue
            try:
                n = recv_into[fd](buf)
            except BlockingIOError:
                continue
            t = now()
            if not n:
                ep.unregister(fd)
                continue
            append((fd, t, buf[:n]))
        if t:
            spin_until = t + spin
            t = 0.0
    cpu = time.process_time() - cpu0
    nbytes = sum(len(r[2]) for r in reads)
    if gc_was:
        __import__("gc").enable()
    per_fd: Dict[int, List[Tuple[float, bytes]]] = {fd: [(0.0, heads[fd])] for fd in socks}
    for fd, t, data in reads:
        per_fd[fd].append((t, bytes(data)))
    arrivals: List[Tuple[int, float]] = []
    for fd, s in socks.items():
        arrivals.extend(_arrivals(per_fd[fd]))
        s.close()
    sys.stdout.write(json.dumps({"arrivals": arrivals, "reads": len(reads), "cpu_s": cpu,
                                "bytes": nbytes}) + "\n")
    sys.stdout.flush()
    return 0


def _push_chunk(i: int, size: int) -> bytes:
    """What the floor writer sends for event `i`: an SSE event in one HTTP chunk, `size`
    bytes in all, carrying the sequence number as our server's does."""
    data = b'event: message\ndata: {"jsonrpc":"2.0","method":"selection_changed","params":{"text":"bench-%06d","pad":"' % i
    end = b'"}}\n\n'
    pad = max(0, size - len(data) - len(end) - 7)  # 7: "%x\r\n" of a 3-digit size and the final "\r\n"
    event = data + b"x" * pad + end
    return b"%x\r\n%s\r\n" % (len(event), event)


def _push_clients(path: str, auth: str, sessions: int, procs: int, opts: List[str]) -> List[subprocess.Popen]:
    """Start the client processes (sessions spread evenly); opts[k] for process k."""
    counts = [sessions // procs + (1 if k < sessions % procs else 0) for k in range(procs)]
    return [subprocess.Popen([sys.executable, os.path.abspath(__file__), "_pushclient", path, auth, str(count),
                              opts[k % len(opts)]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for k, count in enumerate(counts) if count]


def _push_collect(clients: List[subprocess.Popen]) -> Tuple[List[Tuple[int, float]], int, float, int]:
    arrivals: List[Tuple[int, float]] = []
    reads, cpu, nbytes = 0, 0.0, 0
    for client in clients:
        client.stdin.close()  # type: ignore[union-attr]
    for client in clients:
        out = client.stdout.read()  # type: ignore[union-attr]
        client.wait(60)
        got = json.loads(out)
        arrivals.extend(tuple(a) for a in got["arrivals"])  # type: ignore[misc]
        reads += got["reads"]
        cpu += got["cpu_s"]
        nbytes += got["bytes"]
    return arrivals, reads, cpu, nbytes


def _await_ready(clients: List[subprocess.Popen]) -> None:
    for client in clients:
        line = client.stdout.readline()  # type: ignore[union-attr]
        if line.strip() != b"ready":
            raise RuntimeError("push client failed: %r" % line)


def _push_stats(kind: str, sessions: int, events: int, sent: Dict[int, float], call_ms: List[float],
                arrivals: List[Tuple[int, float]], reads: int, cpu: float, nbytes: int, procs: int) -> Dict[str, Any]:
    lat = [t - sent[i] for i, t in arrivals if i in sent]
    last: Dict[int, float] = {}
    first: Dict[int, float] = {}
    for i, t in arrivals:
        if i in sent:
            last[i] = max(last.get(i, 0.0), t - sent[i])
            first[i] = min(first.get(i, 1e9), t - sent[i])
    return {"kind": kind, "sessions": sessions, "client_processes": procs, "events": events, "received": len(lat),
            "expected": sessions * events, "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
            "first_session_p50_ms": pct(list(first.values()), 50) * 1e3,
            "last_session_p50_ms": pct(list(last.values()), 50) * 1e3, "send_ms": pct(call_ms, 50),
            "client_reads": reads, "client_us_per_read": cpu / reads * 1e6 if reads else float("nan"),
            "bytes_per_event": nbytes / len(lat) if lat else float("nan")}


async def _push_run_ours(sessions: int, events: int, gap: float, procs: int, opts: List[str],
                         server_cpu: Optional[int]) -> Dict[str, Any]:
    sys.path.insert(0, ROOT)
    from ide_protocol.server.ide_server import IdeServer
    from ide_protocol.common.tools import Selection

    tmp = tempfile.mkdtemp(prefix="b-", dir="/tmp")
    server = IdeServer([tmp], lock_dir=os.path.join(tmp, "locks"), socket_dir=tmp, debounce=0)
    await server.start()
    clients: List[subprocess.Popen] = []
    try:
        # The clients handshake with the server, which must run meanwhile: their start
        # (blocking) runs in a thread.
        clients = await asyncio.get_event_loop().run_in_executor(None, lambda: _push_clients(
            server.socket_path or "", "Nonce " + server.nonce, sessions, procs, opts))
        await asyncio.get_event_loop().run_in_executor(None, _await_ready, clients)
        sent: Dict[int, float] = {}
        call_ms: List[float] = []
        path = os.path.join(tmp, "a.py")
        sels = [Selection(path, "bench-%06d" % i, (i, 0), (i, 3)) for i in range(events)]
        await asyncio.sleep(0.05)
        now = time.monotonic
        with _pinned(server_cpu):
            for i in range(events):
                t0 = now()
                server.set_selection(sels[i])
                t1 = now()
                call_ms.append((t1 - t0) * 1e3)  # the broadcast itself, server side
                sent[i] = t0
                await asyncio.sleep(gap)
        await asyncio.sleep(0.1)
        arrivals, reads, cpu, nbytes = await asyncio.get_event_loop().run_in_executor(None, _push_collect, clients)
        clients = []
    finally:
        for client in clients:
            client.kill()
            client.wait()
        await server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return _push_stats("ours", sessions, events, sent, call_ms, arrivals, reads, cpu, nbytes, procs)


def _push_run_floor(sessions: int, events: int, gap: float, procs: int, opts: List[str],
                    server_cpu: Optional[int], size: int) -> Dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="b-", dir="/tmp")
    path = os.path.join(tmp, "floor.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(sessions)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    socks: List[socket.socket] = []
    clients: List[subprocess.Popen] = []
    try:
        clients = _push_clients(path, "Nonce x", sessions, procs, [o + ",raw" for o in opts])
        lsock.settimeout(60)
        for _ in range(sessions):
            conn, _ = lsock.accept()
            conn.settimeout(60)
            req = b""
            while b"\r\n\r\n" not in req:
                req += conn.recv(65536)
            conn.sendall(head)
            socks.append(conn)
        _await_ready(clients)
        chunks = [_push_chunk(i, size) for i in range(events)]
        sends = [s.send for s in socks]
        sent: Dict[int, float] = {}
        call_ms: List[float] = []
        time.sleep(0.05)
        now = time.monotonic
        with _pinned(server_cpu):
            for i in range(events):
                chunk = chunks[i]
                t0 = now()
                for send in sends:
                    send(chunk)
                call_ms.append((now() - t0) * 1e3)
                sent[i] = t0
                time.sleep(gap)
        time.sleep(0.1)
        arrivals, reads, cpu, nbytes = _push_collect(clients)
        clients = []
    finally:
        for client in clients:
            client.kill()
            client.wait()
        for s in socks:
            s.close()
        lsock.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return _push_stats("floor", sessions, events, sent, call_ms, arrivals, reads, cpu, nbytes, procs)


class _pinned:
    """Pin this process to one CPU for a block (None: leave it)."""

    def __init__(self, cpu: Optional[int]) -> None:
        self.cpu = cpu
        self.old: Any = None

    def __enter__(self) -> None:
        if self.cpu is not None:
            self.old = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {self.cpu})

    def __exit__(self, *exc: Any) -> None:
        if self.old is not None:
            os.sched_setaffinity(0, self.old)


PUSH_EVENT_BYTES = 279  # what our server writes per selection_changed here (`bytes_per_event` checks it)


def _push_layout(args: argparse.Namespace, pin: bool, log: Callable[[str], None]) -> Dict[str, Any]:
    """Floor and ours, 1 and N sessions, with the processes pinned or where the scheduler
    puts them."""
    procs = args.push_procs
    cpus = sorted(os.sched_getaffinity(0))
    pin = pin and len(cpus) >= 2
    # Pinned: this process (the server or the floor writer) on the first CPU, the client
    # processes on the others.
    server_cpu = cpus[0] if pin else None
    opts = ["cpu=%d" % cpus[1 + k % (len(cpus) - 1)] if pin else "" for k in range(procs)]
    if args.push_spin:
        opts = [o + (",spin" if args.push_spin == "always" else ",spin=%g" % float(args.push_spin)) for o in opts]
    label = "pinned" if pin else "unpinned"
    out: Dict[str, Any] = {}
    for sessions in (1, args.push_sessions):
        gap = 0.004 if sessions == 1 else 0.02
        runs: Dict[str, List[Dict[str, Any]]] = {"floor": [], "ours": []}
        for _ in range(args.push_reps):  # interleaved: drift and other load hit both alike
            runs["floor"].append(_push_run_floor(sessions, args.push_events, gap, procs, opts, server_cpu,
                                                 PUSH_EVENT_BYTES))
            runs["ours"].append(asyncio.run(_push_run_ours(sessions, args.push_events, gap, procs, opts,
                                                           server_cpu)))
        aggs = {}
        for kind, reps in runs.items():
            agg = {k: median([r[k] for r in reps]) for k in ("p50_ms", "p99_ms", "first_session_p50_ms",
                                                              "last_session_p50_ms", "send_ms",
                                                              "client_us_per_read", "bytes_per_event")}
            agg.update(sessions=sessions, events=args.push_events, reps=len(reps), client_processes=procs,
                       received=sum(r["received"] for r in reps), expected=sum(r["expected"] for r in reps),
                       rep_p50_ms=[round(r["p50_ms"], 3) for r in reps],
                       rep_p99_ms=[round(r["p99_ms"], 3) for r in reps])
            aggs[kind] = agg
        ours = aggs["ours"]
        ours["set_selection_ms"] = ours.pop("send_ms")
        ours["floor"] = aggs["floor"]
        ours["layout"] = label
        ours["client"] = {"processes": procs, "pinned": pin, "spin": args.push_spin}
        out["s%d" % sessions] = ours
        log("  push %s, %d session(s): ours p50 %.3f ms p99 %.3f ms; floor p50 %.3f ms p99 %.3f ms" % (
            label, sessions, ours["p50_ms"], ours["p99_ms"], aggs["floor"]["p50_ms"], aggs["floor"]["p99_ms"]))
    return out


def group_push(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    """The first layout is the measurement (the target's); the other, if any, is shown
    under each session count's "other" key."""
    layouts = {"both": (True, False), "pinned": (True,), "unpinned": (False,)}[args.push_layout]
    if len(os.sched_getaffinity(0)) < 2:
        layouts = (False,)  # nothing to pin to
    out = _push_layout(args, layouts[0], log)
    for pin in layouts[1:]:
        other = _push_layout(args, pin, log)
        for key in out:
            out[key]["other"] = other[key]
    return out



# ======================================================= group 3: large open_diff


def _diff_contents(size: int) -> str:
    line = "    value = compute(alpha, beta, gamma)  # a line of ordinary source code\n"
    text = line * (size // len(line) + 1)
    return text[:size]


def _diff_once(contents: str, trace: bool, chunk: int) -> Dict[str, Any]:
    proc = ServerProc("ours")
    try:
        sid, extra = handshake(proc.socket, proc.auth)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"_meta": dict(META, progressToken=7), "name": "open_diff",
                           "arguments": {"original_file_path": os.path.join(proc.dir, "project", "big.txt"),
                                         "new_file_contents": contents, "tab_name": "[Copilot CLI] - big.txt"}}}
        raw_body = json.dumps(body, separators=(",", ":")).encode()
        request = cli_request("POST", proc.auth, raw_body, session=sid, extra=extra, chunk_size=chunk)
        del body
        if trace:
            proc.command("trace_start")
        before = proc.command("rss")
        reset = proc.command("reset_hwm")
        conn = BlockingConn(proc.socket)
        t0 = time.perf_counter()
        conn.sock.sendall(request)
        t_sent = time.perf_counter()  # all but the last socket buffer's worth has been read
        raw = conn.roundtrip(b"")
        elapsed = time.perf_counter() - t0
        conn.close()
        after = proc.command("rss")
        traced = proc.command("trace_stop") if trace else {}
        status, _, resp_body = split_response(raw)
        answer = json.loads(sse_json(resp_body)["result"]["content"][0]["text"])
        if status != 200 or answer.get("result") != "SAVED":
            raise RuntimeError("open_diff answered %d %r" % (status, answer))
        hwm_base = before["rss_kb"] if reset.get("ok") else before["hwm_kb"]
        return {"ms": elapsed * 1e3, "send_ms": (t_sent - t0) * 1e3, "body_bytes": len(raw_body),
                "hwm_delta_bytes": (after["hwm_kb"] - hwm_base) * 1024,
                "maxrss_delta_bytes": (after["maxrss_kb"] - before["maxrss_kb"]) * 1024,
                "traced_peak_bytes": traced.get("peak"),
                "hwm_reset": bool(reset.get("ok"))}
    finally:
        proc.close()


def group_diff(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    contents = _diff_contents(args.diff_mb * 1024 * 1024)
    runs = [_diff_once(contents, False, 16384) for _ in range(args.diff_reps)]
    traced = _diff_once(contents, True, 16384)
    out = {"contents_bytes": len(contents), "body_bytes": runs[0]["body_bytes"], "chunk_bytes": 16384,
           "ms": median([r["ms"] for r in runs]), "send_ms": median([r["send_ms"] for r in runs]),
           "hwm_delta_bytes": median([r["hwm_delta_bytes"] for r in runs]),
           "maxrss_delta_bytes": median([r["maxrss_delta_bytes"] for r in runs]),
           "traced_peak_bytes": traced["traced_peak_bytes"], "traced_ms": traced["ms"],
           "hwm_reset": runs[0]["hwm_reset"],
           "rep_ms": [round(r["ms"], 1) for r in runs]}
    out["peak_bytes"] = max(out["hwm_delta_bytes"], out["traced_peak_bytes"] or 0)
    out["peak_ratio"] = out["peak_bytes"] / out["body_bytes"]
    log("  diff: %.1f ms, peak %.1f MB" % (out["ms"], out["peak_bytes"] / 1e6))
    return out


# ================================================== group 4: start-up and footprint


def _time_process(argv: List[str], env: Dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _idle_rss(argv: List[str], env: Dict[str, str], settle: float) -> int:
    p = subprocess.Popen(argv, env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdout.readline()  # type: ignore[union-attr]
        time.sleep(settle)
        return proc_status(p.pid).get("VmRSS", 0)
    finally:
        p.stdin.close()  # type: ignore[union-attr]
        p.wait(10)


def _serve_once(env: Dict[str, str], sessions: int, settle: float) -> Dict[str, Any]:
    home = tempfile.mkdtemp(prefix="b-", dir="/tmp")
    folder = os.path.join(home, "project")
    os.makedirs(folder)
    env = dict(env, COPILOT_HOME=home, NO_COLOR="1")
    lock_dir = os.path.join(home, "ide")
    log_file = open(os.path.join(home, "serve.out"), "wb")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", folder], env=env, cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT)
    lock = None
    try:
        deadline = t0 + 20
        while time.perf_counter() < deadline:
            try:
                names = [n for n in os.listdir(lock_dir) if n.endswith(".lock")]
            except OSError:
                names = []
            if names:
                lock = os.path.join(lock_dir, names[0])
                break
            if p.poll() is not None:
                break
            time.sleep(0.0005)
        t_lock = time.perf_counter() - t0
        if lock is None:
            log_file.flush()
            with open(os.path.join(home, "serve.out"), "rb") as f:
                raise RuntimeError("serve wrote no lock file: %r" % f.read()[-500:])
        out: Dict[str, Any] = {"lock_s": t_lock}
        time.sleep(settle)
        out["idle_rss_kb"] = proc_status(p.pid).get("VmRSS", 0)
        if sessions:
            for _ in range(50):
                try:
                    with open(lock) as f:
                        info = json.load(f)
                    break
                except ValueError:
                    time.sleep(0.01)
            path, auth = info["socketPath"], info["headers"]["Authorization"]
            streams = []
            for _ in range(sessions):
                sid, _ = handshake(path, auth)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                s.sendall(cli_request("GET", auth, session=sid))
                streams.append(s)
            for s in streams:  # each stream's head has arrived
                s.settimeout(10)
                s.recv(65536)
            time.sleep(settle)
            out["sessions"] = sessions
            out["sessions_rss_kb"] = proc_status(p.pid).get("VmRSS", 0)
            for s in streams:
                s.close()
        return out
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log_file.close()
        shutil.rmtree(home, ignore_errors=True)


def group_startup(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    base_argv = [py, "-c", "import asyncio, json"]
    variants = {
        "baseline": base_argv,
        "import_ide_protocol": [py, "-c", "import asyncio, json; import ide_protocol"],
        "import_server": [py, "-c", "import asyncio, json; from ide_protocol import IdeServer"],
        "import_serve": [py, "-c", "import asyncio, json; import ide_protocol.__main__, ide_protocol.programs.serve"],
    }
    for argv in variants.values():  # warm the bytecode caches and the page cache
        _time_process(argv, env)
    times: Dict[str, List[float]] = {k: [] for k in variants}
    serve_runs: List[Dict[str, Any]] = []
    # In a process that has imported asyncio and json (the baseline), what each import
    # adds, timed inside the process: immune to the process start-up noise.
    inproc_argv = [py, "-c", "import asyncio, json, time; p = time.perf_counter; t0 = p(); import ide_protocol; "
                   "t1 = p(); from ide_protocol import IdeServer; t2 = p(); import ide_protocol.__main__, "
                   "ide_protocol.programs.serve; t3 = p(); print(t1 - t0, t2 - t0, t3 - t0)"]
    inproc: List[List[float]] = []
    for rep in range(args.startup_reps):
        for name, argv in variants.items():  # interleaved: drift hits all alike
            times[name].append(_time_process(argv, env))
        inproc.append([float(x) for x in subprocess.run(inproc_argv, env=env, cwd=ROOT, check=True,
                                                         stdout=subprocess.PIPE, text=True).stdout.split()])
        serve_runs.append(_serve_once(env, args.push_sessions if rep == 0 else 0, args.settle))
    base = median(times["baseline"])
    out: Dict[str, Any] = {"baseline_s": base}
    for name in variants:
        if name != "baseline":
            out[name + "_s"] = median(times[name])
            out[name + "_added_ms"] = (median(times[name]) - base) * 1e3
    for k, name in enumerate(("import_ide_protocol", "import_server", "import_serve")):
        out["inprocess_%s_ms" % name] = median([r[k] for r in inproc]) * 1e3
    out["serve_lock_s"] = median([r["lock_s"] for r in serve_runs])
    out["serve_lock_after_baseline_ms"] = (out["serve_lock_s"] - base) * 1e3
    rss_base = [_idle_rss([py, "-c", "import asyncio, json, sys; print(1, flush=True); sys.stdin.read()"], env,
                          args.settle) for _ in range(3)]
    out["baseline_rss_kb"] = median(rss_base)
    out["serve_idle_rss_kb"] = median([r["idle_rss_kb"] for r in serve_runs])
    out["idle_rss_ratio"] = out["serve_idle_rss_kb"] / out["baseline_rss_kb"]
    with_sessions = [r for r in serve_runs if "sessions_rss_kb" in r]
    if with_sessions:
        r = with_sessions[0]
        out["sessions"] = r["sessions"]
        out["sessions_rss_kb"] = r["sessions_rss_kb"]
        out["per_session_kb"] = (r["sessions_rss_kb"] - r["idle_rss_kb"]) / r["sessions"]
    out["rep_lock_ms"] = [round(r["lock_s"] * 1e3, 1) for r in serve_runs]
    out["rep_baseline_ms"] = [round(t * 1e3, 1) for t in times["baseline"]]
    log("  startup: baseline %.1f ms, serve lock %.1f ms" % (base * 1e3, out["serve_lock_s"] * 1e3))
    return out



# ================================================================ report


def machine_info() -> Dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {"cores": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "loadavg_at_start": [round(x, 2) for x in load]}


def evaluate(results: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The project's targets, each as a ratio or a figure measured in this run."""
    targets: List[Dict[str, Any]] = []

    def add(name: str, value: Optional[float], limit: float, higher_is_better: bool, unit: str, detail: str) -> None:
        op = ">=" if higher_is_better else "<"
        if value is None or value != value:
            targets.append({"target": name, "value": None, "op": op, "limit": limit, "unit": unit,
                            "status": "N/A", "detail": detail})
            return
        ok = value >= limit if higher_is_better else value < limit
        targets.append({"target": name, "value": value, "op": op, "limit": limit, "unit": unit,
                        "status": "PASS" if ok else "MISS", "detail": detail})

    rt = results.get("rt")
    if rt:
        s = rt["servers"]
        ours, floor = s["ours"]["c1"], s["floor"]["c1"]
        pairs = rt.get("paired_p50_ratios", {}).get("c1") or [ours["p50_us"] / floor["p50_us"]]
        add("rt c1 p50 vs floor", median(pairs), 1.5, False, "x",
            "median of %d paired repetitions (%.2f to %.2f); medians %.0f us vs %.0f us = %.2fx" % (
                len(pairs), min(pairs), max(pairs), ours["p50_us"], floor["p50_us"], ours["p50_us"] / floor["p50_us"]))
    tp = results.get("throughput")
    if tp is not None:
        # The targets are against the VS Code stack as pinned; the same against its SDK
        # 1.24.3, the cheaper transport, show whether they would hold there too.
        for base, conc, limit in (("vscode", "c1", 2.0), ("vscode", "c16", 5.0), ("sdk", "c1", 5.0),
                                  ("vscode124", "c1", 2.0), ("vscode124", "c16", 5.0)):
            name = "throughput %s vs %s" % (conc, {"vscode": "VS Code stack", "sdk": "MCP Python SDK",
                                                   "vscode124": "VS Code stack, SDK 1.24.3"}[base])
            ratio = tp.get("ratios", {}).get(base, {}).get(conc)
            if ratio is None:
                add(name, None, limit, True, "x", "%s: %s" % (base, tp["skipped"].get(base, "not measured")))
                continue
            o, b = tp["servers"]["ours"][conc], tp["servers"][base][conc]
            add(name, ratio, limit, True, "x", "medians of %d: %.0f vs %.0f req/s" % (
                len(o["rep_rps"]), o["rps"], b["rps"]))
    push = results.get("push")
    if push:
        key = max(push, key=lambda k: push[k]["sessions"])
        r = push[key]
        detail = "%s: p99 %.2f ms; floor p50 %.2f ms" % (r.get("layout", ""), r["p99_ms"], r["floor"]["p50_ms"])
        if r.get("other"):
            o = r["other"]
            detail += "; %s p50 %.2f ms (floor %.2f)" % (o["layout"], o["p50_ms"], o["floor"]["p50_ms"])
        add("push p50, %d sessions" % r["sessions"], r["p50_ms"], 2.0, False, "ms", detail)
    diff = results.get("diff")
    if diff:
        mb = diff["contents_bytes"] / 1048576
        add("open_diff %.0f MB peak / body" % mb, diff["peak_ratio"], 4.0, False, "x",
            "%.1f MB peak for %.1f MB body" % (diff["peak_bytes"] / 1e6, diff["body_bytes"] / 1e6))
        add("open_diff %.0f MB time" % mb, diff["ms"], 100.0, False, "ms", "")
    st = results.get("startup")
    if st:
        add("import ide_protocol added", st["inprocess_import_ide_protocol_ms"], 15.0, False, "ms",
            "timed in-process; process time vs baseline %+.1f ms" % st["import_ide_protocol_added_ms"])
        add("from ide_protocol import IdeServer added", st["inprocess_import_server_ms"], 15.0, False, "ms",
            "timed in-process; process time vs baseline %+.1f ms" % st["import_server_added_ms"])
        add("serve lock written after baseline", st["serve_lock_after_baseline_ms"], 100.0, False, "ms",
            "lock at %.1f ms" % (st["serve_lock_s"] * 1e3))
        add("serve idle RSS / baseline", st["idle_rss_ratio"], 1.3, False, "x",
            "%.1f MB vs %.1f MB" % (st["serve_idle_rss_kb"] / 1024, st["baseline_rss_kb"] / 1024))
    return targets


def render(results: Dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["ide_protocol benchmarks  %s" % results["date"],
             "machine: %s cores, %s, %s %s, load %s" % (m["cores"], m["cpu"] or "?", m["implementation"],
                                                        m["python"], m["loadavg_at_start"]),
             "mode: %s; medians of the repetitions; other work on the machine adds noise" % results["mode"], ""]
    rt = results.get("rt")
    if rt:
        lines.append("1. tools/call get_selection round trip (chunked POST, SSE answer, keep-alive; %d B request, "
                     "%d B response)" % (rt["request_bytes"], rt["response_bytes"]))
        lines.append("   %-6s %4s %9s %9s %9s %8s %10s %10s %9s" % (
            "server", "conc", "p50 us", "p99 us", "req/s", "vs floor", "server us", "gen ceil", "gen cpu"))
        floor = rt["servers"]["floor"]
        for name in ("floor", "ours"):
            for conc in ("c1", "c16"):
                r = rt["servers"][name][conc]
                lines.append("   %-6s %4s %9.0f %9.0f %9.0f %7.2fx %10.0f %10.0f %8.0f%%" % (
                    name, conc[1:], r["p50_us"], r["p99_us"], r["rps"], r["p50_us"] / floor[conc]["p50_us"],
                    r["server_cpu_us_per_req"], r["gen_ceiling_rps"], r["gen_cpu_util"] * 100))
        for conc, pairs in sorted(rt.get("paired_p50_ratios", {}).items(), key=lambda kv: int(kv[0][1:])):
            lines.append("   ours/floor p50 by repetition, %s: %s; median %.2fx" % (
                conc, " ".join("%.2f" % x for x in pairs), median(pairs)))
        lines.append("   (vs floor: ratio of the medians; server us: server CPU per request; gen ceil: generator "
                     "req/s per CPU-second, its ceiling; gen cpu: its utilisation)")
        lines.append("")
    tp = results.get("throughput")
    if tp is not None:
        lines.append("1b. throughput side by side: tools/call get_selection, one Node.js keep-alive load generator "
                     "for all, %d repetitions of %.1f s, servers interleaved" % (tp["reps"], tp["duration_s"]))
        lines.append("   %-40s %4s %9s %9s %9s %10s %10s %9s %9s" % (
            "server", "conc", "req/s", "p50 us", "p99 us", "ours/this", "server us", "gen ceil", "gen cpu"))
        for name in TP_SERVERS:
            if name not in tp["servers"] and name not in tp["skipped"]:
                continue
            if name not in tp["servers"]:
                lines.append("   %-40s %s" % (TP_LABELS[name], tp["skipped"].get(name, "not measured")))
                continue
            for conc in ("c1", "c16"):
                r = tp["servers"][name][conc]
                ratio = tp.get("ratios", {}).get(name, {}).get(conc)
                lines.append("   %-40s %4s %9.0f %9.0f %9.0f %10s %10.0f %9.0f %8.0f%%" % (
                    TP_LABELS[name], conc[1:], r["rps"], r["p50_us"], r["p99_us"],
                    "%.2fx" % ratio if ratio else "", r["server_cpu_us_per_req"] or float("nan"),
                    r["gen_ceiling_rps"] or float("nan"), r["gen_cpu_util"] * 100))
            rss = tp["servers"][name].get("rss_kb")
            errors = sum(tp["servers"][name][c]["errors"] for c in ("c1", "c16"))
            lines.append("   %-40s      req/s by repetition: c1 %s, c16 %s; RSS after %s%s" % (
                "", tp["servers"][name]["c1"]["rep_rps"], tp["servers"][name]["c16"]["rep_rps"],
                "%.1f MB" % (rss / 1024) if rss else "?", "; %d answers not 200" % errors if errors else ""))
        lines.append("   versions: %s" % json.dumps(tp.get("versions", {}), sort_keys=True))
        lines.append("   (ours/this: ratio of the medians of req/s; server us: server CPU per request, all its "
                     "threads; gen ceil: generator req/s per CPU-second, its ceiling; gen cpu: its CPU use)")
        lines.append("")
    push = results.get("push")
    if push:
        c = next(iter(push.values())).get("client", {})
        spin = c.get("spin")
        lines.append("2. push: set_selection (debounce 0) to arrival on a GET stream; %d client process(es), each a "
                     "bare epoll loop%s" % (c.get("processes", 1), "" if not spin else ", spinning" if spin == "always"
                                            else ", spinning %s ms after a read" % spin))
        lines.append("   %-8s %-6s %8s %8s %8s %9s %9s %9s %9s %9s %7s" % (
            "layout", "server", "sessions", "p50 ms", "p99 ms", "vs floor", "first ms", "last ms", "writes ms",
            "client us", "B/event"))
        keys = sorted(push, key=lambda k: push[k]["sessions"])
        for layout in (None, "other"):
            for key in keys:
                r = push[key] if layout is None else push[key].get(layout)
                if not r:
                    continue
                f = r["floor"]
                for name, x in (("floor", f), ("ours", r)):
                    lines.append("   %-8s %-6s %8d %8.3f %8.3f %8.2fx %9.3f %9.3f %9.3f %9.1f %7.0f" % (
                        r.get("layout", ""), name, x["sessions"], x["p50_ms"], x["p99_ms"], x["p50_ms"] / f["p50_ms"],
                        x["first_session_p50_ms"], x["last_session_p50_ms"], x.get("set_selection_ms", x.get("send_ms")),
                        x["client_us_per_read"], x["bytes_per_event"]))
                lines.append("   %-8s %-6s %8s reps' p50: ours %s, floor %s; events %d/%d" % (
                    "", "", "", r["rep_p50_ms"], f["rep_p50_ms"], r["received"], r["expected"]))
        lines.append("   (floor: the same clients fed by a plain send() loop of a pre-built chunk of the same size: the "
                     "measuring side's own ceiling;")
        lines.append("   pinned: the server or floor writer on one CPU, the clients on the other(s), the measurement; "
                     "unpinned: where the scheduler puts them")
        lines.append("   (a woken reader often lands on its writer's CPU and waits for it); first/last: p50 over events "
                     "of the first/last session to get it;")
        lines.append("   writes: the set_selection call / the floor's send loop; client us: client CPU per read)")
        lines.append("")
    diff = results.get("diff")
    if diff:
        lines.append("3. open_diff, %.1f MB new_file_contents in %d B chunks (%.1f MB body)" % (
            diff["contents_bytes"] / 1048576, diff["chunk_bytes"], diff["body_bytes"] / 1e6))
        lines.append("   time %.1f ms (of which sending %.1f ms; reps %s); peak %.1f MB = %.2fx body (VmHWM rise %.1f MB, tracemalloc %.1f MB, "
                     "ru_maxrss rise %.1f MB)" % (
                         diff["ms"], diff["send_ms"], diff["rep_ms"], diff["peak_bytes"] / 1e6, diff["peak_ratio"],
                         diff["hwm_delta_bytes"] / 1e6, (diff["traced_peak_bytes"] or 0) / 1e6,
                         diff["maxrss_delta_bytes"] / 1e6))
        lines.append("")
    st = results.get("startup")
    if st:
        lines.append("4. start-up and footprint vs python3 -c \"import asyncio, json\" (%.1f ms, %.1f MB)" % (
            st["baseline_s"] * 1e3, st["baseline_rss_kb"] / 1024))
        lines.append("   %-36s %7s %9s" % ("added to the baseline", "timed in", "process"))
        for name, label in (("import_ide_protocol", "import ide_protocol"),
                            ("import_server", "from ide_protocol import IdeServer"),
                            ("import_serve", "import what serve needs")):
            lines.append("   %-36s %7.1f %+9.1f ms" % (label, st["inprocess_%s_ms" % name], st["%s_added_ms" % name]))
        lines.append("   serve: lock file at %.1f ms = baseline +%.1f ms (reps %s)" % (
            st["serve_lock_s"] * 1e3, st["serve_lock_after_baseline_ms"], st["rep_lock_ms"]))
        lines.append("   idle RSS %.1f MB = %.2fx baseline" % (st["serve_idle_rss_kb"] / 1024, st["idle_rss_ratio"]))
        if "sessions_rss_kb" in st:
            lines.append("   RSS with %d sessions (GET streams open) %.1f MB (+%.1f kB per session)" % (
                st["sessions"], st["sessions_rss_kb"] / 1024, st["per_session_kb"]))
        lines.append("")
    lines.append("targets")
    for t in results["targets"]:
        value = "n/a" if t["value"] is None else "%.2f %s" % (t["value"], t["unit"])
        lines.append("   %-4s %-46s %10s  (target %s %g %s) %s" % (
            t["status"], t["target"], value, t["op"], t["limit"], t["unit"], t["detail"]))
    return "\n".join(lines)


GROUPS = ("rt", "throughput", "push", "diff", "startup")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short repetition of everything (smoke test)")
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: %s" % ", ".join(GROUPS))
    parser.add_argument("--json", default=os.path.join(ROOT, "bench-results.json"), metavar="PATH",
                        help="where to write the results (default: %(default)s)")
    parser.add_argument("--no-sdk", dest="sdk", action="store_false", help="skip the official MCP Python SDK")
    parser.add_argument("--no-node", dest="node", action="store_false",
                        help="skip the Node.js servers and load generator (the throughput group)")
    parser.add_argument("--ours-root", default=None, metavar="DIR",
                        help="import our server from another checkout (e.g. a `git worktree` of an older commit)")
    parser.add_argument("--compare-root", default=None, metavar="DIR",
                        help="throughput: also our server imported from DIR (another checkout), side by side")
    parser.add_argument("--servers", default="", metavar="LIST",
                        help="throughput: only these servers, of %s" % ", ".join(TP_SERVERS))
    parser.add_argument("--tp-reps", type=int, default=None, help="repetitions of the throughput runs")
    parser.add_argument("--tp-duration", type=float, default=None, help="seconds counted per throughput run")
    parser.add_argument("--tp-warmup", type=float, default=None, help="seconds not counted before each run")
    parser.add_argument("--tp-prime", type=float, default=None,
                        help="seconds of load not counted per server before the first repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions of the round-trip runs")
    parser.add_argument("--duration", type=float, default=None, help="seconds per round-trip run")
    parser.add_argument("--profile", default=None, metavar="DIR", help="cProfile our server in the first rt runs")
    parser.add_argument("--push-procs", type=int, default=1, help="push client processes (default %(default)s)")
    parser.add_argument("--push-layout", choices=("both", "pinned", "unpinned"), default="both",
                        help="push runs with the server and the clients pinned to different CPUs, where the "
                             "scheduler puts them, or both (default; pinned is the measurement)")
    parser.add_argument("--push-spin", default="", metavar="MS|always",
                        help="push clients poll without sleeping: always, or for MS ms after each read")
    args = parser.parse_args(argv)
    if sys.platform != "linux":
        print("tools/bench.py reads /proc: Linux only", file=sys.stderr)
        return 2
    if args.ours_root:
        os.environ["BENCH_OURS_ROOT"] = os.path.abspath(args.ours_root)  # read by `_serve ours`
    groups = [g.strip() for g in args.only.split(",") if g.strip()]
    for g in groups:
        if g not in GROUPS:
            parser.error("unknown group %r" % g)
    q = args.quick
    defaults = dict(reps=1 if q else 9, duration=0.2 if q else 1.0, tp_reps=3 if q else 9,
                    tp_duration=0.5 if q else 1.5, tp_warmup=0.2 if q else 0.3, tp_prime=1.5 if q else 6.0, push_sessions=10 if q else 100,
                    push_events=10 if q else 60, push_reps=1 if q else 3, diff_mb=1 if q else 10,
                    diff_reps=1 if q else 5, startup_reps=1 if q else 15, settle=0.05 if q else 0.3)
    for k, v in defaults.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: Dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(), "mode": "quick" if q else "full",
        "config": {k: getattr(args, k) for k in ("reps", "duration", "tp_reps", "tp_duration", "tp_warmup",
                                                  "tp_prime", "push_sessions", "push_events", "push_reps",
                                                  "diff_mb", "diff_reps", "startup_reps", "settle", "sdk", "node")},
    }
    runners = {"rt": group_rt, "throughput": group_throughput, "push": group_push, "diff": group_diff,
               "startup": group_startup}
    for g in groups:
        log("running %s ..." % g)
        t0 = time.perf_counter()
        results[g] = runners[g](args, log)
        results.setdefault("seconds", {})[g] = round(time.perf_counter() - t0, 1)
    try:
        results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    results["targets"] = evaluate(results)
    text = render(results)
    results["table"] = text.split("\n")
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print("\nwritten %s" % args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        sys.exit(_serve_main(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if len(sys.argv) > 1 and sys.argv[1] == "_pushclient":
        sys.exit(_push_client_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:6]))
    sys.exit(main())
