"""`Reports`: the IDE's reporting callbacks (`on_session`, `on_tool_call`,
`on_diff_closed`), run so that none of them can harm the protocol.

A callback that reports something expects no answer. It may be a plain function or
return a coroutine; the coroutine runs as a task this object owns, and `cancel()`
(called by `IdeServer.stop()`) cancels and awaits what still runs: no task outlives its
server. An exception is logged, never raised into the request that caused the report.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable, Set

log = logging.getLogger("ide_protocol.server.ide_server")  # (one logger for the server's reports)


class Reports:
    """Runs reporting callbacks and owns the tasks of those that return a coroutine."""

    def __init__(self) -> None:
        self._tasks: "Set[asyncio.Future[Any]]" = set()

    def report(self, name: str, hook: Callable[..., Any], *args: Any) -> None:
        """Call `hook(*args)`; `name` says which callback failed in the log."""
        try:
            result = hook(*args)
        except Exception:
            log.exception("%s callback failed", name)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(lambda done: self._finished(name, done))

    def _finished(self, name: str, task: "asyncio.Future[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s callback failed", name, exc_info=task.exception())

    async def cancel(self) -> None:
        """Cancel the callbacks' tasks still running and wait until they have ended."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
