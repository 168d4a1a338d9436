"""The plugin's start, split so that Vim's thread never waits for it.

Vim's thread does only what must happen there: it reads Vim's state (`settings`: the
working folder, `$COPILOT_HOME`, the options) and makes a `Boot`, which starts a thread
of its own. That thread imports the plugin and the library and starts the server
without waiting for it (`ThreadedIdeServer.start(wait=False)`); the lock file is
written on the server's thread.

Vim's thread must not enter Python while that thread works: the import holds Python's
lock (the GIL) and Vim's thread would wait for it, for milliseconds at each try, more
on a loaded machine. So the thread says it is done the one way Vim sees without
Python: it creates the file "done" in `settings["done_dir"]`, a 0700 folder the plugin
made for it with Vim's `mkdir()` (autoload/copilot_ide.vim says why not `tempname()`),
which Vim's timer looks for with `filereadable()`; only then does Vim ask `state()`.
The file is created exclusively and never through a symbolic link; Vim removes it, then
the empty folder. After `leave()` the thread creates nothing, so Vim's removal at exit
is the last word.

The thread blocks the asynchronous signals for itself first thing (the library's
`leave_signals_to_host`), so that Vim's SIGHUP/SIGTERM handlers, which run Vim's exit,
run on Vim's own thread, never on this one.

This module imports nothing but `_thread` (a built-in), so that making a `Boot` costs
Vim's thread next to nothing beyond Python's own start.
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
        self.error: "Optional[str]" = None
        self.done = False
        self._lock = _thread.allocate_lock()
        self._quitting = False
        _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        try:
            from . import loader

            loader.guest_threads().leave_signals_to_host()  # before the long import below
            from . import plugin  # the plugin and, through it, the library

            ide = plugin.instance()
            with self._lock:
                if self._quitting:
                    return
                import __main__  # where Vim's `:py3` commands run: the forwarders' `_copilot_ide`

                __main__._copilot_ide = ide  # type: ignore[attr-defined]
                ide.serve(self.settings)  # returns at once: the server starts on its own thread
                self.ide = ide
        except BaseException as exc:  # reported on Vim's thread by the timer
            self.error = "%s: %s" % (type(exc).__name__, exc)
        finally:
            self.done = True
            with self._lock:
                if not self._quitting:
                    self._say_done()

    def _say_done(self) -> None:
        """Create the file Vim's timer looks for (see the module's docstring)."""
        import os

        folder = self.settings.get("done_dir")
        if not folder:
            return  # no folder of the plugin's: Vim asks `state()` at its ticks
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            os.close(os.open(os.path.join(folder, "done"), flags, 0o600))
        except (OSError, TypeError, ValueError):  # Vim's timer asks `state()` every 40th tick all the same
            pass

    def state(self) -> str:
        """For Vim's timer: "" while the thread works, "ok" once done, else the error."""
        if not self.done:
            return ""
        return self.error or ("ok" if self.ide is not None else "stopped")

    def leave(self) -> None:
        """Vim quits: nothing is started from now on; a server started is stopped."""
        with self._lock:
            self._quitting = True
            ide = self.ide
        if ide is not None:
            ide.leave()
