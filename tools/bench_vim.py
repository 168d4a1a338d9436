#!/usr/bin/env python3
"""What the Copilot IDE plugin costs Vim: its start-up, its quit, a cursor move and an
idle tick, in a real Vim, printed side by side.

    python3 tools/bench_vim.py [--starts 7] [--moves 300] [--json FILE]   (or: make bench-vim)

A real Vim with +python3 (Debian's vim-nox) runs in a private tmux server (a real
terminal). The plugin is loaded as an installed one is (from 'runtimepath', `-u NORC`).

Start-up and quit (`--starts` runs each way, medians):

* first screen: Vim's own `--startuptime` clock at `--- VIM STARTED ---`, without the
  plugin and with it; the difference is what the plugin adds to Vim's start.
* lock: wall time from launching Vim to its lock file appearing (the server starts on
  threads of its own, after the first screen).

Python caches bytecode as it does for a user (a warm-up start comes first).
* plugin functions: Vim's `:profile` of separate starts, the self time of every
  function defined in the plugin's scripts over the first second after launch (or
  until 0.3 s after the lock, if that is later): the time Vim's thread spent in the
  plugin during its start, work put off to the timer's first ticks included, and
  Python's own start too (the plugin's first `:py3`; "the rest" is the plugin's own).
* quit: `:qa!` with the server up: the plugin's VimLeavePre (stopping the server,
  removing the lock) timed inside Vim, and the wall time until Vim's process is gone
  (tmux's latency included); a lock left behind is reported.

On Vim's thread while it runs (each a list of per-event times):

* keys: tmux types j/k/l/h one at a time (a pause between, so Vim sees each key alone
  and fires CursorMoved for each). Two autocommands bracket the plugin's own: one
  defined before it (`let g:t0 = reltime()`), one after it (adds `reltime(g:t0)`), so
  the time is that of the plugin's part of a move as Vim runs it (it only notes the
  move; plus two `reltime()`s).
* move+tick: the whole of a move's cost when moves come slower than the plugin's timer
  (each then gets a tick of its own): a Vim loop moves the cursor with `cursor()`
  (plain and multibyte lines), fires the plugin's CursorMoved autocommand and runs its
  timer callback, which reads the selection and hands it to the server's thread; all
  three timed together; 10 ms between moves (Vim sleeping, as between keys), in which
  the server's thread takes the hand-over and pushes.
* idle tick: the timer callback with nothing to do (every 50 ms while Vim runs); it
  does not enter Python (one tick in five looks for the plugin's doorbell and compares
  the quickfix/location lists), so its mean is what idling costs Vim per tick, its
  p99 the cost of a tick that looks.
* floor: `py3 pass` with the same pauses: what entering Vim's Python costs at all on
  this machine now (cold caches after a pause weigh heavily on a loaded machine).

Each line says whether it meets its target (TARGETS). The machine's load (printed)
shows in p99 and max: run it on a quiet machine for figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "vim"))
sys.path.insert(0, REPO)

import vim_harness as V  # noqa: E402

#: Targets in milliseconds: (measure, statistic, bound).
TARGETS = {
    "first screen added": ("median", 10.0),
    "plugin functions": ("median", 10.0),
    "lock after launch": ("median", 1000.0),
    "quit (VimLeavePre)": ("median", 100.0),
    "quit (process gone)": ("median", 100.0),
    "idle tick": ("mean", 0.1),
    "keys": ("p99", 1.0),
    "move+tick": ("p99", 1.0),
}
LINES = ["def f%d(x):  # plain ascii line number %d" % (i, i) if i % 2 else
         "    return 'héllo wörld 😀 %d' + x  # ü ß ñ" % i for i in range(200)]


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


def summary(name: str, seconds: List[float]) -> Dict[str, Any]:
    ms = [s * 1000.0 for s in seconds]
    return {"measure": name, "moves": len(ms), "p50_ms": round(statistics.median(ms), 4),
            "p99_ms": round(percentile(ms, 99), 4), "max_ms": round(max(ms), 4),
            "mean_ms": round(statistics.mean(ms), 4)}


# ------------------------------------------------------------- start-up and quit

STARTED = re.compile(r"^\s*([0-9.]+)\s+[0-9.]+:\s+--- VIM STARTED ---", re.M)


def first_screen_ms(path: str) -> Optional[float]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            found = STARTED.findall(f.read())
    except OSError:
        return None
    return float(found[-1]) if found else None


PYTHON_START = re.compile(r"^\s*1\s+([0-9.]+)\s+py3 import sys, vim\s*$", re.M)


def profile_self_ms(path: str) -> Tuple[float, float]:
    """The summed self time of the functions a `:profile` file says were defined in
    the plugin's scripts (editors/vim/...), and of it the first `:py3` (Python's own
    start inside Vim, which the plugin's start pays first)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    total = python = 0.0
    for block in text.split("FUNCTION ")[1:]:
        if V.PLUGIN not in block[:400]:
            continue
        found = re.search(r"^\s*Self time:\s+([0-9.]+)", block, re.M)
        if found:
            total += float(found.group(1)) * 1000.0
        start = PYTHON_START.search(block)
        if start and not python:
            python = float(start.group(1)) * 1000.0
    return total, python


