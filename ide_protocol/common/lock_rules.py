"""Copilot CLI 1.0.102's own rules for IDE lock files, written once.

PROTOCOL.md §1 ("How CLI 1.0.102 reads the lock directory, step by step") lists what the
CLI does before it lists an IDE in ``/ide`` or auto-connects to it: which names it
reads, how it decodes and parses them, the schema, the pid test, the socket probe and
the folder comparison. Every reader of lock files in this project judges locks with the
functions here, so that the client (`client.discovery`), the checker, `serve`'s warning
and `doctor` all pick exactly the lock the CLI would pick, and skip the ones it skips.

The rules are the CLI's, not a friendlier variant: a byte-order mark is a parse error,
a pid of another user is "not running", a socket gets one 250 ms try unless its lock is
fresh, folders are compared lexically. Where our own code wants a different policy
(stale-lock cleanup deciding what to *delete*) it builds on these functions and says so.

Plain JSON values in, verdicts out: the `LockInfo` record built on top lives in
`lockfile`. Nothing here writes, renames or deletes a file.
"""
from __future__ import annotations

import errno
import math
import ntpath
import os
import posixpath
import socket
import stat
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..wire import json_text
from ..wire.json_text import json_type

__all__ = [
    "LockFileError", "LOCK_SUFFIX", "lock_names", "parse_lock_bytes", "schema_problems", "read_regular_file", "read_lock", "read_locks",
    "pid_running", "is_pipe_path", "ACCEPTS", "REFUSED", "UNKNOWN", "connect_once", "probe_socket",
    "probe_lock_socket", "lexical", "folder_key", "same_folder", "lists_folder", "auto_connect_choice",
]

LOCK_SUFFIX = ".lock"
#: A lock that fails to read, parse or validate is read this many times in all, this
#: far apart: it may have been caught half written (PROTOCOL.md §1).
READ_ATTEMPTS = 3
READ_RETRY_SECONDS = 0.1
#: The socket probe (PROTOCOL.md §1): one try this long for a lock older than
#: FRESH_LOCK_MS, or tries for FRESH_PROBE_SECONDS, FRESH_PROBE_INTERVAL_SECONDS apart.
PROBE_TIMEOUT_SECONDS = 0.25
FRESH_PROBE_SECONDS = 1.0
FRESH_PROBE_INTERVAL_SECONDS = 0.1
FRESH_LOCK_MS = 2000
#: A lock is a few hundred bytes. The CLI has no limit; we read at most this much of a
#: file in a shared directory and report a larger one instead of judging it.
MAX_LOCK_BYTES = 1024 * 1024

#: Why the CLI skips a lock: the ``code`` of a `LockFileError`.
INVALID_JSON, SCHEMA, PID_NOT_RUNNING, SOCKET_UNREACHABLE = (
    "invalid-json", "schema", "pid-not-running", "socket-unreachable")


class LockFileError(ValueError):
    """A lock file the CLI would skip, and why.

    ``code`` says at which step (``invalid-json``, ``schema``, ``pid-not-running``,
    ``socket-unreachable``), ``reason`` what went wrong, ``field`` the wire key at fault
    when there is one, ``path`` the file (``None`` when a dict from elsewhere was
    validated), so that a tool can tell exactly what a third-party IDE got wrong.
    """

    def __init__(self, message: str, path: Optional[str] = None, field: Optional[str] = None,
                 code: str = SCHEMA) -> None:
        self.path = path
        self.field = field
        self.reason = message
        self.code = code
        super().__init__("%s: %s" % (path, message) if path else message)


# ------------------------------------------------------------------------- names


