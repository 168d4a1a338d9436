"""`make test`: the suite in a few pytest processes at once, one summary at the end.

Most of the suite's wall time is spent waiting on other processes (a child program
starting, a real editor, a peer that is meant to stay silent until a deadline), not on
the CPU, so test files run in N pytest processes side by side (N: twice the CPU count,
at most 8; `TEST_JOBS=N` or `--jobs N` sets it, `TEST_JOBS=1` runs plain pytest).

How the work is shared: every process collects the same tests, then takes test files
from one queue, the slowest first (their times from the last run, kept in
`.pytest_cache/run_tests.json`; on a first run, the longest files first), until none is
left; a file that would take more than its share of the run is cut into parts of
consecutive tests. A queue entry is claimed by creating `<queue>/<index>` with O_EXCL,
which works the same on every platform and needs no server. The tests of a file (or
part) run in one process in their usual order, so module- and class-scoped fixtures
behave as under plain pytest (a cut file's module fixtures are set up once per part);
tests of different files must not share state (each test has its own HOME and
temporary folders, ports are picked by the kernel).

Compiled modules: the suite starts hundreds of Python processes (each program under test,
fake agents and peers), and each compiles every module it imports whose `.pyc` is
missing or older than its source. Where PYTHONDONTWRITEBYTECODE is set (no `.pyc` beside
the sources), nothing is ever kept, so every process compiles again, and every pytest
process rewrites the asserts of every test module again. So the runner's processes (and
what they start) keep their compiled modules in `.pytest_cache/pycache/` instead
(PYTHONPYCACHEPREFIX, the standard library's own switch): still nothing beside the
sources, and the compiling is done once. What is kept there for files under the
temporary folder (copies of the package that tests make) is removed after each run.

What is printed: each process's output goes to a log; at the end come the logs of the
processes that failed (pytest's own report of the failures), the skip reasons, the
slowest tests, and one line of totals. The exit status is pytest's: 0 when every process
passed, else the first non-zero status (5, no tests collected, only when no process ran
a test).

Arguments are pytest's. When they name single tests (`file::test`), or options that need
one process (`--pdb`, `-s`, `--lf`...), or at most one test file, plain pytest runs with
them unchanged.

This file is also the pytest plugin each process loads (`-p tools.run_tests`); it does
nothing unless the runner set `RUN_TESTS_QUEUE`.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Seconds per test file of the last runs (RUN_TESTS_TIMES names another file).
TIMES = os.environ.get("RUN_TESTS_TIMES") or os.path.join(REPO, ".pytest_cache", "run_tests.json")

#: Options after which the suite must run in one process (a debugger or the terminal is
#: involved, or pytest's last-failed cache, which one process writes).
SERIAL_OPTIONS = ("--pdb", "--trace", "-s", "--capture=no", "--lf", "--last-failed", "--ff",
                  "--failed-first", "--nf", "--new-first", "--sw", "--stepwise", "--sw-skip",
                  "--stepwise-skip", "--cache-clear", "--collect-only", "--co", "--help", "-h",
                  "--version", "-V", "--fixtures", "--markers", "--setup-plan")

#: pytest's options whose value is the next argument (so it is not taken for a test path).
VALUE_OPTIONS = ("-c", "-k", "-m", "-p", "-o", "-W", "-r", "--config-file", "--rootdir", "--basetemp",
                 "--confcutdir", "--ignore", "--ignore-glob", "--deselect", "--junitxml", "--junit-xml",
                 "--override-ini", "--durations", "--durations-min", "--maxfail", "--tb", "--log-file",
                 "--log-level", "--import-mode", "--pythonwarnings", "--capture", "--assert")

QUEUE_ENV = "RUN_TESTS_QUEUE"
#: Where compiled modules are kept when PYTHONDONTWRITEBYTECODE is set (see above).
PYCACHE = os.path.join(REPO, ".pytest_cache", "pycache")


# ---------------------------------------------------------------- the runner


def test_files(args: List[str]) -> Optional[List[str]]:
    """The test files the arguments name (the suite's folder when they name none), or
    None when they name single tests."""
    targets = []
    value_next = False
    for arg in args:
        if value_next or arg.startswith("-"):
            value_next = arg in VALUE_OPTIONS
            continue
        if "::" in arg:
            return None
        if os.path.exists(arg):
            targets.append(arg)
    files: List[str] = []
    for target in targets or ["tests"]:
        if os.path.isfile(target):
            if target.endswith(".py"):
                files.append(os.path.normpath(target))
            continue
        for folder, dirs, names in os.walk(target):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules"))
            files.extend(os.path.normpath(os.path.join(folder, n)) for n in sorted(names)
                         if n.endswith(".py") and (n.startswith("test_") or n.endswith("_test.py")))
    return files


def jobs_wanted(args: List[str]) -> Tuple[int, List[str]]:
    """N from `--jobs N`/`-jN` (taken out of the arguments), else TEST_JOBS, else the CPUs."""
    jobs = os.environ.get("TEST_JOBS", "")
    rest = []
    it = iter(args)
    for arg in it:
        if arg == "--jobs":
            jobs = next(it, "")
        elif arg.startswith("--jobs="):
            jobs = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if jobs.strip():
        return max(1, int(jobs)), rest
    # Twice the CPUs: most of a test's time is spent waiting on another process.
    return min(8, 2 * (os.cpu_count() or 1)), rest


def work_units(files: List[str], jobs: int) -> List[Tuple[str, int, int]]:
    """The queue: (file, part, parts), the slowest first by last run's seconds per file
    (files never timed count as the slowest known: something new is best started early;
    on a first run the longest files go first). A file that alone would take more than
    its share of the run is cut into parts of consecutive tests (at most one per process),
    so that one long file does not decide the run's end."""
    times = _load_times()
    if not times:
        return [(p, 0, 1) for p in sorted(files, key=lambda p: -os.path.getsize(p))]
    most = max(times.values())
    seconds = {p: times.get(p.replace(os.sep, "/"), most) for p in files}
    share = max(10.0, sum(seconds.values()) / (2 * jobs))
    units = []
    for p in files:
        parts = max(1, min(jobs, math.ceil(seconds[p] / share)))  # (each part at most a share)
        units.extend((p, part, parts) for part in range(parts))
    return sorted(units, key=lambda u: -seconds[u[0]] / u[2])


def _load_times() -> Dict[str, float]:
    try:
        with open(TIMES, encoding="utf-8") as f:
            return {str(k): float(v) for k, v in json.load(f).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def process_env() -> Dict[str, str]:
    """The environment of the pytest processes: the caller's, with compiled modules kept
    in PYCACHE when PYTHONDONTWRITEBYTECODE would keep none."""
    env = dict(os.environ)
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        del env["PYTHONDONTWRITEBYTECODE"]
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    return env


def forget_temporary_modules(env: Dict[str, str]) -> None:
    """Remove what PYCACHE holds for files under the temporary folder (when this run
    chose PYCACHE): those files are gone after the run, and their paths are never the
    same twice."""
    if env.get("PYTHONPYCACHEPREFIX") != PYCACHE or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    temp = os.path.realpath(tempfile.gettempdir())
    mirrored = os.path.join(PYCACHE, os.path.splitdrive(temp)[1].lstrip(os.sep))
    if os.path.isdir(mirrored) and os.path.realpath(mirrored).startswith(os.path.realpath(PYCACHE) + os.sep):
        shutil.rmtree(mirrored, ignore_errors=True)


def run_parallel(jobs: int, files: List[str], args: List[str]) -> int:
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="run-tests-")
    queue = os.path.join(work, "queue")
    os.mkdir(queue)
    order = work_units(files, jobs)
    with open(os.path.join(work, "files.json"), "w", encoding="utf-8") as f:
        json.dump([[os.path.abspath(p), part, parts] for p, part, parts in order], f)
    env = dict(process_env(), **{QUEUE_ENV: work})
    procs = []
    for n in range(min(jobs, len(order))):
        log = open(os.path.join(work, "log-%d.txt" % n), "wb")
        # Every process collects what plain pytest would, in the same order (some test
        # folders import their own `conftest`); the plugin then runs the files it claims.
        cmd = [sys.executable, "-m", "pytest", "-p", "tools.run_tests", "-p", "no:cacheprovider",
               "--color=no"] + args
        procs.append((n, log, subprocess.Popen(cmd, cwd=REPO, env=dict(env, RUN_TESTS_WORKER=str(n)),
                                               stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL)))
    print("run_tests: %d files in %d pytest processes (TEST_JOBS=1 for one); their logs in %s"
          " (removed when all pass)"
          % (len(order), len(procs), work), flush=True)
    codes = []
    try:
        for n, log, proc in procs:
            codes.append(proc.wait())
            log.close()
    except KeyboardInterrupt:  # the processes got the same ^C: let them end, then report
        codes = [proc.wait() for n, log, proc in procs]
    forget_temporary_modules(env)
    return report(work, len(procs), codes, time.monotonic() - started)


def _results(work: str, n: int) -> Iterator[Dict[str, Any]]:
    try:
        with open(os.path.join(work, "results-%d.jsonl" % n), encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)
    except (OSError, ValueError):
        return


def report(work: str, count: int, codes: List[int], wall: float) -> int:
    totals: Dict[str, int] = {}
    per_file: Dict[str, float] = {}
    cpu_per_file: Dict[str, float] = {}
    durations: List[Tuple[float, str]] = []
    skips: List[str] = []
    for n in range(count):
        for row in _results(work, n):
            if row.get("kind") == "deselected":
                totals["deselected"] = totals.get("deselected", 0) + row["count"]
                continue
            totals[row["outcome"]] = totals.get(row["outcome"], 0) + 1
            per_file[row["file"]] = per_file.get(row["file"], 0.0) + row["seconds"]
            cpu_per_file[row["file"]] = cpu_per_file.get(row["file"], 0.0) + row.get("cpu", 0.0)
            durations.append((row["seconds"], row["nodeid"]))
            if row["outcome"] == "skipped" and row.get("reason"):
                skips.append("SKIPPED %s: %s" % (row["nodeid"], row["reason"]))
    # pytest reports deselected items once per process: each process collected them all.
    if count and "deselected" in totals:
        totals["deselected"] //= count
    for n in range(count):
        with open(os.path.join(work, "log-%d.txt" % n), encoding="utf-8", errors="replace") as f:
            log = f.read()
        if codes[n] not in (0, 5):
            print("\n" + "=" * 30 + " pytest process %d (exit %d) " % (n, codes[n]) + "=" * 30)
            sys.stdout.write(log)
        elif " warnings summary " in log:  # a passing process's warnings are shown too
            section = log[log.index(" warnings summary "):]
            print("\n==== pytest process %d: warnings summary\n%s" % (n, section.split("\n=", 1)[0].split("\n", 1)[-1]))
    if skips:
        print("\n" + "\n".join(sorted(skips)))
    print("\nslowest tests (setup + call + teardown):")
    for seconds, nodeid in sorted(durations, reverse=True)[:15]:
        print("  %7.2fs %s" % (seconds, nodeid))
    if os.environ.get("RUN_TESTS_FILES"):
        print("\nseconds per file (wall, CPU of the tests and their children):")
        for name, seconds in sorted(per_file.items(), key=lambda kv: -kv[1]):
            print("  %7.2fs %7.2fs %s" % (seconds, cpu_per_file.get(name, 0.0), name))
    if per_file:
        times = _load_times()
        times.update((k, round(v, 3)) for k, v in per_file.items())
        try:
            os.makedirs(os.path.dirname(TIMES), exist_ok=True)
            with open(TIMES, "w", encoding="utf-8") as f:
                json.dump(dict(sorted(times.items())), f, indent=0)
        except OSError:
            pass
    failed = [c for c in codes if c not in (0, 5)]
    ran = sum(v for k, v in totals.items() if k != "deselected")
    status = failed[0] if failed else (0 if ran else 5)
    summary = ", ".join("%d %s" % (v, k) for k, v in sorted(totals.items())) or "no tests ran"
    print("run_tests: %s in %.1fs of wall time (%d processes)%s"
          % (summary, wall, count, "" if status == 0 else ": FAILED (exit %d)" % status), flush=True)
    if status == 0:
        _remove(work)
    return status


def _remove(work: str) -> None:
    for name in os.listdir(os.path.join(work, "queue")):
        os.unlink(os.path.join(work, "queue", name))
    os.rmdir(os.path.join(work, "queue"))
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)