def one_start(root: str, n: int, plugin: bool, profile: bool) -> Dict[str, Any]:
    """One Vim start (and quit) in a fresh COPILOT_HOME; its figures."""
    ws = os.path.join(root, "ws")
    home = os.path.join(root, "home-%s-%d-%d" % (plugin, profile, n))
    os.makedirs(home)
    log = os.path.join(root, "startup-%s-%d-%d.log" % (plugin, profile, n))
    prof = os.path.join(root, "profile-%d.log" % n)
    leave = os.path.join(root, "leave-%s-%d-%d.txt" % (plugin, profile, n))
    before = []
    if profile:
        before += ["profile start " + prof, "profile func *"]
    # Before the plugin's own VimLeavePre (defined when it loads): the quit's clock.
    before += ["autocmd VimLeavePre * let g:bench_t = reltime()",
               "autocmd VimLeave * call writefile([string(reltimefloat(reltime(g:bench_t)))], %r)" % leave]
    if plugin:
        before.append("set rtp^=" + V.PLUGIN)
    vim = V.VimSession(ws, home, root)
    argv = vim.argv(["code.py"], plugin="", rc="NORC", before=before)
    launched = time.monotonic()
    vim.tmux.start(argv[:1] + ["--startuptime", log] + argv[1:], cwd=ws, env=env_of(home))
    out: Dict[str, Any] = {}
    try:
        V.wait_until(lambda: first_screen_ms(log) is not None, what="Vim's first screen", interval=0.005)
        out["first_screen_ms"] = first_screen_ms(log)
        if plugin:
            V.wait_until(lambda: V.locks(home), what="the lock", interval=0.002)
            out["lock_ms"] = (time.monotonic() - launched) * 1000.0
        if profile:
            time.sleep(max(launched + 1.0, time.monotonic() + 0.3) - time.monotonic())
            vim.ex("profile pause")
        time.sleep(0.2)
        pid = vim.pid
        sent = time.monotonic()
        vim.ex("qa!")
        V.wait_until(vim.gone, what="Vim gone", interval=0.002)
        out["quit_gone_ms"] = (time.monotonic() - sent) * 1000.0
        out["pid"] = pid
        with open(leave, encoding="utf-8") as f:
            out["quit_leave_ms"] = float(f.read().strip() or 0) * 1000.0
        out["lock_left"] = bool(V.locks(home))
        if profile:
            V.wait_until(lambda: os.path.exists(prof) and os.path.getsize(prof) > 0, what="the profile")
            out["plugin_functions_ms"], out["python_start_ms"] = profile_self_ms(prof)
    finally:
        vim.close()
    return out


def env_of(home: str) -> Dict[str, str]:
    """Vim's environment: a private HOME, COPILOT_HOME and TMPDIR (what Vim deletes at
    exit stays among the benchmark's files). Python may cache bytecode, as it does for
    a user from the second start on (a warm-up start comes first)."""
    tmp = os.path.join(home, "tmp")
    os.makedirs(tmp, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "TERM": "xterm-256color", "COPILOT_HOME": home, "TMPDIR": tmp}