def lock_names(directory: str) -> Optional[List[str]]:
    """Every name in ``directory`` ending in ``.lock``, in the CLI's order, or ``None``
    when the directory cannot be listed.

    PROTOCOL.md §1: the CLI reads every name ending in ``.lock`` in byte order of the
    names (not code-point order, which differs for undecodable names). Directories and
    broken links named ``*.lock`` are kept: the CLI tries them too (and skips them)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    return sorted((n for n in names if n.endswith(LOCK_SUFFIX)), key=os.fsencode)


# ---------------------------------------------------------------- decode and parse


def _reject_constant(name: str) -> Any:
    # JSON.parse has no NaN, Infinity or -Infinity literals (Python's json does).
    raise ValueError("%s is not JSON" % name)


def parse_lock_bytes(data: bytes, path: Optional[str] = None) -> Any:
    """Decode and parse a lock's bytes as the CLI does: ``readFile`` as UTF-8, then
    ``JSON.parse`` (PROTOCOL.md §1).

    Undecodable bytes become U+FFFD instead of an error; a leading byte-order mark is
    kept, so the parse fails on it; ``NaN``/``Infinity`` are not JSON; JSON of any
    depth is judged, never raised (`json_text.loads`: too deep is not a lock). Raises
    `LockFileError` with code ``invalid-json``."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise LockFileError("the file starts with a UTF-8 byte-order mark, which the CLI's JSON.parse rejects",
                            path, code=INVALID_JSON)
    try:
        return json_text.loads(data, errors="replace")
    except json_text.JsonTextError as exc:
        raise LockFileError("not valid JSON: %s" % exc, path, code=INVALID_JSON) from None


# ------------------------------------------------------------------------ schema


def _is_number(value: Any) -> bool:
    """A JSON number: an int or a finite float, never a boolean. (A dict built in Python
    may hold NaN or infinity; no JSON text does, so no lock file does.)"""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


#: The lock's fields in the order of the CLI's schema, each with what it wants
#: (PROTOCOL.md §1, "Validation"). ``isTrusted`` is optional and checked after these.
SCHEMA_FIELDS: Tuple[Tuple[str, str], ...] = (
    ("socketPath", "a string"),
    ("scheme", "a string"),
    ("headers", "an object whose values are all strings"),
    ("pid", "a number"),
    ("timestamp", "a number (milliseconds since the epoch)"),
    ("workspaceFolders", "an array of strings"),
    ("ideName", "a string"),
)


def schema_problems(raw: Any, path: Optional[str] = None) -> List[LockFileError]:
    """Every field the CLI's schema rejects (it reports them all), in schema order; an
    empty list for a lock it accepts.

    PROTOCOL.md §1: all fields but ``isTrusted`` required; strings, an object of
    strings, numbers (any number, a fraction too: ``1234.0`` is a pid), an array of
    strings; ``isTrusted`` a boolean or absent (``null`` refused). Unknown keys (our
    ``_writer`` marker, other IDEs' extras) are ignored, as the CLI ignores them."""
    if not isinstance(raw, dict):
        return [LockFileError("the lock must be a JSON object, not %s" % json_type(raw), path)]
    problems: List[LockFileError] = []

    def problem(key: str, message: str) -> None:
        problems.append(LockFileError(message, path, key))

    for key, wants in SCHEMA_FIELDS:
        if key not in raw:
            problem(key, 'field "%s" is missing; the CLI wants %s' % (key, wants))
            continue
        value = raw[key]
        if key == "headers":
            ok = isinstance(value, dict)
            for name, item in (value.items() if ok else ()):
                if not isinstance(item, str):
                    problem(key, 'field "headers" has "%s" as %s; the CLI wants %s' % (name, json_type(item), wants))
        elif key == "workspaceFolders":
            ok = isinstance(value, list)
            for index, item in (enumerate(value) if ok else ()):
                if not isinstance(item, str):
                    problem(key, 'field "workspaceFolders" has item %d as %s; the CLI wants %s'
                            % (index, json_type(item), wants))
        elif key in ("pid", "timestamp"):
            ok = _is_number(value)
        else:
            ok = isinstance(value, str)
        if not ok:
            problem(key, 'field "%s" is %s; the CLI wants %s' % (key, json_type(value), wants))
    if "isTrusted" in raw and not isinstance(raw["isTrusted"], bool):
        problem("isTrusted", 'field "isTrusted" is %s; the CLI wants true, false or no field at all'
                % json_type(raw["isTrusted"]))
    return problems


