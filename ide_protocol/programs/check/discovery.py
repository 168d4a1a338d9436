"""Checks of PROTOCOL.md §1: the lock file and the socket it names, as the CLI
validates them before it connects (the CLI's rules from `common.lock_rules`)."""
from __future__ import annotations

import os
import re
import stat
from typing import Optional

from ...common import lock_rules, lockfile
from ...common.lockfile import LockInfo
from .registry import Fail, Skip, Warn, check
from .context import CheckContext, shape


_UUID_LOCK = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.lock\Z")


@check("lock.fields", "§1", "lock file fields and types as the CLI validates them")
async def check_lock_fields(ctx: CheckContext) -> Optional[str]:
    if ctx.raw_lock is None:
        raise Skip("no lock file given (connected by socket only)")
    if ctx.lock.path:
        # The file as the CLI reads it: our own loading is lenient (a byte-order mark,
        # NaN) so that the other checks can still run; the CLI's parse is not.
        _raw, problems = lock_rules.read_lock(ctx.lock.path, attempts=1)
        if problems and problems[0].code == lock_rules.INVALID_JSON:
            raise Fail("the CLI would skip this lock: %s" % problems[0].reason, ctx.lock.path)
    try:
        info = LockInfo.from_json(ctx.raw_lock, ctx.lock.path)
    except lockfile.LockFileError as exc:
        raise Fail("the CLI would skip this lock: %s" % exc.reason, shape(ctx.raw_lock))
    running, why = lock_rules.pid_running(info.pid)
    if not running:
        raise Fail("pid %s is not running as the CLI sees it (%s): the CLI skips this lock" % (info.pid, why),
                   shape(ctx.raw_lock))
    notes = []
    if ctx.lock.path and not _UUID_LOCK.search(os.path.basename(ctx.lock.path)):
        notes.append("file name %s is not <uuid4>.lock" % os.path.basename(ctx.lock.path))
    if info.timestamp < 10 ** 11:
        notes.append("timestamp %r looks like seconds, not milliseconds" % info.timestamp)
    if info.scheme not in ("unix", "pipe"):
        notes.append("scheme %r is neither \"unix\" nor \"pipe\"" % info.scheme)
    if not any(k.lower() == "authorization" for k in info.headers):
        notes.append("headers carry no Authorization nonce")
    if notes:
        raise Warn("; ".join(notes), shape(ctx.raw_lock))
    return None


@check("lock.permissions", "§1", "lock file mode 0600 (directory 0700)")
async def check_lock_permissions(ctx: CheckContext) -> Optional[str]:
    if os.name == "nt" or not ctx.lock.path:
        raise Skip("POSIX lock files only")
    mode = stat.S_IMODE(os.stat(ctx.lock.path).st_mode)
    if mode & 0o077:
        raise Fail("lock file mode is %o; others can read the nonce (must be 0600)" % mode, ctx.lock.path)
    dmode = stat.S_IMODE(os.stat(os.path.dirname(ctx.lock.path)).st_mode)
    if dmode & 0o077:
        raise Warn("lock directory mode is %o (0700 expected)" % dmode, os.path.dirname(ctx.lock.path))
    return None


@check("lock.folders", "§1", "workspaceFolders absolute, with the real (symlink-resolved) path listed")
async def check_lock_folders(ctx: CheckContext) -> Optional[str]:
    folders = ctx.lock.workspace_folders
    if not folders:
        raise Warn("no workspace folder: the CLI can never auto-connect to this IDE")
    for folder in folders:
        if not os.path.isabs(folder):
            raise Fail("folder %r is not absolute" % folder, shape(folders))
        real = os.path.realpath(folder)
        if os.path.exists(folder) and not lock_rules.lists_folder(folders, real):
            raise Fail("folder %r resolves to %r, which is not listed: the CLI compares its physical cwd"
                       % (folder, real), shape(folders))
    return None


@check("lock.socket", "§1", "socket reachable, tolerates empty probe connections")
async def check_lock_socket(ctx: CheckContext) -> Optional[str]:
    # A relative socket path: relative to our cwd, which is where the checks connect.
    reason = lock_rules.probe_lock_socket(ctx.lock.socket_path, ctx.lock.timestamp, os.getcwd())
    if reason is not None:
        raise Fail("socket %s does not accept the CLI's probe (%s): the CLI skips this lock"
                   % (ctx.lock.socket_path, reason))
    for _ in range(2):  # the CLI's probes: connect and close without a byte
        conn = await ctx.connect()
        conn.close()
    reply, rid = await ctx.rpc("ping", {})
    if reply.status == 401 or reply.status >= 500:
        raise Fail("after two empty probe connections the server answers %d" % reply.status, reply.evidence())
    if not os.name == "nt" and not lock_rules.is_pipe_path(ctx.lock.socket_path):
        parent = os.path.dirname(ctx.lock.socket_path)
        try:
            if stat.S_IMODE(os.stat(parent).st_mode) & 0o077:
                raise Warn("socket directory %s is not private (0700 expected)" % parent)
        except OSError:
            pass
    return None
