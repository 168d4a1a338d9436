"""The results as the project's targets (each a ratio or a figure measured in the same
run) and as a table for a person."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from .peers import LABELS, PEERS
from .throughput import RATIOS

PEER_NAMES = {"vscode": "VS Code stack", "sdk": "MCP Python SDK", "node": "bare node:http"}
#: The throughput targets: the least ratio of ours to each peer, measured side by side in
#: one run (None: reported, no target). c=16 against VS Code's stack has none: on two
#: cores the load client takes one, and it bounds every server there. Our CPU per
#: request is reported only: an absolute figure depends on the machine.
RATIO_TARGETS = {("vscode", "c1"): 3.0, ("vscode", "c16"): None, ("sdk", "c1"): 4.5, ("node", "c16"): 1.0}


def evaluate(results: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The project's targets, each as a ratio or a figure measured in this run."""
    targets: List[Dict[str, Any]] = []

    def add(name: str, value: Optional[float], limit: Optional[float], higher_is_better: bool, unit: str,
            detail: str) -> None:
        op = ">=" if higher_is_better else "<="
        if value is None or value != value:
            targets.append({"target": name, "value": None, "op": op, "limit": limit, "unit": unit,
                            "status": "N/A", "detail": detail})
            return
        if limit is None:
            targets.append({"target": name, "value": value, "op": op, "limit": limit, "unit": unit,
                            "status": "INFO", "detail": detail})
            return
        ok = value >= limit if higher_is_better else value <= limit
        targets.append({"target": name, "value": value, "op": op, "limit": limit, "unit": unit,
                        "status": "PASS" if ok else "MISS", "detail": detail})

    tp = results.get("throughput")
    if tp is not None:
        for peer, conc in RATIOS:
            name = "throughput %s vs %s" % (conc.replace("c", "c="), PEER_NAMES[peer])
            ratio = tp.get("ratios", {}).get("%s %s" % (peer, conc))
            if ratio is None:
                why = tp["skipped"].get(peer) or tp["skipped"].get("ours") or "not measured"
                add(name, None, RATIO_TARGETS[(peer, conc)], True, "x", "%s: %s" % (peer, why))
                continue
            o, p = tp["servers"]["ours"][conc], tp["servers"][peer][conc]
            add(name, ratio, RATIO_TARGETS[(peer, conc)], True, "x", "medians of %d rounds: %.0f vs %.0f req/s" % (
                len(o["round_rps"]), o["rps"], p["rps"]))
        add("our server's CPU per request", tp.get("ours_cpu_us_per_req"), None, False, "us",
            "all of its runs, c=1 and c=16")
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
             "mode: %s; medians of the rounds; other work on the machine adds noise" % results["mode"], ""]
    tp = results.get("throughput")
    if tp is not None:
        lines += _throughput_lines(tp)
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
        target = "no target" if t["limit"] is None else "target %s %g %s" % (t["op"], t["limit"], t["unit"])
        lines.append("   %-4s %-46s %10s  (%s) %s" % (t["status"], t["target"], value, target, t["detail"]))
    return "\n".join(lines)


def _times(ratio: Optional[float]) -> str:
    return "%.2fx" % ratio if ratio else "n/a"


def _throughput_lines(tp: Dict[str, Any]) -> List[str]:
    lines = ["1. throughput side by side: tools/call get_selection over a Unix socket, one Node.js keep-alive load "
             "client for all, %d round(s), servers alternating (calls per run x%g)" % (tp["rounds"], tp["scale"]),
             "   %-40s %4s %9s %9s %9s %10s" % ("server", "conc", "req/s", "p50 us", "p99 us", "server us")]
    for name in PEERS:
        if name not in tp["servers"]:
            if name in tp["skipped"]:
                lines.append("   %-40s %s" % (LABELS[name], tp["skipped"][name]))
            continue
        server = tp["servers"][name]
        for conc in ("c1", "c16"):
            r = server[conc]
            cpu = r.get("server_cpu_us_per_req")
            lines.append("   %-40s %4s %9.0f %9.0f %9.0f %10s" % (
                LABELS[name], conc[1:], r["rps"], r["p50_us"], r["p99_us"], "%.0f" % cpu if cpu == cpu else "?"))
        errors = sum(server[c]["errors"] for c in ("c1", "c16"))
        rss = server.get("rss_kb")
        lines.append("   %-40s      req/s by round: c1 %s, c16 %s; RSS after %s%s" % (
            "", server["c1"]["round_rps"], server["c16"]["round_rps"], "%.1f MB" % (rss / 1024) if rss else "?",
            "; %d answers not 200 or not ours" % errors if errors else ""))
    ratios = tp.get("ratios", {})
    if ratios:
        lines.append("   ours / peer: " + "; ".join(
            "%s %s %s" % (PEER_NAMES[peer], conc.replace("c", "c="),
                          "%.2fx" % ratios["%s %s" % (peer, conc)] if ratios.get("%s %s" % (peer, conc)) else "n/a")
            for peer, conc in RATIOS))
    cpu = tp.get("ours_cpu_us_per_req")
    if cpu is not None:
        lines.append("   our server's CPU per request: %.1f us (all its threads, all its runs)" % cpu)
    before = tp.get("before")
    if before:
        lines.append("   ours / ours from %s: req/s c=1 %s, c=16 %s; CPU per request %s (%s us there)" % (
            before["root"], _times(before["c1"]), _times(before["c16"]), _times(before["cpu"]),
            "%.1f" % before["cpu_us_per_req"] if before["cpu_us_per_req"] else "?"))
    lines.append("   versions: %s" % json.dumps(tp.get("versions", {}), sort_keys=True))
    lines.append("   (server us: the server's CPU time per request, median of the rounds, from /proc)")
    lines.append("")
    return lines
