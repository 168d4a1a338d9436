"""A child process and everything it starts, ended as one.

The agent we start (ACP.md §7) and the commands it runs in our terminals (ACP.md §5)
start programs of their own: a shell runs the command, `npm test` runs node, an agent
runs its tools. Ending only the child would leave those running, orphaned, perhaps
holding our pipes open. So each child is started as the root of a tree the system can
end whole:

* **POSIX**: in a session, and so a process group, of its own (`start_new_session`);
  `killpg` reaches every process of the group, also those left after the root exited.
* **Windows**: in a job object made for it just after it starts; `TerminateJobObject`
  ends every process in it, the root's leftovers too. The child cannot be started
  suspended through `subprocess`, so what it starts in the instant before it is
  assigned stays outside the job. Where no job can be had (no `ctypes`, or a parent
  job that forbids nesting, before Windows 8), only the root is ended, as
  `Popen.kill()` ends it.

Either way the tree outlives us if we die without ending it (as a process group
does): the agent then sees its stdin end and shuts down by itself (ACP.md §7).

Windows has no signals to send: there any signal ends the tree at once (as
`TerminateProcess`, Python's `send_signal` there, ends one process).
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import weakref
from typing import Any, Dict, Optional

from ._core import win32

log = logging.getLogger(__name__)

_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # (Windows has no SIGKILL)


def spawn_options(grouped: bool = True) -> Dict[str, Any]:
    """Keywords for `subprocess`/asyncio's spawn functions: the child as a tree's root
    (POSIX: its own session; Windows needs none: its job is made after the start)."""
    return {"start_new_session": True} if grouped and os.name == "posix" else {}


class ProcessTree:
    """`process` (a `subprocess.Popen` or an asyncio `Process`, just started with
    `spawn_options(grouped)`) and what it starts. Not `grouped`: the root alone."""

    def __init__(self, process: Any, grouped: bool = True) -> None:
        self.process = process
        self._group = grouped and os.name == "posix"
        self._job = _Job.holding(process.pid) if grouped and os.name == "nt" else None

    def send(self, sig: int) -> None:
        """`sig` to every process of the tree (see the module's note for Windows); a
        tree already gone is no error. Where the job cannot be ended, the root is."""
        try:
            if self._group:
                os.killpg(self.process.pid, sig)
            elif self._job is None or not self._job.terminate():
                if sig == _KILL or os.name == "nt":
                    self.process.kill()
                else:
                    self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass
        except OSError as exc:  # (Windows: the root exited already)
            log.debug("signal %s to process %s: %s", sig, self.process.pid, exc)

    def kill(self) -> None:
        """End every process of the tree now (the root's leftovers too, where the tree
        is whole)."""
        self.send(_KILL)

    def end(self) -> None:
        """Once the root has exited: end what it left (a root alone leaves nothing we
        can reach), and let go of the tree (Windows: our job handle). Safe to call more
        than once."""
        if self._group or self._job is not None:
            self.kill()
        # Never again: the group's number may be another's once its last process went.
        self._group = False
        job, self._job = self._job, None
        if job is not None:
            job.close()


class _Job:
    """A Windows job object holding one process tree: what the root starts is in it
    too. Its handle is ours alone (not inherited); closing it ends nothing, as on
    POSIX a process group outlives the parent that made it. The handle is closed by
    `close()`, or when this object is collected (a tree never ended)."""

    def __init__(self, kernel32: Any, handle: int) -> None:
        self._kernel32 = kernel32
        self._handle = handle
        self._finalizer = weakref.finalize(self, kernel32.CloseHandle, handle)

    @classmethod
    def holding(cls, pid: int) -> "Optional[_Job]":
        """A job holding process `pid` (which our `Popen` holds open, so that the pid
        is still that process's), or None where none can be had."""
        if sys.platform != "win32":
            return None  # (job objects are Windows's: a process group serves elsewhere)
        try:
            import ctypes

            kernel32 = win32.kernel32()
        except (ImportError, AttributeError, OSError) as exc:
            log.debug("no job object for process %s: %s", pid, exc)
            return None
        process_terminate, process_set_quota = 0x0001, 0x0100
        job = kernel32.CreateJobObjectW(None, None)
        if not job:
            return None
        process = kernel32.OpenProcess(process_terminate | process_set_quota, False, pid)
        held = bool(process) and bool(kernel32.AssignProcessToJobObject(job, process))
        error = ctypes.get_last_error()
        if process:
            kernel32.CloseHandle(process)
        if not held:
            log.debug("no job object for process %s: Windows error %s", pid, error)
            kernel32.CloseHandle(job)
            return None
        return cls(kernel32, job)

    def terminate(self) -> bool:
        """End every process in the job (exit status 1, as `Popen.kill()` leaves);
        False when Windows refused."""
        return bool(self._kernel32.TerminateJobObject(self._handle, 1))

    def close(self) -> None:
        self._finalizer()  # (once: a finalizer runs at most once)