def startup(root: str, starts: int) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    rows: Dict[str, List[float]] = {}
    lock_left = 0
    one_start(root, 999, plugin=True, profile=False)  # warm-up: the OS's caches, Python's bytecode
    for n in range(starts):  # interleaved, so that the machine's load weighs on both alike
        bare = one_start(root, n, plugin=False, profile=False)
        full = one_start(root, n, plugin=True, profile=False)
        rows.setdefault("first screen, no plugin", []).append(bare["first_screen_ms"])
        rows.setdefault("first screen, plugin", []).append(full["first_screen_ms"])
        rows.setdefault("lock after launch", []).append(full["lock_ms"])
        rows.setdefault("quit (VimLeavePre)", []).append(full["quit_leave_ms"])
        rows.setdefault("quit (process gone)", []).append(full["quit_gone_ms"])
        rows.setdefault("quit without plugin (process gone)", []).append(bare["quit_gone_ms"])
        lock_left += full["lock_left"]
    for n in range(starts):
        profiled = one_start(root, 100 + n, plugin=True, profile=True)
        rows.setdefault("plugin functions", []).append(profiled["plugin_functions_ms"])
        rows.setdefault("  of which Python's own start", []).append(profiled["python_start_ms"])
        rows.setdefault("  the rest", []).append(profiled["plugin_functions_ms"] - profiled["python_start_ms"])
    med = {name: statistics.median(values) for name, values in rows.items()}
    med["first screen added"] = med["first screen, plugin"] - med["first screen, no plugin"]
    order = ["first screen, no plugin", "first screen, plugin", "first screen added", "plugin functions",
             "  of which Python's own start", "  the rest", "lock after launch", "quit (VimLeavePre)", "quit (process gone)", "quit without plugin (process gone)"]
    results = []
    for name in order:
        values = rows.get(name, [])
        results.append({"measure": name, "runs": len(values) or starts, "median_ms": round(med[name], 3),
                        "min_ms": round(min(values), 3) if values else None,
                        "max_ms": round(max(values), 3) if values else None})
    return results, {"locks_left_after_quit": lock_left}


def run(starts: int, moves: int) -> Dict[str, Any]:
    reason = V.missing()
    if reason:
        raise SystemExit("bench_vim: " + reason)
    root = tempfile.mkdtemp(prefix="bench-vim-")
    try:
        ws = os.path.join(root, "ws")
        os.makedirs(ws)
        with open(os.path.join(ws, "code.py"), "w", encoding="utf-8") as f:
            f.write("\n".join(LINES) + "\n")
        start_rows, extra = startup(root, starts) if starts else ([], {})
        out = run_moves(root, moves)
        out["startup"] = start_rows
        out.update(extra)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_moves(root: str, moves: int) -> Dict[str, Any]:
    ws = os.path.join(root, "ws")
    home = os.path.join(root, "copilot-home")
    os.makedirs(home)
    vim = V.VimSession(ws, home, root)
    before = ["let g:copilot_ide_autostart = 0", "let g:copilot_ide_bench = []",
              "autocmd CursorMoved * let g:copilot_ide_t0 = reltime()"]
    after = ["CopilotIdeStart",
             "autocmd CursorMoved * call add(g:copilot_ide_bench, reltimefloat(reltime(g:copilot_ide_t0)))"]
    vim.start(files=["code.py"], before=before, after=after)
    try:
        client = V.StreamClient(vim.wait_lock())
        try:
            return measure(vim, client, moves)
        finally:
            client.close()
    finally:
        vim.quit("qa!")
        vim.close()


