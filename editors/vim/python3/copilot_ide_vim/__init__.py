"""Copilot CLI's `/ide` protocol inside Vim (`:py3`), on `ThreadedIdeServer`.

This module starts it (`Boot`, below), `plugin.py` is the plugin (Vim's side: commands,
autocommands, the diff tab), `bell.py` the doorbell its threads ring for Vim's timer,
`positions.py` turns Vim's byte columns into the wire's UTF-16 characters, `loader.py`
finds the `ide_protocol` library. The Vim script in ../../plugin and ../../autoload only
forwards to these.

The start lives in the package's own module because this is the one module Vim's
thread loads at start-up (each module loaded there costs it a few tenths of a
millisecond): it imports nothing but `_thread` (a built-in); the boot thread imports
the rest.

The start is split so that Vim's thread never waits for it. Vim's thread does only what
must happen there: it reads Vim's state (`settings`: the working folder,
`$COPILOT_HOME`, the options) and makes a `Boot`, which starts a thread of its own. That
thread imports the plugin and the library and starts the server without waiting for it
(`ThreadedIdeServer.start(wait=False)`); the lock file is written on the server's
thread.

Vim's thread must not enter Python while that thread works: the import holds Python's
lock (the GIL) and Vim's thread would wait for it, for milliseconds at each try, more
on a loaded machine. So the thread makes the plugin's doorbell first (bell.py: a 0700
folder, `settings["bell"]`, named by Vim), and Vim's timer looks only for its ring
(`filereadable()`), entering Python once it is there: rung by the server's callback
once the server is up (its `_started` waits in the queue), or by this thread when the
start failed. The bell then belongs to the plugin (`VimIde`), which removes it when
Vim quits; after `leave()` the thread makes and rings nothing.

The thread blocks the asynchronous signals for itself first thing (the library's
`leave_signals_to_host`), so that Vim's SIGHUP/SIGTERM handlers, which run Vim's exit,
run on Vim's own thread, never on this one.
"""
import _thread

# No `from __future__ import annotations` (a module to find and load) and no `typing`
# (milliseconds): the annotations below are strings, the names for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional


class Boot:
    """One start of the plugin's Python side, on a thread of its own.

    `leave()` (Vim quits) may come at any point: before the thread has built the
    server, the thread then builds nothing; after, the server is stopped (a start still
    under way is cancelled by `ThreadedIdeServer.stop`). One lock orders the two."""

    def __init__(self, settings: "Dict[str, Any]") -> None:
        self.settings = settings
        self.ide: "Any" = None  # the plugin (VimIde), once its server is starting
        self.bell: "Any" = None  # the doorbell (bell.Bell), made first thing by the thread
        self.error: "Optional[str]" = None
        self.done = False
        self._lock = _thread.allocate_lock()
        self._quitting = False
        _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            from . import loader
            from .bell import Bell

            loader.guest_threads().leave_signals_to_host()  # before the long import below
            with self._lock:
                if self._quitting:
                    return
                self.bell = Bell(self.settings.get("bell"))
                self.bell.make()
            from . import plugin  # the plugin and, through it, the library

            ide = plugin.instance()
            with self._lock:
                if self._quitting:
                    return
                import __main__  # where Vim's `:py3` commands run: the forwarders' `_copilot_ide`

                __main__._copilot_ide = ide  # type: ignore[attr-defined]
                # Returns at once: the server starts on its own thread, and its `_started`,
                # queued for Vim's thread, rings the bell.
                ide.serve(self.settings, bell=self.bell)
                self.ide = ide
        except BaseException as exc:  # reported on Vim's thread by the timer
            self.error = "%s: %s" % (type(exc).__name__, exc)
        finally:
            self.done = True
            with self._lock:
                if self.ide is None and not self._quitting and self.bell is not None:
                    self.bell.ring()  # failed: Vim's timer asks `state()`

    def state(self) -> str:
        """For Vim's timer: "" while the thread works, "ok" once done, else the error."""
        if not self.done:
            return ""
        return self.error or ("ok" if self.ide is not None else "stopped")

    def leave(self) -> None:
        """Vim quits: nothing is started from now on; a server started is stopped, the
        bell removed."""
        with self._lock:
            self._quitting = True
            ide, bell = self.ide, self.bell
        if ide is not None:
            ide.leave()  # the bell is the plugin's now
        elif bell is not None:
            bell.close()