def main(argv: List[str]) -> int:
    jobs, args = jobs_wanted(argv)
    files = test_files(args)
    serial = (jobs == 1 or files is None or len(files) < 2
              or any(a in SERIAL_OPTIONS or a.startswith("--pdbcls") for a in args))
    if serial:
        env = process_env()
        try:
            return subprocess.call([sys.executable, "-m", "pytest"] + args, cwd=REPO, env=env)
        finally:
            forget_temporary_modules(env)
    assert files is not None
    return run_parallel(jobs, files, args)


# ------------------------------------------------ the plugin in each process


def _claim(work: str, count: int, start: int) -> int:
    """The index of the first unclaimed file at or after `start` (claimed now), or -1."""
    for index in range(start, count):
        try:
            os.close(os.open(os.path.join(work, "queue", str(index)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return index
        except FileExistsError:
            continue
    return -1


def pytest_runtestloop(session: Any) -> Any:
    work = os.environ.get(QUEUE_ENV)
    if not work:
        return None  # pytest's own loop
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted("%d errors during collection" % session.testsfailed)
    with open(os.path.join(work, "files.json"), encoding="utf-8") as f:
        units = json.load(f)
    by_file: Dict[str, List[Any]] = {}
    for item in session.items:
        by_file.setdefault(os.path.normcase(str(item.path)), []).append(item)
    groups = []
    for path, part, parts in units:
        items = by_file.get(os.path.normcase(path), [])
        groups.append(items[part * len(items) // parts:(part + 1) * len(items) // parts])
    firsts = [items[0] for items in by_file.values()]
    while True:
        index = _claim(work, len(groups), 0)
        if index < 0:
            return True
        current = groups[index]
        if not current:  # every test of the file deselected, or none in it
            continue
        after = _stand_in(current[0], [i for i in firsts if i.path != current[0].path])
        for i, item in enumerate(current):
            nextitem = current[i + 1] if i + 1 < len(current) else after
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)


def _stand_in(item: Any, others: List[Any]) -> Any:
    """What to give pytest as the item after the last test of a file (or part), before
    it is known what comes next: pytest then tears down every collector the next item does not
    share. The test of another file that shares the fewest collectors (the session, the
    suite's folder) keeps no more than any real next file would: the module's fixtures
    end, the session's stay. None (no other file) ends everything."""
    chain = item.listchain()

    def shared(other: Any) -> int:
        n = 0
        for a, b in zip(chain, other.listchain()):
            if a is not b:
                break
            n += 1
        return n
    return min(others, key=shared) if others else None


#: nodeid -> [seconds so far, outcome, skip reason], until the test's teardown.
_tests: Dict[str, List[Any]] = {}


def pytest_runtest_logreport(report: Any) -> None:
    work = os.environ.get(QUEUE_ENV)
    if not work:
        return
    row = _tests.setdefault(report.nodeid, [0.0, "passed", ""])
    row[0] += report.duration
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        row[1] = "failed" if report.when == "call" and row[1] == "passed" else (
            row[1] if row[1] == "failed" else "error")
    elif report.skipped and row[1] == "passed":
        row[1] = "xfailed" if xfail else "skipped"
        if isinstance(report.longrepr, tuple):
            row[2] = str(report.longrepr[2]).replace("Skipped: ", "", 1)
    elif report.when == "call" and xfail:
        row[1] = "xpassed"
    if report.when == "teardown":
        seconds, outcome, reason = _tests.pop(report.nodeid)
        _write(work, {"nodeid": report.nodeid, "file": report.nodeid.split("::")[0],
                      "seconds": round(seconds, 4), "outcome": outcome, "reason": reason,
                      "cpu": round(_cpu() - _cpu_at_start.pop(report.nodeid, 0.0), 4)})


#: nodeid -> this process's CPU time (its own and its waited-for children's) at setup.
_cpu_at_start: Dict[str, float] = {}


def _cpu() -> float:
    t = os.times()
    return t[0] + t[1] + t[2] + t[3]


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    if os.environ.get(QUEUE_ENV):
        _cpu_at_start[nodeid] = _cpu()


def pytest_collectreport(report: Any) -> None:
    # A file skipped as a whole (a module-level skip) is seen by every process; the
    # first one counts it.
    work = os.environ.get(QUEUE_ENV)
    if work and report.skipped and os.environ.get("RUN_TESTS_WORKER") == "0":
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        _write(work, {"nodeid": report.nodeid, "file": report.nodeid.split("::")[0], "seconds": 0.0,
                      "outcome": "skipped", "reason": reason.replace("Skipped: ", "", 1)})


def pytest_deselected(items: List[Any]) -> None:
    work = os.environ.get(QUEUE_ENV)
    if work:
        _write(work, {"kind": "deselected", "count": len(items)})


def _write(work: str, row: Dict[str, Any]) -> None:
    path = os.path.join(work, "results-%s.jsonl" % os.environ.get("RUN_TESTS_WORKER", "0"))
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
