"""`python3 -m ide_protocol relay cli-side|ide-side ...`: Copilot CLI and the IDE on two
machines (a container, an SSH host, WSL), joined by one byte stream. See
`ide_protocol.relay` and docs/RELAY.md.

    relay cli-side (--via CMD | --stdio) [--map IDE_PATH=CLI_PATH]... [--wsl]
                   [--lock-dir DIR] [--trusted] [--wait] [--request-timeout SECONDS]
                   [--link-timeout SECONDS] [--max-connections N]
    relay ide-side (--via CMD | --stdio) [--folder DIR | --lock FILE] [--lock-dir DIR] [--wait]
                   [--link-timeout SECONDS] [--max-connections N]

Exactly one half gets `--via CMD`, a shell command that starts the other with `--stdio`.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Callable, List, Optional

from ..relay.halves import run_cli_side, run_ide_side
from ..relay.link import LINK_TIMEOUT, MAX_STREAMS
from ..relay.pathmap import PathMap, parse_map, wsl_pairs
from ..server.limits import REQUEST_TIMEOUT
from .options import LOCK_DIR_DEFAULT, add_lock_dir
from .progname import program_name


def _logger(side: str) -> Callable[[str], None]:
    """Messages on stderr, each naming its half (both may write to one terminal)."""
    prefix = "%s %s: " % (program_name("relay"), side)

    def log(text: str) -> None:
        print(prefix + text, file=sys.stderr, flush=True)
    return log


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=program_name("relay"), description=__doc__.split("\n\n")[0])
    sides = parser.add_subparsers(dest="side", metavar="cli-side|ide-side")
    sides.required = True
    for name, text in (("cli-side", "runs where Copilot CLI runs: private socket and lock"),
                       ("ide-side", "runs where the IDE runs: connects to its socket")):
        sub = sides.add_parser(name, help=text)
        how = sub.add_mutually_exclusive_group(required=True)
        how.add_argument("--via", metavar="CMD", help="shell command that starts the other half with --stdio")
        how.add_argument("--stdio", action="store_true", help="the link is this process's stdin and stdout")
        sub.add_argument("--wait", action="store_true", help="when the IDE goes, wait for it to come back")
        sub.add_argument("--link-timeout", type=float, default=LINK_TIMEOUT, metavar="SECONDS",
                         help="the link is declared dead after this long without a word from the other half "
                              "(it is asked every sixth of it; 0: never; default %g)" % LINK_TIMEOUT)
        sub.add_argument("--max-connections", type=int, default=MAX_STREAMS, metavar="N",
                         help="connections relayed at once; one more is refused (0: no limit; default %d)"
                              % MAX_STREAMS)
        if name == "cli-side":
            sub.add_argument("--map", action="append", default=[], metavar="IDE_PATH=CLI_PATH",
                             help="path prefix on the IDE's side and the same on the CLI's (repeatable)")
            sub.add_argument("--wsl", action="store_true", help="add X:\\ = /mnt/x for every drive letter")
            sub.add_argument("--trusted", action="store_true", help="write isTrusted true in the relay's lock")
            sub.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT, metavar="SECONDS",
                             help="a request on the relay's socket must arrive in whole, and an answer be taken, "
                                  "within this time (default %g)" % REQUEST_TIMEOUT)
            add_lock_dir(sub, "where the relay's lock goes (default %s as the CLI resolves it)" % LOCK_DIR_DEFAULT)
        else:
            which = sub.add_mutually_exclusive_group()
            which.add_argument("--folder", metavar="DIR", help="the workspace folder whose IDE to relay (default: cwd)")
            which.add_argument("--lock", metavar="FILE", help="relay the IDE of this lock file")
            add_lock_dir(sub, "where the IDE's lock is (default %s)" % LOCK_DIR_DEFAULT)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.link_timeout >= 0:
        parser.error("--link-timeout must be 0 (never) or a positive number of seconds")
    if args.max_connections < 0:
        parser.error("--max-connections must be 0 (no limit) or more")
    if args.side == "cli-side":
        try:
            pairs = [parse_map(spec) for spec in args.map]
        except ValueError as exc:
            parser.error(str(exc))
        paths = PathMap(pairs + (wsl_pairs() if args.wsl else []))
        if not args.request_timeout > 0:
            parser.error("--request-timeout must be a positive number of seconds")
        coro = run_cli_side(args.via, paths, args.lock_dir, args.trusted, args.wait, _logger(args.side),
                            args.request_timeout, args.link_timeout, args.max_connections)
    else:
        coro = run_ide_side(args.via, args.folder, args.lock, args.lock_dir, args.wait, _logger(args.side),
                            args.link_timeout, args.max_connections)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
