"""`python3 -m ide_protocol serve [FOLDER]`: a complete terminal "IDE" for one folder.

It is what an editor integration would be, with the terminal as the editor: it writes
the lock file and serves the `/ide` protocol (so Copilot CLI started in FOLDER connects
to it), prints who connects and every tool call as it happens, shows each proposed diff
as a coloured unified diff and lets its user accept or reject it, and reads commands on
standard input, one per line, so a person or a script (through a pipe) can drive it:

    select PATH L1[:C1]-L2[:C2]    the editor's selection (pushed as selection_changed)
    ref PATH [L1-L2]               send a file (or lines of it) to the CLI (add_file_reference)
    addsel PATH L1[:C1]-L2[:C2]    send a selection to the CLI's input (add_selection)
    diag PATH LINE SEVERITY MESSAGE    add a diagnostic (diag PATH clear / diag clear)
    accept [TAB] / reject [TAB]    answer a pending diff (the latest one without TAB)
    deselect                       no active editor (get_selection answers current: false)
    status, help, quit

Lines and columns are 1-based, as editors show them (a column is a cursor position
counted in characters, so `1:1-1:6` selects the first five characters); they are
converted to the wire's 0-based lines and UTF-16 characters. The selection's text is
read from the file. A PATH is relative to the folder or absolute.

Everything runs on one asyncio loop; standard input is read through
`loop.connect_read_pipe` (pipes, terminals, sockets). A thread reads it only where the
loop cannot (Windows consoles and pipes, or `/dev/null`); a regular file is read
directly. The lock file and the socket directory are removed on every way out: `quit`,
end of input, Ctrl-C, SIGTERM, SIGHUP.
"""
from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import os
import re
import signal
import stat
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..common import tools
from ..common.paths import resolve_path, utf16_column
from ..server.ide_server import DiffRequest, IdeServer
from ..common.tools import Diagnostic, Selection

PROG = "python3 -m ide_protocol serve"
DEFAULT_NAME = "Terminal IDE"
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
  accept [TAB] | reject [TAB]      answer a pending diff (TAB: its tab name or number;
                                   without TAB: the latest one)
  status                           sessions, pending diffs, selection, diagnostics
  help                             this text
  quit                             remove the lock file and exit (also: EOF, Ctrl-C)"""


class CommandError(Exception):
    """A command the user typed is wrong: printed, and serving goes on."""


# ------------------------------------------------------------------------ output


class Output:
    """Writes lines to stdout and flushes each one (tests and scripts read it through a
    pipe). Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""

    COLORS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36",
              "bold": "1", "dim": "2"}

    def __init__(self, stream: Any = None, color: str = "auto") -> None:
        self.stream = stream if stream is not None else sys.stdout
        if color == "always":
            self.color = True
        elif color == "never":
            self.color = False
        else:
            isatty = getattr(self.stream, "isatty", None)
            self.color = bool(isatty and isatty()) and not os.environ.get("NO_COLOR")

    def paint(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(self.COLORS[s] for s in styles)
        return "\x1b[%sm%s\x1b[0m" % (codes, text)

    def line(self, text: str = "") -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stdout closed (the reader went away): keep serving, stay quiet

    def error(self, text: str) -> None:
        self.line(self.paint("error: ", "red", "bold") + text)


def unified_diff(diff: DiffRequest, folder: str) -> List[str]:
    """The diff as unified-diff lines without terminators; a last line without a newline
    is marked as `diff` does (difflib would glue it to the next line)."""
    old = diff.original_contents.splitlines(keepends=True)
    new = diff.new_file_contents.splitlines(keepends=True)
    shown = display_path(diff.original_file_path, folder)
    out: List[str] = []
    for line in difflib.unified_diff(old, new, "a/" + shown, "b/" + shown, lineterm=""):
        if line.startswith(("---", "+++", "@@")) and not line.endswith(("\n", "\r")):
            out.append(line.rstrip("\n"))
            continue
        stripped = line.rstrip("\r\n")
        out.append(stripped)
        if stripped == line:
            out.append("\\ No newline at end of file")
    return out


def display_path(path: str, folder: str) -> str:
    """A path relative to the folder when inside it, else as given."""
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # another drive on Windows
        return path
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
        return path
    return rel


def color_diff_line(out: Output, line: str) -> str:
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
    return line


# --------------------------------------------------------------- command parsing


def split_args(text: str, count: int) -> Tuple[List[str], str]:
    """Take up to `count` words off the front of `text`; return them and the rest.

    Words are separated by blanks; "double" or 'single' quotes group a word with blanks
    in it (a path with spaces). Backslashes are literal, so Windows paths need no
    escaping (which is why this is not `shlex`)."""
    words: List[str] = []
    i, n = 0, len(text)
    while len(words) < count:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] in "\"'":
            quote = text[i]
            end = text.find(quote, i + 1)
            if end < 0:
                raise CommandError("unterminated quote in %r" % text)
            words.append(text[i + 1:end])
            i = end + 1
        else:
            start = i
            while i < n and not text[i].isspace():
                i += 1
            words.append(text[start:i])
    return words, text[i:].strip()


