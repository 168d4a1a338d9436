"""The `doctor` command line: arguments, the report as text or JSON, the exit status.

Exit status: 0 when the CLI started in FOLDER would connect to an IDE at start-up, 1
when it would not, 2 on a usage error (as argparse does).

Lock files are untrusted input (any local program can write one), and so are the file
names in the lock directory: every string taken from them goes through
`common.terminal_text.safe_text` before it reaches the terminal, with newline and tab
escaped too, since each finding is one line (`options.one_line`). The JSON output is
pure ASCII (``ensure_ascii``) with DEL escaped as well, so it is safe to print as it is.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, TextIO

from ..options import LOCK_DIR_DEFAULT, add_folder, add_lock_dir, folder_of, one_line, terminal_json
from ..progname import program_name
from ..terminal.stdio import utf8_output
from . import diagnose as dx

PROG = program_name("doctor")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Explain whether Copilot CLI started in FOLDER would connect to an IDE at start-up, and why "
                    "not: every lock file the CLI reads, checked by the CLI's own rules. Only reads files.")
    add_folder(p, "where you are about to start copilot (default: the current folder)", default=os.curdir)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_lock_dir(p, "the lock folder the CLI reads: CONFIG/ide for a CLI started with --config-dir CONFIG or "
                    "COPILOT_HOME=CONFIG (default: %s)" % LOCK_DIR_DEFAULT)
    # The older name: the CLI's own --config-dir CONFIG, whose lock folder is CONFIG/ide.
    p.add_argument("--config-dir", metavar="CONFIG", help=argparse.SUPPRESS)
    p.add_argument("--no-handshake", action="store_true",
                   help="do not connect to the IDEs' servers (no server/discover, initialize)")
    p.add_argument("--timeout", type=float, default=dx.HANDSHAKE_TIMEOUT, metavar="SECONDS",
                   help="how long to wait for each answer of the handshake (default %(default)s)")
    return p


def _lock_label(report: dx.Report, lock: dx.LockReport) -> str:
    if lock is report.picked:
        return "USE " if lock.usable else "FAIL"
    if lock.usable:
        return "list"
    if lock.handshake is not None:
        return "FAIL"
    return "skip"


def _handshake_line(hs: dx.Handshake) -> Optional[str]:
    parts = []
    if hs.discover_seconds is not None:
        parts.append("server/discover %.0f ms%s" % (hs.discover_seconds * 1000, _discover_note(hs)))
    if hs.initialize_seconds is not None:
        parts.append("initialize %.0f ms" % (hs.initialize_seconds * 1000))
    if hs.server_info.get("name"):
        parts.append("server %s" % hs.server_info.get("name"))
    parts.extend(hs.notes)
    return ("handshake: " + ", ".join(parts)) if parts else None


def _discover_note(hs: dx.Handshake) -> str:
    """How the server answered server/discover. Declining it is what the CLI expects
    from an IDE: it then falls back to initialize (PROTOCOL.md §3). A healthy report
    says so in words, without the answer's error code and message, which read like a
    failure (the JSON report keeps no more either: the step's time is what matters)."""
    answer = hs.discover_answer
    if not answer:
        return ""
    if answer.startswith("JSON-RPC error") or answer in ("HTTP 400", "HTTP 404"):
        return " (declined, as the CLI expects: it goes on with initialize)"
    if answer.startswith("HTTP "):
        return " (declined with %s: the CLI goes on with initialize)" % answer
    return " (%s)" % answer


def render_text(report: dx.Report, out: TextIO) -> None:
    """The report for a person at a terminal."""
    w = out.write
    w("Copilot CLI started in %s\n" % one_line(report.folder))
    if os.path.abspath(report.given) != report.folder:
        w("  (you gave %s: the CLI works in its physical path)\n" % one_line(report.given))
    count = len(report.locks)
    w("lock files: %s (%d)\n" % (one_line(report.lock_dir), count))
    if count:
        w("  (USE: connects at start-up; list: in /ide only; skip: ignored by the CLI; FAIL: refuses the CLI)\n")
    for lock in report.locks:
        w("\n  %s %s" % (_lock_label(report, lock), one_line(os.path.basename(lock.path))))
        if lock.ide_name is not None:
            w("  %s" % terminal_json(lock.ide_name, indent=None))
        if lock.pid is not None:
            w("  pid %s" % one_line(lock.pid))
        if lock.folders:
            w("  %s" % one_line(", ".join(lock.folders)))
        w("\n")
        if lock.handshake is not None:
            line = _handshake_line(lock.handshake)
            if line:
                w("       %s\n" % one_line(line))
        for finding in lock.findings:
            w("       %s: %s\n" % (finding.code, one_line(finding.message)))
            w("         fix: %s\n" % one_line(finding.fix))
    if report.findings:
        w("\n")
    for finding in report.findings:
        w("  %s: %s\n" % (finding.code, one_line(finding.message)))
        w("    fix: %s\n" % one_line(finding.fix))
    w("\n")
    if report.would_connect:
        assert report.picked is not None
        w("=> copilot started in %s connects to %s at start-up (%s)%s.\n"
          % (one_line(report.folder), terminal_json(report.ide, indent=None),
             one_line(os.path.basename(report.picked.path)),
             "" if report.handshake_tried else "; handshake not tried"))
    else:
        if report.picked is not None and not report.auto_connect:
            why = "auto-connect is off"
        elif report.picked is not None:
            why = "the IDE listing it refuses the CLI's handshake"
        elif any(lock.usable for lock in report.locks):
            why = "no usable lock lists this folder (use /ide to pick another)"
        else:
            why = "no usable IDE lock"
        w("=> copilot started in %s does NOT connect to an IDE at start-up: %s.\n" % (one_line(report.folder), why))
        if report.picked is None:  # no IDE for this folder: say how to get one
            w("   To start one: `%s %s` (or open the folder in an editor with Copilot CLI's IDE "
              "integration).\n" % (program_name("serve"), one_line(report.given)))


def render_json(report: dx.Report) -> str:
    """The report as ASCII-only JSON (`{"folder", "would_connect", "ide", "locks"}` plus
    the lock dir and the findings that concern no single lock)."""
    return terminal_json(report.to_json())


def main(argv: Optional[List[str]] = None) -> int:
    utf8_output()
    parser = _parser()
    args = parser.parse_args(argv)
    folder_of(parser, args)
    if args.timeout <= 0:
        print("%s: --timeout must be positive" % PROG, file=sys.stderr)
        return 2
    config_dir = args.config_dir
    if args.lock_dir is not None:
        lock_dir = os.path.abspath(args.lock_dir.rstrip("/\\") or args.lock_dir)
        if os.path.basename(lock_dir) != "ide":
            print("%s: --lock-dir %s: the CLI reads lock files only from the folder ide in its config folder "
                  "(CONFIG/ide); give that folder" % (PROG, one_line(args.lock_dir)), file=sys.stderr)
            return 2
        if config_dir is not None and os.path.abspath(config_dir) != os.path.dirname(lock_dir):
            print("%s: --lock-dir and --config-dir name different folders: give one" % PROG, file=sys.stderr)
            return 2
        config_dir = os.path.dirname(lock_dir)
    try:
        report = dx.diagnose(args.folder, cli_config_dir=config_dir, try_handshake=not args.no_handshake,
                             timeout=args.timeout)
    except NotADirectoryError:
        print("%s: not a directory: %s" % (PROG, one_line(args.folder)), file=sys.stderr)
        return 2
    if args.json:
        print(render_json(report))
    else:
        render_text(report, sys.stdout)
    sys.stdout.flush()
    return 0 if report.would_connect else 1
