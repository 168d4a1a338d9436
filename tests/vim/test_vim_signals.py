"""Vim with the plugin deletes nothing it did not create, whatever signals reach it while
it exits.

Vim deletes its own temporary folder at exit (made the first time something asks
for a temporary name): it cuts the trailing "/" off the folder's name, then deletes
that folder recursively. Entered twice before it forgets the name (a SIGHUP or
SIGTERM arriving while Vim exits runs the exit again from the signal handler, maybe
on another thread), the cut happens twice and Vim deletes the folder *above* its own:
`$TMPDIR` itself, everything in it. So the plugin must never make Vim create that
folder, and the threads the plugin and the library start keep asynchronous signals
blocked, leaving Vim's handlers to Vim's own thread.

Each test gives Vim a `$TMPDIR` of its own, several folders deep inside the test's
folder (so that even a few cuts stay inside it), with canary files and folders at
every level and in a sibling folder; none may vanish, and Vim may make no temporary
folder of its own there while the plugin runs.
"""
from __future__ import annotations

import os
import re
import signal
import time
from typing import Any, Dict, List

import pytest

from vim_harness import VimSession, locks, wait_until

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="tmux, /proc and POSIX signals: Linux")

VIM_TEMP_FOLDER = re.compile(r"^v[A-Za-z0-9]{6}$")  # what Vim's mkdtemp("vXXXXXX") makes


def plant(root: str) -> Dict[str, Any]:
    """`root/a/b/c/d/tmp` (Vim's `$TMPDIR`) with canaries in it, at every level above
    it and in a sibling folder; returns the folders and the canaries' paths."""
    levels = [root] + [os.path.join(root, *"abcd"[:n]) for n in range(1, 5)]
    tmp = os.path.join(levels[-1], "tmp")
    sibling = os.path.join(levels[-1], "sibling")
    canaries: List[str] = []
    for folder in levels + [tmp, sibling]:
        os.makedirs(os.path.join(folder, "keep-dir"), exist_ok=True)
        for path in (os.path.join(folder, "keep.txt"), os.path.join(folder, "keep-dir", "inner.txt")):
            with open(path, "w", encoding="utf-8") as f:
                f.write("canary\n")
            canaries.append(path)
        canaries.append(os.path.join(folder, "keep-dir"))
    return {"tmp": tmp, "canaries": canaries}


def vanished(canaries: List[str]) -> List[str]:
    return [path for path in canaries if not os.path.lexists(path)]


def vim_temp_folders(tmp: str) -> List[str]:
    return sorted(name for name in os.listdir(tmp) if VIM_TEMP_FOLDER.match(name)) if os.path.isdir(tmp) else []


def gone_or_killed(vim: VimSession, pid: int) -> bool:
    """Whether Vim ended by itself within 10 s; a Vim still there then is killed."""
    try:
        wait_until(vim.gone, timeout=10.0, what="Vim's process gone")
        return True
    except AssertionError:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return False


def signal_while_exiting(vim: VimSession, how: str, delay: float) -> None:
    """Make Vim exit with signals arriving meanwhile. `qa`: `:qa!`, then SIGHUP and
    SIGTERM as it exits. `hup`: SIGHUP to an idle Vim (its handler runs Vim's exit),
    then SIGTERM `delay` seconds later (the second signal runs the exit again). `close`:
    the harness's own end, tmux's kill-server (SIGHUP, the terminal hung up)."""
    pid = vim.pid
    assert pid
    if how == "close":
        vim.close()
        return
    if how == "qa":
        vim.ex("qa!")
    else:
        os.kill(pid, signal.SIGHUP)
    time.sleep(delay)
    for sig in (signal.SIGTERM, signal.SIGHUP) if how == "qa" else (signal.SIGTERM,):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return