_RANGE = re.compile(r"^(\d+)(?::(\d+))?(?:-(\d+)(?::(\d+))?)?$")

Range = Tuple[Tuple[int, int], Tuple[int, int]]  # 1-based (line, column), column a cursor position


def parse_range(text: str) -> Tuple[int, Optional[int], Optional[int], Optional[int], bool]:
    m = _RANGE.match(text)
    if not m:
        raise CommandError("bad range %r: expected L1[:C1]-L2[:C2], L or L:C (1-based)" % text)
    l1 = int(m.group(1))
    c1 = int(m.group(2)) if m.group(2) else None
    l2 = int(m.group(3)) if m.group(3) else None
    c2 = int(m.group(4)) if m.group(4) else None
    return l1, c1, l2, c2, m.group(3) is not None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class FileText:
    """A file's lines as an editor numbers them (`\\r\\n`, `\\r` and `\\n` end a line; a
    file ending with a newline has a last, empty line), with offsets into its text."""

    def __init__(self, path: str) -> None:
        try:
            with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
                self.text = f.read()
        except IsADirectoryError:
            raise CommandError("%s is a directory" % path)
        except OSError as exc:
            raise CommandError("cannot read %s: %s" % (path, exc.strerror or exc))
        self.lines: List[str] = []
        self.starts: List[int] = []
        pos = 0
        for m in _LINE_BREAK.finditer(self.text):
            self.starts.append(pos)
            self.lines.append(self.text[pos:m.start()])
            pos = m.end()
        self.starts.append(pos)
        self.lines.append(self.text[pos:])

    def resolve(self, spec: str) -> Range:
        """A range spec to checked 1-based positions (see HELP for the forms)."""
        l1, c1, l2, c2, has_end = parse_range(spec)
        if not has_end:
            if c1 is None:  # "L": the whole line
                l2, c1, c2 = l1, 1, None
            else:  # "L:C": a cursor
                l2, c2 = l1, c1
        assert l2 is not None
        self._line(l1)
        start = (l1, 1 if c1 is None else c1)
        end = (l2, len(self._line(l2)) + 1 if c2 is None else c2)
        for line, col in (start, end):
            length = len(self.lines[line - 1])
            if not 1 <= col <= length + 1:
                raise CommandError("column %d is outside line %d, which has columns 1-%d" % (col, line, length + 1))
        if end < start:
            start, end = end, start  # the selection was made backwards
        return start, end

    def _line(self, number: int) -> str:
        if not 1 <= number <= len(self.lines):
            raise CommandError("line %d is outside the file, which has lines 1-%d" % (number, len(self.lines)))
        return self.lines[number - 1]

    def text_of(self, rng: Range) -> str:
        (l1, c1), (l2, c2) = rng
        return self.text[self.starts[l1 - 1] + c1 - 1:self.starts[l2 - 1] + c2 - 1]

    def wire(self, pos: Tuple[int, int]) -> Tuple[int, int]:
        """1-based (line, character column) -> 0-based line and UTF-16 character."""
        line, col = pos
        return line - 1, utf16_column(self.lines[line - 1], col - 1)


