"""The plugin: one `ThreadedIdeServer` for Vim's working folder, and everything Vim does
with it.

Threads (the rule that shapes this file): Vim's API may be used only on Vim's thread.
The start is the one exception to "everything here runs there": `serve()` uses no
Vim API, so the boot thread (`Boot` in __init__.py) imports this module and calls it,
and Vim's thread never waits for the import or the server's start; `_started` comes
back through the queue below.
The server's protocol work stays on its loop thread; its callbacks (`on_diff`,
`on_diff_closed`, `on_session`) are handed to `call_in_editor`, which here only puts
them on a queue (`inbox.put`: never waits) and ring the plugin's doorbell (bell.py).
A repeating Vim timer (every `g:copilot_ide_poll_ms`, 50 ms by default) calls `tick`,
which drains that queue on Vim's thread, shows waiting diff tabs, collects changed
quickfix/location lists and reloads files the CLI wrote. Entering Python is what a
tick costs Vim most, so the timer's Vim-script side calls `tick` only when the cursor
moved, while `tick` said something is pending, and when one of its every fifth ticks
finds the bell rung or the lists changed (autoload/copilot_ide.vim): an idle Vim
never enters Python, and work queued meanwhile waits 250 ms at most.
Cursor moves go the other way: an autocommand only notes that the cursor moved, and
the next tick reads the selection and hands it over with
`post(server.set_selection, ...)`, never waiting for the loop. So a move costs Vim's thread a Vim variable
set, and a burst of moves one look at the selection (then the library's debounce).
"""
from __future__ import annotations

import os
import queue
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import vim  # type: ignore

from . import loader, positions, quickfix
from .bell import Bell
from .diffview import DiffView, buffer_of, file_state, number_here
from .vimtext import as_int, echo, error, literal, one_message

VISUAL = ("v", "V", "\x16")
RELOAD_WATCH = 30.0  # seconds a closed diff's file is watched for the CLI's write
# Seconds a reloaded file stays watched: the CLI may write in steps (1.0.60 empties the
# file, then writes the text), and a tick between the steps reloads an empty buffer.
RELOAD_SETTLE = 3.0


