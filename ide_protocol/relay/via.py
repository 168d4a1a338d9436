"""The other half started by `--via CMD`, and ended with this one, whatever it started.

`--via` is a shell command (`ssh host ...`, `docker exec -i ...`, `nsenter ...`): the
shell starts a program that may start others (`ssh` runs a proxy command, a wrapper
script runs `ssh`). Ending only the shell leaves the rest running: an `ssh` whose
remote half goes on for ever. So on POSIX the command runs in a session and process
group of its own (`setsid`), and ending it ends the group:

1. its stdin is closed first (by the link): the other half ends on its input's end,
   and `ssh` with it; the group gets `GRACE` seconds for that;
2. whatever of the group is left gets SIGTERM (and SIGCONT, so that a stopped one
   acts on it), and after another `GRACE` seconds SIGKILL.

Being in a session of its own, the command has no controlling terminal: `ssh` cannot
ask for a password or a host key's confirmation there (it fails at once and says so,
instead of stopping the relay at a prompt nobody sees). Key authentication, an agent,
or a host key accepted beforehand (`ssh HOST true` once) are what works; docs/RELAY.md
says so. On Windows there are no process groups of this kind: the shell is ended
(`TerminateProcess`), and what it started may outlive it.
"""
from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Optional, Tuple

from ..common.child_process import Child, start_child

#: Seconds each step of the ending waits (see the module doc).
GRACE = 2.0
_POLL = 0.05


class ViaChild:
    """The process `--via` started (asyncio's, and its transport), and its process group
    on POSIX."""

    def __init__(self, child: Child) -> None:
        self.proc: Any = child.process
        self.transport = child.transport
        self.group: Optional[int] = self.proc.pid if os.name == "posix" else None

    async def end(self, grace: float = GRACE) -> None:
        """End the command and everything it started (see the module doc); bounded by
        about three times `grace`."""
        await self._exited(grace)
        if self._group_exists():
            self._signal(signal.SIGTERM)
            self._signal(signal.SIGCONT)
            if not await self._group_gone(grace):
                self._signal(getattr(signal, "SIGKILL", signal.SIGTERM))
        elif self.proc.returncode is None and self.group is None:
            self._terminate()
        if not await self._exited(grace):
            self._terminate()
            await self._exited(grace)
        self._close()

    async def _exited(self, seconds: float) -> bool:
        if self.proc.returncode is not None:
            return True
        try:
            await asyncio.wait_for(self.proc.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True

    def _group_exists(self) -> bool:
        """Whether a process of the group is left (zombies count: nothing tells them
        apart portably, and signalling one is harmless)."""
        if self.group is None:
            return False
        try:
            os.killpg(self.group, 0)
        except ProcessLookupError:
            return False
        except OSError:  # (EPERM: a member changed its user; it is not ours to end)
            return False
        return True

    async def _group_gone(self, seconds: float) -> bool:
        loop = asyncio.get_event_loop()
        deadline = loop.time() + seconds
        while self._group_exists():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL)
        return True

    def _signal(self, sig: int) -> None:
        assert self.group is not None
        try:
            os.killpg(self.group, sig)
        except OSError:  # gone meanwhile
            pass

    def _terminate(self) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.kill()
            except (ProcessLookupError, OSError):  # it ended meanwhile
                pass

    def _close(self) -> None:
        """Close asyncio's transport of the process now. Its pipes would otherwise stay
        open until the garbage collector takes it, after the loop closed, which it
        reports with a traceback ("Event loop is closed")."""
        try:
            self.transport.close()
        except (OSError, RuntimeError):
            pass


async def open_via(command: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, ViaChild]:
    """Start the other half with the shell's `COMMAND` (in a session of its own on
    POSIX); its stdout and stdin are the link."""
    child = await start_child(command, shell=True, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                              start_new_session=os.name == "posix")
    proc = child.process
    assert proc.stdout is not None and proc.stdin is not None
    return proc.stdout, proc.stdin, ViaChild(child)
