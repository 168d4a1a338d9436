"""The options every program spells the same way, and the advice they all give.

* The workspace folder: positional (`copilot-ide doctor ~/project`) or `--folder DIR`,
  in every program, so that what works in one works in the others.
* The lock folder: `--lock-dir DIR` (where lock files are written or read).
* With no IDE for a folder: say what to run next (`serve` there, or `doctor`).
* Text from a lock file or a server, printed on one line of a program's output:
  `one_line`.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Optional

from ..common.terminal_text import safe_text
from .progname import program_name

LOCK_DIR_DEFAULT = "$COPILOT_HOME/ide or ~/.copilot/ide"


def add_folder(parser: argparse.ArgumentParser, help_text: str, default: Optional[str] = None) -> None:
    """FOLDER positional and `--folder FOLDER`; read the value with `folder_of`."""
    parser.add_argument("folder", nargs="?", default=None, metavar="FOLDER",
                        help="%s (also --folder FOLDER)" % help_text)
    parser.add_argument("--folder", dest="folder_option", metavar="FOLDER", default=None,
                        help=argparse.SUPPRESS)
    parser.set_defaults(folder_default=default)


def folder_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Optional[str]:
    """The folder given either way (both ways at once must agree), else the default;
    also stored back as `args.folder`."""
    positional, option = args.folder, getattr(args, "folder_option", None)
    if positional is not None and option is not None and positional != option:
        parser.error("the folder is given twice (%s and --folder %s): give it once" % (positional, option))
    args.folder = option if option is not None else positional
    if args.folder is None:
        args.folder = getattr(args, "folder_default", None)
    return args.folder


def add_lock_dir(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--lock-dir DIR`."""
    parser.add_argument("--lock-dir", metavar="DIR", default=None, help=help_text)


def one_line(text: object) -> str:
    """Untrusted text (from a lock file, a server's answer, an error that quotes one)
    for one line of a program's output: `safe_text`'s one-line form, so that it drives
    nothing on the terminal and a newline in it cannot print a line of the peer's own
    making; a tab is shown as an escape too, so that it cannot push columns about."""
    return safe_text(text, multiline=False).replace("\t", "\\t")


def terminal_json(value: Any, indent: Optional[int] = 2) -> str:
    """JSON of untrusted text for a program's output (`--json`, a name quoted), safe on a
    terminal: ASCII only, so that every control character (DEL and the C1 controls
    too) and every invisible or reordering one is escaped."""
    return json.dumps(value, ensure_ascii=True, indent=indent)


def no_ide_advice(folder: Optional[str]) -> str:
    """What to run when no IDE serves `folder`: the last lines of every no-IDE error."""
    where = one_line(os.path.abspath(folder or os.curdir))
    return ("to start one: `%s` in %s (or open the folder in an editor with Copilot CLI's IDE integration);\n"
            "to see why the CLI finds none: `%s %s`"
            % (program_name("serve"), where, program_name("doctor"), where))