# ----------------------------------------------------------------------- reading


def read_regular_file(path: str) -> bytes:
    """At most ``MAX_LOCK_BYTES + 1`` bytes of a regular file. Opened without blocking
    and checked before reading, so that a FIFO or a device named ``*.lock`` (which
    would hang a plain read, the CLI's included) is reported instead of waited for."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "it is a directory")
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device; reading it may hang "
                                        "the CLI's scan)")
        chunks = []
        left = MAX_LOCK_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_once(path: str) -> Tuple[Any, List[LockFileError], bool]:
    """One read of a lock: ``(decoded value or None, problems, worth another try)``."""
    try:
        data = read_regular_file(path)
    except OSError as exc:
        return None, [LockFileError("cannot be read: %s" % (exc.strerror or exc), path, code=INVALID_JSON)], True
    if len(data) > MAX_LOCK_BYTES:
        return None, [LockFileError("larger than %d bytes: not a lock file" % MAX_LOCK_BYTES, path,
                                    code=INVALID_JSON)], False
    try:
        raw = parse_lock_bytes(data, path)
    except LockFileError as exc:
        return None, [exc], True
    problems = schema_problems(raw, path)
    return raw, problems, bool(problems)


def read_locks(paths: Sequence[str], attempts: int = READ_ATTEMPTS, sleep: Callable[[float], Any] = time.sleep
               ) -> List[Tuple[Optional[Dict[str, Any]], List[LockFileError]]]:
    """`read_lock` for many files, the retries shared: every file is read once, then
    the ones that failed are read again together after 100 ms, and so on. A folder
    holding any number of junk files costs two pauses in all, not two per file, so a
    scan is bounded as a whole (each read is bounded by `MAX_LOCK_BYTES` and never
    blocks)."""
    results: List[Tuple[Any, List[LockFileError]]] = [(None, []) for _ in paths]
    pending = list(range(len(paths)))
    for attempt in range(max(1, attempts)):
        if not pending:
            break
        if attempt:
            sleep(READ_RETRY_SECONDS)
        again = []
        for index in pending:
            raw, problems, retry = _read_once(paths[index])
            results[index] = (raw, problems)
            if problems and retry:
                again.append(index)
        pending = again
    return [(raw if isinstance(raw, dict) else None, problems) for raw, problems in results]


def read_lock(path: str, attempts: int = READ_ATTEMPTS,
              sleep: Callable[[float], Any] = time.sleep) -> Tuple[Optional[Dict[str, Any]], List[LockFileError]]:
    """Read, parse and validate one lock as the CLI does: ``(content, [])`` when it
    passes, else ``(the decoded object or None, problems)``.

    PROTOCOL.md §1: a file that cannot be read, parsed or validated is tried again,
    three times in all, 100 ms apart, so a lock caught half written is not skipped.
    ``attempts=1`` reads once (for a writer's own locks, which are never half written)."""
    return read_locks([path], attempts, sleep)[0]


# ---------------------------------------------------------------------- liveness


NO_SUCH_PROCESS = "no such process"  # `pid_running`'s reason when the pid names no process here


def pid_running(pid: Any) -> Tuple[bool, str]:
    """The CLI's ``process.kill(pid, 0)`` test: ``(running, why not)``.

    PROTOCOL.md §1: Node refuses a pid that is not a 32-bit integer (``1234.0`` is one,
    ``1234.5`` is not), and any error counts as "not running" for the CLI, ``EPERM``
    (a process of another user) included. A pid from another PID namespace (an IDE in
    a container, Flatpak or Snap) names no process here, or an unrelated one. ``0`` and
    negative pids address process groups: Node lets them through, and so does this.
    Windows has no ``kill``: `winpipe.pid_alive` follows libuv's ``uv_kill`` there (0
    is the calling process, a negative pid names no process).
    """
    if not _is_number(pid) or not (-2 ** 31 <= pid < 2 ** 31) or pid != int(pid):
        return False, "%r is not a 32-bit integer, which the CLI cannot signal" % (pid,)
    if os.name == "nt":
        from . import winpipe  # Windows-only code lives there

        alive = winpipe.pid_alive(int(pid))
        return alive, "" if alive else NO_SUCH_PROCESS
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False, NO_SUCH_PROCESS
    except PermissionError:
        return False, "it belongs to another user (the CLI's kill(pid, 0) fails with EPERM)"
    except OSError as exc:
        return False, exc.strerror or str(exc)
    return True, ""


def is_pipe_path(path: str) -> bool:
    """Whether ``path`` names a Windows named pipe (``\\\\.\\pipe\\...``, PROTOCOL.md §1)."""
    return path.replace("/", "\\").lower().startswith("\\\\.\\pipe\\")


#: What one connection attempt tells: a server accepts, provably nobody is there
#: (refused, no such file, not a socket), or it cannot tell (a timeout, a full
#: backlog, no permission).
ACCEPTS, REFUSED, UNKNOWN = "accepts", "refused", "unknown"
_REFUSED_ERRNOS = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK, errno.ENOTDIR)


