"""The start-up group: `import ide_protocol`, `serve` to its lock file, idle RSS and RSS
with open sessions, against a bare `python3 -c "import asyncio, json"`."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

from .common import ROOT, median, proc_status
from .wire import cli_request, handshake


def _time_process(argv: List[str], env: Dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _idle_rss(argv: List[str], env: Dict[str, str], settle: float) -> int:
    p = subprocess.Popen(argv, env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdout.readline()  # type: ignore[union-attr]
        time.sleep(settle)
        return proc_status(p.pid).get("VmRSS", 0)
    finally:
        p.stdin.close()  # type: ignore[union-attr]
        p.wait(10)


def _serve_once(env: Dict[str, str], sessions: int, settle: float) -> Dict[str, Any]:
    home = tempfile.mkdtemp(prefix="b-", dir="/tmp")
    folder = os.path.join(home, "project")
    os.makedirs(folder)
    env = dict(env, COPILOT_HOME=home, NO_COLOR="1")
    lock_dir = os.path.join(home, "ide")
    log_file = open(os.path.join(home, "serve.out"), "wb")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", folder], env=env, cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT)
    lock = None
    try:
        deadline = t0 + 20
        while time.perf_counter() < deadline:
            try:
                names = [n for n in os.listdir(lock_dir) if n.endswith(".lock")]
            except OSError:
                names = []
            if names:
                lock = os.path.join(lock_dir, names[0])
                break
            if p.poll() is not None:
                break
            time.sleep(0.0005)
        t_lock = time.perf_counter() - t0
        if lock is None:
            log_file.flush()
            with open(os.path.join(home, "serve.out"), "rb") as f:
                raise RuntimeError("serve wrote no lock file: %r" % f.read()[-500:])
        out: Dict[str, Any] = {"lock_s": t_lock}
        time.sleep(settle)
        out["idle_rss_kb"] = proc_status(p.pid).get("VmRSS", 0)
        if sessions:
            for _ in range(50):
                try:
                    with open(lock) as f:
                        info = json.load(f)
                    break
                except ValueError:
                    time.sleep(0.01)
            path, auth = info["socketPath"], info["headers"]["Authorization"]
            streams = []
            for _ in range(sessions):
                sid, _ = handshake(path, auth)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                s.sendall(cli_request("GET", auth, session=sid))
                streams.append(s)
            for s in streams:  # each stream's head has arrived
                s.settimeout(10)
                s.recv(65536)
            time.sleep(settle)
            out["sessions"] = sessions
            out["sessions_rss_kb"] = proc_status(p.pid).get("VmRSS", 0)
            for s in streams:
                s.close()
        return out
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log_file.close()
        shutil.rmtree(home, ignore_errors=True)


def group_startup(args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    base_argv = [py, "-c", "import asyncio, json"]
    variants = {
        "baseline": base_argv,
        "import_ide_protocol": [py, "-c", "import asyncio, json; import ide_protocol"],
        "import_server": [py, "-c", "import asyncio, json; from ide_protocol import IdeServer"],
        "import_serve": [py, "-c", "import asyncio, json; import ide_protocol.__main__, ide_protocol.programs.serve"],
    }
    for argv in variants.values():  # warm the bytecode caches and the page cache
        _time_process(argv, env)
    times: Dict[str, List[float]] = {k: [] for k in variants}
    serve_runs: List[Dict[str, Any]] = []
    # In a process that has imported asyncio and json (the baseline), what each import
    # adds, timed inside the process: immune to the process start-up noise.
    inproc_argv = [py, "-c", "import asyncio, json, time; p = time.perf_counter; t0 = p(); import ide_protocol; "
                   "t1 = p(); from ide_protocol import IdeServer; t2 = p(); import ide_protocol.__main__, "
                   "ide_protocol.programs.serve; t3 = p(); print(t1 - t0, t2 - t0, t3 - t0)"]
    inproc: List[List[float]] = []
    for rep in range(args.startup_reps):
        for name, argv in variants.items():  # interleaved: drift hits all alike
            times[name].append(_time_process(argv, env))
        inproc.append([float(x) for x in subprocess.run(inproc_argv, env=env, cwd=ROOT, check=True,
                                                         stdout=subprocess.PIPE, text=True).stdout.split()])
        serve_runs.append(_serve_once(env, args.push_sessions if rep == 0 else 0, args.settle))
    base = median(times["baseline"])
    out: Dict[str, Any] = {"baseline_s": base}
    for name in variants:
        if name != "baseline":
            out[name + "_s"] = median(times[name])
            out[name + "_added_ms"] = (median(times[name]) - base) * 1e3
    for k, name in enumerate(("import_ide_protocol", "import_server", "import_serve")):
        out["inprocess_%s_ms" % name] = median([r[k] for r in inproc]) * 1e3
    out["serve_lock_s"] = median([r["lock_s"] for r in serve_runs])
    out["serve_lock_after_baseline_ms"] = (out["serve_lock_s"] - base) * 1e3
    rss_base = [_idle_rss([py, "-c", "import asyncio, json, sys; print(1, flush=True); sys.stdin.read()"], env,
                          args.settle) for _ in range(3)]
    out["baseline_rss_kb"] = median(rss_base)
    out["serve_idle_rss_kb"] = median([r["idle_rss_kb"] for r in serve_runs])
    out["idle_rss_ratio"] = out["serve_idle_rss_kb"] / out["baseline_rss_kb"]
    with_sessions = [r for r in serve_runs if "sessions_rss_kb" in r]
    if with_sessions:
        r = with_sessions[0]
        out["sessions"] = r["sessions"]
        out["sessions_rss_kb"] = r["sessions_rss_kb"]
        out["per_session_kb"] = (r["sessions_rss_kb"] - r["idle_rss_kb"]) / r["sessions"]
    out["rep_lock_ms"] = [round(r["lock_s"] * 1e3, 1) for r in serve_runs]
    out["rep_baseline_ms"] = [round(t * 1e3, 1) for t in times["baseline"]]
    log("  startup: baseline %.1f ms, serve lock %.1f ms" % (base * 1e3, out["serve_lock_s"] * 1e3))
    return out



# ================================================================ report


