"""`tools/bench.py --quick` runs end to end and writes valid JSON.

No timing is asserted: the machine running the suite may be slow or busy. The MCP Python
SDK is skipped (it needs `make bench-venv`); the Node.js servers of the throughput group
run when node is on PATH (the VS Code stack when `make bench-node` has installed it), and
without node the group only says why it is skipped: Node.js is never needed to pass.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "tools", "bench.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or sys.version_info < (3, 8),
                                reason="the benchmark reads /proc (Linux only)")


def test_bench_quick_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, BENCH, "--quick", "--no-sdk", "--json", str(out),
                           # the throughput group at its shortest: it runs, not what it measures
                           "--tp-reps", "1", "--tp-duration", "0.5", "--tp-prime", "0.3"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    data = json.loads(out.read_text())
    assert data["mode"] == "quick"
    assert data["machine"]["cores"] >= 1 and data["machine"]["python"]
    assert data["date"]
    rt = data["rt"]["servers"]
    for name in ("ours", "floor"):
        for conc in ("c1", "c16"):
            assert rt[name][conc]["n"] > 0
            assert rt[name][conc]["errors"] == 0
    assert "sdk" not in rt
    tp = data["throughput"]
    if shutil.which("node") is None:
        # No Node.js here: the group reports why it measured nothing, and the run still passes.
        assert set(tp["skipped"]) == {"ours", "vscode", "vscode124", "sdk", "bare"} and not tp["servers"]
    else:
        assert tp["skipped"]["sdk"] == "skipped (--no-sdk)"
        measured = set(tp["servers"])
        assert {"ours", "bare"} <= measured
        for name, package in (("vscode", "sdk"), ("vscode124", "sdk-1.24")):
            if os.path.isdir(os.path.join(ROOT, ".bench-node", "node_modules", "@modelcontextprotocol", package)):
                assert name in measured
            else:
                assert tp["skipped"][name] == "not installed (make bench-node)"
        for name in measured:
            for conc in ("c1", "c16"):
                assert tp["servers"][name][conc]["n"] > 0
                assert tp["servers"][name][conc]["errors"] == 0
        assert set(tp["ratios"]) == measured - {"ours"}
    for key in ("s1", "s10"):
        assert data["push"][key]["received"] == data["push"][key]["expected"] > 0
    assert data["diff"]["body_bytes"] > data["diff"]["contents_bytes"] > 0
    assert data["diff"]["peak_bytes"] > 0
    startup = data["startup"]
    assert startup["baseline_s"] > 0 and startup["serve_lock_s"] > 0
    assert startup["serve_idle_rss_kb"] > 0 and startup["baseline_rss_kb"] > 0
    statuses = {t["target"]: t["status"] for t in data["targets"]}
    assert len(statuses) >= 8
    assert set(statuses.values()) <= {"PASS", "MISS", "N/A"}
    assert data["table"] and "targets" in data["table"]
    assert "targets" in proc.stdout.decode()
