"""A push client process of the push group: N sessions with open GET streams, read by a
bare epoll loop over non-blocking sockets, each read stamped with `time.monotonic()`
just after `recv_into` returns (CLOCK_MONOTONIC, shared by all processes on Linux).

    python3 tools/bench/push_client.py SOCKET AUTH N [OPTS]

Each event's selection text carries its sequence number ("bench-000042"); `arrivals`
finds them in the reads of one stream.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Dict, List, Tuple

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tools.bench.wire import cli_request, handshake  # noqa: E402

PUSH_MARK = b'"text":"bench-'
PUSH_MARK_WIDTH = len(PUSH_MARK) + 6


def arrivals(parts: List[Tuple[float, bytes]]) -> List[Tuple[int, float]]:
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


def client_main(path: str, auth: str, sessions: int, opts: str = "") -> int:
    """`push_client.py SOCKET AUTH N [OPTS]`: N sessions with open GET streams;
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
    found: List[Tuple[int, float]] = []
    for fd, s in socks.items():
        found.extend(arrivals(per_fd[fd]))
        s.close()
    sys.stdout.write(json.dumps({"arrivals": found, "reads": len(reads), "cpu_s": cpu,
                                "bytes": nbytes}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(client_main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5]))
