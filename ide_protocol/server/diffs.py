"""The pending `open_diff`s (`DiffRequest`, and `PendingDiffs` holding them by tab
name), and how an original file is read safely.

`original_file_path` comes from the client, so reading it is reading untrusted input
(PROTOCOL.md §4: the path may not exist yet, a new file, diffed against empty). The
rules, all in `check_original` and `read_original`:

* Only a path that does not exist (ENOENT) is a new file. Every other failure (no
  permission, no file descriptor left, a loop of symlinks) is an error answered to the
  client: showing an existing file as entirely new would make the person review, and
  the CLI write, the wrong change.
* Only a regular file is read (symlinks resolved): a FIFO, `/dev/stdin` or a terminal
  would block, `/dev/zero` never ends. It is opened non-blocking and without becoming
  the controlling terminal, and checked again once open (the same file, still
  regular), so that swapping the path in between gains nothing.
* It is read only up to the server's body limit.
* A path with a NUL character or a lone surrogate (both possible in JSON) names no
  file: a clear error, not an exception from deep in `os`.

`IdeTools` reads small files at once and larger ones in the loop's executor, and
registers the diff only after all this succeeded: a failed `open_diff` leaves nothing
pending.
"""
from __future__ import annotations

import asyncio
import os
import stat
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ..common import tools
from ..common.terminal_text import safe_text

if TYPE_CHECKING:  # (imports only for the type checker: no cycle at run time)
    from .sessions import Session

#: Files up to this size are read on the loop at once (a page-cache read of this size
#: takes microseconds); larger ones in the executor, so other connections go on.
READ_AT_ONCE = 256 * 1024

#: Past these sizes no line diff is computed (`DiffRequest.small_enough_to_diff`):
#: difflib's time grows with the square of the lines (50 000 lines took seconds,
#: 200 000 most of a minute), and no one reads such a diff.
MAX_DIFFED_CHARS = 8 * 1024 * 1024
MAX_DIFFED_LINES = 20000

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_original(path: str, limit: int) -> Optional[os.stat_result]:
    """The original file's status, or None for a new file (the path does not exist).

    Raises `tools.ToolError` (answered as `isError`) for a path that names no file, is
    not a regular file, is larger than `limit` bytes or cannot be examined."""
    if "\x00" in path:
        raise tools.ToolError("Invalid original_file_path: it contains a NUL character")
    try:
        # Strict UTF-8, not os.fsencode: on Windows the file system encoding lets lone
        # surrogates through (a UTF-16 name), yet the CLI, whose paths reach the OS as
        # UTF-8, could never write the file so named.
        path.encode("utf-8")
    except UnicodeError:
        raise tools.ToolError("Invalid original_file_path: it is not valid Unicode (a lone surrogate)")
    try:
        st = os.stat(path)  # follows symlinks: the file the CLI would write
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise tools.ToolError("Cannot read original_file_path %s: %s" % (path, getattr(exc, "strerror", None) or exc))
    if not stat.S_ISREG(st.st_mode):
        raise tools.ToolError("original_file_path %s is %s, not a regular file: refused" % (path, _kind(st.st_mode)))
    if st.st_size > limit:
        raise tools.ToolError("original_file_path %s is %d bytes, more than the limit of %d"
                              % (path, st.st_size, limit))
    return st


def read_original(path: str, expected: os.stat_result, limit: int) -> Tuple[str, bool]:
    """The text of the regular file `check_original` found (UTF-8, line endings
    untouched), and whether it is exact: a file that is not UTF-8 is decoded with its
    invalid bytes as U+FFFD, which then no longer tell what the file holds (a proposal
    with U+FFFD there would show no change, yet change the bytes). Blocking: run it off
    the loop when large."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise tools.ToolError("original_file_path %s disappeared while being read" % path)
    except OSError as exc:
        raise tools.ToolError("Cannot read original_file_path %s: %s" % (path, exc.strerror or exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
            raise tools.ToolError("original_file_path %s changed while being read: refused" % path)
        chunks = []
        size = 0
        while True:
            try:
                chunk = os.read(fd, min(1024 * 1024, limit + 1 - size))
            except InterruptedError:
                continue
            except OSError as exc:
                raise tools.ToolError("Cannot read original_file_path %s: %s" % (path, exc.strerror or exc))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise tools.ToolError("original_file_path %s grew past the limit of %d bytes" % (path, limit))
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


async def load_original(path: str, limit: int) -> Tuple[str, bool, bool]:
    """(text, is_new_file, exact) of the original file, read by the rules above
    (`read_original`): at once when small, in the loop's executor when large."""
    st = check_original(path, limit)
    if st is None:
        return "", True, True
    if st.st_size <= READ_AT_ONCE:
        text, exact = read_original(path, st, limit)
    else:
        loop = asyncio.get_event_loop()
        text, exact = await loop.run_in_executor(None, read_original, path, st, limit)
    return text, False, exact


