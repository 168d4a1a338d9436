"""The signals that end a program: SIGINT, SIGTERM and SIGHUP set an event its run
awaits, so the program stops by its own way out (its lock file and socket removed),
never by a default handler that kills the process where it stands."""
from __future__ import annotations

import asyncio
import signal
from typing import List, Sequence

__all__ = ["install_signals", "remove_signals"]


def install_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> List[int]:
    """SIGINT, SIGTERM and SIGHUP stop the server cleanly (the lock file must go: it is
    the only disconnect signal the CLI notices). Where the loop cannot take signals
    (Windows), a plain handler hands Ctrl-C to the loop."""
    installed: List[int] = []
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            try:
                signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
            except (OSError, RuntimeError, ValueError):
                pass
    return installed


def remove_signals(loop: asyncio.AbstractEventLoop, installed: Sequence[int]) -> None:
    for sig in installed:
        try:
            loop.remove_signal_handler(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
