"""`serve`'s options, its run and its ways to stop: the lock file and the socket go on
every way out (`quit`, end of input, Ctrl-C, SIGTERM, SIGHUP), and another live IDE
already serving the folder is warned of, off the loop."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import List, Optional, Sequence

from ...common import lock_rules, lockfile
from ...common.terminal_text import safe_text
from ...server import limits as server_limits
from ..options import LOCK_DIR_DEFAULT, add_folder, add_lock_dir, folder_of
from ..progname import program_name
from ..terminal.output import DEFAULT_OUTPUT_LIMIT, Output
from ..terminal.signals import install_signals, remove_signals
from ..terminal.stdin import StdinReader
from .commands import CommandError
from .diffs import DEFAULT_SHOWN_LINES
from .ide import TerminalIde

__all__ = ["main", "run", "build_parser", "warn_if_folder_served"]

PROG = program_name("serve")
DEFAULT_NAME = "Terminal IDE"


# ---------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="A terminal IDE for Copilot CLI's /ide: serves FOLDER, shows diffs, reads "
                               "commands on standard input (type `help` once it runs).")
    add_folder(parser, "the workspace folder (default: the current one)", default=os.curdir)
    parser.add_argument("--name", default=DEFAULT_NAME, help="the IDE name in the lock file (default: %(default)s)")
    parser.add_argument("--trusted", action="store_true",
                        help="mark the folder trusted in the lock file (the CLI then skips its trust prompt)")
    auto = parser.add_mutually_exclusive_group()
    auto.add_argument("--auto-accept", action="store_true", help="accept every proposed diff at once")
    auto.add_argument("--auto-reject", action="store_true", help="reject every proposed diff at once")
    parser.add_argument("--debounce", type=float, default=0.2, metavar="SECONDS",
                        help="debounce of selection/diagnostics pushes (default: %(default)s)")
    add_lock_dir(parser, "where to write the lock file (default: %s)" % LOCK_DIR_DEFAULT)
    parser.add_argument("--trace", action="store_true", help="print every HTTP exchange and JSON-RPC message")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the diffs: auto = on a terminal unless NO_COLOR is set")
    parser.add_argument("--ignore-eof", action="store_true",
                        help="keep serving at the end of standard input (stop with quit, Ctrl-C or SIGTERM)")
    limits = parser.add_argument_group("limits (docs/LIMITS.md)")
    limits.add_argument("--diff-lines", type=int, default=DEFAULT_SHOWN_LINES, metavar="N",
                        help="diff lines printed at most per diff (default: %(default)s)")
    limits.add_argument("--output-buffer", type=int, default=DEFAULT_OUTPUT_LIMIT, metavar="BYTES",
                        help="output kept while nobody reads stdout; beyond it lines are dropped and "
                             "counted (default: %(default)s)")
    limits.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                        help="largest request body, and largest original file open_diff reads "
                             "(default: %d)" % server_limits.DEFAULT_MAX_BODY)
    limits.add_argument("--max-connections", type=int, default=None, metavar="N",
                        help="open connections at most; the one idle longest makes room, else 503; 0: no limit "
                             "(default: %d)" % server_limits.DEFAULT_MAX_CONNECTIONS)
    limits.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help="MCP sessions at most; the one idle longest makes room, else 503; 0: no limit "
                             "(default: %d)" % server_limits.DEFAULT_MAX_SESSIONS)
    limits.add_argument("--connection-idle-timeout", type=float, default=None, metavar="SECONDS",
                        help="close a connection idle between requests this long "
                             "(default: %s)" % server_limits.DEFAULT_CONNECTION_IDLE_TIMEOUT)
    limits.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS",
                        help="end a session with no stream and no request this long "
                             "(default: %s)" % server_limits.DEFAULT_IDLE_TIMEOUT)
    return parser


#: The longest the "already served" scan probes other IDEs' sockets, whatever the lock
#: folder holds (the reads themselves are bounded by `lock_rules.read_locks`).
FOLDER_SCAN_SECONDS = 5.0


def warn_if_folder_served(folder: str, own_lock: Optional[str]) -> None:
    """Warn on stderr when another live IDE (pid alive, socket accepting) already has a
    lock listing this folder: the CLI auto-connects to only one of them, the first lock
    that lists its folder (PROTOCOL.md §1), so a second server for a folder is easily
    not the one the user talks to.

    Blocking (file reads, socket probes): `run` calls it in a worker thread, never on
    the loop that answers the CLI; bounded as a whole by `FOLDER_SCAN_SECONDS`."""
    if not own_lock:
        return
    deadline = time.monotonic() + FOLDER_SCAN_SECONDS
    cwd = os.path.realpath(folder)  # the CLI's physical working folder
    for path, info in lockfile.read_locks(os.path.dirname(own_lock)):
        if time.monotonic() > deadline:
            return
        if path == own_lock or not isinstance(info, lockfile.LockInfo):
            continue
        # The CLI's own rules (common.lock_rules), cheapest first: folder, pid, probe.
        if not lock_rules.lists_folder(info.workspace_folders, cwd) or not lock_rules.pid_running(info.pid)[0]:
            continue
        if lock_rules.probe_lock_socket(info.socket_path, info.timestamp, cwd) is not None:
            continue
        print(safe_text("%s: warning: %s (pid %d, lock %s) already serves %s; Copilot CLI started there "
                        "connects to one of the two (the first lock listing the folder), pick the other "
                        "with /ide" % (PROG, json.dumps(info.ide_name, ensure_ascii=False), info.pid, path,
                                       folder)),  # another IDE's name: escaped for the terminal
              file=sys.stderr, flush=True)


async def run(args: argparse.Namespace, out: Output) -> int:
    loop = asyncio.get_event_loop()
    ide = TerminalIde(args, out)
    stop = asyncio.Event()
    ide.stop_event = stop
    installed = install_signals(loop, stop)
    stdin = StdinReader(loop)
    reader_task: Optional["asyncio.Future[None]"] = None
    scan: Optional["asyncio.Future[None]"] = None
    try:
        try:
            await ide.server.start()
        except (OSError, ValueError) as exc:
            print("%s: cannot start: %s" % (PROG, exc), file=sys.stderr, flush=True)
            return 1
        out.line("serving %s on %s, lock %s" % (ide.folder, ide.server.socket_path, ide.server.lock_path))
        # Off the loop: a lock folder full of junk must not delay the CLI's first call.
        scan = loop.run_in_executor(None, warn_if_folder_served, ide.folder, ide.server.lock_path)
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
        if scan is not None:  # bounded (FOLDER_SCAN_SECONDS): its warning is not lost
            await asyncio.gather(scan, return_exceptions=True)
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


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    folder_of(parser, args)
    if not os.path.isdir(args.folder):
        print("%s: %s is not a folder" % (PROG, args.folder), file=sys.stderr)
        return 2
    if args.debounce < 0:
        print("%s: --debounce must be >= 0" % PROG, file=sys.stderr)
        return 2
    for name in ("max_connections", "max_sessions"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            print("%s: --%s must be >= 0" % (PROG, name.replace("_", "-")), file=sys.stderr)
            return 2
    for name in ("diff_lines", "output_buffer", "max_body", "connection_idle_timeout", "idle_timeout"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            print("%s: --%s must be more than 0" % (PROG, name.replace("_", "-")), file=sys.stderr)
            return 2
    out = Output(color=args.color, limit=args.output_buffer)
    try:
        return asyncio.run(run(args, out))
    except KeyboardInterrupt:  # Ctrl-C where the loop could not take the signal
        return 0
    finally:
        out.close()  # what is queued, while someone reads it


if __name__ == "__main__":
    sys.exit(main())
