#!/usr/bin/env python3
"""What the relay's halves hold in memory under a burst of large requests, with the link
working and with the far half stalled.

    python3 tools/bench_relay.py [--requests 20] [--size-mb 16] [--json FILE]   (or: make bench-relay)

Both halves run as real processes (`relay cli-side --via "... relay ide-side --stdio"`)
in front of our IdeServer, which rejects every diff at once. `--requests` connections,
each its own, post one `open_diff` of `--size-mb` MB at the same time; the figures are
the halves' resident memory (Linux's /proc: VmRSS sampled every 10 ms, VmHWM for the
peak), in MB:

* burst: the link working; peak during the burst, and resident once every answer came
  back and the connections closed (what was not given back);
* stall: the IDE's half stopped (SIGSTOP) before the burst, resumed once the CLI's half
  has taken all it will take (its memory flat for a second); peak while stalled, and
  resident after the answers came back.

The baseline is each half at rest before the burst. Linux only (/proc).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ide_protocol.client import IdeClient  # noqa: E402
from ide_protocol.server.ide_server import IdeServer  # noqa: E402


def status_mb(pid: int, field: str) -> float:
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def ide_half_pid(marker: str) -> Optional[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"ide-side" in args and marker.encode() in args:
                return int(name)
    return None


class Sampler:
    """The peak of VmRSS of some processes, sampled every 10 ms while it runs."""

    def __init__(self, pids: Dict[str, int]) -> None:
        self.pids = pids
        self.peak = {name: 0.0 for name in pids}
        self.last = dict(self.peak)
        self._task: Optional["asyncio.Task[None]"] = None

    async def _run(self) -> None:
        while True:
            for name, pid in self.pids.items():
                value = status_mb(pid, "VmRSS")
                self.last[name] = value
                self.peak[name] = max(self.peak[name], value)
            await asyncio.sleep(0.01)

    def __enter__(self) -> "Sampler":
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()


async def post(socket_path: str, head: bytes, body: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(socket_path)
    try:
        writer.write(head)
        writer.write(body)
        await writer.drain()
        return await reader.read()
    except ConnectionError:
        return b""
    finally:
        writer.close()


async def relay_lock(directory: str, relay: "subprocess.Popen[bytes]") -> None:
    """Until the relay has written its lock."""
    deadline = time.monotonic() + 60
    while not (os.path.isdir(directory) and any(n.endswith(".lock") for n in os.listdir(directory))):
        if time.monotonic() > deadline or relay.poll() is not None:
            raise SystemExit("bench_relay: the relay wrote no lock")
        await asyncio.sleep(0.05)


async def flat(sampler: Sampler, name: str, seconds: float = 1.0, limit: float = 120.0) -> None:
    """Until `name`'s memory has not grown for `seconds`."""
    loop = asyncio.get_event_loop()
    start = loop.time()
    best, since = sampler.peak[name], loop.time()
    while loop.time() - start < limit:
        await asyncio.sleep(0.1)
        if sampler.peak[name] > best + 1:
            best, since = sampler.peak[name], loop.time()
        elif loop.time() - since >= seconds:
            return


async def scenario(tmp: str, requests: int, size_mb: int, stall: bool) -> Dict[str, Any]:
    project = os.path.join(tmp, "project")
    os.makedirs(project, exist_ok=True)
    with open(os.path.join(project, "a.py"), "w") as f:
        f.write("print('hi')\n")

    async def reject(diff: Any) -> Optional[bool]:
        return False

    marker = os.path.join(tmp, "project")
    async with IdeServer([project], lock_dir=os.path.join(tmp, "ide"), ide_name="Bench IDE", on_diff=reject):
        ide_side = "%s -m ide_protocol relay ide-side --stdio --folder %s --lock-dir %s" % (
            sys.executable, shlex.quote(project), shlex.quote(os.path.join(tmp, "ide")))
        relay = subprocess.Popen([sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", ide_side,
                                  "--lock-dir", os.path.join(tmp, "cli-ide")],
                                 env=dict(os.environ, PYTHONPATH=ROOT), stderr=subprocess.DEVNULL)
        try:
            await relay_lock(os.path.join(tmp, "cli-ide"), relay)
            client = IdeClient.discover(project, os.path.join(tmp, "cli-ide"), timeout=60)
            await client.connect(follow_stream=False)
            ide_pid = ide_half_pid(marker)
            assert ide_pid is not None
            pids = {"cli-side": relay.pid, "ide-side": ide_pid}
            await asyncio.sleep(0.5)
            base = {name: status_mb(pid, "VmRSS") for name, pid in pids.items()}
            lock = client.lock
            body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "open_diff", "arguments": {"original_file_path": os.path.join(project, "a.py"),
                                                   "new_file_contents": "x" * (size_mb << 20), "tab_name": "T"}}}
                              ).encode()
            head = ("POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: %s\r\n"
                    "Mcp-Session-Id: %s\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n"
                    % (lock.headers["Authorization"], client.session_id, len(body))).encode()
            if stall:
                os.kill(ide_pid, signal.SIGSTOP)
            started = time.monotonic()
            with Sampler(pids) as sampler:
                calls = [asyncio.ensure_future(post(lock.socket_path, head, body)) for _ in range(requests)]
                if stall:
                    await flat(sampler, "cli-side")
                    stalled_peak = dict(sampler.peak)
                    os.kill(ide_pid, signal.SIGCONT)
                answers = await asyncio.gather(*calls)
            seconds = time.monotonic() - started
            await asyncio.sleep(1.0)
            after = {name: status_mb(pid, "VmRSS") for name, pid in pids.items()}
            answered = sum(1 for a in answers if a.startswith(b"HTTP/1.1 200"))
            await client.close()
            result = {"base_mb": base, "peak_mb": stalled_peak if stall else sampler.peak,
                      "after_mb": after, "answered": answered, "seconds": round(seconds, 2)}
        finally:
            relay.send_signal(signal.SIGTERM)
            relay.wait(60)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--size-mb", type=int, default=16)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if not os.path.isdir("/proc/self"):
        print("bench_relay: needs Linux's /proc", file=sys.stderr)
        return 2
    results: Dict[str, Any] = {"requests": args.requests, "size_mb": args.size_mb}
    for name, stall in (("burst", False), ("stall", True)):
        with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
            results[name] = asyncio.run(scenario(tmp, args.requests, args.size_mb, stall))
    print("%d requests of %d MB at once, one connection each (resident MB: at rest / peak / after)"
          % (args.requests, args.size_mb))
    for name in ("burst", "stall"):
        r = results[name]
        for half in ("cli-side", "ide-side"):
            print("  %-5s %-8s %7.1f / %7.1f / %7.1f   (%d of %d answered in %.1f s)"
                  % (name, half, r["base_mb"][half], r["peak_mb"][half], r["after_mb"][half], r["answered"],
                     args.requests, r["seconds"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
