"""`fs/read_text_file` and `fs/write_text_file` (ACP.md §5), confined to allowed roots.

The agent names absolute paths; we serve a path only when its real location (symlinks
and `..` resolved, so a link pointing out of the root does not count as inside) lies in
one of the roots. The roots are the session's cwd unless the client was given a list.
Only regular files are read or written (a FIFO, device or socket is refused), within a
size limit, in a worker thread. Refusals and failures are JSON-RPC errors; the
connection is never affected.
"""
from __future__ import annotations

import asyncio
import errno
import ntpath
import os
import posixpath
import stat
from typing import Any, Callable, List, Optional, Sequence, Union

from ._core import jsonrpc, rpc
from .os_strings import check_os_string

MAX_FILE_BYTES = 64 * 1024 * 1024  # what one read or write may move (the line limit's size)
#: Reads of files larger than this run one at a time, so that a flood of them (an agent
#: asking for the same large file twenty times) holds one file in memory, not twenty.
LARGE_READ = 1024 * 1024
RESOURCE_NOT_FOUND = -32002  # ACP's code for a missing resource (the capture uses it)
ACCESS_DENIED_CODE = jsonrpc.INVALID_PARAMS

RootsFor = Callable[[Optional[str]], List[str]]


def session_folder(folder: str) -> str:
    """A session's folder as it is sent to the agent: absolute when it is a folder on
    this machine; otherwise exactly as given. An agent reached over TCP may run on
    another machine or OS (ACP.md §8), where the folder is the agent's to judge: a
    folder that does not exist here (`C:\\ws` for a Windows agent) is not refused here,
    nor made absolute against our current folder."""
    return os.path.abspath(folder) if os.path.isdir(folder) else folder


def absolute_anywhere(path: str) -> bool:
    """Absolute on POSIX (`/srv/ws`) or on Windows (`C:\\ws`, `\\\\server\\share`): a
    path that can name a folder on an agent's machine, whatever its system."""
    return posixpath.isabs(path) or (bool(ntpath.splitdrive(path)[0]) and ntpath.isabs(path))


def not_here(what: str, path: str) -> jsonrpc.JsonRpcError:
    """The refusal when a session's folder is not on this machine (an agent elsewhere,
    ACP.md §8): its files and commands are the agent's, none of them can be served here."""
    return jsonrpc.JsonRpcError(RESOURCE_NOT_FOUND, "Not on this machine: %s %s is the agent's, not a folder "
                                "here; an agent on another machine reads, writes and runs there itself"
                                % (what, path), {"path": path})


def is_within(path: str, root: str) -> bool:
    """True when the real `path` is `root` or below it (both resolved)."""
    try:
        return _contains(os.path.normcase(os.path.realpath(root)), os.path.normcase(os.path.realpath(path)))
    except OSError:  # a link removed while it was resolved (realpath can raise then)
        return False


def _contains(real_root: str, real_path: str) -> bool:
    try:
        return os.path.commonpath([real_path, real_root]) == real_root
    except ValueError:  # different drives on Windows
        return False