def measure(vim: V.VimSession, client: V.StreamClient, moves: int) -> Dict[str, Any]:
    vim.eval("1")  # Vim is up and takes commands
    vim.ex("let g:copilot_ide_bench = []")
    pattern = ["j", "l", "j", "l", "k", "h", "j", "j", "l", "k"]
    for i in range(moves):
        vim.keys(pattern[i % len(pattern)])
        time.sleep(0.012)
    V.wait_until(lambda: len(vim.eval("g:copilot_ide_bench")) >= moves * 0.9, what="the moves recorded")
    keys = [float(x) for x in vim.eval("g:copilot_ide_bench")]
    script = os.path.join(vim.log_dir, "scripted.vim")
    with open(script, "w", encoding="utf-8") as f:
        f.write("let g:copilot_ide_scripted = []\n"
                "for s:i in range(%d)\n"
                "  call cursor(1 + s:i %% 200, 1 + (s:i * 7) %% 30)\n"
                "  let s:t = reltime()\n"
                "  doautocmd <nomodeline> copilot_ide CursorMoved\n"
                "  call copilot_ide#tick(0)\n"
                "  call add(g:copilot_ide_scripted, reltimefloat(reltime(s:t)))\n"
                "  sleep 10m\n"
                "endfor\n"
                "let g:copilot_ide_idle = []\n"
                "for s:i in range(%d)\n"
                "  let s:t = reltime()\n"
                "  call copilot_ide#tick(0)\n"
                "  call add(g:copilot_ide_idle, reltimefloat(reltime(s:t)))\n"
                "  sleep 10m\n"
                "endfor\n"
                "let g:copilot_ide_floor = []\n"
                "for s:i in range(%d)\n"
                "  let s:t = reltime()\n"
                "  py3 pass\n"
                "  call add(g:copilot_ide_floor, reltimefloat(reltime(s:t)))\n"
                "  sleep 10m\n"
                "endfor\n" % (moves, moves, moves))
    vim.ex("source " + script)
    scripted = [float(x) for x in vim.eval("g:copilot_ide_scripted", timeout=120)]
    idle = [float(x) for x in vim.eval("g:copilot_ide_idle", timeout=120)]
    floor = [float(x) for x in vim.eval("g:copilot_ide_floor", timeout=120)]
    pushed = 0
    while not client.notifications.empty():
        if client.notifications.get_nowait().get("method") == "selection_changed":
            pushed += 1
    got = client.tool_json("get_selection")
    results = [summary("keys", keys), summary("move+tick", scripted), summary("idle tick", idle),
               summary("floor", floor)]
    return {"vim": vim.eval("v:version"), "load_average": os.getloadavg(), "results": results,
            "selection_pushes_received": pushed, "last_selection_file": os.path.basename(got["filePath"])}


def verdict(name: str, row: Dict[str, Any]) -> str:
    target = TARGETS.get(name)
    if target is None:
        return ""
    stat, bound = target
    value = row[stat + "_ms"]
    return "  %s (target: %s <= %g ms)" % ("met" if value <= bound else "MISSED", stat, bound)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=7, help="Vim starts each way (0: skip the start-up part)")
    ap.add_argument("--moves", type=int, default=300)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    out = run(args.starts, args.moves)
    load = os.getloadavg()
    print("Vim %s, load average %.1f %.1f %.1f (2 cores: figures under load are upper bounds)"
          % ((out["vim"],) + tuple(load)))
    if out["startup"]:
        print("start-up and quit, %d starts each way (medians; min-max):" % args.starts)
        for r in out["startup"]:
            print("  %-36s %8.2f ms  (%s-%s)%s" % (r["measure"], r["median_ms"],
                                                 "%.2f" % r["min_ms"] if r["min_ms"] is not None else "-",
                                                 "%.2f" % r["max_ms"] if r["max_ms"] is not None else "-",
                                                 verdict(r["measure"], r)))
        print("  locks left after :qa!: %d" % out["locks_left_after_quit"])
    print("on Vim's thread while it runs:")
    for r in out["results"]:
        print("  %-10s %4d runs: p50 %.3f ms, p99 %.3f ms, max %.3f ms, mean %.3f ms%s"
              % (r["measure"], r["moves"], r["p50_ms"], r["p99_ms"], r["max_ms"], r["mean_ms"],
                 verdict(r["measure"], r)))
    print("selection pushes the client received: %d (debounced)" % out["selection_pushes_received"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
