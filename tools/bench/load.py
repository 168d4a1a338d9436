"""One run of the load client (tools/bench_node/load_client.js) against one server, and
the server's CPU time over that run (read from /proc before and after: the server is
idle in between, so what it spent is what the run cost it)."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict

from .common import NODE_DIR, SELECTION_TEXT, proc_cpu
from .peers import node
from .serve import ServerProc

LOAD_CLIENT = os.path.join(NODE_DIR, "load_client.js")


def run(server: ServerProc, count: int, concurrency: int) -> Dict[str, Any]:
    """`count` calls of `tools/call get_selection` at `concurrency`: the load client's
    figures (rps, p50_us, p99_us, n, c, errors) and `server_cpu_us_per_req`."""
    cpu_before = proc_cpu(server.pid)
    out = subprocess.run([node() or "node", LOAD_CLIENT, server.socket, server.auth, str(count), str(concurrency),
                          SELECTION_TEXT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120 + count / 50)
    cpu_after = proc_cpu(server.pid)
    try:
        result: Dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError("load client failed (exit %d): %s %s" % (out.returncode, out.stdout[-500:],
                                                                      out.stderr[-1500:]))
    if out.returncode != 0 or "error" in result:
        raise RuntimeError("load client against %s: %s" % (server.kind, result.get("error", out.stderr[-1500:])))
    result["server_cpu_s"] = cpu_after - cpu_before
    result["server_cpu_us_per_req"] = (cpu_after - cpu_before) / result["n"] * 1e6 if result["n"] else None
    return result
