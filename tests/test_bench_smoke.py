"""`python3 -m tools.bench --quick` runs end to end and writes valid JSON.

No timing is asserted: the machine running the suite may be slow or busy. The MCP Python
SDK is skipped (it needs `make bench-venv`); the throughput group runs when node is on
PATH (VS Code's stack when `make bench-node` has installed it), and without node it
only says why it is skipped: Node.js is never needed to pass.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or sys.version_info < (3, 8),
                                reason="the benchmark reads /proc (Linux only)")


def test_bench_quick_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "tools.bench", "--quick", "--no-sdk", "--json", str(out),
                           # the throughput group at its shortest: it runs, not what it measures
                           "--scale", "0.01"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    data = json.loads(out.read_text())
    assert data["mode"] == "quick"
    assert data["machine"]["cores"] >= 1 and data["machine"]["python"]
    assert data["date"]
    assert "rt" not in data  # the retired round trip against a floor server
    tp = data["throughput"]
    if shutil.which("node") is None:
        # No Node.js here: the group reports why it measured nothing, and the run still passes.
        assert set(tp["skipped"]) == {"ours", "node", "vscode", "sdk"} and not tp["servers"]
    else:
        assert tp["skipped"]["sdk"] == "skipped (--no-sdk)"
        measured = set(tp["servers"])
        assert {"ours", "node"} <= measured
        if os.path.isdir(os.path.join(ROOT, ".bench-node", "node_modules", "@modelcontextprotocol", "sdk")):
            assert "vscode" in measured
        else:
            assert tp["skipped"]["vscode"] == "not installed (make bench-node)"
        for name in measured:
            for conc in ("c1", "c16"):
                assert tp["servers"][name][conc]["n"] > 0
                assert tp["servers"][name][conc]["errors"] == 0
        # The four ratios, each measured or None when its peer was skipped.
        assert set(tp["ratios"]) == {"vscode c1", "vscode c16", "sdk c1", "node c16"}
        assert tp["ratios"]["node c16"] > 0 and tp["ratios"]["sdk c1"] is None
        assert tp["ours_cpu_us_per_req"] >= 0
        assert "our server's CPU per request" in proc.stdout.decode()
    for key in ("s1", "s10"):
        assert data["push"][key]["received"] == data["push"][key]["expected"] > 0
    assert data["diff"]["body_bytes"] > data["diff"]["contents_bytes"] > 0
    assert data["diff"]["peak_bytes"] > 0
    startup = data["startup"]
    assert startup["baseline_s"] > 0 and startup["serve_lock_s"] > 0
    assert startup["serve_idle_rss_kb"] > 0 and startup["baseline_rss_kb"] > 0
    statuses = {t["target"]: t["status"] for t in data["targets"]}
    assert {"throughput c=1 vs VS Code stack", "throughput c=16 vs VS Code stack", "throughput c=1 vs MCP Python SDK",
            "throughput c=16 vs bare node:http", "our server's CPU per request"} <= set(statuses)
    assert not any("floor" in name for name in statuses)
    assert set(statuses.values()) <= {"PASS", "MISS", "N/A", "INFO"}
    assert statuses["our server's CPU per request"] in ("INFO", "N/A")  # reported, no absolute target
    assert data["table"] and "targets" in data["table"]
    assert "targets" in proc.stdout.decode()


@pytest.mark.skipif(shutil.which("node") is None, reason="the load client is Node.js: node not found")
def test_bench_measures_an_older_checkout_in_the_same_rounds(tmp_path):
    # `--before-root`: our server from another checkout (here a vendored copy of the
    # package) runs in the same rounds; ours is given against it, and that server
    # really imported the copy.
    before = tmp_path / "before"
    shutil.copytree(os.path.join(ROOT, "ide_protocol"), str(before / "ide_protocol"))
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "tools.bench", "--quick", "--only", "throughput", "--servers",
                           "ours,before", "--before-root", str(before), "--scale", "0.01", "--json", str(out)],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    tp = json.loads(out.read_text())["throughput"]
    assert set(tp["servers"]) == {"ours", "before"}
    assert tp["before"]["root"] == os.path.realpath(str(before))
    assert tp["before"]["c1"] > 0 and tp["before"]["c16"] > 0 and tp["before"]["cpu"] > 0
    assert "ours / ours from %s" % tp["before"]["root"] in proc.stdout.decode()


def test_bench_cost_measures_a_tools_call_through_the_server(tmp_path):
    """tools/bench_cost.py (the cost of one request, which the request path's speed
    tricks cite) runs against a checkout and prints a figure per root."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_cost.py"), "--cpu", "--requests", "50",
                           "--root", ROOT, "--root", ROOT], cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 2 and all("us of CPU per request" in line for line in lines), lines


def test_bench_relay_runs_and_writes_json(tmp_path):
    """`make bench-relay` at its smallest: both scenarios run, every request answered
    (what it measures is not asserted)."""
    out = tmp_path / "relay.json"
    proc = subprocess.run([sys.executable, "tools/bench_relay.py", "--requests", "2", "--size-mb", "1", "--json",
                           str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    data = json.loads(out.read_text())
    for name in ("burst", "stall"):
        assert data[name]["answered"] == 2
        assert data[name]["peak_mb"]["cli-side"] > 0 and data[name]["after_mb"]["ide-side"] > 0
