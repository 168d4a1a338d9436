"""Find the IDE the CLI would connect to, from the lock files (PROTOCOL.md §1).

The rules (strict field types, live pid, a socket that accepts, exact match of the
folder's real path) live in `common.lockfile`; this module applies them as the CLI does
at start-up and, when nothing matches, says why each lock was passed over.
"""
from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..common import lockfile
from ..common.lockfile import LockInfo
from .errors import NoIdeFound

__all__ = ["discover"]


def discover(folder: Optional[str] = None, lock_dir: Optional[str] = None) -> LockInfo:
    """The lock the CLI would auto-connect to from `folder` (default: the cwd).

    PROTOCOL.md §1, through `lockfile.find_lock_for_folder`: strict types, live pid,
    reachable socket, exact match of the folder's real path. Raises `NoIdeFound`
    listing the other usable locks and the skipped ones with their reasons.
    """
    folder = os.getcwd() if folder is None else folder
    directory = lock_dir if lock_dir is not None else lockfile.lock_dir()
    match, others = lockfile.find_lock_for_folder(folder, directory)
    if match is not None:
        return match
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
