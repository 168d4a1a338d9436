"""`python3 -m ide_protocol trace`: see what flows between Copilot CLI and an IDE.

The tracer sits between the CLI and a real IDE server (VS Code, JetBrains, ours...):

    CLI ──> tracer socket ──> real IDE socket
        <──               <──

1. It finds the real server's lock as the CLI would (PROTOCOL.md §1: the lock whose
   `workspaceFolders` lists FOLDER, default the cwd), or takes `--lock FILE`.
2. It listens on its own socket and writes **its own** lock for the same workspace,
   with the real lock's `headers` (the nonce), so the CLI's requests pass through
   unchanged and the real server accepts them.
3. Every byte is forwarded unchanged in both directions; a copy goes through the
   sans-IO parsers (`http11`, `sse`) only to be shown: connection number, timing,
   request and status lines, headers, chunked bodies decoded as JSON, SSE events as
   JSON. `--out FILE` also writes the raw bytes in the format of
   `tests/captures/*.log` (`--- HH:MM:SS.mmm #N C>S|S>C LEN bytes`, then the bytes
   with `\\r` `\\n` shown literally).

Making the CLI pick the tracer: the tracer's lock goes into a directory of its own (by
default a fresh temporary `COPILOT_HOME`, printed at start; or `--copilot-home DIR`),
and the traced CLI run is pointed at it:

    python3 -m ide_protocol trace ~/project            # prints COPILOT_HOME=/tmp/ide-trace-XXXX
    cd ~/project && COPILOT_HOME=/tmp/ide-trace-XXXX copilot

(A private `COPILOT_HOME` also hides the CLI's usual configuration; copy the files it
needs, such as `config.json`, into that directory if your CLI asks you to log in again.)
Writing the tracer's lock next to the real one (`--same-dir`) works too, but then both
locks list the folder and the CLI takes the first by file name, and every CLI run is
traced: the tracer refuses it unless you insist.

The tracer never modifies or deletes another program's lock file. It removes its own
lock, socket and (if it created it) temporary directory on exit, including SIGINT and
SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from typing import Any, Callable, Deque, IO, List, Optional, Tuple

from ..wire import http11, json_text, sse
from ..wire.http11 import rules as http_rules
from ..common import lockfile
from ..client import ClientError, discover, open_socket
from ..common.lockfile import LockInfo
from ..server.acceptor import Acceptor, stream_protocols
from ..server.sockets import bind_unix, wait_server_closed
from ..common.terminal_text import safe_text
from .options import LOCK_DIR_DEFAULT, add_folder, add_lock_dir, folder_of, one_line
from .progname import program_name

READ_SIZE = 256 * 1024
DEFAULT_SHOW = 2000  # characters of one JSON body or event shown on the terminal
#: The bytes of `Tracer.records` kept in memory (the newest; older ones are dropped and
#: counted): a flood through the tracer must not grow it. `--out` writes every byte.
KEEP_RECORD_BYTES = 16 * 1024 * 1024
#: The largest body or SSE event decoded for display; a larger one is forwarded
#: unchanged and reported by its size only.
MAX_SHOWN_MESSAGE = 4 * 1024 * 1024
CAPTURE_HEADER = ("# raw bytes logged by `python3 -m ide_protocol trace` (ide_protocol.trace). "
                  "C>S = CLI to server, S>C = server to CLI; \\r \\n shown literally.")
_BLOCK = re.compile(r"--- (\S+) #(\d+) (C>S|S>C) (\d+) bytes\Z")


class Record:
    """One read from one side of one connection, forwarded as is."""

    __slots__ = ("conn", "direction", "time", "data")

    def __init__(self, conn: int, direction: str, time: float, data: bytes) -> None:
        self.conn = conn
        self.direction = direction
        self.time = time
        self.data = data

    def __repr__(self) -> str:
        return "Record(#%d %s %d bytes)" % (self.conn, self.direction, len(self.data))


# ------------------------------------------------------------------ capture format


def clock(t: float) -> str:
    """HH:MM:SS.mmm local time, as in the capture files."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)


def escape_block(data: bytes) -> str:
    """The bytes of one block as the capture format shows them: CR and LF written as
    `\\r` `\\n`, each LF also ending the log line."""
    text = data.decode("utf-8", "backslashreplace")
    text = text.replace("\r\n", "\\r\\n\x00").replace("\n", "\\n\x00").replace("\r", "\\r")
    return text.replace("\x00", "\n")


