"""The diffs waiting for the person at `serve`'s terminal: their numbers, and how they are shown.

The person answers a diff by what they see, so the registry keeps two namespaces that a
client cannot mix up: the number `serve` printed (`accept 3`) and the tab name the
client chose (`accept --tab NAME`, or the name in quotes). A digit string is always a
number: a client naming its tab "3" cannot capture `accept 3`. A bare `accept` answers
the only waiting diff; with several waiting it asks which instead of guessing. A diff is
listed only once it has been shown in full, and leaves the list when it is answered.

A large diff is computed in a daemon thread (difflib on a large file takes seconds, and
the loop must keep answering), and at most `max_lines` lines are printed.
"""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...server.ide_server import DiffRequest
from ..options import one_line  # a one-line field from the client (tab name, path), escaped
from .commands import CommandError, split_args

#: Diff lines printed at most per diff (`serve --diff-lines`).
DEFAULT_SHOWN_LINES = 2000
#: Up to this many characters (both sides) the diff is computed at once: milliseconds,
#: and the diff is then shown, and answerable, before the next command is read.
RENDER_AT_ONCE = 256 * 1024
RENDER_LINES_AT_ONCE = 2000  # (and lines: difflib on many short repetitive lines takes seconds)




def display_path(path: str, folder: str) -> str:
    """A path relative to the folder when inside it, else as given."""
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # another drive on Windows
        return path
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
        return path
    return rel


def where_it_goes(path: str, folder: str) -> List[str]:
    """What the path's name does not tell: the file an accepted diff has the CLI write
    may be elsewhere (a link, a relative path, a place outside the folder)."""
    notes = []
    if not os.path.isabs(path):
        notes.append("a relative path: here it names %s; the CLI may mean another file" % os.path.abspath(path))
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return notes
    if os.path.normcase(real) != os.path.normcase(os.path.abspath(path)):
        notes.append("through a link: the file written is %s" % real)
    if display_path(real, os.path.realpath(folder)) == real:
        notes.append("outside %s" % folder)
    return notes


def unified_diff(diff: DiffRequest, folder: str) -> List[str]:
    """The diff's lines (`DiffRequest.unified_diff_lines`), the file named as shown here:
    relative to the folder, escaped to one line (a newline would start a line of its own)."""
    return diff.unified_diff_lines(one_line(display_path(diff.original_file_path, folder)))


def render(diff: DiffRequest, folder: str, max_lines: int) -> Tuple[List[str], int, bool]:
    """(lines to print, lines left out, whether a line diff was computed at all)."""
    if not diff.small_enough_to_diff():
        return [], 0, False
    lines = unified_diff(diff, folder)
    if len(lines) > max_lines:
        return lines[:max_lines], len(lines) - max_lines, True
    return lines, 0, True


async def render_in_thread(diff: DiffRequest, folder: str, max_lines: int) -> Tuple[List[str], int, bool]:
    """`render`, at once for a small diff, else in a daemon thread: the loop goes on,
    and stopping `serve` never waits for it (the loop's default executor would be
    waited for at exit)."""
    if (len(diff.original_contents) + len(diff.new_file_contents) <= RENDER_AT_ONCE
            and diff.original_contents.count("\n") + diff.new_file_contents.count("\n") <= RENDER_LINES_AT_ONCE):
        return render(diff, folder, max_lines)
    loop = asyncio.get_event_loop()
    future: "asyncio.Future[Tuple[List[str], int, bool]]" = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def work() -> None:
        setter: Callable[[Any], None]
        try:
            value: Any = render(diff, folder, max_lines)
            setter = future.set_result
        except Exception as exc:  # handed to the loop
            value, setter = exc, future.set_exception
        try:
            loop.call_soon_threadsafe(deliver, setter, value)
        except RuntimeError:
            pass  # the loop is closed: serve is exiting

    threading.Thread(target=work, name="serve-diff", daemon=True).start()
    return await future


class NumberedDiffs:
    """The diffs `serve` shows, numbered so that a person can answer one by its number;
    the ones shown in full wait here for that answer. (The server's own record of the
    pending diffs is `server.diffs.PendingDiffs`.)"""

    def __init__(self) -> None:
        self._next = 0
        self._numbers: Dict[int, int] = {}          # id(diff) -> number, from reserve to close
        self._waiting: Dict[int, DiffRequest] = {}  # number -> diff, from show to close (in order)

    def reserve(self, diff: DiffRequest) -> int:
        """A number for a diff about to be shown (printed in its header)."""
        self._next += 1
        self._numbers[id(diff)] = self._next
        return self._next

    def show(self, diff: DiffRequest) -> None:
        """The diff has been shown in full: from now on it can be answered."""
        number = self._numbers.get(id(diff))
        if number is not None and not diff.done:
            self._waiting[number] = diff

    def close(self, diff: DiffRequest) -> int:
        """The diff was answered (by anyone): forget it; its number, 0 if unknown."""
        number = self._numbers.pop(id(diff), 0)
        self._waiting.pop(number, None)
        return number

    def number(self, diff: DiffRequest) -> int:
        return self._numbers.get(id(diff), 0)

    def waiting(self) -> List[Tuple[int, DiffRequest]]:
        return [(n, d) for n, d in self._waiting.items() if not d.done]

    def find(self, spec: str, verb: str = "accept") -> DiffRequest:
        """The diff `spec` names: "" (the only one), "N" (a number), `--tab NAME` or a
        quoted tab name. Raises CommandError saying what to type instead."""
        waiting = self.waiting()
        if not waiting:
            raise CommandError("no diff is waiting")
        spec = spec.strip()
        if not spec:
            if len(waiting) == 1:
                return waiting[0][1]
            listing = "".join("\n  %d. %s" % (n, one_line(d.tab_name)) for n, d in waiting)
            raise CommandError("%d diffs are waiting; say which: `%s N` (its number) or `%s --tab NAME`:%s"
                               % (len(waiting), verb, verb, listing))
        if spec.isdigit():
            number = int(spec)
            for n, diff in waiting:
                if n == number:
                    return diff
            raise CommandError("no waiting diff number %d (type `status` to list them)" % number)
        if spec == "--tab" or spec.startswith("--tab "):
            tab = spec[len("--tab"):].strip()
            if len(tab) >= 2 and tab[0] == tab[-1] and tab[0] in "\"'":
                tab = tab[1:-1]
        elif spec[0] in "\"'":
            words, extra = split_args(spec, 1)
            if extra:
                raise CommandError("unexpected %r after the quoted tab name" % extra)
            tab = words[0]
        else:
            raise CommandError("expected a diff number (`%s 3`) or a tab name (`%s --tab NAME`), got %r"
                               % (verb, verb, spec))
        if not tab:
            raise CommandError("usage: %s --tab NAME" % verb)
        for _, diff in waiting:
            if diff.tab_name == tab:
                return diff
        raise CommandError("no waiting diff with tab name %s (type `status` to list them)"
                           % one_line(repr(tab)))