class FileSystem:
    """The two fs handlers. `roots_for(session_id)` says which roots apply to a session
    (the client passes one returning the session's cwd, or a fixed list)."""

    def __init__(self, roots_for: RootsFor, read: bool = True, write: bool = True,
                 max_read_bytes: int = MAX_FILE_BYTES, max_write_bytes: int = MAX_FILE_BYTES,
                 room_for: Optional[Callable[[int], bool]] = None) -> None:
        """`room_for(size)` says whether an answer of about `size` bytes can be sent
        now (the connection's rule, ACP.md §1): a file whose answer could not be is
        not read at all."""
        self.roots_for = roots_for
        self.read = read
        self.write = write
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.room_for = room_for
        self._large_reads: Optional[asyncio.Lock] = None  # made in the loop that reads

    def _check(self, params: dict) -> "_Target":
        path = params["path"]
        if not isinstance(path, str) or not path:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: path must be a string")
        roots = [root for root in self.roots_for(params.get("sessionId")) if root]
        if roots and not any(os.path.isdir(root) for root in roots):
            raise not_here("the session's folder", roots[0])  # (an agent elsewhere, ACP.md §8)
        if not os.path.isabs(path):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: path must be absolute: %s" % path)
        # Resolved once: what is checked is what is opened (a second resolution could
        # follow a link swapped in meanwhile out of the root).
        try:
            real = os.path.realpath(path)
            for root in roots:
                real_root = os.path.realpath(root)
                if _contains(os.path.normcase(real_root), os.path.normcase(real)):
                    return _Target(real_root, real)
        except OSError as exc:  # a link removed while it was resolved (realpath can raise then)
            raise _os_error(exc, path) from None
        raise jsonrpc.JsonRpcError(ACCESS_DENIED_CODE, "Access denied: %s is outside the allowed folders" % path,
                                   {"path": path})

    async def read_text_file(self, params: object, _context: object = None) -> dict:
        """`{sessionId, path, line?, limit?}` → `{content}`; `line` is 1-based (ACP.md:
        positions are 1-based lines) and `limit` counts lines."""
        if not self.read:
            raise jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: fs/read_text_file")
        p = jsonrpc.require_params(params, ("path",), {"path": str, "line": int, "limit": int})
        check_os_string(p["path"], "path")
        target = self._check(p)
        line, limit = p.get("line"), p.get("limit")
        if line is not None and line < 1:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: line starts at 1")
        if limit is not None and limit < 0:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: limit must be >= 0")
        size = await _off_loop(_size_of_regular, target, p["path"])
        if size <= LARGE_READ:
            text = await self._read(target, p["path"], size)
        else:
            if self._large_reads is None:
                self._large_reads = asyncio.Lock()
            async with self._large_reads:
                text = await self._read(target, p["path"], size)
        if line is not None or limit is not None:
            # Split on "\n" only and keep the terminators, so the slice is byte-faithful.
            parts = text.split("\n")
            pieces = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
            start = (line or 1) - 1
            end = start + limit if limit is not None else None
            text = "".join(pieces[start:end])
        return {"content": text}

    async def _read(self, target: "_Target", shown: str, size: int) -> str:
        if self.room_for is not None and not self.room_for(size):
            raise jsonrpc.JsonRpcError(jsonrpc.INTERNAL_ERROR, rpc.NO_ROOM_MESSAGE, {"path": shown})
        text: str = await _off_loop(_read_regular, target, shown, self.max_read_bytes)
        return text

    async def write_text_file(self, params: object, _context: object = None) -> None:
        """`{sessionId, path, content}` → null (ACP.md §5). Creates the file and missing
        parent folders inside the root; writes through an in-root symlink to its target;
        writes only regular files, of at most `max_write_bytes`."""
        if not self.write:
            raise jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: fs/write_text_file")
        p = jsonrpc.require_params(params, ("path", "content"), {"path": str, "content": str})
        check_os_string(p["path"], "path")
        target = self._check(p)
        try:
            data = p["content"].encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: content is not valid Unicode text",
                                       {"path": p["path"]}) from None
        if len(data) > self.max_write_bytes:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "File too large: %d bytes to write, the limit "
                                       "is %d: %s" % (len(data), self.max_write_bytes, p["path"]), {"path": p["path"]})
        await _off_loop(_write_regular, target, p["path"], data)
        return None


# Opening a FIFO blocks until the other end opens it, a device can be endless: files
# are opened without blocking, checked to be regular files before one byte moves, and
# all of it runs in a worker thread so the event loop (and Ctrl-C) never waits on a disk.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# A folder opened only to name what is in it: O_PATH (Linux) needs no permission to
# read the folder, only to pass through it, as opening by the whole path needs.
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | _DIRECTORY
# Opening beneath a folder needs `dir_fd` and both flags (POSIX; not Windows).
_BENEATH = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd


class _Target:
    """A checked path: its real location and the real root it lies in."""

    __slots__ = ("root", "real")

    def __init__(self, root: str, real: str) -> None:
        self.root = root
        self.real = real