def format_block(record: Record) -> str:
    """One block: its `---` line, the escaped bytes, and a newline (which makes the
    blank separator line after a block that ends with LF, as in the captures)."""
    return "--- %s #%d %s %d bytes\n%s\n" % (clock(record.time), record.conn, record.direction,
                                            len(record.data), escape_block(record.data))


def unescape_block(lines: List[str]) -> bytes:
    """The bytes of one capture block from its logged lines (the reverse of
    `escape_block`). Only a `\\r\\n` or `\\n` at the end of a line stands for CR/LF: one
    inside a line is JSON's own escape (a file's content in open_diff) and stays."""
    while lines and lines[-1] == "":
        lines.pop()  # the blank line that separates blocks
    out = bytearray()
    for i, line in enumerate(lines):
        if line.endswith("\\r\\n"):
            out += line[:-4].encode("utf-8") + b"\r\n"
        elif line.endswith("\\n"):
            out += line[:-2].encode("utf-8") + b"\n"
        else:
            if i != len(lines) - 1:
                raise ValueError("unterminated line inside a capture block: %r" % line[:60])
            out += line.encode("utf-8")  # a body without a final newline
    return bytes(out)


def read_capture(path: str) -> List[Tuple[str, Record]]:
    """Parse a capture file back into (clock text, Record) pairs, bytes rebuilt."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks: List[Tuple[str, Record]] = []
    header: Optional[Tuple[str, int, str, int]] = None
    body: List[str] = []

    def flush() -> None:
        if header is not None:
            data = unescape_block(body)
            blocks.append((header[0], Record(header[1], header[2], 0.0, data)))

    for line in text.split("\n")[1:]:
        m = _BLOCK.match(line)
        if m:
            flush()
            header = (m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))
            body = []
        else:
            body.append(line)
    flush()
    return blocks


# ------------------------------------------------------------------- the display


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "… (%d more characters)" % (len(text) - limit)


def _json_text(data: bytes, limit: int) -> str:
    try:
        obj = json_text.loads(data)
    except json_text.JsonTextError:
        return _short(repr(data[:limit + 1]), limit)
    return _short(json.dumps(obj, ensure_ascii=False), limit)


class _Side:
    """The display of one direction of one connection, fed with a copy of the bytes."""

    def __init__(self, view: "ConnectionView", direction: str) -> None:
        self.view = view
        self.direction = direction
        self.parser: Any = http11.RequestParser(max_body=None) if direction == "C>S" else http11.ResponseParser()
        self.body = bytearray()  # at most MAX_SHOWN_MESSAGE bytes of the current body
        self.body_size = 0
        self.decoder: Optional[sse.SSEDecoder] = None
        self.chunked = False
        self.dead = False
        self.events = 0

    def feed(self, data: bytes, eof: bool = False) -> None:
        """Show a copy of the bytes; never raises (the display must not stop the
        forwarding: what it cannot show it says so, once)."""
        if self.dead:
            return
        try:
            events = self.parser.feed_eof() if eof else self.parser.feed(data)
            for event in events:
                self._event(event)
        except Exception as exc:
            self.dead = True
            self.view.line(self.direction, "(cannot display this connection any more: %s: %s; bytes still "
                                           "forwarded unchanged)" % (type(exc).__name__, str(exc)[:200]))

    def _event(self, event: Any) -> None:
        v = self.view
        if isinstance(event, http11.Request):
            v.emit(self.direction, "%s %s HTTP/%s" % (event.method, event.target, event.http_version),
                   event.headers)
            v.expect(event.method)
            self._begin(event.headers)
        elif isinstance(event, http11.Response):
            v.emit(self.direction, "HTTP/%s %d %s" % (event.http_version, event.status, event.reason), event.headers)
            self._begin(event.headers)
            if "text/event-stream" in (event.headers.get("content-type") or ""):
                self.decoder = sse.SSEDecoder(MAX_SHOWN_MESSAGE)
        elif isinstance(event, http11.Data):
            if self.decoder is not None:
                dropped = self.decoder.dropped
                for sse_event in self.decoder.feed(event.data):
                    self.events += 1
                    v.line(self.direction, "event %s: %s" % (sse_event.event, _json_text(
                        sse_event.data.encode("utf-8"), v.tracer.show)))
                if self.decoder.dropped != dropped:
                    self.events += self.decoder.dropped - dropped
                    v.line(self.direction, "event larger than %d bytes: forwarded, not shown" % MAX_SHOWN_MESSAGE)
            else:
                self.body_size += len(event.data)
                if len(self.body) < MAX_SHOWN_MESSAGE:
                    self.body += event.data[:MAX_SHOWN_MESSAGE - len(self.body)]
        elif isinstance(event, http11.EndOfMessage):
            if self.decoder is not None:
                v.line(self.direction, "end of stream (%d event%s)" % (self.events, "" if self.events == 1 else "s")
                       if self.chunked else "end of body")
            elif self.body_size > len(self.body):
                v.line(self.direction, "body (%s, %d bytes): larger than %d bytes, forwarded, not shown"
                       % ("chunked" if self.chunked else "length", self.body_size, MAX_SHOWN_MESSAGE))
            elif self.body:
                v.line(self.direction, "body (%s, %d bytes): %s" % ("chunked" if self.chunked else "length",
                                                                   len(self.body),
                                                                   _json_text(bytes(self.body), v.tracer.show)))
            self.body = bytearray()
            self.body_size = 0
            self.decoder = None
            self.events = 0
        elif isinstance(event, http11.ParseError):
            self.dead = True
            v.line(self.direction, "(not HTTP as expected: %s; bytes still forwarded unchanged)" % event.message)

    def _begin(self, headers: http11.Headers) -> None:
        self.body = bytearray()
        self.body_size = 0
        self.decoder = None
        self.events = 0
        try:  # (the framing rule is wire.http11's; the parser has already applied it)
            self.chunked = http_rules.body_framing(headers) is http_rules.CHUNKED
        except http_rules.Refusal:
            self.chunked = False


class ConnectionView:
    """Readable trace of one proxied connection."""

    def __init__(self, tracer: "Tracer", number: int) -> None:
        self.tracer = tracer
        self.number = number
        self.request = _Side(self, "C>S")
        self.response = _Side(self, "S>C")

    def expect(self, method: str) -> None:
        self.response.parser.expect(method)

    def emit(self, direction: str, start: str, headers: http11.Headers) -> None:
        self.line(direction, start)
        for name, value in headers:
            self.tracer.write("        %s: %s" % (name, value))

    def line(self, direction: str, text: str) -> None:
        self.tracer.write("%s #%d %s %s" % (self.tracer.stamp(), self.number, direction, text))


# ------------------------------------------------------------------- the tracer


class Tracer:
    """The proxy: its own socket and lock, the real server behind (see module doc)."""

    def __init__(self, target: LockInfo, lock_dir: str, *, out: Optional[IO[str]] = None,
                 capture_path: Optional[str] = None, show: int = DEFAULT_SHOW,
                 allow_same_dir: bool = False, socket_dir: Optional[str] = None,
                 on_record: Optional[Callable[[Record], None]] = None) -> None:
        self.target = target
        self.lock_dir = lock_dir
        self.out = out
        self.capture_path = capture_path
        self.show = show
        self.socket_dir = socket_dir
        self.on_record = on_record
        #: The newest records, at most KEEP_RECORD_BYTES of data; `dropped_records` and
        #: `dropped_bytes` count the older ones let go.
        self.records: Deque[Record] = collections.deque()
        self.kept_bytes = 0
        self.dropped_records = 0
        self.dropped_bytes = 0
        self.lock_path: Optional[str] = None
        self.socket_path: Optional[str] = None
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self._numbers = itertools.count(1)
        self._server: Any = None   # (the named pipe's server, on Windows)
        self._acceptor: Optional[Acceptor] = None
        self._tasks: List["asyncio.Task[Any]"] = []
        self._writers: List[asyncio.StreamWriter] = []
        self._private_dir: Optional[str] = None
        self._capture: Optional[IO[str]] = None
        if target.path and not allow_same_dir and _same_dir(os.path.dirname(target.path), lock_dir):
            raise ValueError("the tracer's lock would go next to the real one in %s; use a private COPILOT_HOME "
                             "for the traced CLI (--copilot-home DIR), or --same-dir to insist" % lock_dir)

    # -- output

    def stamp(self) -> str:
        return "+%.3fs" % (time.monotonic() - self._t0)

    def write(self, text: str) -> None:
        if self.out is not None:
            self.out.write(safe_text(text) + "\n")  # peer bytes never drive the terminal
            self.out.flush()

    def _record(self, conn: int, direction: str, data: bytes) -> None:
        record = Record(conn, direction, time.time(), data)
        self.records.append(record)
        self.kept_bytes += len(data)
        while self.kept_bytes > KEEP_RECORD_BYTES and len(self.records) > 1:
            old = self.records.popleft()
            self.kept_bytes -= len(old.data)
            self.dropped_records += 1
            self.dropped_bytes += len(old.data)
        if self._capture is not None:
            self._capture.write(format_block(record))
            self._capture.flush()
        if self.on_record is not None:
            self.on_record(record)

    # -- lifecycle

    async def start(self) -> "Tracer":
        """Listen, then write our lock (after the socket listens, PROTOCOL.md §1)."""
        streams = stream_protocols(self._accept, limit=2 ** 20)
        if os.name == "nt":  # Windows: a named pipe, as every server there (PROTOCOL.md §1)
            from ..common import winpipe

            self._server, self.socket_path = await winpipe.start_pipe_server(streams)
        else:
            sock, self._private_dir, self.socket_path = bind_unix(self.socket_dir)
            self._acceptor = Acceptor(sock, streams)
            self._acceptor.start()
        scheme = "pipe" if lockfile._is_pipe_path(self.socket_path) else "unix"
        try:
            if self.capture_path:
                self._capture = open(self.capture_path, "w", encoding="utf-8", newline="\n")
                self._capture.write(CAPTURE_HEADER + "\n")
            info = LockInfo(socket_path=self.socket_path, scheme=scheme, headers=dict(self.target.headers),
                            pid=os.getpid(), ide_name=self.target.ide_name + " (traced)",
                            timestamp=int(time.time() * 1000), workspace_folders=list(self.target.workspace_folders),
                            is_trusted=self.target.is_trusted)
            self.lock_path = lockfile.write_lock(info, self.lock_dir)
        except BaseException:
            await self.stop()
            raise
        self.write("tracing %s (pid %d, %s) through %s" % (one_line(self.target.ide_name), self.target.pid,
                                                          one_line(self.target.socket_path), self.socket_path))
        self.write("tracer lock: %s" % self.lock_path)
        return self

    async def stop(self) -> None:
        """Remove our lock first (the CLI's disconnect signal), then everything else ours."""
        if self.lock_path:
            lockfile.remove_lock(self.lock_path)
            self.lock_path = None
        if self._acceptor is not None:
            await self._acceptor.close()
            self._acceptor = None
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            try:
                writer.close()
            except (OSError, RuntimeError):
                pass
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._server is not None:
            await wait_server_closed(self._server)
            self._server = None
        if self._private_dir:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None
        if self._capture is not None:
            self._capture.close()
            self._capture = None

    async def __aenter__(self) -> "Tracer":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # -- one connection

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            await self._proxy(creader, cwriter)
        except asyncio.CancelledError:
            pass  # the tracer stops; asyncio's stream callback must not see a cancelled task

    async def _proxy(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.append(task)
        number = next(self._numbers)
        view = ConnectionView(self, number)
        self._writers.append(cwriter)
        try:
            try:
                sreader, swriter = await open_socket(self.target.socket_path)
            except ClientError as exc:
                view.line("---", "cannot reach the real server: %s" % exc)
                return
            self._writers.append(swriter)
            view.line("---", "connected")
            up = asyncio.ensure_future(self._pump(number, creader, swriter, "C>S", view.request))
            down = asyncio.ensure_future(self._pump(number, sreader, cwriter, "S>C", view.response))
            reasons: List[str] = []
            try:
                done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
                first = up if up in done else down
                reasons.append(_outcome(first))
                if first is up:
                    # The CLI finished sending (or closed): let the server's answer finish.
                    await asyncio.gather(down, return_exceptions=True)
                    reasons.append(_outcome(down))
                else:
                    up.cancel()
                    await asyncio.gather(up, return_exceptions=True)
            finally:
                for t in (up, down):
                    if not t.done():
                        t.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
                _close(swriter)
            view.line("---", "closed: %s" % "; then ".join(r for r in reasons if r))
        finally:
            _close(cwriter)
            if task is not None and task in self._tasks:
                self._tasks.remove(task)
            for w in list(self._writers):
                if w is cwriter or w.is_closing():
                    self._writers.remove(w)

    async def _pump(self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    direction: str, side: _Side) -> str:
        """Copy bytes one way, unchanged; record and show a copy. Returns why it
        stopped, for the connection's "closed" line."""
        sender, receiver = ("the CLI", "the server") if direction == "C>S" else ("the server", "the CLI")
        while True:
            try:
                data = await reader.read(READ_SIZE)
            except (ConnectionError, OSError) as exc:
                side.feed(b"", eof=True)
                return "reading from %s failed (%s)" % (sender, exc)
            if not data:
                side.feed(b"", eof=True)
                try:
                    if writer.can_write_eof():
                        writer.write_eof()  # half-close: the other side may still answer
                    else:
                        writer.close()  # a named pipe has no half-close: the end is a close
                except (OSError, RuntimeError):
                    pass
                return "%s closed its side" % sender
            self._record(number, direction, data)
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError, RuntimeError) as exc:
                return "%s stopped taking bytes (%s)" % (receiver, exc)
            side.feed(data)


def _outcome(task: "asyncio.Future[str]") -> str:
    """Why a pump ended: its own words, or the error that ended it."""
    if task.cancelled():
        return ""
    exc = task.exception()
    if exc is not None:
        return "the tracer failed: %s: %s" % (type(exc).__name__, exc)
    return task.result()


def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
    except (OSError, RuntimeError):
        pass


def _same_dir(a: str, b: str) -> bool:
    return os.path.realpath(os.path.abspath(a)) == os.path.realpath(os.path.abspath(b))


# ---------------------------------------------------------------------- program


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program_name("trace"),
                                description="Trace the /ide wire between Copilot CLI and a real IDE server.",
                                epilog="Run the CLI with COPILOT_HOME set to the tracer's directory (printed at "
                                       "start) so that it connects through the tracer.")
    add_folder(p, "workspace folder of the IDE to trace (default: the current one)")
    p.add_argument("--lock", metavar="FILE", help="trace the server of this lock file")
    add_lock_dir(p, "where the real IDE's lock is (default: %s)" % LOCK_DIR_DEFAULT)
    p.add_argument("--copilot-home", metavar="DIR", help="COPILOT_HOME for the traced CLI: the tracer's lock goes "
                                                          "into DIR/ide (default: a fresh temporary directory)")
    p.add_argument("--same-dir", action="store_true",
                   help="allow the tracer's lock next to the real one (every CLI run is then traced)")
    p.add_argument("--out", metavar="FILE", help="also write the raw bytes in the capture format")
    p.add_argument("--show", type=int, default=DEFAULT_SHOW, metavar="N",
                   help="characters of each JSON body shown (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no trace on stdout (with --out)")
    return p


