"""`python3 -m ide_protocol bridge [FOLDER...]`: the `/ide` server as a subprocess an
editor drives with one JSON object per line on stdin and stdout (docs/BRIDGE.md).

For editors that cannot host Python (Emacs, Kakoune, Helix, ...): the editor starts this
program through a pipe, says hello (its protocol version and the unit it counts
columns in), and then tells the bridge what changes (selection, diagnostics, file
references, folders, its answer to a diff); the bridge tells the editor what happens on
the wire (a CLI connected or left, a diff proposed or closed) and answers every line it
cannot use with an error naming that line. Logs go to stderr, never to stdout.

Ways out, each removing the lock file (the only disconnect signal the CLI notices,
PROTOCOL.md §1) and answering pending diffs `client_disconnected` (§4): a `stop`
message, the end of stdin (the editor exited or closed the pipe), SIGTERM, SIGHUP,
SIGINT.

The parts: `bridge_positions` converts columns; `terminal.stdin.StdinReader` reads lines
for the loop; `terminal.output.BoundedWriter` writes without ever blocking the loop; this
module holds the messages and the run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..common.tools import Diagnostic, Selection
from ..server.diffs import DiffRequest
from ..server.ide_server import IdeServer
from ..wire.ndjson import LineSplitter, LineTooLong
from .bridge_messages import MAX_LINE, MessageError, check, decode, message_type, path_of, shown
from .bridge_positions import UNITS, PositionError, wire_position
from .progname import program_name
from .terminal.output import BoundedWriter
from .terminal.signals import install_signals, remove_signals
from .terminal.stdin import StdinReader

PROG = program_name("bridge")
#: The version of the bridge's own protocol (docs/BRIDGE.md), named in hello and ready.
PROTOCOL = 1
DEFAULT_NAME = "Editor"
#: Output queued at most while the editor does not read: two 64 MB texts (the server's
#: body limit) of one diff, escaped.
OUTPUT_LIMIT = 512 * 1024 * 1024

log = logging.getLogger(__name__)
#: A surrogate code point in a Python string is always a lone one (json.loads joins pairs).
_SURROGATE = re.compile("[\ud800-\udfff]")


class Bridge:
    """One editor on stdin/stdout, one `IdeServer`. Runs on the loop's thread only."""

    def __init__(self, folders: List[str], name: Optional[str], write: Callable[[Dict[str, Any]], bool],
                 server_options: Dict[str, Any]) -> None:
        self.folders = folders
        self.name = name
        self.write = write
        self.server_options = server_options
        self.server: Optional[IdeServer] = None
        self.unit = ""
        self.stop = asyncio.Event()
        self.stop_reason = "signal"                 # unless a stop message or the end of input
        self.diffs: Dict[int, DiffRequest] = {}     # id given to the editor -> pending diff
        self._ids: Dict[int, int] = {}              # id(DiffRequest) -> its id
        self._next_id = 1
        self._shown: Set[int] = set()               # diffs whose message went out
        self.unified = False                        # the hello asked for unified diffs
        self._handlers: Dict[str, Callable[[Dict[str, Any]], Any]] = {
            "selection": self.on_selection, "diagnostics": self.on_diagnostics,
            "clear_diagnostics": self.on_clear_diagnostics, "add_file": self.on_add_file,
            "add_selection": self.on_add_selection, "folders": self.on_folders,
            "diff_answer": self.on_diff_answer, "status": self.on_status, "stop": self.on_stop,
        }

    # ------------------------------------------------------------- editor -> bridge

    async def line(self, number: int, raw: bytes) -> None:
        """One line from the editor: handled, or answered with an `error` naming it.
        Never raises: whatever a line holds costs at most that line."""
        if not raw.strip():
            return
        request_id: Any = None
        try:
            message = decode(raw)
            request_id = message.get("id")  # (any JSON value: decoded by json_text, so it can be echoed)
            kind = message_type(message)
            check(kind, message)
            if kind == "hello":
                await self.on_hello(message)
                return
            if self.server is None:
                raise MessageError("%s before hello: say hello first" % kind)
            reply = self._handlers[kind](message)
            if reply is not None:
                if request_id is not None:
                    reply["id"] = request_id
                self.write(reply)
        except (MessageError, PositionError) as exc:
            self.error(number, str(exc), request_id)
        except Exception as exc:  # a bug in one message must not end the bridge
            log.exception("line %d failed", number)
            self.error(number, "%s: %s" % (type(exc).__name__, exc), request_id)

    def error(self, number: Optional[int], text: str, request_id: Any = None) -> None:
        message: Dict[str, Any] = {"type": "error", "line": number, "message": text}
        if request_id is not None:
            message["id"] = request_id
        self.write(message)

    async def on_hello(self, message: Dict[str, Any]) -> None:
        if self.server is not None:
            raise MessageError("hello: already said (the bridge serves one editor)")
        version = message["protocol"]
        if version != PROTOCOL:
            raise MessageError("hello: protocol %s is not spoken here (this bridge speaks %d)" % (shown(version), PROTOCOL))
        unit = message["unit"]
        if unit not in UNITS:
            raise MessageError("hello: 'unit' must be one of %s, not %s" % (", ".join(UNITS), shown(unit)))
        name = self.name or message.get("name") or DEFAULT_NAME
        server = IdeServer(self.folders, ide_name=name, on_diff=self.on_diff, on_diff_closed=self.on_diff_closed,
                           on_session=self.on_session, **self.server_options)
        try:
            await server.start()
        except (OSError, ValueError) as exc:
            raise MessageError("hello: cannot start the server: %s" % exc)
        self.server, self.unit = server, unit
        self.unified = message.get("unified_diff") is True
        self.write(self.ready("ready"))

    def ready(self, kind: str) -> Dict[str, Any]:
        assert self.server is not None
        return {"type": kind, "protocol": PROTOCOL, "unit": self.unit, "lock": self.server.lock_path,
                "socket": self.server.socket_path, "folders": self.server.workspace_folders,
                "name": self.server.ide_name, "pid": os.getpid()}

    def _lines(self, message: Dict[str, Any]) -> Dict[str, str]:
        return message.get("lines") or {}

    def _range(self, message: Dict[str, Any], lines: Dict[str, str], prefix: str = "",
               where: Optional[Dict[str, Any]] = None) -> Tuple[Tuple[int, int], Tuple[int, int]]:
        where = message if where is None else where
        start = wire_position(self.unit, where.get("start"), lines, prefix + "start")
        end = wire_position(self.unit, where.get("end") or where.get("start"), lines, prefix + "end")
        return start, end

    def on_selection(self, message: Dict[str, Any]) -> None:
        assert self.server is not None
        if message.get("path") is None:
            self.server.set_selection(None)   # no active editor (§4: current false)
            return None
        path = path_of(message)
        text = message.get("text") or ""
        start, end = self._range(message, self._lines(message))
        self.server.set_selection(Selection(path, text, start, end))
        return None

    def on_diagnostics(self, message: Dict[str, Any]) -> None:
        assert self.server is not None
        path = path_of(message)
        lines = self._lines(message)
        diagnostics = []
        for index, item in enumerate(message["diagnostics"]):   # (each checked: bridge_messages)
            start, end = self._range(message, lines, "diagnostics[%d]." % index, item)
            diagnostics.append(Diagnostic(item["message"], item.get("severity") or "Error", start, end,
                                          item.get("source"), item.get("code")))
        self.server.set_diagnostics(path, diagnostics)
        return None

    def on_clear_diagnostics(self, message: Dict[str, Any]) -> None:
        assert self.server is not None
        self.server.clear_diagnostics()
        return None

    def _reference(self, message: Dict[str, Any]) -> Tuple[str, Any, Any, Optional[str]]:
        path = path_of(message)
        text = message.get("text")
        if message.get("start") is None:   # (only `add_file` may leave it out: bridge_messages)
            return path, None, None, text
        start, end = self._range(message, self._lines(message))
        return path, start, end, text

    def on_add_file(self, message: Dict[str, Any]) -> Dict[str, Any]:
        assert self.server is not None
        path, start, end, text = self._reference(message)
        return {"type": "sent", "sessions": self.server.add_file_reference(path, start, end, text)}

    def on_add_selection(self, message: Dict[str, Any]) -> Dict[str, Any]:
        assert self.server is not None
        path, start, end, text = self._reference(message)
        return {"type": "sent", "sessions": self.server.add_selection(path, start, end, text)}

    def on_folders(self, message: Dict[str, Any]) -> Dict[str, Any]:
        assert self.server is not None
        self.server.set_workspace_folders(message["folders"])   # the lock rewritten in place (§1)
        return self.ready("lock")

    def on_diff_answer(self, message: Dict[str, Any]) -> None:
        number, accept = message["diff"], message["accept"]
        diff = self.diffs.get(number)
        if diff is None:
            raise MessageError("diff_answer: no pending diff %s (already closed, or never sent)" % shown(number))
        if accept:
            diff.accept()
        else:
            diff.reject()
        return None

    def on_status(self, message: Dict[str, Any]) -> Dict[str, Any]:
        assert self.server is not None
        status = self.ready("status")
        status["sessions"] = self.server.sessions
        status["diffs"] = sorted(self.diffs)
        return status

    def on_stop(self, message: Dict[str, Any]) -> None:
        self.stop_reason = "stop"
        self.stop.set()
        return None

    # ------------------------------------------------------------- server -> editor

    def on_session(self, event: str, info: Dict[str, Any]) -> None:
        assert self.server is not None
        message = {"type": event, "session": info.get("id"), "client": info.get("client"),
                   "client_version": info.get("client_version"), "client_pid": info.get("client_pid"),
                   "sessions": len(self.server.app.sessions)}
        if "reason" in info:
            message["reason"] = info["reason"]
        self.write(message)

    def on_diff(self, diff: DiffRequest) -> None:
        number = self._next_id
        self._next_id += 1
        self.diffs[number] = diff
        self._ids[id(diff)] = number
        message = {"type": "diff", "id": number, "tab": diff.tab_name, "path": diff.original_file_path,
                   "original": diff.original_contents, "new": diff.new_file_contents,
                   "new_file": diff.is_new_file, "original_exact": diff.original_is_exact,
                   "session": diff.session_id}
        if not self.unified or not diff.small_enough_to_diff():  # (too large: the proposal alone)
            self._show(diff, number, message)
            return None
        # difflib on two large texts can take long: a daemon thread (never waited for at
        # exit) computes it, the loop sends the message.
        loop = asyncio.get_event_loop()

        def compute() -> None:
            try:
                text = diff.unified_diff()
            except Exception:
                log.exception("unified diff of %s", diff.original_file_path)
                text = ""
            try:
                loop.call_soon_threadsafe(deliver, text)
            except RuntimeError:  # the loop closed: the bridge is exiting
                pass

        def deliver(text: str) -> None:
            message["unified"] = text
            self._show(diff, number, message)

        threading.Thread(target=compute, name="bridge-unified-diff", daemon=True).start()
        return None  # answered by a diff_answer message

    def _show(self, diff: DiffRequest, number: int, message: Dict[str, Any]) -> None:
        if diff.done:  # closed before it could be shown: the editor hears of neither
            return
        self._shown.add(number)
        if not self.write(message):
            # Not handed to the editor (it does not read, and the output is full): nobody
            # could answer it, so it is rejected now; the editor hears of a `dropped`.
            self._shown.discard(number)
            diff.reject()

    def on_diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        number = self._ids.pop(id(diff), None)
        if number is None:
            return
        self.diffs.pop(number, None)
        if number not in self._shown:
            return
        self._shown.discard(number)
        self.write({"type": "diff_closed", "id": number, "tab": diff.tab_name, "path": diff.original_file_path,
                    "result": answer.get("result"), "trigger": answer.get("trigger")})


