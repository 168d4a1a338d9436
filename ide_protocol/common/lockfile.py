"""The discovery lock file: format, strict validation, atomic write, stale cleanup.

PROTOCOL.md §1: an IDE-side server announces itself with a JSON file
``<lock dir>/<uuid4>.lock``; the CLI reads every ``*.lock`` file there, validates each
strictly, skips the ones whose pid is dead or whose socket refuses a connection, and
auto-connects to the first whose ``workspaceFolders`` holds exactly its physical cwd.

This module is used from both sides: the server writes and removes its lock
(:func:`write_lock`, :func:`remove_lock`, :func:`remove_stale_locks`), the client and
the checker discover servers the way the CLI does (:func:`read_locks`,
:func:`find_lock_for_folder`). Validation is shared so that a lock this library writes
is one the CLI accepts.

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
import math
import os
import socket
import time
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

def uuid4() -> str:
    """A random (version 4) UUID, as ``str(uuid.uuid4())`` gives it, without importing
    ``uuid`` (which imports ``platform``: milliseconds of every start-up)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


__all__ = [
    "LockFileError",
    "LockInfo",
    "WRITER_KEY",
    "WRITER_VALUE",
    "lock_dir",
    "workspace_folders",
    "write_lock",
    "remove_lock",
    "pid_alive",
    "socket_reachable",
    "remove_stale_locks",
    "read_locks",
    "find_lock_for_folder",
]

#: Extra key marking locks written by this library (see the module docstring).
WRITER_KEY = "_writer"
WRITER_VALUE = "python-ide-protocol"

LOCK_SUFFIX = ".lock"
# A lock is a few hundred bytes; refuse to slurp anything absurd from a shared dir.
_MAX_LOCK_BYTES = 1024 * 1024


class LockFileError(ValueError):
    """A lock file that cannot be read or that the CLI would reject.

    ``path`` is the lock file (``None`` when validating a dict that came from
    elsewhere), ``field`` the offending wire key when there is one, so that the
    checker can report exactly what a third-party IDE got wrong.
    """

    def __init__(self, message: str, path: Optional[str] = None, field: Optional[str] = None):
        self.path = path
        self.field = field
        self.reason = message
        super().__init__("%s: %s" % (path, message) if path else message)


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