async def _run(args: argparse.Namespace) -> int:
    if args.lock:
        from .check import load_lock
        target, _ = load_lock(args.lock)
    else:
        target = discover(args.folder, args.lock_dir)
    created_home = None
    if args.copilot_home:
        home = os.path.abspath(args.copilot_home)
    else:
        home = created_home = tempfile.mkdtemp(prefix="ide-trace-")
    lock_dir = os.path.join(home, "ide")
    tracer = Tracer(target, lock_dir, out=None if args.quiet else sys.stdout, capture_path=args.out,
                    show=args.show, allow_same_dir=args.same_dir)
    loop = asyncio.get_event_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        await tracer.start()
        print("run the CLI as:  cd %s && COPILOT_HOME=%s copilot" % (  # (the folder: the lock's text)
            one_line(target.workspace_folders[0]) if target.workspace_folders else ".", one_line(home)),
            file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await tracer.stop()
        if created_home:
            for d in (lock_dir, created_home):  # only our own, and only when empty
                try:
                    os.rmdir(d)
                except OSError:
                    pass
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    from .client_cli import run_command
    from .terminal.stdio import utf8_output

    utf8_output()
    parser = _parser()
    args = parser.parse_args(argv)
    folder_of(parser, args)
    return run_command(_run(args), program_name("trace"), 2)


if __name__ == "__main__":
    sys.exit(main())