class VimIde:
    def __init__(self) -> None:
        self.lib: Optional[loader.Library] = None
        self.server: Any = None
        self.inbox: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self.bell: Optional[Bell] = None  # rung when work is queued for Vim's thread
        # view's number -> pending diff's view; not by tab name: two diffs may have one
        # tab name, and each waits in its own view (PROTOCOL.md §4)
        self.views: Dict[int, DiffView] = {}
        self.diff_count = 0
        self.watches: List[Tuple[str, Optional[Tuple[int, int]], float]] = []  # path, state, until
        self._last_key: Any = None
        self._files: Dict[int, Tuple[str, Optional[str]]] = {}  # bufnr -> (name, real path or None)
        self._cwd: Optional[str] = None  # Vim's working folder as last read (getcwd(-1))
        self._diagnostics: Dict[str, List[Any]] = {}
        self._failed_once = False
        self._starting = False  # a start() whose `_started` has not run yet
        self._announce = False  # `_started` says "serving" (a :CopilotIdeStart, not Vim's start)
        self._quiet = False  # no message per diff closed (a stop says one for all)

    # ------------------------------------------------------------------ lifecycle

    @one_message()
    def start(self) -> None:
        """:CopilotIdeStart: serve Vim's working folder. A stopped server is started
        again (the same object: its diffs' numbering and callbacks stay), with the
        folder, `$COPILOT_HOME` and options of now, since they may have changed."""
        if self.server is not None and (self.server.running or self._starting):
            echo("Copilot IDE: already serving %s" % ", ".join(self.server.workspace_folders))
            return
        try:
            self.serve(vim.eval("copilot_ide#settings()"), announce=True)
        except Exception as exc:
            error("could not start: %s" % (exc,))
            return
        vim.command("call copilot_ide#timer(1)")

    def serve(self, settings: Dict[str, Any], announce: bool = False, bell: Optional[Bell] = None) -> None:
        """Start serving `settings` (`copilot_ide#settings()`, read on Vim's thread)
        without waiting for the server: `_started` runs on Vim's thread once it is up.
        Uses no Vim API, so the boot thread (__init__.py) may call it, with the `bell` it
        made; else the first start makes one."""
        if bell is not None:
            self.bell = bell
        elif self.bell is None:
            self.bell = Bell(settings.get("bell"))
        self.bell.make()  # (again after a stop during the start removed it)
        if self.lib is None:
            self.lib = loader.load()
        self._cwd = settings["folder"]
        folder = os.path.realpath(self._cwd)
        self._know_file(settings.get("file"))
        lock_dir = self.lib.lockfile.lock_dir({"COPILOT_HOME": settings.get("copilot_home") or ""})
        trusted = bool(as_int(settings.get("trusted")))
        if self.server is None:
            self.server = self.lib.ThreadedIdeServer(
                [folder], ide_name="Vim", lock_dir=lock_dir, is_trusted=trusted, call_in_editor=self.call_in_editor,
                on_diff=self.on_diff, on_diff_closed=self.on_diff_closed,
                ide_info={"version": self.vim_version(settings)})
        else:  # :CopilotIdeStop then :CopilotIdeStart: the same server, maybe a new folder
            self.server.set_workspace_folders([folder])
            self.server.server.lock_dir = lock_dir
            self.server.server.is_trusted = trusted
        self._announce = announce
        self._starting = True
        self.server.start(wait=False, on_started=self._started)

    def call_in_editor(self, work: Callable[[], None]) -> None:
        """The server's hook (on its thread): queue `work` for Vim's thread, then ring
        (in this order: Vim's tick takes the ring away before it drains the queue)."""
        self.inbox.put(work)
        if self.bell is not None:
            self.bell.ring()

    def _know_file(self, current: Any) -> None:
        """The real path of the buffer Vim showed at the start (`[bufnr, full name,
        buftype]`), found here, off Vim's thread when the boot thread serves: the first
        selection's look then finds it known (`_file_of` checks the name)."""
        try:
            number, name, buftype = int(current[0]), str(current[1]), str(current[2])
        except (TypeError, ValueError, IndexError):
            return
        if name and buftype == "" and number not in self._files:
            self._files[number] = (name, os.path.realpath(name))

    def _started(self, failure: Optional[BaseException]) -> None:
        """The server's start ended (on Vim's thread, from the timer's tick)."""
        self._starting = False
        if failure is not None:
            error("could not start: %s" % (failure,))
            vim.command("call copilot_ide#timer(0)")
            return
        self._last_key = None
        # The autocommands, the lists looked at anew, whether the timer has a bell, and
        # the cursor of now, which moved() below hands over.
        vim.command("call copilot_ide#started(%d)" % (self.bell is not None and self.bell.made))
        self.folder_changed()  # a `:cd` made while the server started (DirChanged from now on)
        self.moved()  # the selection of now, kept for the CLI's first stream (PROTOCOL.md §5)
        if self._announce:
            echo("Copilot IDE: serving %s" % ", ".join(self.server.workspace_folders))

    @one_message()
    def stop(self, quiet: bool = False) -> None:
        """Stop serving: the lock goes first (the server's stop), then the callbacks
        that stop queued run here, so that every pending diff's tab closes now (one
        message for them all: a line each would leave Vim at "Press ENTER")."""
        vim.command("call copilot_ide#autocmds(0) | call copilot_ide#timer(0)")
        self._starting = False
        pending = len(self.views)
        self._quiet = True
        try:
            if self.server is not None:
                self.server.stop(timeout=2.0)
            self.drain()  # the diffs' closing callbacks: their tabs close now
            for view in list(self.views.values()):
                view.close()
            self.views.clear()
        finally:
            self._quiet = False
        self._diagnostics = {}
        if not quiet:
            echo("Copilot IDE: stopped (lock file removed%s)"
                 % ("; %d pending diff%s rejected" % (pending, "" if pending == 1 else "s") if pending else ""))

    def leave(self) -> None:
        """VimLeavePre (the timer is stopped already): stop before Vim exits (the
        atexit hook would too, later). A start under way is cancelled. The bell goes
        first: a deadly signal that arrives while the stop waits for the server's
        thread (Vim takes it then, and exits at once) leaves no folder behind, and a
        ring after `close` does nothing."""
        if self.bell is not None:
            self.bell.close()
        if self.server is not None:
            self.server.stop(timeout=2.0)

    @staticmethod
    def vim_version(settings: Dict[str, Any]) -> str:
        v = as_int(settings.get("version"))
        return "%d.%d.%d" % (v // 100, v % 100, as_int(settings.get("versionlong")) % 10000)

    # ------------------------------------------------------------- Vim's thread

    @one_message()
    def tick(self, moved: bool = False, lists_changed: bool = False, rung: bool = False) -> bool:
        """The timer: everything the server asked of Vim, on Vim's thread (`rung`: the
        timer saw the bell); the selection when the cursor `moved` since the last tick;
        the quickfix/location lists when they changed. Returns whether something is
        pending, so that the next tick calls again (True) or an idle one may skip
        Python (False)."""
        try:
            if rung and self.bell is not None:
                self.bell.answer()  # before the queue is drained: what comes later rings again
            if not self.inbox.empty():
                self.drain()
            if self.views:
                self.check_views()
            if lists_changed:
                self.check_diagnostics()
            if self.watches:
                self.check_reloads()
            if moved:  # last: the hand-over wakes the server's thread, which wants the GIL
                self.moved()
        except Exception:
            if not self._failed_once:  # say it once, not at every tick
                self._failed_once = True
                error("timer failed: " + traceback.format_exc().strip().splitlines()[-1])
            return False
        # A start under way is not "pending": its `_started` is queued work, which rings
        # (entering Python meanwhile would contend with the start).
        return bool(self.views or self.watches or not self.inbox.empty())

    def drain(self) -> None:
        """Run what the server's thread queued, on Vim's thread, in the order queued."""
        while True:
            try:
                work = self.inbox.get_nowait()
            except queue.Empty:
                return
            work()  # ThreadedIdeServer guards it: a failure is logged, not raised

    # ------------------------------------------------------------------- selection

    def _file_of(self, buf: Any) -> Optional[str]:
        """The real path of a buffer that holds a file; None for help, quickfix, the
        diff proposal, an unnamed buffer..."""
        name = buf.name
        cached = self._files.get(buf.number)
        if cached is None or cached[0] != name:
            path = None
            if name and buf.options["buftype"] in (b"", ""):
                path = os.path.realpath(name)
            cached = self._files[buf.number] = (name, path)
        return cached[1]

    def moved(self) -> None:
        """The selection now (after CursorMoved/CursorMovedI/ModeChanged/BufEnter/
        WinEnter): a few attribute reads, one or three evals, one hand-over."""
        server = self.server
        if server is None:
            return
        buf = vim.current.buffer
        path = self._file_of(buf)
        if path is None:
            return  # not an editor of a file: the last file's selection stays
        mode = vim.eval("mode()")[:1]
        if mode in VISUAL:
            v = vim.eval("getpos('v')")
            c = vim.eval("getpos('.')")
            key: Any = (path, mode, int(v[1]), int(v[2]), int(c[1]), int(c[2]))
            if key == self._last_key:
                return
            self._last_key = key
            inclusive = vim.eval("&selection") != "exclusive"
            if mode == "\x16":
                text, start, end = self._block(buf, key[2], key[3], key[4], key[5], inclusive)
            else:
                text, start, end = positions.visual(mode, (key[2], key[3]), (key[4], key[5]),
                                                    lambda n: buf[n - 1], inclusive)
        else:
            row, col = vim.current.window.cursor
            key = (path, row, col)
            if key == self._last_key:
                return
            self._last_key = key
            text, start, end = positions.cursor(row, buf[row - 1], col)
        server.post(server.set_selection, self.lib.Selection(path, text, start, end))

    @staticmethod
    def _block(buf: Any, l1: int, c1: int, l2: int, c2: int, inclusive: bool) -> Any:
        """A blockwise selection: its corners' screen cells (Vim's `virtcol()`: the first
        cell of a corner's character is one past the previous character's last), then
        the rows of those cells (`positions.block`)."""
        cells = [int(x) for x in vim.eval(
            "[%d > 1 ? virtcol([%d, %d]) + 1 : 1, virtcol([%d, %d]), %d > 1 ? virtcol([%d, %d]) + 1 : 1,"
            " virtcol([%d, %d]), getcurpos()[4], &tabstop]"
            % (c1, l1, c1 - 1, l1, c1, c2, l2, c2 - 1, l2, c2))]
        left = min(cells[0], cells[2])
        right: Optional[int] = max(cells[1], cells[3]) - (0 if inclusive else 1)
        if cells[4] >= positions.MAXCOL:  # `$`: every row to its end
            right = None
        return positions.block(min(l1, l2), max(l1, l2), left, right, lambda n: buf[n - 1], cells[5])

    # ------------------------------------------------------------------- commands

    def _require(self) -> bool:
        if self.server is None or not self.server.running:
            error("not running (:CopilotIdeStart)")
            return False
        return True

    def send_file(self) -> None:
        if not self._require():
            return
        path = self._file_of(vim.current.buffer)
        if path is None:
            error("this buffer is not a file")
            return
        self._sent(self.server.add_file_reference(path), os.path.basename(path))

    def send_selection(self, line1: int, line2: int, has_range: int) -> None:
        if not self._require():
            return
        buf = vim.current.buffer
        path = self._file_of(buf)
        if path is None:
            error("this buffer is not a file")
            return
        marks = (as_int(vim.eval("line(\"'<\")")), as_int(vim.eval("line(\"'>\")")))
        if has_range and marks == (line1, line2) and vim.eval("visualmode()"):
            # :'<,'>: the visual selection itself, to the character.
            v1, v2 = vim.eval("getpos(\"'<\")"), vim.eval("getpos(\"'>\")")
            mode = vim.eval("visualmode()")
            inclusive = vim.eval("&selection") != "exclusive"
            if mode == "\x16":
                text, start, end = self._block(buf, int(v1[1]), int(v1[2]), int(v2[1]), int(v2[2]), inclusive)
            else:
                text, start, end = positions.visual(mode, (int(v1[1]), int(v1[2])), (int(v2[1]), int(v2[2])),
                                                    lambda n: buf[n - 1], inclusive)
        else:
            text, start, end = positions.visual("V", (line1, 1), (line2, 1), lambda n: buf[n - 1])
        count = self.server.add_selection(path, start, end, text)
        self._sent(count, "%s:%d-%d" % (os.path.basename(path), start[0] + 1, end[0] + 1))

    def _sent(self, count: int, what: str) -> None:
        if count:
            echo("Copilot IDE: sent %s to %d Copilot CLI session%s" % (what, count, "" if count == 1 else "s"))
        else:
            error("no Copilot CLI is connected")

    def status(self) -> None:
        if self.server is None or not self.server.running:
            echo("Copilot IDE: not running (:CopilotIdeStart)")
            return
        sessions = self.server.sessions()
        lines = ["Copilot IDE: serving %s" % ", ".join(self.server.workspace_folders),
                 "  lock %s (library: %s, %s)" % (self.server.lock_path, self.lib.origin, self.lib.path),
                 "  sessions connected: %d" % len(sessions)]
        for s in sessions:
            lines.append("    %s %s %s%s" % (s["id"][:8], s.get("client") or "?", s.get("client_version") or "",
                                             (" (%s)" % s["name"]) if s.get("name") else ""))
        lines.append("  pending diffs: %d" % len(self.views))
        for view in self.views.values():
            lines.append("    %d. %s%s" % (view.number, view.vim_name, {"open": "", "failed": " (Vim could not show it)"}
                                                 .get(view.state, " (not shown yet)")))
        vim.command("echo " + literal("\n".join(lines)))

    @one_message()
    def answer(self, accept: bool, name: str) -> None:
        view = self._find(name.strip())
        if view is None:
            return
        view.close()
        self._watch(view)
        self.views.pop(view.number, None)
        self.server.post(view.diff.accept if accept else view.diff.reject)
        echo("Copilot IDE: %s %s" % ("accepted" if accept else "rejected", view.tab_name))

    def _find(self, name: str) -> Optional[DiffView]:
        if not name:
            here = self.views.get(number_here())
            if here is not None:
                return here
            if len(self.views) == 1:
                return next(iter(self.views.values()))
            error("no pending diff" if not self.views else
                  "%d pending diffs: name one (Tab completes)" % len(self.views))
            return None
        found = [v for v in self.views.values() if name == v.vim_name] or \
                [v for v in self.views.values() if name == str(v.number)] or \
                [v for v in self.views.values() if name in v.vim_name]
        if len(found) == 1:
            return found[0]
        error(("no pending diff matches %r" if not found else "%r matches several pending diffs: name one by its number (:CopilotIdeStatus)") % name)
        return None

    def complete(self, lead: str) -> List[str]:
        return [v.vim_name for v in self.views.values() if lead in v.vim_name]

    def folder_changed(self) -> None:
        """DirChanged: serve the new folder (the lock rewritten in place, PROTOCOL.md §1), when it is a new one."""
        if self.server is not None and self.server.running:
            cwd = vim.eval("getcwd(-1)")
            if cwd == self._cwd:
                return  # the same as at the last look: no need to resolve it again
            self._cwd = cwd
            folder = os.path.realpath(cwd)
            if [folder] != self.server.workspace_folders:
                self.server.set_workspace_folders([folder])

    # ---------------------------------------------- server callbacks (Vim's thread)

    def on_diff(self, diff: Any) -> None:
        """`open_diff` from the CLI: a tab now when Vim is in Normal mode, else at the
        first tick back in it (a tab opened in Insert or Command-line mode would take
        the user's keys away)."""
        self.diff_count += 1
        view = DiffView(diff, self.diff_count)
        self.views[view.number] = view
        if vim.eval("mode()") == "n":
            self._open(view)
        return None  # answered later, by the user

    def _open(self, view: DiffView) -> None:
        try:
            view.open()
        except vim.error as exc:  # Vim is busy (a textlock): tried again at the next tick
            view.failures += 1
            if view.failures == 1:  # said once, not at every tick
                echo("Copilot IDE: a diff waits: %s" % (exc,), "WarningMsg")
        except Exception as exc:  # not Vim being busy: trying again would fail again
            view.state = "failed"
            error("could not show %s (%s): :CopilotIdeAccept or :CopilotIdeReject %d"
                  % (view.vim_name, exc, view.number))

    def check_views(self) -> None:
        """At each tick while diffs are pending: show those that wait (in Normal mode),
        and take the closing of an open one's tab or proposal window as the user's no."""
        normal = vim.eval("mode()") == "n"
        for view in list(self.views.values()):
            if view.state == "waiting" and normal:
                self._open(view)
            elif view.closed_by_user():
                self._rejected_by_closing(view)

    def on_diff_closed(self, diff: Any, answer: Dict[str, Any]) -> None:
        """The server answered `diff` (the CLI's `close_diff`, whose server picks the
        oldest diff of that tab name; a session's end; the stop): its view goes, and
        another diff of the same tab name stays."""
        view = next((v for v in self.views.values() if v.diff is diff), None)
        if view is None:
            return
        del self.views[view.number]
        view.close()
        self._watch(view)
        if not self._quiet:
            echo("Copilot IDE: %s %s (%s)" % (diff.tab_name, answer.get("result"), answer.get("trigger")))

    def proposal_wiped(self, bufnr: int) -> None:
        """The proposal's buffer was wiped by the user (`:bwipeout`): no. (Its window
        showing another buffer is not a no: the buffer is `bufhidden=hide`.)"""
        for view in list(self.views.values()):
            if view.proposal == bufnr and view.state == "open":
                view.proposal = None  # gone already
                # The rest of its tab goes at the next tick: no window may close in here.
                self._rejected_by_closing(view, later=True)

    def _rejected_by_closing(self, view: DiffView, later: bool = False) -> None:
        self.views.pop(view.number, None)
        if later:
            self.inbox.put(view.close)
        else:
            view.close()
        self._watch(view)  # and the next tick runs Python
        self.server.post(view.diff.reject)
        echo("Copilot IDE: rejected %s (its tab was closed)" % view.tab_name)

    # ------------------------------------------------- files the CLI writes

    def _watch(self, view: DiffView) -> None:
        """Watch a decided diff's file for the CLI's write; the timer's next ticks
        enter Python to look (`tick`'s answer keeps them coming while it watches)."""
        self.watches.append((view.path, view.file_before, float(vim.eval("reltimefloat(reltime())")) + RELOAD_WATCH))
        vim.command("call copilot_ide#pending()")

    def check_reloads(self) -> None:
        now = float(vim.eval("reltimefloat(reltime())"))
        keep = []
        for path, before, until in self.watches:
            state = file_state(path)
            if state != before:
                self.reload(path)
                keep.append((path, state, now + RELOAD_SETTLE))  # a later step reloads too
            elif now < until:
                keep.append((path, before, until))
        self.watches = keep

    def reload(self, path: str) -> None:
        """The CLI wrote `path` (the IDE never does): reload its buffer, unless it has
        changes of the user's (then Vim asks, as for any file changed outside)."""
        buf = buffer_of(path)
        bufnr = buf.number if buf is not None else 0
        if bufnr <= 0 or not as_int(vim.eval("bufloaded(%d)" % bufnr)):
            return
        if as_int(vim.eval("getbufvar(%d, '&modified')" % bufnr)):
            vim.command("checktime %d" % bufnr)
            return
        vim.command("call setbufvar(%d, '&autoread', 1)" % bufnr)
        vim.command("checktime %d" % bufnr)

    # ------------------------------------------------------------- diagnostics

    def check_diagnostics(self) -> None:
        """The lists changed (the timer compares their ids and change ticks): hand
        over the diagnostics that changed."""
        if self.server is None:
            return
        new = quickfix.collect(self.lib.Diagnostic)
        for path, diags in quickfix.diff_sets(self._diagnostics, new):
            self.server.post(self.server.set_diagnostics, path, diags)
        self._diagnostics = new


_instance: Optional[VimIde] = None


def instance() -> VimIde:
    global _instance
    if _instance is None:
        _instance = VimIde()
    return _instance
