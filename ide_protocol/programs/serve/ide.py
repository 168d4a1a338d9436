"""The terminal IDE of `serve`: an `IdeServer` for one folder, its callbacks and its commands.

Callbacks print what happens (sessions, tool calls, diffs); commands typed on standard
input change the editor state (selection, diagnostics) or answer diffs. Everything a
client sent is printed through `Output`, which escapes it for the terminal; one-line
fields (tab names, paths) are escaped with their newlines (`one_line`).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...common import tools
from ...common.paths import resolve_path
from ...common.tools import Diagnostic, Selection
from ...server.ide_server import DiffRequest, IdeServer
from ..terminal.output import Output, Styled
from .commands import CommandError, FileText, format_range, split_args
from .diffs import (DEFAULT_SHOWN_LINES, NumberedDiffs, display_path, one_line, render_in_thread,
                          where_it_goes)
from .peers import DIFF_GRACE, Peers
from .trace import TracingApp, short, summarize, summarize_result

#: Longest JSON shown per message with --trace (open_diff carries whole files).
TRACE_LIMIT = 2000

HELP = """commands (lines and columns are 1-based; PATH is relative to the folder or absolute):
  select PATH L1[:C1]-L2[:C2]      set the editor selection (L alone: the whole line;
                                   L:C alone: a cursor); pushed as selection_changed
  deselect                         no active editor (the last selection stays cached)
  ref PATH [L1-L2]                 send a file reference to the CLI (add_file_reference)
  addsel PATH L1[:C1]-L2[:C2]      send a selection to the CLI's input (add_selection)
  diag PATH LINE SEVERITY MESSAGE  add a diagnostic (SEVERITY: error, warning, info, hint)
  diag PATH clear | diag clear     remove a file's diagnostics | all diagnostics
  accept | reject                  answer the waiting diff (with several waiting: asks which)
  accept N | reject N              answer diff number N, as printed (`diff N waits`)
  accept --tab NAME | reject --tab NAME
                                   answer the diff whose tab name is NAME (also: "NAME"
                                   in quotes); a number is never taken for a tab name
  folders PATH [PATH...]           change the workspace folders the lock lists (the lock
                                   is rewritten in place: a connected CLI stays connected)
  status                           sessions, waiting diffs, selection, diagnostics
  help                             this text
  quit                             remove the lock file and exit (also: EOF, Ctrl-C)"""


def color_diff_line(out: Output, line: str) -> Styled:
    if line.startswith(("---", "+++")):
        return out.paint(line, "bold")
    if line.startswith("@@"):
        return out.paint(line, "cyan")
    if line.startswith("+"):
        return out.paint(line, "green")
    if line.startswith("-"):
        return out.paint(line, "red")
    if line.startswith("\\"):
        return out.paint(line, "dim")
    return out.paint(line)


class TerminalIde:
    """The state and commands of the terminal IDE around one `IdeServer`."""

    def __init__(self, args: argparse.Namespace, out: Output) -> None:
        self.args = args
        self.out = out
        self.folder = os.path.abspath(args.folder)
        self.stop_event: Optional[asyncio.Event] = None
        self.diagnostics: Dict[str, List[Diagnostic]] = {}
        self.diffs = NumberedDiffs()
        self.peers = Peers()
        self._folded_diffs: Dict[int, None] = {}
        self._typed_selection = ""  # the last `select` range as typed (1-based), for `status`  # id(diff) of diffs folded into a check run
        self.server = IdeServer([self.folder], ide_name=args.name, is_trusted=args.trusted,
                                on_diff=self.on_diff, on_diff_closed=self.on_diff_closed,
                                on_session=self.on_session, on_tool_call=self.on_tool_call,
                                lock_dir=args.lock_dir, debounce=args.debounce,
                                on_exchange=self.on_exchange if args.trace else None,
                                **server_limits(args))
        if args.trace:
            # Raw HTTP requests and statuses: wrap the application the listener runs
            # for each request (the JSON-RPC messages come from `on_exchange`).
            listener = self.server.listener
            tracing = TracingApp(listener.app, self.out, listener.judge)
            listener.app, listener.judge = tracing, tracing.judge_head

    # ----------------------------------------------------------------- callbacks

    def on_session(self, event: str, info: Dict[str, Any]) -> None:
        sid = short(info.get("id"))
        if event == "connected":
            line = self.peers.connected(info)
            if line is not None:
                self.out.line(self.out.paint("connected", "green", "bold"), ": %s" % one_line(line))
        elif event == "disconnected":
            if self.peers.ended(info.get("id")):
                self.out.line(self.out.paint("disconnected", "yellow"), ": session %s (%s)"
                              % (sid, info.get("reason")))
        elif self.peers.folded(info.get("id")):
            return
        elif event == "renamed":
            self.out.line("session %s is named %s" % (sid, json.dumps(info.get("name"), ensure_ascii=False)))
        else:
            self.out.line("session %s: %s" % (sid, event))

    def on_tool_call(self, call: Dict[str, Any], session_id: str, result: Dict[str, Any]) -> None:
        if self.peers.folded(session_id):
            return
        name = call.get("name")
        args = call.get("arguments") or {}
        shown = ", ".join("%s=%s" % (k, summarize(v)) for k, v in args.items()) if isinstance(args, dict) else ""
        self.out.line(self.out.paint("tool", "blue", "bold"), " %s(%s) from session %s -> %s"
                      % (one_line(name), one_line(shown), short(session_id),
                         one_line(summarize_result(name, result))))

    def on_exchange(self, direction: str, message: Dict[str, Any]) -> None:
        arrow = {"in": "<<", "out": ">>", "push": ">> push"}.get(direction, direction)
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        if len(text) > TRACE_LIMIT:
            text = text[:TRACE_LIMIT] + "... (%d characters)" % len(text)
        self.out.line(self.out.paint("  %s %s" % (arrow, text), "dim"))

    async def on_diff(self, diff: DiffRequest) -> Optional[bool]:
        """Show a proposed diff; it can be answered once shown in full (`NumberedDiffs`).

        A diff of a `check` run is decided by --auto-accept/--auto-reject, or closed by
        check itself within DIFF_GRACE, with nothing shown; one that waits longer is
        shown in full like any other. Whether a session is check's is its own account
        (its clientInfo, its pid): any client could claim it, so what waits for a
        person's answer is never shown in less than full."""
        number = self.diffs.reserve(diff)
        if self.peers.folded(diff.session_id):
            self._folded_diffs[id(diff)] = None  # not shown: its end is not shown either
            if self.args.auto_accept or self.args.auto_reject:
                return bool(self.args.auto_accept)
            await asyncio.wait([diff.future], timeout=DIFF_GRACE)
            if diff.done:
                return None
            self._folded_diffs.pop(id(diff), None)
            source = "from copilot-ide check (session %s, by its own account)" % short(diff.session_id)
        else:
            source = "proposed by session %s" % short(diff.session_id)
        return await self._show(diff, number, source)

    async def _show(self, diff: DiffRequest, number: int, source: str) -> Optional[bool]:
        out = self.out
        what = "new file" if diff.is_new_file else "edit"
        out.line(out.paint("diff %d" % number, "magenta", "bold"), " %s: %s" % (source, one_line(diff.tab_name)))
        out.line("  %s of %s" % (what, one_line(display_path(diff.original_file_path, self.folder))))
        for warning in where_it_goes(diff.original_file_path, self.folder):
            out.line(out.paint("  (%s)" % one_line(warning), "yellow"))
        if not diff.original_is_exact:
            out.line(out.paint("  (the file is not UTF-8: its invalid bytes show as U+FFFD below, and accepting "
                               "replaces them with the proposal's text)", "yellow"))
        lines, hidden, diffed = await render_in_thread(diff, self.folder, self.args.diff_lines)
        if diff.done:  # answered (closed by the client) while it was being computed
            return None
        if not diffed:
            out.line(out.paint("  (too large to show here: %d characters now, %d proposed; review the "
                               "file elsewhere before accepting)" % (len(diff.original_contents),
                                                                     len(diff.new_file_contents)), "yellow"))
        elif not lines:
            out.line("  (no changes)" if diff.original_is_exact else "  (no changes to the text shown)")
        for line in lines:
            out.line(color_diff_line(out, line))
        if hidden:
            out.line(out.paint("  ... %d more diff line%s not shown (--diff-lines %d); review them elsewhere "
                               "before accepting" % (hidden, "" if hidden == 1 else "s", self.args.diff_lines),
                               "yellow"))
        self.diffs.show(diff)
        if self.args.auto_accept:
            out.line("diff %d: auto-accepting" % number)
            return True
        if self.args.auto_reject:
            out.line("diff %d: auto-rejecting" % number)
            return False
        out.line("diff %d waits: type `accept %d` or `reject %d`" % (number, number, number))
        return None

    def on_diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        if id(diff) in self._folded_diffs:
            del self._folded_diffs[id(diff)]
            self.diffs.close(diff)
            return
        number = self.diffs.close(diff)
        saved = answer.get("result") == "SAVED"
        self.out.line(self.out.paint("diff %d %s" % (number, answer.get("result")), "green" if saved else "red",
                                     "bold"), " (%s): %s" % (answer.get("trigger"), one_line(diff.tab_name)))

    # ------------------------------------------------------------------ commands

    def command(self, line: str) -> None:
        """Run one input line; a wrong command raises CommandError (printed by the caller)."""
        line = line.strip()
        if not line or line.startswith("#"):
            return
        words, rest = split_args(line, 1)
        name = words[0].lower()
        handler = self.COMMANDS.get(name)
        if handler is None:
            raise CommandError("unknown command %r (type `help`)" % words[0])
        handler(self, rest)

    def path_arg(self, path: str) -> str:
        if not path:
            raise CommandError("missing PATH")
        return resolve_path(path, self.folder)

    def cmd_select(self, rest: str) -> None:
        words, extra = split_args(rest, 2)
        if len(words) < 2 or extra:
            raise CommandError("usage: select PATH L1[:C1]-L2[:C2]")
        path = self.path_arg(words[0])
        text = FileText(path)
        rng = text.resolve(words[1])
        selected = text.text_of(rng)
        self.server.set_selection(Selection(path, selected, text.wire(rng[0]), text.wire(rng[1])))
        self._typed_selection = "%s %s" % (display_path(path, self.folder), format_range(rng))
        self.out.line("selected %s (%d characters)" % (self._typed_selection, len(selected)))

    def cmd_deselect(self, rest: str) -> None:
        if rest:
            raise CommandError("usage: deselect")
        self.server.set_selection(None)
        self.out.line("no active editor")

    def _reference(self, rest: str, method: str, need_range: bool) -> None:
        words, extra = split_args(rest, 2)
        if not words or extra or (need_range and len(words) < 2):
            raise CommandError("usage: %s" % ("addsel PATH L1[:C1]-L2[:C2]" if need_range else "ref PATH [L1-L2]"))
        path = self.path_arg(words[0])
        text = FileText(path)  # the file must exist and be readable
        start: Optional[Tuple[int, int]] = None
        end: Optional[Tuple[int, int]] = None
        selected: Optional[str] = None
        if len(words) == 2:
            rng = text.resolve(words[1])
            start, end, selected = text.wire(rng[0]), text.wire(rng[1]), text.text_of(rng)
            where = "%s:%s" % (display_path(path, self.folder), format_range(rng))
        else:
            where = display_path(path, self.folder)
        if method == "add_selection":
            assert start is not None and end is not None
            count = self.server.add_selection(path, start, end, selected)
        else:
            count = self.server.add_file_reference(path, start, end, selected)
        self.out.line("sent %s %s to %d session%s%s" % (
            method, where, count, "" if count == 1 else "s",
            "" if count else " (no client is connected: start `copilot` in %s, or pick this IDE with /ide "
                             "in a running one)" % self.folder))

    def cmd_ref(self, rest: str) -> None:
        self._reference(rest, "add_file_reference", False)

    def cmd_addsel(self, rest: str) -> None:
        self._reference(rest, "add_selection", True)

    def cmd_diag(self, rest: str) -> None:
        words, message = split_args(rest, 3)
        if len(words) == 1 and words[0].lower() == "clear" and not message:
            self.diagnostics.clear()
            self.server.clear_diagnostics()
            self.out.line("diagnostics cleared")
            return
        if len(words) == 2 and words[1].lower() == "clear" and not message:
            path = self.path_arg(words[0])
            self.diagnostics.pop(path, None)
            self.server.set_diagnostics(path, [])
            self.out.line("diagnostics of %s cleared" % display_path(path, self.folder))
            return
        if len(words) < 3 or not message:
            raise CommandError("usage: diag PATH LINE SEVERITY MESSAGE (or diag PATH clear, diag clear)")
        path = self.path_arg(words[0])
        text = FileText(path)
        rng = text.resolve(words[1])
        try:
            severity = tools.normalize_severity(words[2])
        except ValueError as exc:
            raise CommandError(str(exc))
        diagnostic = Diagnostic(message, severity, text.wire(rng[0]), text.wire(rng[1]), source="serve")
        diags = self.diagnostics.setdefault(path, [])
        diags.append(diagnostic)
        self.server.set_diagnostics(path, list(diags))
        self.out.line("diagnostic %s %s: [%s] %s (%d in this file)"
                      % (display_path(path, self.folder), format_range(rng), severity, message, len(diags)))

    def cmd_accept(self, rest: str) -> None:
        self.diffs.find(rest, "accept").accept()

    def cmd_reject(self, rest: str) -> None:
        self.diffs.find(rest, "reject").reject()

    #: Most folders `folders` takes at once (the lock is read whole by every CLI).
    MAX_FOLDERS = 64

    def cmd_folders(self, rest: str) -> None:
        """What an IDE does when its user opens or closes a folder: the lock lists the new
        folders, rewritten in place (PROTOCOL.md §1, "Changing folders"). Paths are
        relative to serve's folder, which stays the root of the other commands' paths."""
        words, extra = split_args(rest, self.MAX_FOLDERS)
        if not words or extra:
            raise CommandError("usage: folders PATH [PATH...] (at most %d folders)" % self.MAX_FOLDERS)
        folders = [self.path_arg(word) for word in words]
        for folder in folders:
            if not os.path.isdir(folder):
                raise CommandError("%s is not a folder" % one_line(folder))
        before = self.server.lock_path
        try:
            self.server.set_workspace_folders(folders)
        except OSError as exc:
            raise CommandError("could not write the lock: %s%s" % (
                exc.strerror or exc, "" if self.server.lock_path else " (no lock now: no CLI finds this IDE)"))
        after = self.server.lock_path
        how = ("rewritten in place" if after == before else "written anew: %s" % after) if after else "not written"
        self.out.line("folders: %s (lock %s)" % (one_line(", ".join(self.server.workspace_folders)), how))

    def cmd_status(self, rest: str) -> None:
        s = self.server
        out = self.out
        out.line("folder: %s" % self.folder)
        if self.server.workspace_folders != [self.folder]:
            out.line("workspace folders: %s" % one_line(", ".join(self.server.workspace_folders)))
        out.line("socket: %s" % s.socket_path)
        out.line("lock: %s" % s.lock_path)
        sessions = s.sessions
        out.line("sessions: %d" % len(sessions))
        for info in sessions:
            out.line("  %s %s, stream %s%s" % (
                one_line(info["id"]), one_line(self.peers.describe(info)),
                "open" if info.get("stream_open") else "closed",
                ", name %s" % json.dumps(info["name"], ensure_ascii=False) if info.get("name") else ""))
        waiting = self.diffs.waiting()
        out.line("pending diffs: %d" % len(waiting))
        for number, diff in waiting:
            out.line("  %d. %s (%s)" % (number, one_line(diff.tab_name),
                                        one_line(display_path(diff.original_file_path, self.folder))))
        sel = s.selection
        if sel is None:
            out.line("selection: none")
        else:
            # As it was typed (1-based lines and columns), not as the wire carries it.
            out.line("selection: %s%s" % (self._typed_selection, "" if sel.current else
                                          " (cached: no active editor)"))
        count = sum(len(d) for d in self.diagnostics.values())
        out.line("diagnostics: %d in %d file%s" % (count, len(self.diagnostics), "" if len(self.diagnostics) == 1 else "s"))
        if out.writer.dropped:
            out.line("output dropped while nobody read it: %d lines in all" % out.writer.dropped)

    def cmd_help(self, rest: str) -> None:
        self.out.line(HELP)

    def cmd_quit(self, rest: str) -> None:
        if self.stop_event is not None:
            self.stop_event.set()

    COMMANDS: Dict[str, Callable[["TerminalIde", str], None]] = {
        "select": cmd_select, "deselect": cmd_deselect, "ref": cmd_ref, "addsel": cmd_addsel,
        "diag": cmd_diag, "accept": cmd_accept, "reject": cmd_reject, "folders": cmd_folders, "status": cmd_status,
        "help": cmd_help, "?": cmd_help, "quit": cmd_quit, "exit": cmd_quit,
    }



def server_limits(args: argparse.Namespace) -> Dict[str, Any]:
    """The `IdeServer` limits given on the command line (`serve --help`, README
    "Limits and safety"); 0 lifts a count limit."""
    limits: Dict[str, Any] = {}
    for name in ("max_body", "max_connections", "max_sessions", "idle_timeout", "connection_idle_timeout"):
        value = getattr(args, name, None)
        if value is not None:
            limits[name] = None if value == 0 and name in ("max_connections", "max_sessions") else value
    return limits
