"""The diff group: `open_diff` with large `new_file_contents` (10 MB by default), sent
chunked in 16 KiB pieces as the CLI does: the time, and the peak memory of the server's
process (tracemalloc, and the VmHWM / ru_maxrss rise)."""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Callable, Dict

from .common import median
from .serve import ServerProc
from .wire import META, BlockingConn, cli_request, handshake, split_response, sse_json


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
