"""Find the IDE the CLI would connect to, from the lock files (PROTOCOL.md §1).

The CLI's rules (its parse and schema, a running pid, a socket that accepts its probe,
the lexical match of its physical folder, the first lock by file name) live in
`common.lock_rules`, the same ones `doctor` predicts with; this module applies them as
the CLI does at start-up (`lockfile.scan_locks`) and, when nothing matches, says why
each lock was passed over.
"""
from __future__ import annotations

import os
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..common import lock_rules, lockfile
from ..common.lockfile import LockInfo
from .errors import NoIdeFound

__all__ = ["Choice", "choose", "describe_choice", "discover"]


class Choice(NamedTuple):
    """The lock the CLI would connect to, and the other live locks listing the same
    folder that it would pass over."""

    chosen: LockInfo
    passed_over: List[LockInfo]


def discover(folder: Optional[str] = None, lock_dir: Optional[str] = None) -> LockInfo:
    """The lock the CLI would auto-connect to from `folder` (default: the cwd).

    PROTOCOL.md §1, by the CLI's rules (`common.lock_rules`): its parse and schema, a
    running pid, a socket that accepts the probe, the folder's physical path equal to a
    listed folder after lexical normalisation. Raises `NoIdeFound` listing the other
    usable locks and the skipped ones with their reasons.
    """
    return choose(folder, lock_dir).chosen


def choose(folder: Optional[str] = None, lock_dir: Optional[str] = None) -> Choice:
    """`discover`, plus the other live locks that list the same folder and were passed
    over, so a program can say which IDE it picked when several serve one folder
    (`describe_choice`). Raises `NoIdeFound` as `discover` does."""
    folder = os.getcwd() if folder is None else folder
    directory = lock_dir if lock_dir is not None else lockfile.lock_dir()
    cwd = os.path.realpath(folder)  # the CLI compares its physical working folder
    scanned = lockfile.scan_locks(directory, cwd)
    usable = [info for _path, info in scanned if isinstance(info, LockInfo)]
    chosen, passed_over = lock_rules.auto_connect_choice(usable, cwd)
    if chosen is not None:
        return Choice(chosen, passed_over)
    rejected: List[Tuple[str, str]] = [(path, info.reason) for path, info in scanned
                                       if isinstance(info, lockfile.LockFileError)]
    raise NoIdeFound(cwd, directory, usable, rejected)


def describe_choice(chosen: LockInfo, passed_over: List[LockInfo], show: Callable[[str], str] = str) -> str:
    """One line per lock: which of several IDEs serving one folder was chosen, and why
    (PROTOCOL.md §1: the first lock, in lock file name order, that lists the folder).
    Each lock's name and path pass through `show` (a program's terminal escaper, as
    for `NoIdeFound.describe`)."""
    def name(info: LockInfo) -> str:
        return "%s (pid %d, %s)" % (show(info.ide_name), info.pid, show(info.path or "?"))

    lines = ["%d live IDE locks list this folder; chose %s: the first by lock file name, "
             "as the CLI takes the first lock that lists its folder (PROTOCOL.md §1)"
             % (len(passed_over) + 1, name(chosen))]
    lines += ["  passed over: %s" % name(info) for info in passed_over]
    lines.append("  (--lock FILE picks one)")
    return "\n".join(lines)
