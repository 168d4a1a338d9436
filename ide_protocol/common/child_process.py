"""A child process on asyncio's stream pipes that leaves nothing for asyncio to report.

Two users: the ACP client's agent (`acp.connection`) and the relay's `--via` command
(`relay.via`). Both write to the child's stdin while the child may stop reading and be
ended with our writes unsent, so the pipe ends with a broken-pipe error.

asyncio's own `create_subprocess_exec`/`create_subprocess_shell` keep how the stdin
pipe ended in a future that only `StreamWriter.wait_closed` reads. CPython 3.8-3.10
log that future's error when it is collected ("Future exception was never retrieved",
which a CI run printed after the suite's summary; CPython gh-104340, fixed in 3.11):
noise on a program's stderr after its last line, for an error the failed write (or
the child's exit) has already reported. `ChildProtocol` takes it, and keeps a
`wait_closed` given up on from cancelling it (see `_get_close_waiter`): the subprocess
counterpart of `stream_close` for sockets. It also tells when the child has exited:
`Process.wait` waits for the pipes too, which a grandchild may hold open long after
the child itself is gone.
"""
from __future__ import annotations

import asyncio
from typing import Any, NamedTuple, Optional, Sequence, Union

__all__ = ["Child", "ChildProtocol", "start_child"]

#: asyncio's default buffer limit of a child's stdout and stderr readers.
LIMIT = 2 ** 16


class ChildProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The stream protocol asyncio uses, plus `exited` (set when the child has exited
    and was reaped) and stdin's end taken (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()

    def pipe_connection_lost(self, fd: int, exc: Optional[Exception]) -> None:
        super().pipe_connection_lost(fd, exc)
        waiter = self._stdin_closed_waiter() if fd == 0 else None
        if waiter is not None and waiter.done() and not waiter.cancelled():
            waiter.exception()  # taken (see the module doc)

    def _get_close_waiter(self, stream: Any) -> Any:
        """asyncio's hook: what `StreamWriter.wait_closed` awaits. Handed out shielded:
        a wait given up on (`wait_for`'s timeout) would otherwise cancel asyncio's own
        future, and when the pipe ends later, asyncio's setting it raises
        InvalidStateError, printed as "Exception in callback" (a relay whose far half
        stalled with more queued than the pipe holds, on every CPython)."""
        waiter = self._stdin_closed_waiter() if stream is self.stdin else None
        return asyncio.shield(waiter) if waiter is not None else None

    def _stdin_closed_waiter(self) -> "Optional[asyncio.Future[None]]":
        """asyncio's future of how stdin's pipe ended (None where it has none)."""
        hook = getattr(super(), "_get_close_waiter", None)  # (untyped)
        waiter = hook(self.stdin) if hook is not None and self.stdin is not None else None
        return waiter if isinstance(waiter, asyncio.Future) else None


class Child(NamedTuple):
    """A started child: asyncio's `Process` (its `stdin`, `stdout`, `stderr` streams,
    `pid`, `returncode`), its transport (closing it closes our pipe ends), and the
    event set once it has exited."""
    process: asyncio.subprocess.Process
    transport: asyncio.SubprocessTransport
    exited: asyncio.Event


async def start_child(command: Union[str, Sequence[str]], *, shell: bool = False, stdin: Any = None,
                      stdout: Any = None, stderr: Any = None, limit: int = LIMIT, **options: Any) -> Child:
    """Start `command` (an argv, or with `shell` a shell command line) as
    `asyncio.create_subprocess_exec`/`_shell` would, on a `ChildProtocol`: the standard
    streams are inherited unless said otherwise (`asyncio.subprocess.PIPE`...), where
    the loop's own `subprocess_exec` makes all three pipes. `options` are theirs (cwd,
    env, start_new_session...); OSError and ValueError when it cannot start."""
    loop = asyncio.get_event_loop()

    def protocol() -> ChildProtocol:
        return ChildProtocol(limit=limit, loop=loop)

    if shell:
        assert isinstance(command, str)
        transport, made = await loop.subprocess_shell(protocol, command, stdin=stdin, stdout=stdout, stderr=stderr,
                                                      **options)
    else:
        argv = list(command)
        transport, made = await loop.subprocess_exec(protocol, *argv, stdin=stdin, stdout=stdout, stderr=stderr,
                                                     **options)
    return Child(asyncio.subprocess.Process(transport, made, loop), transport, made.exited)
