"""What one `tools/call get_selection` costs the server, in instructions: the number
that decides whether a speed trick on the request path earns its place.

The request goes through the whole server side, in process: `HttpConnection` (bytes
in, through `http11.ServerConnection` and the parser, the judge, `McpApp`, the
dispatcher, the tool, JSON through the public `json` API, the writer) to a transport
that only counts what it is given. No socket and no load client, so nothing else is
measured. Under `valgrind --tool=callgrind` (instructions, which the machine's load does
not change) the figure is the difference between two runs of N and 2N requests,
divided by N: start-up cancels out. Without valgrind, or with `--cpu`, it is the CPU
time per request (noisy on a loaded machine).

    python3 tools/bench_cost.py [--root DIR ...] [--requests N] [--cpu]

Each `--root` is a checkout whose `ide_protocol` is measured (default: this one); the
roots run one after the other, and their ratio to the first is printed: a trick is
measured by a root without it (a `git worktree` with the trick taken out).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _request(body: bytes, session: Optional[str]) -> bytes:
    """A POST as Copilot CLI 1.0.102 sends it (its fields, in its order; chunked)."""
    lines = ["POST /mcp HTTP/1.1", "X-Copilot-Session-Id: dd2a8913-a676-4133-b217-36b97d0ac572",
             "X-Copilot-PID: 32748", "X-Copilot-Parent-PID: 32746", "Authorization: Nonce %s",
             "accept: application/json, text/event-stream", "content-type: application/json"]
    if session:
        lines.append("mcp-session-id: " + session)
    lines += ["Host: localhost", "Connection: keep-alive", "Transfer-Encoding: chunked"]
    head = "\r\n".join(lines) + "\r\n\r\n"
    return head.encode("latin-1") + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def serve(requests: int) -> None:
    """The measured run: a server, one connection, `requests` calls of get_selection."""
    import asyncio

    from ide_protocol import IdeServer, Selection
    from ide_protocol.server.transport import HttpConnection

    class Transport:
        written = 0

        def write(self, data: bytes) -> None:
            self.written += len(data)
            self.last = data

        def is_closing(self) -> bool:
            return False

        def get_write_buffer_size(self) -> int:
            return 0

        def pause_reading(self) -> None:
            pass

        resume_reading = close = abort = pause_reading

    async def main() -> None:
        folder = tempfile.mkdtemp()
        try:
            path = os.path.join(folder, "app.py")
            with open(path, "w") as f:
                f.write("def main():\n    return 42\n")
            server = IdeServer([folder], write_lock=False)
            server.set_selection(Selection(path, "return 42", (1, 4), (1, 13)))
            conn = HttpConnection(server.app.answer, 1, judge=server.app.judge_head)
            transport = Transport()
            conn.connection_made(transport)
            nonce = server.nonce
            init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "copilot-cli", "version": "1.0.102"}}}).encode()
            conn.data_received(_request(init, None).replace(b"%s", nonce.encode()))
            head = transport.last.split(b"\r\n\r\n", 1)[0].decode("latin-1")
            session = [line.split(":", 1)[1].strip() for line in head.split("\r\n")
                       if line.lower().startswith("mcp-session-id:")][0]
            call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "get_selection", "arguments": {}}}).encode()
            raw = _request(call, session).replace(b"%s", nonce.encode())
            conn.data_received(raw)  # (the selection's result is made at the first call)
            assert b'"text"' in transport.last, transport.last[:200]
            started = time.process_time()
            for _ in range(requests):
                conn.data_received(raw)
            spent = time.process_time() - started
            print(json.dumps({"cpu_us": spent / requests * 1e6}))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    asyncio.run(main())


def _instructions(root: str, requests: int) -> int:
    out = tempfile.mkdtemp()
    try:
        env = dict(os.environ, PYTHONPATH=root, PYTHONHASHSEED="0")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(out, "cg.out"),
                        sys.executable, os.path.abspath(__file__), "--serve", str(requests)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(out, "cg.out")) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
        raise RuntimeError("no totals in callgrind's output")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure(root: str, requests: int, cpu: bool) -> float:
    if cpu or not shutil.which("valgrind"):
        env = dict(os.environ, PYTHONPATH=root)
        best = min(json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--serve", str(requests)],
                                             env=env, check=True, capture_output=True, text=True).stdout)["cpu_us"]
                   for _ in range(5))
        return best
    return (_instructions(root, 2 * requests) - _instructions(root, requests)) / requests


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", default=[], help="a checkout to measure (repeatable)")
    parser.add_argument("--requests", type=int, default=None, help="N (default: 2000 under valgrind, 20000 else)")
    parser.add_argument("--cpu", action="store_true", help="CPU time per request, not instructions")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    cpu = args.cpu or not shutil.which("valgrind")
    requests = args.requests or (20000 if cpu else 2000)
    roots = [os.path.abspath(r) for r in args.root] or [ROOT]
    unit = "us of CPU" if cpu else "instructions"
    first: Optional[float] = None
    for root in roots:
        value = measure(root, requests, cpu)
        first = value if first is None else first
        print("%-40s %10.1f %s per request  (%.3fx the first)" % (root, value, unit, value / first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