def encode(message: Dict[str, Any]) -> bytes:
    """One line of output, strict JSON (ValueError: a value JSON cannot carry, such as
    NaN). Text from the CLI may hold lone surrogates (JSON allows `\\ud800`), which
    UTF-8 cannot carry: they become U+FFFD, the line stays valid."""
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = _SURROGATE.sub("\ufffd", text).encode("utf-8")
    return data + b"\n"


def encoded(message: Dict[str, Any]) -> bytes:
    """`encode`, or where the message cannot be written as JSON (a value no decoder of
    ours lets in: a bug), an `error` line that says so instead: every line is JSON."""
    try:
        return encode(message)
    except (ValueError, TypeError, RecursionError) as exc:
        log.error("a %s message could not be written: %s", message.get("type"), exc)
        return encode({"type": "error", "line": None,
                       "message": "a %s message could not be written as JSON: %s" % (message.get("type"), exc)})


async def read_lines(stdin: StdinReader, bridge: Bridge) -> None:
    """The editor's lines, numbered from 1 (blank ones counted), to the bridge, until the
    end of input. A line over `MAX_LINE` bytes is skipped without being kept, with one
    `error`, and the lines after it keep their true numbers."""
    splitter = LineSplitter(MAX_LINE, keep_blank=True)
    number = 0
    while True:
        data = await stdin.read()
        for line in splitter.feed(data) if data else splitter.flush():
            number += 1
            if isinstance(line, LineTooLong):
                bridge.error(number, "line too long: %d bytes (at most %d): ignored" % (line.size, MAX_LINE))
            else:
                await bridge.line(number, line)
        if not data:
            return


