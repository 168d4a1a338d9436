"""The push group: `set_selection` (debounce 0) to arrival on the client's GET stream,
1 and N sessions. The server runs in this process, the sessions' streams are read by
client processes (push_client.py).

The floor is the same clients fed by a trivial writer in this process, which sends a
pre-built chunk of the same size to every socket with plain `send` calls: what the
measuring side costs, the latency no server could beat on this machine. Measured with
the server (or floor writer) and the clients pinned to different CPUs, and again where
the scheduler puts them.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .common import ROOT, median, pct

PUSH_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "push_client.py")

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
    return [subprocess.Popen([sys.executable, PUSH_CLIENT, path, auth, str(count),
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