def _lines(text: str) -> List[str]:
    """`text`'s lines with their `\\n` kept (the last may lack it), split there only."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class DiffRequest:
    """One pending `open_diff`: what to show, and the way to answer it.

    `original_contents` was read from disk before the diff was made (empty for a new
    file). Call `accept()` or `reject()` once; later calls are ignored. `result` is
    the answer sent to the CLI.
    """

    def __init__(self, diffs: "PendingDiffs", tab_name: str, original_file_path: str, new_file_contents: str,
                 session: "Optional[Session]", original_contents: str = "",
                 is_new_file: Optional[bool] = None, original_is_exact: bool = True) -> None:
        self._diffs = diffs
        self.tab_name = tab_name
        self.original_file_path = original_file_path
        self.new_file_contents = new_file_contents
        self.session_id = session.id if session is not None else None
        self.session_name = session.name if session is not None else None
        self.created = time.time()
        self.future: "asyncio.Future[Dict[str, Any]]" = asyncio.get_event_loop().create_future()
        self.original_contents = original_contents
        #: False when the file is not UTF-8: its invalid bytes show as U+FFFD in
        #: `original_contents` (`read_original`), and an accept replaces them.
        self.original_is_exact = original_is_exact
        self.is_new_file = not os.path.exists(original_file_path) if is_new_file is None else is_new_file

    @property
    def done(self) -> bool:
        return self.future.done()

    @property
    def result(self) -> Optional[Dict[str, Any]]:
        return self.future.result() if self.future.done() and not self.future.cancelled() else None

    def accept(self) -> bool:
        """The user accepted: the CLI gets SAVED. Safe from any thread (see `_decide`)."""
        return self._decide(True, tools.ACCEPTED_VIA_BUTTON)

    def reject(self) -> bool:
        """The user rejected: the CLI gets REJECTED. Safe from any thread."""
        return self._decide(False, tools.REJECTED_VIA_BUTTON)

    def _decide(self, saved: bool, trigger: str) -> bool:
        """Resolve on the loop's own thread: asyncio futures are not thread-safe, and an
        editor's UI thread (ThreadedIdeServer) answers diffs from outside the loop. From
        another thread the call is handed over with `call_soon_threadsafe` and waits
        (at most 10 s) for the outcome; True when this call decided the diff."""
        loop = self.future.get_loop()
        try:
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or not loop.is_running():
            return self._diffs.resolve(self, saved, trigger)
        import concurrent.futures

        outcome: "concurrent.futures.Future[bool]" = concurrent.futures.Future()

        def run() -> None:
            try:
                outcome.set_result(self._diffs.resolve(self, saved, trigger))
            except BaseException as exc:  # handed to the calling thread
                outcome.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
            return outcome.result(timeout=10.0)
        except (RuntimeError, concurrent.futures.TimeoutError):  # the loop closed or is stuck
            return False

    def decide(self, decision: Any) -> None:
        """Apply what an `on_diff` callback returned: True/"accept" accepts, False/
        "reject" rejects, None leaves the diff pending (decided later). Anything else
        is the callback's mistake: ValueError."""
        if decision is None or self.done:
            return
        word = decision.lower() if isinstance(decision, str) else None
        if decision is True or word in ("accept", "accepted", "saved", "yes"):
            self.accept()
        elif decision is False or word in ("reject", "rejected", "no"):
            self.reject()
        else:
            raise ValueError("on_diff returned %r; expected True/False, 'accept'/'reject' or None" % (decision,))

    def small_enough_to_diff(self) -> bool:
        """Whether a line diff of the two texts is quick to compute: difflib is close to
        quadratic on repetitive lines, so past `MAX_DIFFED_CHARS` characters (both
        texts together) or `MAX_DIFFED_LINES` lines in either the programs show the
        proposal instead. Lines are what `unified_diff_lines` compares: ended by `\\n`."""
        if len(self.original_contents) + len(self.new_file_contents) > MAX_DIFFED_CHARS:
            return False
        return max(self.original_contents.count("\n"), self.new_file_contents.count("\n")) <= MAX_DIFFED_LINES

    def unified_diff_lines(self, name: Optional[str] = None, context: int = 3) -> List[str]:
        """The diff as unified-diff lines without their terminators (`\\n`, or `\\r\\n`),
        the files named `a/NAME` and `b/NAME` (NAME: the path without its leading `/`,
        its control characters escaped: a newline would forge header lines).

        Lines end at `\\n` only, as `diff` and `patch` count them: `str.splitlines`
        would also end one at `\\r`, a form feed or U+2028, and so miscount the hunks
        and put the marker below mid-file. A last line without a newline is followed by
        `\\ No newline at end of file`, as `diff` marks it: difflib would glue the next
        line to it (a removed `DEBUG = False` and an added line would read as one
        removed line). Slow for large texts: see `small_enough_to_diff`."""
        import difflib

        shown = safe_text(name if name is not None else self.original_file_path.lstrip("/"), multiline=False)
        old, new = _lines(self.original_contents), _lines(self.new_file_contents)
        out: List[str] = []
        for index, line in enumerate(difflib.unified_diff(old, new, "a/" + shown, "b/" + shown, n=context,
                                                          lineterm="")):
            if index < 2 or line.startswith("@@"):  # the file and hunk headers (content has a +, - or space)
                out.append(line)
            elif line.endswith("\n"):
                out.append(line[:-2] if line.endswith("\r\n") else line[:-1])
            else:
                out.append(line)
                out.append("\\ No newline at end of file")
        return out

    def unified_diff(self, context: int = 3) -> str:
        """`unified_diff_lines` as one text, each line ended by a newline."""
        return "".join(line + "\n" for line in self.unified_diff_lines(context=context))

    def __repr__(self) -> str:
        return "DiffRequest(%r, %r)" % (self.tab_name, self.original_file_path)