def connect_once(path: str, timeout: float) -> Tuple[str, str]:
    """One probe connection, as the CLI makes it: ``(ACCEPTS/REFUSED/UNKNOWN, why)``.

    PROTOCOL.md §1: connect and close at once without sending a byte (servers must
    tolerate exactly this). A Windows pipe is probed by `winpipe.probe_pipe`. A path the OS
    cannot take (a NUL byte) has nobody listening: ``REFUSED``."""
    if is_pipe_path(path):
        from . import winpipe  # a pipe is probed by opening it, without a socket

        held, why = winpipe.probe_pipe(path)
        return (ACCEPTS if held else REFUSED if held is False else UNKNOWN), why
    family = getattr(socket, "AF_UNIX", None)
    if family is None:
        return UNKNOWN, "Unix sockets are not available here"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return UNKNOWN, exc.strerror or str(exc)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        return ACCEPTS, ""
    except socket.timeout:
        return UNKNOWN, "no connection within %d ms" % round(timeout * 1000)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return REFUSED, "no such file"
        if exc.errno == errno.ECONNREFUSED:
            return REFUSED, "connection refused (nothing listens on it)"
        return (REFUSED if exc.errno in _REFUSED_ERRNOS else UNKNOWN), exc.strerror or str(exc)
    except ValueError as exc:  # NUL byte in the path
        return REFUSED, str(exc)
    finally:
        sock.close()


def probe_socket(path: str, timeout: float = PROBE_TIMEOUT_SECONDS) -> str:
    """`connect_once`'s verdict alone (``ACCEPTS``, ``REFUSED`` or ``UNKNOWN``)."""
    return connect_once(path, timeout)[0]


def probe_lock_socket(socket_path: str, timestamp: Any, cwd: str, now_ms: Optional[float] = None,
                      sleep: Callable[[float], Any] = time.sleep) -> Optional[str]:
    """The CLI's socket probe of a lock: ``None`` when it connects, else why not.

    PROTOCOL.md §1: for a lock whose ``timestamp`` is at most 2 s old (its server may
    still be starting) connecting is retried for up to 1 s, every 100 ms; an older lock
    gets one attempt with a 250 ms timeout. A relative path is relative to the CLI's
    working folder ``cwd``. A Windows named pipe follows the same rule: its server may
    still be starting too."""
    if not socket_path:
        return "the path is empty"
    if is_pipe_path(socket_path) or os.path.isabs(socket_path):
        path = socket_path
    else:
        path = os.path.join(cwd, socket_path)
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    fresh = _is_number(timestamp) and now_ms - timestamp <= FRESH_LOCK_MS
    if not fresh:
        verdict, reason = connect_once(path, PROBE_TIMEOUT_SECONDS)
        return None if verdict == ACCEPTS else reason
    start = time.monotonic()
    reason = "no connection within %d ms" % round(FRESH_PROBE_SECONDS * 1000)
    while True:
        left = FRESH_PROBE_SECONDS - (time.monotonic() - start)
        if left <= 0:
            return reason
        verdict, reason = connect_once(path, left)
        if verdict == ACCEPTS:
            return None
        spent = time.monotonic() - start
        if spent >= FRESH_PROBE_SECONDS:
            return reason
        sleep(min(FRESH_PROBE_INTERVAL_SECONDS, FRESH_PROBE_SECONDS - spent))