async def run(args: argparse.Namespace, writer: BoundedWriter) -> int:
    loop = asyncio.get_event_loop()
    options: Dict[str, Any] = {"debounce": args.debounce, "is_trusted": args.trusted}
    if args.lock_dir:
        options["lock_dir"] = args.lock_dir

    def write(message: Dict[str, Any]) -> bool:
        return writer.write(encoded(message))

    bridge = Bridge([os.path.abspath(f) for f in args.folders], args.name, write, options)
    installed = install_signals(loop, bridge.stop)
    stdin = StdinReader(loop)

    def reading_ended(task: "asyncio.Future[None]") -> None:
        """Input ended (or, by a bug, reading failed): the bridge stops, its lock goes.
        It never goes on without reading: nobody could answer its diffs or stop it."""
        if task.cancelled():
            return
        if task.exception() is not None:
            log.error("reading the editor's input failed: %r", task.exception())
            bridge.stop_reason = "error"
        elif not bridge.stop.is_set():
            bridge.stop_reason = "end of input"
        bridge.stop.set()

    reader: Optional["asyncio.Future[None]"] = None
    try:
        await stdin.open()
        reader = asyncio.ensure_future(read_lines(stdin, bridge))
        reader.add_done_callback(reading_ended)
        await bridge.stop.wait()
    finally:
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        stdin.close()
        if bridge.server is not None:
            await bridge.server.stop()   # lock removed, pending diffs client_disconnected
        remove_signals(loop, installed)
    bridge.write({"type": "stopped", "reason": bridge.stop_reason})
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The /ide server for an editor that drives it with one JSON message per line "
                               "on stdin/stdout (docs/BRIDGE.md). Logs go to stderr.")
    parser.add_argument("folders", nargs="*", default=[os.curdir], metavar="FOLDER",
                        help="the workspace folders (default: the current one)")
    parser.add_argument("--name", default=None,
                        help="the IDE name in the lock file (default: the hello's name, else %s)" % DEFAULT_NAME)
    parser.add_argument("--trusted", action="store_true", help="mark the folders trusted in the lock file")
    parser.add_argument("--debounce", type=float, default=0.2, metavar="SECONDS",
                        help="debounce of selection/diagnostics pushes (default: %(default)s)")
    parser.add_argument("--lock-dir", default=None, metavar="DIR",
                        help="where to write the lock file (default: $COPILOT_HOME/ide or ~/.copilot/ide)")
    parser.add_argument("--output-limit", type=int, default=OUTPUT_LIMIT, metavar="BYTES",
                        help="output queued at most while the editor does not read; past it messages are "
                             "dropped (a diff among them is rejected) and a `dropped` message says how many "
                             "(default: %(default)s)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log the server's progress to stderr")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    for folder in args.folders:
        if not os.path.isdir(folder):
            print("%s: %s is not a folder" % (PROG, folder), file=sys.stderr)
            return 2
    if args.debounce < 0:
        print("%s: --debounce must be >= 0" % PROG, file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format=PROG + ": %(message)s")
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 1
    if args.output_limit < 1:
        print("%s: --output-limit must be >= 1" % PROG, file=sys.stderr)
        return 2
    writer = BoundedWriter(fd, args.output_limit, notice=lambda count: encode({"type": "dropped", "messages": count}))
    try:
        return asyncio.run(run(args, writer))
    except KeyboardInterrupt:
        return 0
    finally:
        writer.close()


if __name__ == "__main__":
    sys.exit(main())