@pytest.mark.parametrize("how,delay", [("qa", 0.0), ("qa", 0.05), ("hup", 0.0), ("hup", 0.01), ("close", 0.0)])
def test_signals_during_the_exit_delete_nothing_the_test_made(vims: Any, tmp_path: Any, copilot_home: str,
                                                              how: str, delay: float) -> None:
    planted = plant(str(tmp_path / "canary"))
    vim = vims(env={"TMPDIR": planted["tmp"]}).start()
    vim.wait_started()
    pid = vim.pid
    assert pid
    made = vim_temp_folders(planted["tmp"])  # a temporary folder the plugin made Vim create
    for name in made:  # (files of the test's own, so that Vim's deletion of it lasts long enough to be hit)
        for n in range(3000):
            open(os.path.join(planted["tmp"], name, "f%04d" % n), "w").close()
    signal_while_exiting(vim, how, delay)
    if how == "hup":
        # Vim runs its exit, Python included, from the signal's handler. SIGTERM on the
        # heels of SIGHUP may land while the first exit's Vim thread waits for
        # Python's lock (the GIL, inside pthread_cond_wait); the second exit's
        # Python finalisation then signals that same condition variable and hangs in
        # glibc (seen here with gdb: Py_FinalizeEx under the second handler, a
        # PyGILState_Ensure under the first). That is Vim's, not the plugin's (whose
        # own hang there, a lock, is the last test below): such a Vim is killed, and
        # what matters here is what it deleted. (So this case may take 10 s.)
        gone_or_killed(vim, pid)
    wait_until(vim.gone, what="Vim's process gone")
    assert vanished(planted["canaries"]) == []
    assert made == []
    if how == "hup":
        return  # (a hung Vim was killed before it removed the lock: the next start does)
    assert locks(copilot_home) == []
    # and the plugin's doorbell folder (removed on VimLeavePre, as the lock is)
    assert [n for n in os.listdir(planted["tmp"]) if n.startswith("copilot-ide-vim-")] == []


def test_the_bell_is_gone_before_the_stop_waits_for_the_server(vims: Any, tmp_path: Any) -> None:
    """Vim quitting: a deadly signal that arrives while VimLeavePre waits for the
    server's stop ends Vim there (seen in CI: `:qa!` with SIGTERM and SIGHUP on its
    heels left the doorbell's folder). So the folder goes before the stop begins; the
    test records, from inside the stop, whether it is still there."""
    report = str(tmp_path / "at-stop.txt")
    vim = vims().start()
    vim.wait_lock()
    assert vim.eval("py3eval('_copilot_ide.bell is not None and _copilot_ide.bell.made')") == 1
    vim.ex("py3 import os; _s = _copilot_ide.server; _stop = _s.stop")
    vim.ex("py3 _s.stop = lambda *a, **k: (open(%r, 'w').write(repr(os.path.isdir(_copilot_ide.bell.folder))), "
           "_stop(*a, **k))[1]" % report)
    vim.ex("qa!")
    wait_until(vim.gone, what="Vim's process gone")
    with open(report, encoding="utf-8") as f:
        assert f.read() == "False"


def blocked_signals(pid: int, tid: int) -> int:
    with open("/proc/%d/task/%d/status" % (pid, tid), encoding="ascii") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigBlk in /proc/%d/task/%d/status" % (pid, tid))


