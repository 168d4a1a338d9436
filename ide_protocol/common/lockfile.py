"""The discovery lock file: the record, atomic write and removal, and discovery.

PROTOCOL.md §1: an IDE-side server announces itself with a JSON file
``<lock dir>/<uuid4>.lock``; the CLI reads every ``*.lock`` file there, validates each
strictly, skips the ones whose pid is not running or whose socket refuses a connection,
and auto-connects to the first whose ``workspaceFolders`` holds its physical cwd.

This module is used from both sides: the server writes and removes its lock
(:func:`write_lock`, :func:`remove_lock`, :func:`remove_stale_locks`), the client and
the checker discover servers the way the CLI does (:func:`read_locks`,
:func:`scan_locks`, :func:`find_lock_for_folder`). The CLI's rules themselves (parse,
schema, pid, socket probe, folder equality, the choice) live in :mod:`.lock_rules`,
once, so that a lock this library writes is one the CLI accepts and a lock the client
picks is the one the CLI picks.

Ownership marker: locks written here carry one extra top-level key,
``"_writer": "python-ide-protocol"`` (:data:`WRITER_KEY`/:data:`WRITER_VALUE`). The CLI
checks the types of the fields it knows and ignores others, and this key lets
:func:`remove_stale_locks` delete only our own leftovers, never another IDE's lock
(PROTOCOL.md §1, last paragraphs). :meth:`LockInfo.to_json` does not include it: it is
the wire format only; :func:`write_lock` adds the marker.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import lock_cleanup, lock_rules
from .lock_rules import LOCK_SUFFIX, LockFileError


__all__ = [
    "LockFileError",
    "LockInfo",
    "WRITER_KEY",
    "WRITER_VALUE",
    "lock_dir",
    "workspace_folders",
    "write_lock",
    "rewrite_lock",
    "remove_lock",
    "pid_alive",
    "socket_reachable",
    "remove_stale_locks",
    "read_locks",
    "scan_locks",
    "probe_lock_sockets",
    "find_lock_for_folder",
]

#: Extra key marking locks written by this library (see the module docstring).
WRITER_KEY = "_writer"
WRITER_VALUE = "python-ide-protocol"

#: The locks this process wrote and has not removed (`write_lock`, `remove_lock`), each
#: with the identity of the file written, ``(st_dev, st_ino)``: stale cleanup never judges
#: these, whatever their pid or socket says, and `rewrite_lock` writes only into the very
#: file it made.
_written_here: Dict[str, Tuple[int, int]] = {}


def _path_key(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def written_here(path: str) -> bool:
    """Whether this process wrote the lock at ``path`` (and has not removed it)."""
    return _path_key(path) in _written_here

def lock_dir(env: Optional[Mapping[str, str]] = None, home: Optional[str] = None) -> str:
    """Directory of lock files: ``$COPILOT_HOME/ide``, else ``~/.copilot/ide``.

    PROTOCOL.md §1: follow the CLI 1.0.102, which reads only these two (not VS Code's
    ``$XDG_STATE_HOME`` variant). ``env``/``home`` are injectable for tests and for
    callers that want an override; an empty ``COPILOT_HOME`` counts as unset.
    """
    if env is None:
        env = os.environ
    copilot_home = env.get("COPILOT_HOME")
    if copilot_home:
        return os.path.join(copilot_home, "ide")
    if home is None:
        home = os.path.expanduser("~")
    return os.path.join(home, ".copilot", "ide")


class LockInfo:
    """One lock file's content (PROTOCOL.md §1), with Python names.

    ``timestamp`` is milliseconds since the epoch (an ``int`` when written here; a
    float read from another writer is kept as is so it round-trips). ``path`` is where
    the lock lives on disk, ``None`` for one not written or read yet. Two locks are
    equal when their content is, wherever they live (``path`` is not compared).
    """

    def __init__(self, socket_path: str, scheme: str, headers: Dict[str, str], pid: int, ide_name: str,
                 timestamp: Union[int, float], workspace_folders: List[str], is_trusted: bool = False,
                 path: Optional[str] = None) -> None:
        self.socket_path = socket_path
        self.scheme = scheme
        self.headers = headers
        self.pid = pid
        self.ide_name = ide_name
        self.timestamp = timestamp
        self.workspace_folders = workspace_folders
        self.is_trusted = is_trusted
        self.path = path

    def _content(self) -> Tuple[Any, ...]:
        return (self.socket_path, self.scheme, self.headers, self.pid, self.ide_name, self.timestamp,
                self.workspace_folders, self.is_trusted)

    def __eq__(self, other: object) -> bool:
        # (Compared by content; mutable, so unhashable: a class that defines `__eq__`
        # alone gets `__hash__ = None`.)
        if isinstance(other, LockInfo) and other.__class__ is self.__class__:
            return self._content() == other._content()
        return NotImplemented

    def __repr__(self) -> str:
        return ("%s(socket_path=%r, scheme=%r, headers=%r, pid=%r, ide_name=%r, timestamp=%r, workspace_folders=%r, "
                "is_trusted=%r, path=%r)" % ((type(self).__qualname__,) + self._content() + (self.path,)))

    @classmethod
    def new(
        cls,
        socket_path: str,
        headers: Mapping[str, str],
        folders: Iterable[str],
        ide_name: str,
        is_trusted: bool = False,
        pid: Optional[int] = None,
        timestamp: Optional[int] = None,
        scheme: Optional[str] = None,
    ) -> "LockInfo":
        """Build the lock of a server in this process, with the protocol's defaults.

        ``pid`` is ours, ``timestamp`` now in ms, ``scheme`` ``"pipe"`` on Windows and
        ``"unix"`` elsewhere, and the folders go through :func:`workspace_folders` so
        the CLI's exact, symlink-resolved cwd comparison matches (PROTOCOL.md §1).
        ``is_trusted`` stays ``False`` unless the caller really knows the folder is
        trusted, because ``true`` makes the CLI skip its own trust prompt.
        """
        return cls(
            socket_path=socket_path,
            scheme=scheme if scheme is not None else ("pipe" if os.name == "nt" else "unix"),
            headers=dict(headers),
            pid=os.getpid() if pid is None else pid,
            ide_name=ide_name,
            timestamp=int(time.time() * 1000) if timestamp is None else timestamp,
            workspace_folders=workspace_folders(folders),
            is_trusted=is_trusted,
        )

    def to_json(self) -> Dict[str, Any]:
        """The wire form: exactly the keys of PROTOCOL.md §1, in its order."""
        return {
            "socketPath": self.socket_path,
            "scheme": self.scheme,
            "headers": dict(self.headers),
            "pid": self.pid,
            "ideName": self.ide_name,
            "timestamp": self.timestamp,
            "workspaceFolders": list(self.workspace_folders),
            "isTrusted": self.is_trusted,
        }

    @classmethod
    def from_json(cls, d: Any, path: Optional[str] = None) -> "LockInfo":
        """Validate a decoded lock like the CLI does and build a :class:`LockInfo`.

        The schema is the CLI's (PROTOCOL.md §1), from :func:`.lock_rules.schema_problems`:
        every field but ``isTrusted`` required, with exact types, unknown keys ignored.
        Raises :class:`LockFileError` naming the first bad field. JSON has one number
        type, so a ``pid`` such as ``1234.0`` is the integer 1234 here; a fractional
        one is kept as it is (the CLI never finds it running).
        """
        problems = lock_rules.schema_problems(d, path)
        if problems:
            raise problems[0]
        pid = d["pid"]
        if isinstance(pid, float) and pid.is_integer():
            pid = int(pid)
        return cls(
            socket_path=d["socketPath"],
            scheme=d["scheme"],
            headers=dict(d["headers"]),
            pid=pid,
            ide_name=d["ideName"],
            timestamp=d["timestamp"],
            workspace_folders=list(d["workspaceFolders"]),
            is_trusted=d.get("isTrusted", False),
            path=path,
        )


def workspace_folders(folders: Union[str, Iterable[str]]) -> List[str]:
    """The ``workspaceFolders`` list for a set of folders (PROTOCOL.md §1).

    The CLI compares its *physical* cwd (symlinks resolved) exactly with each entry, so
    every folder is listed as ``os.path.realpath``; when the absolute path as given
    differs (it goes through a symlink), that form is listed right after it too, for
    other clients that use the logical path. Duplicates are dropped, order is kept.
    A single string is taken as one folder, not as a sequence of characters.
    """
    if isinstance(folders, str):
        folders = [folders]
    result: List[str] = []
    seen = set()
    for folder in folders:
        absolute = os.path.abspath(folder)
        for candidate in (os.path.realpath(absolute), absolute):
            if candidate not in seen:
                seen.add(candidate)
                result.append(candidate)
    return result


def _encode_lock(info: LockInfo) -> bytes:
    """Serialise a lock with our ownership marker; pure ASCII so any reader decodes it."""
    obj = info.to_json()
    obj[WRITER_KEY] = WRITER_VALUE
    return json.dumps(obj, ensure_ascii=True, allow_nan=False, indent=2).encode("ascii") + b"\n"


def _fsync_dir(directory: str) -> None:
    """Flush a directory entry (the rename) to disk; best effort, POSIX only."""
    if os.name == "nt":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the open lock ``fd``, make its mode exactly 0600 and flush it
    to disk: the end of every lock write, a new one's and a rewrite's (PROTOCOL.md §1)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)  # os.open's mode is filtered by the umask
    os.fsync(fd)


def _identity(st: os.stat_result) -> Tuple[int, int]:
    return (st.st_dev, st.st_ino)


def write_lock(info: LockInfo, directory: Optional[str] = None) -> str:
    """Write ``info`` atomically as a new ``<uuid4>.lock`` and return its path.

    PROTOCOL.md §1: the CLI reads every ``*.lock`` file at any moment, so the content
    goes first into ``.<uuid4>.lock.tmp`` (a name that does not end in ``.lock``),
    created with mode 0600 and ``O_EXCL``, is fsync'ed, then ``os.replace``\\ d onto the
    final name: a reader sees no file or a complete one, never a partial one. The
    directory is created with mode 0700 when missing; an existing one is left as its
    owner set it. Every call makes a new file name: a server writes one lock per run,
    and changes it with :func:`rewrite_lock`, never with a second lock (PROTOCOL.md §1,
    "Changing folders"). ``info.path`` is set to the result.

    The lock is validated first (:meth:`LockInfo.from_json`) so that we never
    announce a server the CLI would silently ignore.
    """
    LockInfo.from_json(info.to_json())
    if directory is None:
        directory = lock_dir()
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        # makedirs' mode is filtered by the umask; make it exactly 0700.
        os.chmod(directory, 0o700)
    data = _encode_lock(info)
    import uuid  # (here: a lock is written once per server; importing this module needs none)
    name = str(uuid.uuid4())
    final = os.path.join(directory, name + LOCK_SUFFIX)
    tmp = os.path.join(directory, "." + name + LOCK_SUFFIX + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        try:
            _write_all(fd, data)
            identity = _identity(os.fstat(fd))  # (a rename keeps the file: `rewrite_lock` knows it by this)
        finally:
            os.close(fd)
        if not hasattr(os, "fchmod"):
            os.chmod(tmp, 0o600)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    _written_here[_path_key(final)] = identity
    info.path = final
    return final


def rewrite_lock(info: LockInfo, path: str) -> str:
    """Write ``info`` into the lock this process wrote at ``path``, in place: the same
    file, its name and its inode kept. Returns the path of the lock that holds ``info``.

    PROTOCOL.md §1, "Changing folders": a CLI connected through a lock watches that
    file and takes its deletion, or another file renamed over it, for the IDE leaving;
    it disconnects (and connects again only through a lock listing its folder). A
    change of the same file it lets be. So no temporary file and no rename here: the
    file is opened (never created, never through a symlink, never a FIFO: opened
    without blocking and checked), checked to be the very file :func:`write_lock` made,
    truncated, and the whole new content written at once. A reader in between finds an
    empty file or the start of a JSON object, neither of which parses (a JSON object
    is complete only at its last byte); the CLI, like :func:`.lock_rules.read_locks`,
    reads such a file again 100 ms later, so it never takes a lock half written. The
    mode is made 0600 again.

    When ``path`` is not a file this process wrote (deleted since, or replaced by
    someone else's), it is left alone and ``info`` goes to a new lock beside it
    (:func:`write_lock`). When the write fails once the file was truncated, the
    damaged lock is removed (it would announce nothing) and the error raised: then
    :func:`written_here` is false for ``path``.
    """
    LockInfo.from_json(info.to_json())
    data = _encode_lock(info)
    key = _path_key(path)
    expected = _written_here.get(key)
    fd = _open_own_lock(path, expected) if expected is not None else None
    if fd is None:  # not (or no longer) the file we wrote: leave it, announce anew
        _written_here.pop(key, None)
        return write_lock(info, os.path.dirname(os.path.abspath(path)))
    try:
        try:
            os.ftruncate(fd, 0)
            _write_all(fd, data)
        finally:
            os.close(fd)
    except BaseException:
        try:
            remove_lock(path)
        except OSError:
            pass  # (the error that matters is the write's)
        raise
    info.path = path
    return path


def _open_own_lock(path: str, expected: Tuple[int, int]) -> Optional[int]:
    """A descriptor open for writing on ``path`` when it is still the lock file written
    (identity ``expected``, a regular file), else None. Never created, never followed
    through a symlink, never waited on (a FIFO): opened without blocking, then checked."""
    flags = (os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        fd = _retry_sharing(lambda: os.open(path, flags))
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in _NOT_OURS_ERRORS:
            return None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISREG(st.st_mode) and _identity(st) == expected:
        return fd
    os.close(fd)
    return None


#: `os.open` errors that say ``path`` is not the lock file we wrote: a symlink there
#: (`O_NOFOLLOW`), a FIFO without a reader, a directory.
_NOT_OURS_ERRORS = frozenset(getattr(errno, name) for name in ("ELOOP", "EMLINK", "ENXIO", "EISDIR", "ENOTDIR")
                             if hasattr(errno, name))


def remove_lock(path: Optional[str]) -> None:
    """Delete a lock file; a missing file (or ``None``) is fine.

    PROTOCOL.md §1: deleting the lock is the only disconnect signal the CLI notices, so
    servers call this on every exit path, possibly twice (signal handler + finally).
    """
    if not path:
        return

    def unlink() -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    _retry_sharing(unlink)
    _written_here.pop(_path_key(path), None)


_T = TypeVar("_T")


def _retry_sharing(action: Callable[[], _T]) -> _T:
    """``action()``, tried again on a Windows sharing violation: Windows refuses to
    delete or open a file another handle holds in a way that excludes it, and a reader
    of the lock folder (the CLI, or a scan of ours) holds a lock for an instant. Given
    up (raised) after `_SHARING_RETRIES`; elsewhere a PermissionError is raised at once.
    A lock left behind would keep the CLI pointing at a server that is gone."""
    for attempt in range(_SHARING_RETRIES + 1):
        try:
            return action()
        except PermissionError:
            if sys.platform != "win32" or attempt == _SHARING_RETRIES:
                raise
            time.sleep(_SHARING_PAUSE)
    raise AssertionError("unreachable")


#: How often, and how far apart, `_retry_sharing` tries again on a Windows sharing
#: violation (at most 0.2 s in all).
_SHARING_RETRIES = 20
_SHARING_PAUSE = 0.01


def pid_alive(pid: int) -> bool:
    """Whether the CLI would find process ``pid`` running (PROTOCOL.md §1).

    :func:`.lock_rules.pid_running` without the reason: ``kill(pid, 0)`` succeeds; a
    pid of another user (``EPERM``) or one that is not a 32-bit integer is not running.
    """
    return lock_rules.pid_running(pid)[0]


def socket_reachable(path: str, timeout: float = lock_rules.PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether a server accepts one probe connection on ``path`` (PROTOCOL.md §1; see
    :func:`.lock_rules.probe_lock_socket` for the CLI's whole probe of a lock)."""
    return lock_rules.probe_socket(path, timeout) == lock_rules.ACCEPTS


#: Kept for callers that test for pipe names through this module.
_is_pipe_path = lock_rules.is_pipe_path


def _lock_paths(directory: str) -> List[str]:
    """Every ``*.lock`` regular file in ``directory``, in the CLI's order (byte order of
    the names, PROTOCOL.md §1). A directory or FIFO named ``*.lock`` is no lock: the
    CLI fails to read it and skips it, so it is left out here."""
    paths = []
    for name in lock_rules.lock_names(directory) or []:
        full = os.path.join(directory, name)
        if os.path.isfile(full):
            paths.append(full)
    return paths


def read_locks(directory: Optional[str] = None) -> List[Tuple[str, Union[LockInfo, LockFileError]]]:
    """Every ``*.lock`` file in the lock directory, read and validated as the CLI does.

    Each entry is ``(path, LockInfo)`` or ``(path, LockFileError)`` for one the CLI
    would skip (a byte-order mark, bad JSON, a schema error; retried as the CLI retries,
    PROTOCOL.md §1). Temp files (``*.tmp``) are not listed: they are not locks yet. A
    missing directory means no locks. Pid and socket are not judged: see
    :func:`scan_locks`.
    """
    if directory is None:
        directory = lock_dir()
    paths = _lock_paths(directory)
    return [(path, problems[0] if problems else LockInfo.from_json(raw, path=path))
            for path, (raw, problems) in zip(paths, lock_rules.read_locks(paths))]


def scan_locks(directory: Optional[str], cwd: str,
               check_socket: bool = True) -> List[Tuple[str, Union[LockInfo, LockFileError]]]:
    """Every lock with the CLI's verdict: ``(path, LockInfo)`` for one it can use,
    ``(path, LockFileError)`` with the reason for one it skips.

    PROTOCOL.md §1, in the CLI's order: read and validate (:func:`read_locks`), the pid
    must be running (:func:`.lock_rules.pid_running`), the socket must accept the
    probe (:func:`.lock_rules.probe_lock_socket`, skipped when ``check_socket`` is
    false). ``cwd`` is the CLI's physical working folder (a relative socket path is
    relative to it).
    """
    now_ms = time.time() * 1000
    result: List[Tuple[str, Union[LockInfo, LockFileError]]] = []
    to_probe: List[Tuple[int, LockInfo]] = []  # the locks whose socket is probed, by index in `result`
    for path, info in read_locks(directory):
        if isinstance(info, LockInfo):
            running, why = lock_rules.pid_running(info.pid)
            if not running:
                info = LockFileError("pid %s is not running as the CLI sees it (%s)" % (info.pid, why), path,
                                     "pid", lock_rules.PID_NOT_RUNNING)
            elif check_socket:
                to_probe.append((len(result), info))
        result.append((path, info))
    reasons = probe_lock_sockets([(info.socket_path, info.timestamp) for _, info in to_probe], cwd, now_ms)
    for (index, probed), reason in zip(to_probe, reasons):
        if reason is not None:
            path = result[index][0]
            result[index] = (path, LockFileError("socket %s does not accept a connection (%s)"
                                                 % (probed.socket_path, reason),
                                                 path, "socketPath", lock_rules.SOCKET_UNREACHABLE))
    return result


#: Socket probes run at once at most (each is a thread waiting on a connect).
MAX_PARALLEL_PROBES = 16


def probe_lock_sockets(targets: Sequence[Tuple[str, Any]], cwd: str, now_ms: float) -> List[Optional[str]]:
    """`lock_rules.probe_lock_socket` of every `(socketPath, timestamp)`, in parallel,
    its verdicts in the same order: a probe may wait up to 1 s (a fresh lock) or 250 ms
    (PROTOCOL.md §1), so one after another, a folder of live servers that do not answer
    would hold the caller for seconds per lock. Every reader of the lock folder that
    probes (`scan_locks`, `doctor`) probes here."""
    def probe(target: Tuple[str, Any]) -> Optional[str]:
        return lock_rules.probe_lock_socket(target[0], target[1], cwd, now_ms)
    if len(targets) <= 1:
        return [probe(target) for target in targets]
    from concurrent.futures import ThreadPoolExecutor  # (only needed here: imported late)
    from .guest_threads import leave_signals_to_host
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_PROBES, len(targets)), thread_name_prefix="lock-probe",
                            initializer=leave_signals_to_host) as pool:  # (a host's signals stay with it)
        return list(pool.map(probe, targets))


