"""The doorbell: how the plugin's threads tell Vim's timer that work waits for it,
without Vim entering Python to ask.

Entering Python is most of what a timer tick costs Vim's thread (and while the boot
thread imports, it would wait for Python's lock), so an idle tick only looks, with
Vim's `filereadable()`, for the file "ring" in a folder of the plugin's own. A thread
that queued work for Vim's thread (`ring()`: the server's callbacks, the end of a
failed boot) creates that file; Vim's timer, seeing it, enters Python, which removes
the file (`answer()`) before it runs what was queued, so that work queued meanwhile
rings again.

The folder: `copilot-ide-vim-PID-N` in `$TMPDIR` (Vim chooses the name; the plugin
never asks Vim for `tempname()`: autoload/copilot_ide.vim says why), made here with
mode 0700 by `os.mkdir`, which fails when the name exists (then there is no bell, and
Vim's timer asks Python at its every fifth tick instead). The file is created
exclusively and never through a symbolic link. Only what this object made is ever
removed: its "ring" file, then the folder with `rmdir` (only when empty: never
recursive), at `close()` (Vim quits). A Vim killed outright leaves the empty folder.
A folder removed by someone else (a cleaner of old files in /tmp, after days of
idling) is made again at the next ring.

Uses `os` only (imported by Python's own start already): the boot thread makes the
bell before its long import.
"""
import os
import _thread

# The annotations are strings (no `from __future__`, no `typing`: see __init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_RING_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))


class Bell:
    """The folder `folder` and its "ring" file. `make()` on any thread, `ring()` on
    any (the server's), `answer()` and `close()` on Vim's; one lock orders `ring()`
    and `close()`, so that no ring comes after the folder is gone."""

    def __init__(self, folder: "Optional[str]") -> None:
        self.folder = folder or ""
        self.ring_path = os.path.join(self.folder, "ring") if self.folder else ""
        self.made = False  # the folder is this object's (made by it, not removed yet)
        self._lock = _thread.allocate_lock()

    def make(self) -> bool:
        """Make the folder (0700); False when it cannot be made or its name exists."""
        with self._lock:
            if not self.made and self.folder:
                try:
                    os.mkdir(self.folder, 0o700)
                    self.made = True
                except (OSError, ValueError):
                    pass
            return self.made

    def ring(self) -> None:
        """Work waits for Vim's thread (any thread may ring, as often as it likes)."""
        with self._lock:
            if not self.made:
                return
            try:
                os.close(os.open(self.ring_path, _RING_FLAGS, 0o600))
            except FileNotFoundError:  # the folder went (a cleaner of old files in /tmp): made again
                try:
                    os.mkdir(self.folder, 0o700)
                    os.close(os.open(self.ring_path, _RING_FLAGS, 0o600))
                except OSError:  # (its name taken meanwhile: no ring; Python's next tick drains all the same)
                    pass
            except OSError:  # rung already
                pass

    def answer(self) -> None:
        """Vim's thread saw the ring and runs what waits: the ring goes first."""
        if self.made:
            self._remove_ring()

    def close(self) -> None:
        """Remove the ring and the folder (this object's own; only when empty)."""
        with self._lock:
            if not self.made:
                return
            self.made = False
            self._remove_ring()
            try:
                os.rmdir(self.folder)
            except OSError:  # not empty (something not ours in it) or gone: left as it is
                pass

    def _remove_ring(self) -> None:
        try:
            os.unlink(self.ring_path)
        except OSError:
            pass
