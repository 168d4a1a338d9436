"""The doorbell: how the plugin's threads tell Vim's timer that work waits for it,
without Vim entering Python to ask.

Entering Python is most of what a timer tick costs Vim's thread (and while the boot
thread imports, it would wait for Python's lock), so an idle tick only looks, with
Vim's `filereadable()`, for the file "ring" in a folder of the plugin's own. A thread
that queued work for Vim's thread (`ring()`: the server's callbacks, the end of a
failed boot) creates that file; Vim's timer, seeing it, enters Python, which removes
the file (`answer()`) before it runs what was queued, so that work queued meanwhile
rings again.

The folder: `copilot-ide-vim-PID-TIME` in `$TMPDIR` (Vim chooses the name; the
plugin never asks Vim for `tempname()`: autoload/copilot_ide.vim says why), made here
with mode 0700 by `os.mkdir`, which fails when the name exists (then there is no
bell, and Vim's timer asks Python at its every fifth tick instead), and held open.
The file is created exclusively, never through a symbolic link, and in that held
folder. Only what this object made is ever removed: its "ring" file, then the
folder with `rmdir` (only when empty: never recursive, and only while the name is
still that folder), at `close()` (Vim quits), or at Python's exit when that did not
run or did not finish (`at_exit`). A Vim killed outright leaves the empty folder. A
folder removed by someone else (a cleaner of old files in /tmp, after days of idling)
is made again at the next ring, unless the name is taken by then.

Uses `os` only (imported by Python's own start already): the boot thread makes the
bell before its long import.
"""
import atexit
import os
import stat
import _thread

# The annotations are strings (no `from __future__`, no `typing`: see __init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_RING_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))
# Where the system has them (not Windows): the folder held open, and the ring made and
# removed relative to it, so that they are in the folder this object made whatever
# now has its name.
_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
#: How long a `ring()` waits for the lock between looks at whether the bell is closing.
_RING_WAIT_STEP = 0.05
_HOLD = hasattr(os, "O_DIRECTORY") and os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd


def _identity(st: "os.stat_result") -> "tuple":
    """What tells the folder this object made from another at its name: its file id
    (compared with the held folder's, or where it cannot be held open, Windows, with
    the one noted when it was made: NTFS's carries a sequence number that changes
    when an id is used again)."""
    return (st.st_dev, st.st_ino)


class Bell:
    """The folder `folder` and its "ring" file. `make()` on any thread, `ring()` on
    any (the server's), `answer()` and `close()` on Vim's; one lock orders them, so
    that no ring comes after the folder is gone.

    The lock is re-entrant: Vim's thread may be inside `answer()` (the timer's tick),
    or inside `close()`, when a deadly signal's handler runs Vim's exit on top of it
    on the same thread, and that exit calls `close()` (VimLeavePre) and `at_exit()`.
    They then go on through the lock the thread holds already, where a plain lock
    would wait for itself for ever (seen in CI: Vim hung, the lock file left). Every
    step is harmless done twice, and the interrupted call never resumes (Vim exits).
    The lock is then never let go: a `ring()` from another thread (the server's stop
    queues the pending diffs' closing) waits for it in short steps and gives up once
    the bell is closing, so that the server's stop is not held up.

    The folder is held open while it is this object's: the ring is made and removed
    in it (never in a folder someone else made at its name after ours went), and the
    name is removed only while it is still that folder (held open, its inode cannot be
    another's). Windows cannot hold a folder so: there the folder's file id, noted when
    it was made, tells it apart, and the ring is made and removed by name."""

    def __init__(self, folder: "Optional[str]") -> None:
        self.folder = folder or ""
        self.ring_path = os.path.join(self.folder, "ring") if self.folder else ""
        self.made = False  # the folder is this object's (made by it, not removed yet)
        self._fd = -1  # the folder, held open (where the system can)
        self._made_as = None  # else its identity when made (`_identity`)
        self._lock = _thread.RLock()
        self._closing = False  # set first by `close`/`at_exit`, outside the lock

    def make(self) -> bool:
        """Make the folder (0700); False when it cannot be made or its name exists."""
        with self._lock:
            if not self.made and self.folder:
                self._closing = False
                self.made = self._mkdir()
                if self.made:
                    atexit.register(self.at_exit)
            return self.made

    def ring(self) -> None:
        """Work waits for Vim's thread (any thread may ring, as often as it likes)."""
        while not self._lock.acquire(timeout=_RING_WAIT_STEP):
            if self._closing:  # (Vim exits: the lock may never be let go)
                return
        try:
            if not self.made or self._closing:
                return
            try:
                self._create_ring()
            except FileNotFoundError:
                # The folder went (a cleaner of old files in /tmp, after days of idling):
                # made again, unless its name is someone else's now (then no bell).
                self._release()
                self.made = self._mkdir()
                if self.made:
                    try:
                        self._create_ring()
                    except OSError:
                        pass
            except OSError:  # rung already
                pass
        finally:
            self._lock.release()

    def answer(self) -> None:
        """Vim's thread saw the ring and runs what waits: the ring goes first."""
        with self._lock:
            if self.made:
                self._remove_ring()

    def close(self) -> None:
        """Remove the ring and the folder (this object's own; only when empty)."""
        self._closing = True
        with self._lock:
            atexit.unregister(self.at_exit)
            self._remove_all()

    def at_exit(self) -> None:
        """Python's exit (atexit): what `close` would do, where it did not run or did not
        finish (Vim exits twice when a deadly signal comes while VimLeavePre runs: the
        second exit, Python's finalisation included, runs on top of the first)."""
        self._closing = True
        with self._lock:
            self._remove_all()

    def _remove_all(self) -> None:
        """The ring, then the folder while it is still ours, then what holds it; from
        then on nothing is ours (the last step: until it, a second caller does all
        again)."""
        self.made = False
        if self._fd < 0 and self._made_as is None:
            return  # nothing made, or removed already
        self._remove_ring()
        if self._ours():
            try:
                os.rmdir(self.folder)
            except OSError:  # not empty (something not ours in it), or gone: left as it is
                pass
        self._release()

    def _mkdir(self) -> bool:
        try:
            os.mkdir(self.folder, 0o700)
            if _HOLD:
                self._fd = os.open(self.folder, _DIR_FLAGS)
            else:
                self._made_as = _identity(os.lstat(self.folder))
        except (OSError, ValueError):
            return False
        return True

    def _ours(self) -> bool:
        """The folder at the name is the one this object made and holds."""
        if self._fd < 0:
            try:
                named = os.lstat(self.folder)
            except OSError:
                return False
            return stat.S_ISDIR(named.st_mode) and _identity(named) == self._made_as
        try:
            held, named = os.fstat(self._fd), os.lstat(self.folder)
        except OSError:
            return False
        return held.st_nlink > 0 and _identity(held) == _identity(named)

    def _create_ring(self) -> None:
        if self._fd >= 0:
            os.close(os.open("ring", _RING_FLAGS, 0o600, dir_fd=self._fd))
        elif self._ours():
            os.close(os.open(self.ring_path, _RING_FLAGS, 0o600))
        else:  # (ours went; the name may be another's now: `ring` makes it again, or not)
            raise FileNotFoundError(self.folder)

    def _remove_ring(self) -> None:
        try:
            if self._fd >= 0:
                os.unlink("ring", dir_fd=self._fd)
            elif self._ours():
                os.unlink(self.ring_path)
        except OSError:
            pass

    def _release(self) -> None:
        # The descriptor is forgotten before it is closed: an exit run on top of this
        # step (see the class) must not close the number again, which another thread
        # may have been given meanwhile.
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        self._made_as = None
