"""What every part of the benchmark shares: where things are, the selection every server
answers, and measurements of a process read from /proc (Linux only)."""
from __future__ import annotations

import os
import platform
import statistics
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK_PYTHON = os.path.join(ROOT, ".bench-venv", "bin", "python")
NODE_DIR = os.path.join(ROOT, "tools", "bench_node")
NODE_MODULES = os.path.join(ROOT, ".bench-node", "node_modules")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# The selection every server answers to `get_selection` (the same bytes of content).
SELECTION_TEXT = "def main():\n    return 42\n"
SELECTION = {"text": SELECTION_TEXT, "filePath": "/work/project/src/app.py",
             "fileUrl": "file:///work/project/src/app.py",
             "selection": {"start": {"line": 10, "character": 0}, "end": {"line": 12, "character": 0},
                           "isEmpty": False}, "current": True}


def proc_status(pid: int) -> Dict[str, int]:
    """VmRSS, VmHWM (kB) of a process, from /proc."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def proc_cpu(pid: int) -> float:
    """utime + stime of a process in seconds (clock-tick resolution)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return float("nan")


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[k]


def median(values: List[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")




def machine_info() -> Dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {"cores": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "loadavg_at_start": [round(x, 2) for x in load]}

