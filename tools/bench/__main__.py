"""`python3 -m tools.bench`: run the groups asked for, print the table, write the JSON
(see the package's doc)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

if __package__ in (None, ""):  # run as a script: python3 tools/bench
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tools.bench import report  # noqa: E402
from tools.bench.common import ROOT, machine_info  # noqa: E402
from tools.bench.diff import group_diff  # noqa: E402
from tools.bench.peers import PEERS  # noqa: E402
from tools.bench.push import group_push  # noqa: E402
from tools.bench.startup import group_startup  # noqa: E402
from tools.bench.throughput import group_throughput  # noqa: E402

GROUPS: Dict[str, Callable[[argparse.Namespace, Callable[[str], None]], Dict[str, Any]]] = {
    "throughput": group_throughput, "push": group_push, "diff": group_diff, "startup": group_startup}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.bench", description="Benchmarks of the /ide server "
                                     "against peers measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="one short round of everything (smoke test)")
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: %s" % ", ".join(GROUPS))
    parser.add_argument("--json", default=os.path.join(ROOT, "bench-results.json"), metavar="PATH",
                        help="where to write the results (default: %(default)s)")
    parser.add_argument("--no-sdk", dest="sdk", action="store_false", help="skip the official MCP Python SDK")
    parser.add_argument("--no-node", dest="node", action="store_false",
                        help="skip the Node.js peers (the load client still needs Node.js)")
    parser.add_argument("--ours-root", default=None, metavar="DIR",
                        help="import our server from another checkout (e.g. a `git worktree` of an older commit)")
    parser.add_argument("--before-root", default=None, metavar="DIR",
                        help="throughput: also run our server from this checkout (e.g. a `git worktree` of an older "
                             "commit) in the same rounds, and give ours against it")
    parser.add_argument("--servers", default="", metavar="LIST",
                        help="throughput: only these servers, of %s" % ", ".join(PEERS))
    parser.add_argument("--rounds", type=int, default=None, help="throughput: rounds (default 3; quick 1)")
    parser.add_argument("--scale", type=float, default=None,
                        help="throughput: calls per run, times the yardstick's (default 1; quick 0.05)")
    parser.add_argument("--profile", default=None, metavar="DIR", help="cProfile our server in its first round")
    parser.add_argument("--push-procs", type=int, default=1, help="push client processes (default %(default)s)")
    parser.add_argument("--push-layout", choices=("both", "pinned", "unpinned"), default="both",
                        help="push runs with the server and the clients pinned to different CPUs, where the "
                             "scheduler puts them, or both (default; pinned is the measurement)")
    parser.add_argument("--push-spin", default="", metavar="MS|always",
                        help="push clients poll without sleeping: always, or for MS ms after each read")
    args = parser.parse_args(argv)
    if sys.platform != "linux":
        print("tools/bench reads /proc: Linux only", file=sys.stderr)
        return 2
    if args.ours_root:
        os.environ["BENCH_OURS_ROOT"] = os.path.abspath(args.ours_root)  # read by `serve.py ours`
    if args.before_root:
        args.before_root = os.path.abspath(args.before_root)
    groups = [g.strip() for g in args.only.split(",") if g.strip()]
    for g in groups:
        if g not in GROUPS:
            parser.error("unknown group %r" % g)
    q = args.quick
    defaults = dict(rounds=1 if q else 3, scale=0.05 if q else 1.0, push_sessions=10 if q else 100,
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
        "config": {k: getattr(args, k) for k in ("rounds", "scale", "push_sessions", "push_events", "push_reps",
                                                  "diff_mb", "diff_reps", "startup_reps", "settle", "sdk", "node")},
    }
    for g in groups:
        log("running %s ..." % g)
        t0 = time.perf_counter()
        results[g] = GROUPS[g](args, log)
        results.setdefault("seconds", {})[g] = round(time.perf_counter() - t0, 1)
    try:
        results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    results["targets"] = report.evaluate(results)
    text = report.render(results)
    results["table"] = text.split("\n")
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print("\nwritten %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
