"""Every task the server starts has an owner: the coroutine a reporting callback returns
runs as the server's task and ends with `stop()`; a failing one is logged; a stop asked
for by a signal (or from the loop thread) is one task, kept until it has run."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any, List

from ide_wire import cli_for, make_server, run, until
import platforms


def test_a_callback_coroutine_still_running_is_cancelled_and_awaited_by_stop(tmp_path) -> None:
    seen: List[str] = []

    async def on_session(event: str, info: Any) -> None:
        seen.append("started " + event)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        server = make_server(tmp_path, on_session=on_session)
        await server.start()
        await cli_for(server).handshake(probes=0)
        await until(lambda: "started connected" in seen, what="the callback running")
        await server.stop()
        # Cancelled and awaited by stop() itself, not left pending for the loop's end.
        assert seen[-1] == "cancelled"

    run(main())


def test_a_failing_callback_coroutine_is_logged(tmp_path, caplog) -> None:
    async def on_session(event: str, info: Any) -> None:
        raise RuntimeError("the editor's bug")

    async def main() -> None:
        async with make_server(tmp_path, on_session=on_session) as server:
            await cli_for(server).handshake(probes=0)
            await until(lambda: any("on_session callback failed" in r.getMessage() for r in caplog.records),
                        what="the failure logged")

    with caplog.at_level(logging.ERROR):
        run(main())
    record = next(r for r in caplog.records if "on_session callback failed" in r.getMessage())
    assert record.exc_info is not None and "the editor's bug" in str(record.exc_info[1])


@platforms.posix_signals
def test_repeated_signals_make_one_stop_task_that_the_server_keeps(tmp_path) -> None:
    async def main() -> None:
        server = make_server(tmp_path)
        await server.start()
        lock = server.lock_path
        server.install_signal_handlers([signal.SIGUSR1])
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(server.wait_stopped(), 30)
            first = server._stop_task
            assert first is not None and first.done() and first.exception() is None
            assert not os.path.exists(lock)
        finally:
            server.remove_signal_handlers()
            await server.stop()

    run(main())
