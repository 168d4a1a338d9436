"""The throughput group: `tools/call get_selection` per second at concurrency 1 and 16,
this project's server beside its three peers (peers.py), one load client for all
(load.py), in the side-by-side yardstick's order: rounds alternating the servers
(ours, node, sdk, vscode, then again), each server measured at c=1 then c=16 in its
turn, medians over the rounds. The calls per run are the yardstick's too (fewer for the
slower peers, so that a round takes about as long for each), times `--scale`.

The four ratios it reports are ours against VS Code's stack at c=1 and c=16, against
the MCP Python SDK at c=1 and against the bare node:http handler at c=16; and our
server's CPU time per request (all its threads, from /proc). With `--before-root`, an
older checkout of our server runs in the same rounds, and ours is given against it too.
"""
from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import load, peers
from .common import median, proc_status
from .serve import ServerProc

ORDER = ("ours", "before", "node", "sdk", "vscode")  # the yardstick's order within a round ("before" ours)
#: Calls per run, (c=1, c=16).
CALLS = {"ours": (3000, 8000), "before": (3000, 8000), "node": (3000, 8000), "sdk": (800, 1600),
         "vscode": (1500, 3000)}
#: The four ratios: (peer, concurrency).
RATIOS = (("vscode", "c1"), ("vscode", "c16"), ("sdk", "c1"), ("node", "c16"))


def calls(name: str, concurrency: int, scale: float) -> int:
    base = CALLS[name][0 if concurrency == 1 else 1]
    return max(concurrency * 4, int(base * scale))


def group_throughput(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"servers": {}, "skipped": {}, "versions": {}, "rounds": args.rounds,
                              "scale": args.scale, "load_client": "tools/bench_node/load_client.js"}
    wanted = [name for name in ORDER if (not args.servers or name in args.servers.split(","))
              and (name != "before" or args.before_root)]
    if not peers.node():
        result["skipped"] = {name: "node not found: the load client is Node.js" for name in wanted}
        log("  throughput: node not found; skipped")
        return result
    procs: Dict[str, ServerProc] = {}
    runs: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
    try:
        for name in wanted:
            try:
                proc, why = peers.start(name, use_sdk=args.sdk, use_node=args.node, before_root=args.before_root)
            except Exception as exc:  # report, do not fail the whole run
                proc, why = None, "failed to start: %s" % exc
            if proc is None:
                result["skipped"][name] = why
                log("  throughput: %s %s" % (name, why))
                continue
            procs[name] = proc
            if proc.info.get("versions"):
                result["versions"][name] = proc.info["versions"]
        result["versions"]["load_client_node"] = subprocess.run(
            [peers.node() or "node", "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
        for round_number in range(args.rounds):
            for name in list(procs):
                _profile(name, procs[name], args.profile, round_number, start=True)
                try:
                    for concurrency in (1, 16):
                        runs.setdefault((name, concurrency), []).append(
                            load.run(procs[name], calls(name, concurrency, args.scale), concurrency))
                except Exception as exc:  # this server is out of the comparison, the run goes on
                    result["skipped"][name] = "failed in round %d: %s" % (round_number + 1, exc)
                    log("  throughput: %s failed: %s" % (name, exc))
                    procs.pop(name).close()
                    continue
                _profile(name, procs[name], args.profile, round_number, start=False)
            log("  throughput round %d/%d: %s" % (round_number + 1, args.rounds, ", ".join(
                "%s %d/%d" % (n, runs[(n, 1)][-1]["rps"], runs[(n, 16)][-1]["rps"]) for n in procs)))
        for name in procs:
            result["servers"][name] = {"c%d" % c: _summary(runs[(name, c)]) for c in (1, 16)}
            result["servers"][name]["rss_kb"] = proc_status(procs[name].pid).get("VmRSS")
    finally:
        for proc in procs.values():
            proc.close()
    ours = result["servers"].get("ours")
    if ours:
        result["ratios"] = {"%s %s" % (peer, c): _ratio(ours, result["servers"].get(peer), c) for peer, c in RATIOS}
        result["ours_cpu_us_per_req"] = _cpu_per_request(runs, "ours")
        before = result["servers"].get("before")
        if before:
            cpu = _cpu_per_request(runs, "before")
            result["before"] = {"root": procs["before"].info.get("root"), "cpu_us_per_req": cpu,
                                "c1": _ratio(ours, before, "c1"), "c16": _ratio(ours, before, "c16"),
                                "cpu": result["ours_cpu_us_per_req"] / cpu if cpu else None}
    return result


def _cpu_per_request(runs: Dict[Tuple[str, int], List[Dict[str, Any]]], name: str) -> Optional[float]:
    """A server's CPU time per request over all its runs, c=1 and c=16."""
    every = runs[(name, 1)] + runs[(name, 16)]
    total = sum(r["n"] for r in every)
    return sum(r["server_cpu_s"] for r in every) / total * 1e6 if total else None


def _summary(rs: List[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {k: median([r[k] for r in rs if isinstance(r.get(k), (int, float))])
                           for k in ("rps", "p50_us", "p99_us", "server_cpu_us_per_req")}
    out["n"] = sum(r["n"] for r in rs)
    out["errors"] = sum(r["errors"] for r in rs)
    out["round_rps"] = [r["rps"] for r in rs]
    return out


def _ratio(ours: Dict[str, Any], peer: Optional[Dict[str, Any]], c: str) -> Optional[float]:
    if not peer or not peer[c]["rps"]:
        return None
    return float(ours[c]["rps"]) / peer[c]["rps"]


def _profile(name: str, proc: ServerProc, directory: Optional[str], round_number: int, start: bool) -> None:
    """`--profile DIR`: cProfile our server (CPU time) over its runs of the first round."""
    if not directory or name != "ours" or round_number != 0:
        return
    if start:
        proc.command("profile_start")
    else:
        os.makedirs(directory, exist_ok=True)
        proc.command("profile_stop %s" % os.path.join(os.path.abspath(directory), "ours.prof"))
