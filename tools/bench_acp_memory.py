#!/usr/bin/env python3
"""Peak memory of the ACP client when the agent stops reading its answers (ACP.md §1).

The fake agent (tests/acp/fake_agent.py, turn FLOOD) sends `--requests` fs/read_text_file
requests for one file of `--mib` MiB at once, then reads nothing more. Each answer
carries the whole file: a client that queues every answer for an agent that never
takes them holds all of them (twenty reads of a 30 MB file: about 1.8 GB). The client
runs in a child process of its own, which prints its peak resident memory (`ru_maxrss`)
once every handler has answered, and its memory after start-up for comparison.

    python3 tools/bench_acp_memory.py [--mib 30] [--requests 20] [--root DIR]

`--root` runs the client of another checkout (an older commit, from `git worktree add`
or `git archive`), for the figure before a change. Linux and macOS (`resource`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAKE = os.path.join(ROOT, "tests", "acp", "fake_agent.py")
MIB = 1024 * 1024

# The client's side, run as `python3 -c CLIENT ROOT FILE REQUESTS` in a fresh process.
CLIENT = r'''
import asyncio, json, os, resource, sys
root, path, count, fake = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
WAIT = 20.0
sys.path.insert(0, root)
from acp import Client

def peak_mib():
    try:  # Linux: this process's own high-water mark (ru_maxrss can carry the parent's)
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0

async def main():
    client = Client([sys.executable, fake], fs_roots=[os.path.dirname(path)], request_timeout=60)
    await client.start()
    await client.initialize()
    session = await client.new_session(os.path.dirname(path))
    started = peak_mib()
    result = await session.prompt("FLOOD %d %s" % (count, path))
    peer = client.conn.peer
    waited = 0.0
    # Every answer given (sent, queued or refused); a client that waits for the agent
    # to read each answer never gets there: its peak is taken after WAIT seconds.
    while peer.handler_tasks and waited < WAIT:
        await asyncio.sleep(0.05)
        waited += 0.05
    await asyncio.sleep(0.2)
    report = {"started_mib": started, "peak_mib": peak_mib(), "text": result.text, "waiting": peer.handler_tasks,
              "unsent": getattr(client.conn, "unsent", None)}
    await client.close(grace=0.2, term_grace=0.5)
    print(json.dumps(report))

asyncio.run(main())
'''


def run(root: str, path: str, requests: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CLIENT, root, path, str(requests), FAKE],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if proc.returncode != 0:
        raise SystemExit("the client failed:\n" + proc.stderr.decode("utf-8", "replace")[-3000:])
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=30.0, help="size of the file read (MiB, default 30)")
    parser.add_argument("--requests", type=int, default=20, help="reads sent at once (default 20)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose client runs (default: this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "big.txt")
        line = b"x" * 99 + b"\n"
        lines = int(args.mib * MIB / len(line))
        with open(path, "wb") as handle:  # (in pieces: this process stays small)
            for start in range(0, lines, 10000):
                handle.write(line * min(10000, lines - start))
        size = os.path.getsize(path)
        report = run(os.path.abspath(args.root), path, args.requests)
    print("client of %s" % os.path.abspath(args.root))
    print("%d fs/read_text_file of a %.1f MB file, the agent reading nothing:" % (args.requests, size / 1e6))
    print("  after start-up  %7.1f MiB" % report["started_mib"])
    print("  peak            %7.1f MiB   (growth %.1f MiB)" % (report["peak_mib"],
                                                            report["peak_mib"] - report["started_mib"]))
    if report["waiting"]:
        print("  answers still waiting for the agent to read them: %d" % report["waiting"])
    if report.get("unsent") is not None:
        print("  bytes left unsent for the agent: %d" % (report["unsent"] or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