def remove_stale_locks(directory: Optional[str] = None) -> List[str]:
    """Remove this library's stale locks and their sockets; return the locks' paths.

    PROTOCOL.md §1: clean up stale locks on start, only those this implementation
    wrote. A dead pid alone does not make a lock stale (another PID namespace): the
    rules live in :mod:`.lock_cleanup`, given the lock files and our writer marker."""
    return lock_cleanup.remove_stale_locks(_lock_paths(directory if directory is not None else lock_dir()),
                                           (WRITER_KEY, WRITER_VALUE), written_here)


def find_lock_for_folder(
    folder: str, directory: Optional[str] = None, check_socket: bool = True
) -> Tuple[Optional[LockInfo], List[LockInfo]]:
    """Pick the lock the CLI would auto-connect to for ``folder``, plus the others.

    As the CLI does (PROTOCOL.md §1, :func:`scan_locks` then
    :func:`.lock_rules.auto_connect_choice`): skip invalid locks, pids not running and
    (when ``check_socket``) sockets that refuse the probe; among the rest the first
    lock (by file name) listing the physical ``os.path.realpath(folder)`` after lexical
    normalisation matches: no prefix matching, case-sensitive. Returns ``(match or
    None, other usable locks)``; the others are what the CLI's ``/ide`` picker offers.
    """
    cwd = os.path.realpath(folder)
    usable = [info for _path, info in scan_locks(directory, cwd, check_socket) if isinstance(info, LockInfo)]
    match, _passed_over = lock_rules.auto_connect_choice(usable, cwd)
    return match, [info for info in usable if info is not match]