# ------------------------------------------------------------------------ folders


def _windows(windows: Optional[bool]) -> bool:
    return os.name == "nt" if windows is None else windows


#: Paths the Windows CLI does not fold: the ``\\?\`` and ``\\.\`` device namespaces.
_WINDOWS_VERBATIM = ("\\\\?\\", "\\\\.\\")


def lexical(path: str, windows: Optional[bool] = None) -> str:
    """A path normalised as the CLI's ``repoPathsEqual`` does before comparing
    (PROTOCOL.md §1): ``.``, ``..``, repeated and trailing separators folded, nothing
    resolved on disk, case and Unicode form kept. (``posixpath.normpath`` keeps a
    leading ``//``; the CLI folds it to ``/``.)

    ``windows`` (default: this system's) picks the Windows CLI's rules, measured with
    copilot.exe: ``/`` is ``\\`` too and the result uses ``\\``; a drive's root keeps its
    separator (``C:\\``); a ``\\\\?\\`` or ``\\\\.\\`` path is kept as it is (the CLI does
    not take ``\\\\?\\C:\\ws`` for ``C:\\ws``); another drive naming the same folder stays
    another path."""
    if not path:
        return path
    if _windows(windows):
        backslashed = path.replace("/", "\\")
        if backslashed.startswith(_WINDOWS_VERBATIM):
            return backslashed
        return ntpath.normpath(backslashed)
    folded = posixpath.normpath(path)
    if folded.startswith("//"):
        folded = "/" + folded.lstrip("/")
    return folded


def folder_key(path: str, windows: Optional[bool] = None) -> str:
    """What the CLI compares of a folder (PROTOCOL.md §1): `lexical`, and on Windows in
    lower case too (``C:\\WS``, ``c:\\ws`` and ``C:/ws/`` are one folder there; on
    POSIX the case is kept)."""
    folded = lexical(path, windows)
    return folded.lower() if _windows(windows) else folded


def same_folder(listed: str, cwd: str, windows: Optional[bool] = None) -> bool:
    """The CLI's auto-connect test for one listed folder (PROTOCOL.md §1): equal to its
    physical working folder ``cwd`` after `folder_key`; no prefix match, no symlink
    resolution of the lock's path; case-sensitive on POSIX, not on Windows."""
    return bool(listed) and folder_key(listed, windows) == folder_key(cwd, windows)


def lists_folder(folders: Sequence[str], cwd: str, windows: Optional[bool] = None) -> bool:
    """Whether a lock's ``workspaceFolders`` hold the CLI's folder ``cwd`` (`same_folder`)."""
    return any(same_folder(folder, cwd, windows) for folder in folders)


T = TypeVar("T")


def _workspace_folders_of(lock: Any) -> Sequence[str]:
    return lock.workspace_folders


def auto_connect_choice(usable: Sequence[T], cwd: str,
                        folders: Callable[[T], Sequence[str]] = _workspace_folders_of) -> Tuple[Optional[T], List[T]]:
    """The lock the CLI connects to at start-up, and the other usable ones listing its
    folder, which it passes over: ``(choice or None, passed over)``.

    PROTOCOL.md §1: among the usable locks (read, valid, pid running, socket accepting),
    in file-name order, the first one with a folder equal to the CLI's physical working
    folder ``cwd``; with several, the first file name wins, not the newest lock.
    ``cwd`` must already be physical (``os.path.realpath``), as ``process.cwd()`` is."""
    matching = [lock for lock in usable if lists_folder(folders(lock), cwd)]
    if not matching:
        return None, []
    return matching[0], matching[1:]
