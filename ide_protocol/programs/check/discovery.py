"""Checks of PROTOCOL.md §1: the lock file and the socket it names, as the CLI
validates them before it connects (the CLI's rules from `common.lock_rules`)."""
from __future__ import annotations

import asyncio
import os
import re
import stat
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ...wire import json_text
from ...common import lock_rules, lockfile
from ...common.lockfile import LockInfo
from ...client import IdeTimeout, ServerGone
from .outcomes import CLI, RECOMMENDED, SECURITY, VSCODE, Advise, Differs, Fail, Skip, Warn
from .registry import check
from .context import CheckContext, shape


_UUID_LOCK = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.lock\Z")


@check("lock.fields", "§1", "lock file fields and types as the CLI validates them", rule=CLI)
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
        raise Advise("; ".join(notes), shape(ctx.raw_lock))
    return None


@check("lock.permissions", "§1", "lock file mode 0600", rule=SECURITY)
async def check_lock_permissions(ctx: CheckContext) -> Optional[str]:
    if os.name == "nt" or not ctx.lock.path:
        raise Skip("POSIX lock files only")
    mode = stat.S_IMODE(os.stat(ctx.lock.path).st_mode)
    if mode & 0o077:
        raise Fail("lock file mode is %o; others can read the nonce (must be 0600)" % mode, ctx.lock.path)
    return None


@check("lock.directory_mode", "§1", "lock directory 0700 when the IDE made it (WARN only: see its message)",
       rule=SECURITY)
async def check_lock_directory_mode(ctx: CheckContext) -> Optional[str]:
    if os.name == "nt" or not ctx.lock.path:
        raise Skip("POSIX lock directories only")
    directory = os.path.dirname(os.path.abspath(ctx.lock.path))
    dmode = stat.S_IMODE(os.stat(directory).st_mode)
    if dmode & 0o077:
        # An IDE that creates the directory makes it 0700; one it finds (the CLI or
        # another IDE made it) is left as its owner set it. A directory's mode does not
        # say who made it, so this cannot be a FAIL.
        raise Warn("lock directory mode is %o: 0700 if the IDE created it; an existing directory is left as "
                   "its owner set it, and this checker cannot tell which happened" % dmode, directory)
    return None


@check("lock.folders", "§1", "workspaceFolders absolute, with the real (symlink-resolved) path listed", rule=CLI)
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


@check("lock.socket", "§1", "socket reachable, tolerates empty probe connections; a private directory (VS Code)",
       rule=CLI)
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
                raise Differs("socket directory %s is not private (0700 expected)" % parent)
        except OSError:
            pass
    return None


#: Why `lock.folder_change` cannot run against an IDE this checker did not start.
NO_FOLDER_CHANGE = ("a client cannot make an IDE change its folders (no message of the protocol does), and this "
                    "checker did not start the IDE; the rule is tested in this project's own suite "
                    "(tests/test_check.py drives it, tests/test_server_lock.py; the real CLI: "
                    "tests/interop/test_interop_folders.py)")


def _locks_in(directory: str) -> Dict[str, bytes]:
    """The lock files of `directory` and their bytes (a lock vanishing meanwhile is left out)."""
    found = {}
    for name in os.listdir(directory):
        if name.endswith(lockfile.LOCK_SUFFIX):
            try:
                found[name] = lock_rules.read_regular_file(os.path.join(directory, name))
            except OSError:
                pass
    return found


@check("lock.folder_change", "§1", "changing folders: the lock rewritten in place, never deleted or renamed over, "
                                   "the same socket and nonce; sessions carry on", rule=CLI,
       situation="when the IDE's folders change while a CLI is connected")
async def check_folder_change(ctx: CheckContext) -> Optional[str]:
    if ctx.change_folders is None or not ctx.lock.path:
        raise Skip(NO_FOLDER_CHANGE)
    path = ctx.lock.path
    directory = os.path.dirname(os.path.abspath(path))
    try:
        before = os.stat(path)
        old = json_text.loads(lock_rules.read_regular_file(path))
    except (OSError, json_text.JsonTextError) as exc:
        raise Fail("the lock file %s cannot be read before the folders change: %s" % (path, exc))
    sid = await ctx.new_session()
    conn, stream = await ctx.open_stream(sid)
    folders = list(ctx.lock.workspace_folders)
    added = os.path.join(folders[0] if folders else os.getcwd(), ".ide-check-folder-%s" % uuid.uuid4().hex[:8])
    wanted = folders + [added]
    await ctx.change_folders(wanted)
    try:
        lock = await _rewritten(ctx, path, directory, before, wanted)
        for key in ("socketPath", "headers"):
            if lock.get(key) != old.get(key):
                raise Fail("the lock lists the new folders with another %s than before: the socket and the nonce "
                           "stay (the CLI connected through the lock keeps the ones it read)" % key, shape(lock), CLI)
        if os.name != "nt" and stat.S_IMODE(os.stat(path).st_mode) & 0o077:
            raise Fail("the rewritten lock is open to others (mode %o; 0600 expected): it holds the nonce"
                       % stat.S_IMODE(os.stat(path).st_mode), None, SECURITY)
        await ctx.call("ping", session=sid)  # the session carries on (Fail when it does not)
        try:
            if await stream.next_data(0.3) is None:
                raise Fail("the session's GET stream ended when the folders changed")
        except IdeTimeout:
            pass  # still open and idle, as it should be
        except ServerGone:
            raise Fail("the server closed the session's GET stream when the folders changed") from None
    finally:
        await ctx.change_folders(folders)  # back as they were
    return None


async def _rewritten(ctx: CheckContext, path: str, directory: str, before: os.stat_result,
                     wanted: List[str]) -> Dict[str, Any]:
    """The lock at `path` once it lists `wanted`: the same file as `before` (Fail when it
    was deleted, or another file put in its place: the CLI connected through it takes
    either for the IDE leaving, tests/interop/test_interop_folders.py). A read that is
    no JSON yet is a rewrite under way: read again, as the CLI does."""
    deadline = asyncio.get_event_loop().time() + ctx.timeout
    while True:  # (an IDE may rewrite it a moment later)
        try:
            now = os.stat(path)
        except FileNotFoundError:
            raise Fail("the lock %s was deleted when the folders changed: the CLI connected through it takes that "
                       "for the IDE leaving and disconnects (rewrite the lock in place)" % path,
                       "\n".join(sorted(_locks_in(directory)))) from None
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise Fail("another file was put in place of the lock %s (a rename over it) when the folders changed: the "
                       "CLI connected through it takes that for a deletion and disconnects (rewrite the same file)"
                       % path)
        try:
            last = lock_rules.read_regular_file(path)
        except OSError:
            last = None
        lock = json_text.loads(last) if last is not None and _folders_of(last) == wanted else None
        if isinstance(lock, dict):
            return lock
        if asyncio.get_event_loop().time() > deadline:
            others = sorted(name for name, data in _locks_in(directory).items()
                            if name != os.path.basename(path) and _folders_of(data) == wanted)
            raise Fail("%s s after the folders changed the lock does not list them%s" % (
                ctx.timeout, "; a new lock does (%s): rewrite the lock itself, in place" % ", ".join(others)
                if others else ""), last.decode("utf-8", "replace") if last is not None else None)
        await asyncio.sleep(0.05)


def _folders_of(data: bytes) -> Any:
    try:
        raw = json_text.loads(data)
    except json_text.JsonTextError:
        return None
    return raw.get("workspaceFolders") if isinstance(raw, dict) else None