def _type_name(value: Any) -> str:
    """JSON-ish name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


@dataclass
class LockInfo:
    """One lock file's content (PROTOCOL.md §1), with Python names.

    ``timestamp`` is milliseconds since the epoch (an ``int`` when written here; a
    float read from another writer is kept as is so it round-trips). ``path`` is where
    the lock lives on disk, ``None`` for one not written or read yet.
    """

    socket_path: str
    scheme: str
    headers: Dict[str, str]
    pid: int
    ide_name: str
    timestamp: Union[int, float]
    workspace_folders: List[str]
    is_trusted: bool = False
    path: Optional[str] = dc_field(default=None, compare=False)

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

        PROTOCOL.md §1: every field but ``isTrusted`` is required, with exact types.
        ``pid`` must be an integer and not a boolean (JSON ``true`` is not a pid),
        ``timestamp`` any finite number. Unknown keys (our ``_writer`` marker, other
        IDEs' extras) are ignored, as the CLI ignores them. Raises
        :class:`LockFileError` naming the first bad field.
        """
        if not isinstance(d, dict):
            raise LockFileError("lock content must be a JSON object, got %s" % _type_name(d), path)

        def need(key: str) -> Any:
            if key not in d:
                raise LockFileError('missing required field "%s"' % key, path, key)
            return d[key]

        def bad(key: str, expected: str) -> LockFileError:
            return LockFileError(
                'field "%s" must be %s, got %s' % (key, expected, _type_name(d[key])), path, key
            )

        socket_path = need("socketPath")
        if not isinstance(socket_path, str):
            raise bad("socketPath", "a string")
        scheme = need("scheme")
        if not isinstance(scheme, str):
            raise bad("scheme", "a string")
        headers = need("headers")
        if not isinstance(headers, dict):
            raise bad("headers", "an object")
        for name, value in headers.items():
            if not isinstance(value, str):
                raise LockFileError(
                    'field "headers" must map strings to strings; "%s" is %s'
                    % (name, _type_name(value)),
                    path,
                    "headers",
                )
        pid = need("pid")
        if isinstance(pid, bool) or not isinstance(pid, int):
            raise bad("pid", "an integer")
        ide_name = need("ideName")
        if not isinstance(ide_name, str):
            raise bad("ideName", "a string")
        timestamp = need("timestamp")
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
            raise bad("timestamp", "a number")
        if isinstance(timestamp, float) and not math.isfinite(timestamp):
            raise LockFileError('field "timestamp" must be a finite number', path, "timestamp")
        folders = need("workspaceFolders")
        if not isinstance(folders, list):
            raise bad("workspaceFolders", "an array of strings")
        for index, folder in enumerate(folders):
            if not isinstance(folder, str):
                raise LockFileError(
                    'field "workspaceFolders" must be an array of strings; item %d is %s'
                    % (index, _type_name(folder)),
                    path,
                    "workspaceFolders",
                )
        is_trusted = d.get("isTrusted", False)
        if "isTrusted" in d and not isinstance(is_trusted, bool):
            # Optional, but when present a boolean; null is rejected too (PROTOCOL.md §1).
            raise bad("isTrusted", "a boolean")
        return cls(
            socket_path=socket_path,
            scheme=scheme,
            headers=dict(headers),
            pid=pid,
            ide_name=ide_name,
            timestamp=timestamp,
            workspace_folders=list(folders),
            is_trusted=is_trusted,
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


def write_lock(info: LockInfo, directory: Optional[str] = None) -> str:
    """Write ``info`` atomically as a new ``<uuid4>.lock`` and return its path.

    PROTOCOL.md §1: the CLI reads every ``*.lock`` file at any moment, so the content
    goes first into ``.<uuid4>.lock.tmp`` (a name that does not end in ``.lock``),
    created with mode 0600 and ``O_EXCL``, is fsync'ed, then ``os.replace``\\ d onto the
    final name: a reader sees no file or a complete one, never a partial one. The
    directory is created with mode 0700 when missing; an existing one is left as its
    owner set it. Every call makes a new file name, because rewriting a lock a CLI is
    connected through makes it reconnect: to change folders write a new lock and
    remove the old one. ``info.path`` is set to the result.

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
    name = uuid4()
    final = os.path.join(directory, name + LOCK_SUFFIX)
    tmp = os.path.join(directory, "." + name + LOCK_SUFFIX + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # os.open's mode is filtered by the umask too
            os.fsync(fd)
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
    info.path = final
    return final


def remove_lock(path: Optional[str]) -> None:
    """Delete a lock file; a missing file (or ``None``) is fine.

    PROTOCOL.md §1: deleting the lock is the only disconnect signal the CLI notices, so
    servers call this on every exit path, possibly twice (signal handler + finally).
    """
    if not path:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (PROTOCOL.md §1: the CLI skips dead pids).

    POSIX: ``kill(pid, 0)``; ``EPERM`` means it exists under another user. A pid of 0
    or below is never alive here: ``kill(0, 0)`` would probe our own process group and
    always succeed. An unreaped zombie counts as alive, as it does for the CLI.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if os.name == "nt":
        from . import winpipe  # Windows-only code lives there

        return winpipe.pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    except OSError:
        return True
    return True


def _is_pipe_path(path: str) -> bool:
    """Whether ``path`` names a Windows named pipe (``\\\\.\\pipe\\...``)."""
    return path.replace("/", "\\").lower().startswith("\\\\.\\pipe\\")


def _pipe_exists(path: str) -> bool:
    """Windows named-pipe reachability, without taking one of its instances.

    Connecting to a pipe would occupy a server instance; existence is what the CLI's
    probe effectively learns and is cheap (``os.stat`` works on pipe paths).
    """
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


#: What a connection attempt can tell: a server accepts, provably nobody is there
#: (refused, no such file, not a socket), or it cannot tell (a timeout, a full
#: backlog, no permission).
ACCEPTS, REFUSED, UNKNOWN = "accepts", "refused", "unknown"
_REFUSED_ERRNOS = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK, errno.ENOTDIR)


def probe_socket(path: str, timeout: float = 1.0) -> str:
    """Connect to ``path`` the way the CLI does and say what that showed.

    Unix: connect and close at once without sending a byte (PROTOCOL.md §1; servers
    must tolerate exactly this). Windows pipe names: an existence check. A path the OS
    cannot take (NUL, longer than ``sun_path``) has nobody listening: ``REFUSED``.
    """
    if _is_pipe_path(path):
        return ACCEPTS if _pipe_exists(path) else REFUSED
    family = getattr(socket, "AF_UNIX", None)
    if family is None:
        return UNKNOWN
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return UNKNOWN
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        return ACCEPTS
    except OSError as exc:
        return REFUSED if exc.errno in _REFUSED_ERRNOS else UNKNOWN
    except ValueError:
        return REFUSED
    finally:
        sock.close()


def socket_reachable(path: str, timeout: float = 1.0) -> bool:
    """Whether a server accepts connections on ``path`` (``probe_socket`` says so)."""
    return probe_socket(path, timeout) == ACCEPTS


def _lock_paths(directory: str) -> List[str]:
    """Every ``*.lock`` regular file in ``directory``, sorted by name for determinism."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    paths = []
    for name in sorted(names):
        if not name.endswith(LOCK_SUFFIX):
            continue
        full = os.path.join(directory, name)
        if os.path.isfile(full):
            paths.append(full)
    return paths


def _load(path: str) -> Tuple[Any, Union[LockInfo, LockFileError]]:
    """Read and validate one lock; returns (raw decoded JSON or None, info or error)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_LOCK_BYTES + 1)
    except OSError as exc:
        return None, LockFileError("cannot read: %s" % (exc.strerror or exc), path)
    if len(data) > _MAX_LOCK_BYTES:
        return None, LockFileError("larger than %d bytes" % _MAX_LOCK_BYTES, path)
    try:
        raw = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, LockFileError("not valid JSON: %s" % exc, path)
    try:
        return raw, LockInfo.from_json(raw, path=path)
    except LockFileError as exc:
        return raw, exc


def read_locks(directory: Optional[str] = None) -> List[Tuple[str, Union[LockInfo, LockFileError]]]:
    """Every ``*.lock`` file in the lock directory, parsed and validated.

    For discovery (client, checker): each entry is ``(path, LockInfo)`` or
    ``(path, LockFileError)`` for one the CLI would skip. Temp files (``*.tmp``) are
    not listed: they are not locks yet. A missing directory means no locks.
    """
    if directory is None:
        directory = lock_dir()
    return [(path, _load(path)[1]) for path in _lock_paths(directory)]


def remove_stale_locks(directory: Optional[str] = None) -> List[str]:
    """Remove this library's stale locks and their sockets; return the locks' paths.

    PROTOCOL.md §1: clean up stale locks on start, only those this implementation
    wrote. A dead pid alone does not make a lock stale (another PID namespace): the
    rules live in :mod:`.lock_cleanup`, imported here only when cleaning."""
    from . import lock_cleanup

    return lock_cleanup.remove_stale_locks(directory)


def find_lock_for_folder(
    folder: str, directory: Optional[str] = None, check_socket: bool = True
) -> Tuple[Optional[LockInfo], List[LockInfo]]:
    """Pick the lock the CLI would auto-connect to for ``folder``, plus the others.

    As the CLI does (PROTOCOL.md §1): skip invalid locks, dead pids and (when
    ``check_socket``) sockets that refuse a connection; among the rest the first lock
    (by file name) listing ``os.path.realpath(folder)`` *exactly* in
    ``workspaceFolders`` matches, no prefix matching, case-sensitive. Returns
    ``(match or None, other usable locks)``; the others are what the CLI's ``/ide``
    picker would offer.
    """
    target = os.path.realpath(folder)
    match: Optional[LockInfo] = None
    others: List[LockInfo] = []
    for _path, info in read_locks(directory):
        if not isinstance(info, LockInfo):
            continue
        if not pid_alive(info.pid):
            continue
        if check_socket and not socket_reachable(info.socket_path):
            continue
        if match is None and target in info.workspace_folders:
            match = info
        else:
            others.append(info)
    return match, others