def _open(target: _Target, shown: str, flags: int, make_folders: bool = False) -> int:
    """Open the checked file. Where the system allows, one component at a time from
    the root, following no link: the real path has none (it was resolved), so a link
    found now is a folder swapped for a link since the check (by a shell the agent
    runs, say), and is refused rather than followed out of the root. Elsewhere
    (Windows) by its real path, which such a swap could still redirect."""
    if not _BENEATH:
        if make_folders:
            os.makedirs(os.path.dirname(target.real), exist_ok=True)
        return os.open(target.real, flags, 0o666)
    relative = os.path.relpath(target.real, target.root)
    names = [] if relative == os.curdir else relative.split(os.sep)
    folder = os.open(target.root, _FOLDER)
    try:
        if not names:
            return os.open(".", flags, dir_fd=folder)  # the root itself: refused later, not a file
        for name in names[:-1]:
            if make_folders:
                try:
                    os.mkdir(name, 0o777, dir_fd=folder)
                except FileExistsError:
                    pass
            inner = os.open(name, _FOLDER | _NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(names[-1], flags | _NOFOLLOW, 0o666, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise jsonrpc.JsonRpcError(ACCESS_DENIED_CODE, "Access denied: %s leads through a link that its "
                                       "check did not see (a loop of links, or a folder or the file swapped "
                                       "for a link since)" % shown, {"path": shown}) from None
        raise
    finally:
        os.close(folder)


async def _off_loop(function: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, function, *args)


def _refuse_unless_regular(fd_or_path: Union[int, str], shown: str) -> None:
    try:
        mode = os.fstat(fd_or_path).st_mode if isinstance(fd_or_path, int) else os.stat(fd_or_path).st_mode
    except FileNotFoundError:
        return  # a write creates it
    except OSError as exc:
        raise _os_error(exc, shown) from None
    if not stat.S_ISREG(mode):
        raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Not a regular file: %s" % shown, {"path": shown})


def _size_of_regular(target: _Target, shown: str) -> int:
    """The file's size now (it may change before it is read; the read has its own limit)."""
    try:
        info = os.stat(target.real)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    if not stat.S_ISREG(info.st_mode):
        raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Not a regular file: %s" % shown, {"path": shown})
    return info.st_size


def _read_regular(target: _Target, shown: str, limit: int) -> str:
    """The file's text (undecodable bytes replaced), decoded here in the worker thread
    so that its bytes are gone before the answer is built."""
    _refuse_unless_regular(target.real, shown)  # where O_NONBLOCK is missing (Windows) it is all we have
    try:
        fd = _open(target, shown, os.O_RDONLY | _NONBLOCK | _BINARY)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    try:
        _refuse_unless_regular(fd, shown)  # the file opened, not the one checked before
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            data = handle.read(limit + 1)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "File too large: over %d bytes: %s" % (limit, shown),
                                   {"path": shown})
    return data.decode("utf-8", "replace")


def read_own_file(path: str, limit: int) -> bytes:
    """A file the person named (a prompt's attachment): a regular file only, a FIFO or
    device refused before anything can block, at most `limit` bytes. Raises OSError, or
    ValueError saying what is wrong."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # (where O_NONBLOCK is missing: all we have)
        raise ValueError("not a regular file: %s" % path)
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _BINARY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # the file opened, not the one checked
            raise ValueError("not a regular file: %s" % path)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            data = handle.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise ValueError("larger than %d bytes: %s" % (limit, path))
    return data


def _write_regular(target: _Target, shown: str, data: bytes) -> None:
    _refuse_unless_regular(target.real, shown)
    try:
        # No O_TRUNC yet: a FIFO or device is refused before anything is changed.
        fd = _open(target, shown, os.O_WRONLY | os.O_CREAT | _NONBLOCK | _BINARY, make_folders=True)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    try:
        _refuse_unless_regular(fd, shown)
        os.ftruncate(fd, 0)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        raise _os_error(exc, shown) from None
    finally:
        os.close(fd)


def _os_error(exc: OSError, path: str) -> jsonrpc.JsonRpcError:
    if exc.errno == errno.ENOENT:
        return jsonrpc.JsonRpcError(RESOURCE_NOT_FOUND, "Resource not found: %s" % path, {"path": path})
    return jsonrpc.JsonRpcError(jsonrpc.INTERNAL_ERROR, "%s: %s" % (exc.strerror or exc, path), {"path": path})


def fixed_roots(roots: Sequence[str]) -> RootsFor:
    resolved = [os.path.abspath(r) for r in roots]
    return lambda _session_id: resolved