def format_range(rng: Range) -> str:
    (l1, c1), (l2, c2) = rng
    return "%d:%d-%d:%d" % (l1, c1, l2, c2)


# ------------------------------------------------------------------- the terminal IDE


class TerminalIde:
    """The state and commands of the terminal IDE around one `IdeServer`."""

    def __init__(self, args: argparse.Namespace, out: Output) -> None:
        self.args = args
        self.out = out
        self.folder = os.path.abspath(args.folder)
        self.stop_event: Optional[asyncio.Event] = None
        self.diagnostics: Dict[str, List[Diagnostic]] = {}
        self.diff_numbers: Dict[int, int] = {}  # id(DiffRequest) -> number shown to the user
        self._next_diff = 0
        self.server = IdeServer([self.folder], ide_name=args.name, is_trusted=args.trusted,
                                on_diff=self.on_diff, on_diff_closed=self.on_diff_closed,
                                on_session=self.on_session, on_tool_call=self.on_tool_call,
                                lock_dir=args.lock_dir, debounce=args.debounce,
                                on_exchange=self.on_exchange if args.trace else None)
        if args.trace:
            # Raw HTTP requests and statuses: wrap the application the listener runs
            # for each request (the JSON-RPC messages come from `on_exchange`).
            self.server.listener.app = TracingApp(self.server.listener.app, self.out)

    # ----------------------------------------------------------------- callbacks

    def on_session(self, event: str, info: Dict[str, Any]) -> None:
        sid = short(info.get("id"))
        if event == "connected":
            client = " ".join(str(x) for x in (info.get("client"), info.get("client_version")) if x) or "a client"
            pid = info.get("client_pid")
            self.out.line(self.out.paint("connected", "green", "bold") + ": session %s, %s%s"
                          % (sid, client, " (pid %s)" % pid if pid else ""))
        elif event == "disconnected":
            self.out.line(self.out.paint("disconnected", "yellow") + ": session %s (%s)" % (sid, info.get("reason")))
        elif event == "renamed":
            self.out.line("session %s is named %s" % (sid, json.dumps(info.get("name"), ensure_ascii=False)))
        else:
            self.out.line("session %s: %s" % (sid, event))

    def on_tool_call(self, call: Dict[str, Any], session_id: str, result: Dict[str, Any]) -> None:
        name = call.get("name")
        args = call.get("arguments") or {}
        shown = ", ".join("%s=%s" % (k, summarize(v)) for k, v in args.items()) if isinstance(args, dict) else ""
        self.out.line(self.out.paint("tool", "blue", "bold") + " %s(%s) from session %s -> %s"
                      % (name, shown, short(session_id), summarize_result(name, result)))

    def on_exchange(self, direction: str, message: Dict[str, Any]) -> None:
        arrow = {"in": "<<", "out": ">>", "push": ">> push"}.get(direction, direction)
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        if len(text) > TRACE_LIMIT:
            text = text[:TRACE_LIMIT] + "... (%d characters)" % len(text)
        self.out.line(self.out.paint("  %s %s" % (arrow, text), "dim"))

    def on_diff(self, diff: DiffRequest) -> Optional[bool]:
        self._next_diff += 1
        number = self._next_diff
        self.diff_numbers[id(diff)] = number
        out = self.out
        what = "new file" if diff.is_new_file else "edit"
        out.line(out.paint("diff %d" % number, "magenta", "bold") + " proposed by session %s: %s"
                 % (short(diff.session_id), diff.tab_name))
        out.line("  %s of %s" % (what, display_path(diff.original_file_path, self.folder)))
        lines = unified_diff(diff, self.folder)
        if not lines:
            out.line("  (no changes)")
        for line in lines:
            out.line(color_diff_line(out, line))
        if self.args.auto_accept:
            out.line("diff %d: auto-accepting" % number)
            return True
        if self.args.auto_reject:
            out.line("diff %d: auto-rejecting" % number)
            return False
        out.line("diff %d waits: type `accept` or `reject` (or `accept %d` / `reject %d`)" % (number, number, number))
        return None

    def on_diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        number = self.diff_numbers.pop(id(diff), 0)
        saved = answer.get("result") == "SAVED"
        self.out.line(self.out.paint("diff %d %s" % (number, answer.get("result")), "green" if saved else "red",
                                     "bold") + " (%s): %s" % (answer.get("trigger"), diff.tab_name))

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
        self.out.line("selected %s %s (%d characters)" % (display_path(path, self.folder), format_range(rng),
                                                          len(selected)))

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
        if len(words) == 2:
            rng = text.resolve(words[1])
            start, end, selected = text.wire(rng[0]), text.wire(rng[1]), text.text_of(rng)
            where = "%s:%s" % (display_path(path, self.folder), format_range(rng))
        else:
            start = end = selected = None
            where = display_path(path, self.folder)
        if method == "add_selection":
            assert start is not None and end is not None
            count = self.server.add_selection(path, start, end, selected)
        else:
            count = self.server.add_file_reference(path, start, end, selected)
        self.out.line("sent %s %s to %d session%s" % (method, where, count, "" if count == 1 else "s"))

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

    def find_diff(self, tab: str) -> DiffRequest:
        pending = self.server.pending_diffs()
        if not pending:
            raise CommandError("no diff is waiting")
        if not tab:
            return pending[-1]
        if len(tab) >= 2 and tab[0] == tab[-1] and tab[0] in "\"'":
            tab = tab[1:-1]
        for diff in pending:
            if diff.tab_name == tab:
                return diff
        if tab.isdigit():
            for diff in pending:
                if self.diff_numbers.get(id(diff)) == int(tab):
                    return diff
        matches = [d for d in pending if tab in d.tab_name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise CommandError("%r matches %d pending diffs; give the whole tab name" % (tab, len(matches)))
        raise CommandError("no pending diff %r (type `status` to list them)" % tab)

    def cmd_accept(self, rest: str) -> None:
        self.find_diff(rest).accept()

    def cmd_reject(self, rest: str) -> None:
        self.find_diff(rest).reject()

    def cmd_status(self, rest: str) -> None:
        s = self.server
        out = self.out
        out.line("folder: %s" % self.folder)
        out.line("socket: %s" % s.socket_path)
        out.line("lock: %s" % s.lock_path)
        sessions = s.sessions
        out.line("sessions: %d" % len(sessions))
        for info in sessions:
            client = " ".join(str(x) for x in (info.get("client"), info.get("client_version")) if x) or "?"
            out.line("  %s %s%s, stream %s%s" % (
                info["id"], client, " pid %s" % info["client_pid"] if info.get("client_pid") else "",
                "open" if info.get("stream_open") else "closed",
                ", name %s" % json.dumps(info["name"], ensure_ascii=False) if info.get("name") else ""))
        pending = s.pending_diffs()
        out.line("pending diffs: %d" % len(pending))
        for diff in pending:
            out.line("  %d. %s (%s)" % (self.diff_numbers.get(id(diff), 0), diff.tab_name,
                                        display_path(diff.original_file_path, self.folder)))
        sel = s.selection
        if sel is None:
            out.line("selection: none")
        else:
            out.line("selection: %s %d:%d-%d:%d (wire, 0-based)%s" % (
                display_path(sel.file_path, self.folder), sel.start[0], sel.start[1], sel.end[0], sel.end[1],
                "" if sel.current else ", cached"))
        count = sum(len(d) for d in self.diagnostics.values())
        out.line("diagnostics: %d in %d file%s" % (count, len(self.diagnostics), "" if len(self.diagnostics) == 1 else "s"))

    def cmd_help(self, rest: str) -> None:
        self.out.line(HELP)

    def cmd_quit(self, rest: str) -> None:
        if self.stop_event is not None:
            self.stop_event.set()

    COMMANDS: Dict[str, Callable[["TerminalIde", str], None]] = {
        "select": cmd_select, "deselect": cmd_deselect, "ref": cmd_ref, "addsel": cmd_addsel,
        "diag": cmd_diag, "accept": cmd_accept, "reject": cmd_reject, "status": cmd_status,
        "help": cmd_help, "?": cmd_help, "quit": cmd_quit, "exit": cmd_quit,
    }


def short(session_id: Any) -> str:
    return str(session_id)[:8] if session_id else "-"


def summarize(value: Any, limit: int = 60) -> str:
    if isinstance(value, str) and (len(value) > limit or "\n" in value):
        return "<%d characters>" % len(value)
    return json.dumps(value, ensure_ascii=False)


def summarize_result(name: Any, result: Dict[str, Any]) -> str:
    try:
        value = tools.parse_text_result(result)
    except tools.ToolError as exc:
        return "error: %s" % exc
    if name == "open_diff" and isinstance(value, dict):
        return "%s (%s)" % (value.get("result"), value.get("trigger"))
    if name == "get_selection":
        if not isinstance(value, dict):
            return "no selection"
        rng = value.get("selection") or {}
        start, end = rng.get("start") or {}, rng.get("end") or {}
        return "%s %s:%s-%s:%s%s" % (value.get("filePath"), start.get("line"), start.get("character"),
                                      end.get("line"), end.get("character"),
                                      "" if value.get("current") else " (cached)")
    if name == "get_diagnostics" and isinstance(value, list):
        return "%d file%s" % (len(value), "" if len(value) == 1 else "s")
    if name == "close_diff" and isinstance(value, dict):
        return str(value.get("message"))
    return "ok"


class TracingApp:
    """`--trace`: prints each HTTP request (Authorization redacted) and its status, then
    runs the real application with a responder that reports what is sent."""

    def __init__(self, app: Any, out: Output) -> None:
        self.app = app
        self.out = out

    def __call__(self, request: Any, body: bytes, responder: Any) -> Any:
        number = responder.connection_number
        headers = "; ".join("%s: %s" % (k, "<redacted>" if k.lower() == "authorization" else v)
                            for k, v in request.headers)
        self.out.line(self.out.paint("  [#%d] %s %s (%d bytes) %s" % (number, request.method, request.target,
                                                                      len(body), headers), "dim"))
        # The wrapped application's own answer (None, or what it leaves to wait for).
        return self.app(request, body, _TracingResponder(responder, self.out, number))


class _TracingResponder:
    """Delegates everything to the real `transport.Responder`, printing the status line
    of whatever starts a response (any method called with an `int` status first:
    `send`, `start`, ...) and the end of streams. Generic on purpose, so the trace
    keeps working when the responder grows new ways to answer."""

    def __init__(self, inner: Any, out: Output, number: int) -> None:
        self._inner = inner
        self._out = out
        self._number = number

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value) or name.startswith("_") or name.startswith("chunk"):
            return value

        def traced(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                headers = args[1] if len(args) > 1 else kwargs.get("headers")
                shown = "; ".join("%s: %s" % (k, v) for k, v in (headers or []))
                self._out.line(self._out.paint("  [#%d] -> %d%s %s" % (
                    self._number, args[0], "" if name.startswith("send") and "chunked" not in name else " (stream)",
                    shown), "dim"))
            elif name.startswith("end") and getattr(self._inner, "streaming", False) and not self._inner.finished:
                self._out.line(self._out.paint("  [#%d] -> end of stream" % self._number, "dim"))
            return value(*args, **kwargs)

        return traced


# --------------------------------------------------------------------- standard input


class StdinReader:
    """Lines of standard input for the loop, without a thread where POSIX allows.

    A pipe, a socket or a terminal goes through `loop.connect_read_pipe`. A terminal is
    opened again by name so that the non-blocking mode the loop sets does not leak into
    stdout (a terminal's stdin and stdout often share one open file description, and a
    non-blocking stdout makes big writes fail). A regular file never blocks and is read
    directly. Anything else (Windows, /dev/null) is read by a daemon thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int = 0) -> None:
        self.loop = loop
        self.fd = fd
        self._reader: Optional[asyncio.StreamReader] = None
        self._transport: Any = None
        self._file: Any = None
        self._queue: Optional["asyncio.Queue[bytes]"] = None
        self._restore_blocking = False
        self.mode = ""

    async def open(self) -> None:
        try:
            st = os.fstat(self.fd)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            self._file = os.fdopen(os.dup(self.fd), "rb")
            self.mode = "file"
            return
        if sys.platform != "win32" and st is not None and _pollable(self.fd):
            pipe = None
            try:
                if os.isatty(self.fd):
                    pipe = open(os.ttyname(self.fd), "rb", buffering=0)
                    self.mode = "tty"
                else:
                    pipe = os.fdopen(os.dup(self.fd), "rb", buffering=0)
                    self.mode = "pipe"
                    self._restore_blocking = True  # the dup shares the description
                reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
                self._transport, _ = await self.loop.connect_read_pipe(
                    lambda: asyncio.StreamReaderProtocol(reader), pipe)
                self._reader = reader
                return
            except (OSError, ValueError, NotImplementedError):
                if pipe is not None:
                    pipe.close()
                self._restore()
        self._start_thread()

    def _start_thread(self) -> None:
        """The fallback: a daemon thread blocks on readline and hands lines to the loop."""
        self.mode = "thread"
        queue: "asyncio.Queue[bytes]" = asyncio.Queue()
        self._queue = queue
        loop = self.loop
        fd = self.fd

        def run() -> None:
            try:
                stream = os.fdopen(os.dup(fd), "rb")
            except OSError:
                stream = None
            while True:
                try:
                    line = stream.readline() if stream is not None else b""
                except (OSError, ValueError):
                    line = b""
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                except RuntimeError:  # the loop is closed: we are exiting
                    return
                if not line:
                    return

        threading.Thread(target=run, name="serve-stdin", daemon=True).start()

    async def readline(self) -> Optional[bytes]:
        """One line (terminator included), or None at the end of input."""
        if self._file is not None:
            line = self._file.readline()
        elif self._reader is not None:
            line = await self._reader.readline()
        else:
            assert self._queue is not None
            line = await self._queue.get()
        return line or None

    def _restore(self) -> None:
        if self._restore_blocking:
            try:
                os.set_blocking(self.fd, True)
            except (OSError, AttributeError):
                pass
            self._restore_blocking = False

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self._restore()


def _pollable(fd: int) -> bool:
    """Whether the loop's selector accepts `fd`. `connect_read_pipe` takes any character
    device but only registers it later, in a callback, where epoll's refusal of
    /dev/null (EPERM) would be an unhandled error and input would never arrive."""
    import selectors

    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, selectors.EVENT_READ)
        return True
    except (OSError, ValueError):
        return False
    finally:
        selector.close()


# ---------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="A terminal IDE for Copilot CLI's /ide: serves FOLDER, shows diffs, reads "
                               "commands on standard input (type `help` once it runs).")
    parser.add_argument("folder", nargs="?", default=os.curdir, help="the workspace folder (default: the current one)")
    parser.add_argument("--name", default=DEFAULT_NAME, help="the IDE name in the lock file (default: %(default)s)")
    parser.add_argument("--trusted", action="store_true",
                        help="mark the folder trusted in the lock file (the CLI then skips its trust prompt)")
    auto = parser.add_mutually_exclusive_group()
    auto.add_argument("--auto-accept", action="store_true", help="accept every proposed diff at once")
    auto.add_argument("--auto-reject", action="store_true", help="reject every proposed diff at once")
    parser.add_argument("--debounce", type=float, default=0.2, metavar="SECONDS",
                        help="debounce of selection/diagnostics pushes (default: %(default)s)")
    parser.add_argument("--lock-dir", default=None, metavar="DIR",
                        help="where to write the lock file (default: $COPILOT_HOME/ide or ~/.copilot/ide)")
    parser.add_argument("--trace", action="store_true", help="print every HTTP exchange and JSON-RPC message")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the diffs: auto = on a terminal unless NO_COLOR is set")
    parser.add_argument("--ignore-eof", action="store_true",
                        help="keep serving at the end of standard input (stop with quit, Ctrl-C or SIGTERM)")
    return parser


async def run(args: argparse.Namespace, out: Output) -> int:
    loop = asyncio.get_event_loop()
    ide = TerminalIde(args, out)
    stop = asyncio.Event()
    ide.stop_event = stop
    installed = install_signals(loop, stop)
    stdin = StdinReader(loop)
    reader_task: Optional["asyncio.Future[None]"] = None
    try:
        try:
            await ide.server.start()
        except (OSError, ValueError) as exc:
            print("%s: cannot start: %s" % (PROG, exc), file=sys.stderr, flush=True)
            return 1
        out.line("serving %s on %s, lock %s" % (ide.folder, ide.server.socket_path, ide.server.lock_path))
        out.line("IDE %s%s; diffs: %s. Type `help` for commands." % (
            json.dumps(args.name, ensure_ascii=False), ", trusted" if args.trusted else "",
            "auto-accept" if args.auto_accept else "auto-reject" if args.auto_reject else "ask"))
        await stdin.open()
        reader_task = asyncio.ensure_future(read_commands(ide, stdin, stop, args.ignore_eof))
        await stop.wait()
    finally:
        if reader_task is not None:
            reader_task.cancel()
            await asyncio.gather(reader_task, return_exceptions=True)
        stdin.close()
        await ide.server.stop()
        remove_signals(loop, installed)
    out.line("stopped (lock file and socket removed)")
    return 0


async def read_commands(ide: TerminalIde, stdin: StdinReader, stop: asyncio.Event, ignore_eof: bool) -> None:
    while True:
        try:
            raw = await stdin.readline()
        except ValueError:  # a line longer than the reader's limit
            ide.out.error("input line too long; ignored")
            continue
        if raw is None:
            if not ignore_eof:
                ide.out.line("end of input")
                stop.set()
            return
        line = raw.decode("utf-8", errors="replace")
        try:
            ide.command(line)
        except CommandError as exc:
            ide.out.error(str(exc))
        except Exception as exc:  # a bug in one command must not end the session
            ide.out.error("%s failed: %s: %s" % (line.strip(), type(exc).__name__, exc))
        if stop.is_set():
            return


def install_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> List[int]:
    """SIGINT, SIGTERM and SIGHUP stop the server cleanly (the lock file must go: it is
    the only disconnect signal the CLI notices). Where the loop cannot take signals
    (Windows), a plain handler hands Ctrl-C to the loop."""
    installed: List[int] = []
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            try:
                signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
            except (OSError, RuntimeError, ValueError):
                pass
    return installed


def remove_signals(loop: asyncio.AbstractEventLoop, installed: Sequence[int]) -> None:
    for sig in installed:
        try:
            loop.remove_signal_handler(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if not os.path.isdir(args.folder):
        print("%s: %s is not a folder" % (PROG, args.folder), file=sys.stderr)
        return 2
    if args.debounce < 0:
        print("%s: --debounce must be >= 0" % PROG, file=sys.stderr)
        return 2
    out = Output(color=args.color)
    try:
        return asyncio.run(run(args, out))
    except KeyboardInterrupt:  # Ctrl-C where the loop could not take the signal
        return 0


if __name__ == "__main__":
    sys.exit(main())
