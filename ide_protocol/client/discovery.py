"""Find the IDE the CLI would connect to, from the lock files (PROTOCOL.md §1).

The rules (strict field types, live pid, a socket that accepts, exact match of the
folder's real path) live in `common.lockfile`; this module applies them as the CLI does
at start-up and, when nothing matches, says why each lock was passed over.
"""
from __future__ import annotations

import os
from typing import List, NamedTuple, Optional, Tuple

from ..common import lockfile
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

    PROTOCOL.md §1, through `lockfile.find_lock_for_folder`: strict types, live pid,
    reachable socket, exact match of the folder's real path. Raises `NoIdeFound`
    listing the other usable locks and the skipped ones with their reasons.
    """
    return choose(folder, lock_dir).chosen


def choose(folder: Optional[str] = None, lock_dir: Optional[str] = None) -> Choice:
    """`discover`, plus the other live locks that list the same folder and were passed
    over, so a program can say which IDE it picked when several serve one folder
    (`describe_choice`). Raises `NoIdeFound` as `discover` does."""
    folder = os.getcwd() if folder is None else folder
    directory = lock_dir if lock_dir is not None else lockfile.lock_dir()
    match, others = lockfile.find_lock_for_folder(folder, directory)
    if match is not None:
        target = os.path.realpath(folder)
        return Choice(match, [o for o in others if target in o.workspace_folders])
    usable = {o.path for o in others}
    rejected: List[Tuple[str, str]] = []
    for path, info in lockfile.read_locks(directory):
        if isinstance(info, lockfile.LockFileError):
            rejected.append((path, info.reason))
        elif path not in usable:
            if not lockfile.pid_alive(info.pid):
                rejected.append((path, "pid %d is not alive" % info.pid))
            else:
                rejected.append((path, "socket %s refuses connections" % info.socket_path))
    raise NoIdeFound(os.path.realpath(folder), directory, others, rejected)


def describe_choice(chosen: LockInfo, passed_over: List[LockInfo]) -> str:
    """One line per lock: which of several IDEs serving one folder was chosen, and why
    (PROTOCOL.md §1: the first lock, in lock file name order, that lists the folder)."""
    def name(info: LockInfo) -> str:
        return "%s (pid %d, %s)" % (info.ide_name, info.pid, info.path or "?")

    lines = ["%d live IDE locks list this folder; chose %s: the first by lock file name, "
             "as the CLI takes the first lock that lists its folder (PROTOCOL.md §1)"
             % (len(passed_over) + 1, name(chosen))]
    lines += ["  passed over: %s" % name(info) for info in passed_over]
    lines.append("  (--lock FILE picks one)")
    return "\n".join(lines)
