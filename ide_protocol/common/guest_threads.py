"""Threads the library starts inside a host's process leave the host's signals to it.

A signal sent to a process (SIGHUP when its terminal closes, SIGTERM, SIGINT, SIGCHLD,
...) is delivered to any one of its threads that does not block it. An editor that
embeds Python (Vim's `:py3`, Sublime, a Qt application) installs C signal handlers
written for its own thread: Vim's SIGHUP/SIGTERM handler runs Vim's whole exit. Run
on a thread of ours instead, such a handler races the editor's own thread through
code never meant to run twice at once: Vim then deletes its temporary folder's name
twice and with it the folder *above* it. (Python's own handlers always run on the main
thread anyway; this is about the host's.)

So a thread the library starts in someone else's process calls `leave_signals_to_host()`
first thing: it blocks the asynchronous signals for that thread alone (a thread's
signal mask is its own; nothing process-wide changes, and the host's threads keep
receiving them). Threads it starts in turn (asyncio's executor threads) inherit the
mask. Signals a fault raises in the thread itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
SIGTRAP, SIGSYS) and SIGABRT (`abort()`) stay unblocked: they are the thread's own.

Where threads have no signal masks (Windows, a Python without `pthread_sigmask`) this
does nothing. Imports only the `signal` module, so a host may call it before importing
the rest of the library.
"""
from __future__ import annotations

import signal

_OWN = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGABRT")


def host_signals() -> set[int]:
    """The signals a thread of ours blocks: every valid one but the thread's own."""
    own = {getattr(signal, name) for name in _OWN if hasattr(signal, name)}
    valid = getattr(signal, "valid_signals", None)  # 3.8+, POSIX and Windows
    return set() if valid is None else {int(s) for s in valid()} - {int(s) for s in own}


def leave_signals_to_host() -> None:
    """Block the host's signals in the calling thread only (see the module's docstring).
    Call it first thing in a thread the library starts; never on a host's thread."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        return
    try:
        mask(signal.SIG_BLOCK, host_signals())
    except (OSError, ValueError):  # a platform refusing some signal: the rest is best effort
        pass