def test_the_plugins_threads_leave_signals_to_vims_own_thread(vims: Any) -> None:
    """Every thread in Vim other than Vim's own (the server's loop thread, and the boot
    thread while it lives) blocks SIGHUP, SIGTERM and SIGINT, so that Vim's handlers for
    them run on Vim's thread; Vim's own thread blocks none of them."""
    vim = vims().start()
    vim.wait_lock()
    pid = vim.pid
    assert pid
    threads = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    assert len(threads) >= 2 and pid in threads
    wanted = (1 << (signal.SIGHUP - 1)) | (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
    assert blocked_signals(pid, pid) & wanted == 0
    for tid in threads:
        if tid != pid:
            assert blocked_signals(pid, tid) & wanted == wanted, tid
    vim.quit("qa!")


def test_an_exit_without_vimleavepre_still_removes_the_bell_and_the_lock(vims: Any, tmp_path: Any,
                                                                         copilot_home: str) -> None:
    """An exit that skips VimLeavePre but ends Python (`:noautocmd qa!` here; in the wild
    the second exit a deadly signal runs while the first is inside VimLeavePre, seen
    once: the lock gone, the doorbell's folder left): Python's exit hooks remove both."""
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    vim = vims(env={"TMPDIR": tmp}).start()
    vim.wait_lock()
    assert [n for n in os.listdir(tmp) if n.startswith("copilot-ide-vim-")]  # the bell, made
    vim.ex("noautocmd qa!")
    wait_until(vim.gone, what="Vim's process gone")
    assert locks(copilot_home) == []
    assert [n for n in os.listdir(tmp) if n.startswith("copilot-ide-vim-")] == []


def _hold_in_vims_thread(vim: VimSession, target: str, method: str, marker: str) -> None:
    """Make `target.method` (a Python expression in Vim and a method name) write
    `marker` and wait 3 s the first time it runs, on whichever thread calls it."""
    code = ("import os, time\n"
            "_held_obj = %s\n"
            "_held_orig = _held_obj.%s\n"
            "_held_n = [0]\n"
            "def _held(*a, **k):\n"
            "    _held_n[0] += 1\n"
            "    if _held_n[0] == 1:\n"
            "        open(%r, 'w').close()\n"
            "        time.sleep(3)\n"
            "    return _held_orig(*a, **k)\n"
            "_held_obj.%s = _held\n") % (target, method, marker, method)
    vim.ex("py3 exec(%r)" % code)


def _ends_cleanly(vim: VimSession, pid: int, copilot_home: str, tmp: str) -> None:
    """Vim, whose exit a signal's handler runs on top of a held call, must end (else it
    is killed and the test fails), the lock file and the doorbell's folder with it."""
    if not gone_or_killed(vim, pid):
        raise AssertionError("Vim hung in its exit (killed): it waited for a lock its own thread held")
    assert locks(copilot_home) == []
    assert [n for n in os.listdir(tmp) if n.startswith("copilot-ide-vim-")] == []


def test_a_signal_while_the_timer_holds_the_bell_ends_vim_cleanly(vims: Any, tmp_path: Any,
                                                                  copilot_home: str) -> None:
    """Seen in CI (tmux's kill-server just after the lock appeared): SIGHUP came while
    the timer's tick answered the bell, holding the bell's lock; VimLeavePre, run by the
    signal's handler on the same thread, waited for that lock for ever (Vim hung, the
    lock file stayed). Vim's thread may be anywhere in the plugin when the handler runs
    the exit: nothing on that path may wait for a lock Vim's thread can hold."""
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    marker = str(tmp_path / "inside")
    vim = vims(env={"TMPDIR": tmp}).start()
    vim.wait_lock()
    assert vim.eval("py3eval('_copilot_ide.bell is not None and _copilot_ide.bell.made')") == 1
    _hold_in_vims_thread(vim, "_copilot_ide.bell", "_remove_ring", marker)
    vim.ex("py3 _copilot_ide.bell.ring()")  # the timer answers it within a few ticks
    wait_until(lambda: os.path.exists(marker), what="the timer's tick inside the bell")
    pid = vim.pid
    assert pid
    os.kill(pid, signal.SIGHUP)
    _ends_cleanly(vim, pid, copilot_home, tmp)


def test_a_second_signal_while_the_exit_stops_the_server_ends_vim_cleanly(vims: Any, tmp_path: Any,
                                                                         copilot_home: str) -> None:
    """SIGHUP runs Vim's exit; its VimLeavePre stops the server, holding the server's
    start/stop lock while it waits for the server's thread; SIGTERM then runs the exit
    again on top of it, whose Python finalisation stops the server too (the `atexit`
    hook). That second stop must not wait for the lock the first holds: Vim hung
    there (its stack inside Py_FinalizeEx, under the signal's handler) and had to be
    killed, its lock file left."""
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    marker = str(tmp_path / "inside")
    vim = vims(env={"TMPDIR": tmp}).start()
    vim.wait_lock()
    pid = vim.pid
    assert pid
    _hold_in_vims_thread(vim, "_copilot_ide.server", "_join", marker)
    assert vim.eval("1") == 1  # (the command above has run: Vim is idle again)
    os.kill(pid, signal.SIGHUP)
    wait_until(lambda: os.path.exists(marker), what="the exit's stop waiting for the server")
    os.kill(pid, signal.SIGTERM)
    _ends_cleanly(vim, pid, copilot_home, tmp)
