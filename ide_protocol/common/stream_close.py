"""Closing an asyncio stream so that nothing is left for the garbage collector to print.

When a socket fails (a reset, a broken pipe), asyncio keeps the error twice: it is
raised to the reader, and it is also kept in the stream's close future, which only
`StreamWriter.wait_closed()` hands out. Left untaken, that future is printed as
"Future exception was never retrieved" whenever the garbage collector finalises it
before the stream's protocol (they are in one reference cycle, collected in any order):
a stray traceback on the user's terminal after a clean one-line error. Every owner of
a stream over a socket (the IDE client's connections, the ACP client over TCP) closes
it through `close_stream`.
"""
from __future__ import annotations

import asyncio
from typing import Any

#: How long a close waits for the stream's end to close before aborting it: a peer
#: that does not read what is still buffered is not waited for.
CLOSE_WAIT = 1.0


async def close_stream(writer: Any, wait: float = CLOSE_WAIT) -> None:
    """Close `writer` (an `asyncio.StreamWriter`), wait up to `wait` seconds for its end
    to close, and take the outcome asyncio keeps for it (a reset's error, which its
    reader has already reported). Past `wait` the transport is aborted. Never raises
    but for cancellation."""
    try:
        writer.close()
    except (OSError, RuntimeError):  # (its loop already closed: nothing is kept)
        return
    try:
        await asyncio.wait_for(writer.wait_closed(), wait)
    except asyncio.TimeoutError:
        transport = getattr(writer, "transport", None)
        if transport is not None:
            transport.abort()
    except Exception:  # the reset, or a broken pipe: its reader's to report
        pass