class PendingDiffs:
    """The diffs waiting for the user, of every session, oldest first (PROTOCOL.md §4,
    as VS Code: a repeated tab name opens a second diff beside the first, and a tab
    name finds the oldest diff of that name, whichever session opened it). A diff
    leaves when it is answered, by whatever answers it: the user, `close_diff`, the end
    of its session, the server's stop (after `close()`, no new diff is shown).
    `on_closed(diff, answer)` hears of every answer."""

    def __init__(self, on_closed: Optional[Callable[[DiffRequest, Dict[str, Any]], None]] = None) -> None:
        self._pending: Dict[int, DiffRequest] = {}  # keyed by the diff itself: names may repeat
        self._on_closed = on_closed
        self.open = True

    def __len__(self) -> int:
        return len(self._pending)

    def get(self, tab_name: str) -> Optional[DiffRequest]:
        """The oldest pending diff with this tab name."""
        return next((diff for diff in self._pending.values() if diff.tab_name == tab_name), None)

    def pending(self) -> List[DiffRequest]:
        """The diffs waiting, oldest first."""
        return list(self._pending.values())

    def add(self, diff: DiffRequest) -> None:
        """Show `diff` (beside any other of the same tab name, §4)."""
        self._pending[id(diff)] = diff

    def forget(self, diff: DiffRequest) -> None:
        """Drop an answered diff (it is normally dropped when answered)."""
        if diff.done:
            self._pending.pop(id(diff), None)

    def resolve(self, diff: DiffRequest, saved: bool, trigger: str) -> bool:
        """Answer `diff` (SAVED when `saved`); False when it was answered already."""
        if diff.future.done():
            return False
        answer = tools.diff_answer(saved, trigger, diff.tab_name, diff.original_file_path)
        diff.future.set_result(answer)
        self._pending.pop(id(diff), None)
        if self._on_closed is not None:
            self._on_closed(diff, answer)
        return True

    def resolve_all(self, trigger: str, session_id: Optional[str] = None) -> None:
        """Reject every pending diff (only those of one session when `session_id`)."""
        for diff in [d for d in self._pending.values() if session_id is None or d.session_id == session_id]:
            self.resolve(diff, False, trigger)

    def close(self) -> None:
        """The server stops: every pending diff is answered `client_disconnected`
        (§4) and none is shown any more until `open` is set again."""
        self.open = False
        self.resolve_all(tools.CLIENT_DISCONNECTED)
