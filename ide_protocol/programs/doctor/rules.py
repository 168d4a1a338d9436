"""The CLI's own rules for IDE lock files, applied strictly, as Copilot CLI 1.0.102 does.

This module is the "why" of `doctor`: every function here mirrors one check the CLI makes
before it lists or auto-connects to an IDE (PROTOCOL.md §1). It deliberately does *not*
reuse our server's lenient reading (``lockfile._load`` strips a byte-order mark, caps
the size, counts ``EPERM`` as alive), because `doctor` must predict what the CLI does
with any IDE's lock (VS Code's, JetBrains', ours), not what we would accept.

What the CLI does, established by reading its bundle and calling its own native
helpers (``repoPathsEqual``, ``resolveCopilotHome``, ``folderTrustIsTrusted``):

* Lock directory: ``<config dir>/ide``, where the config dir is ``--config-dir``, else a
  non-empty ``$COPILOT_HOME`` used *verbatim* (a relative one is relative to the CLI's
  working folder, ``~`` is not expanded), else ``$HOME/.copilot``. Older CLIs (0.0.x)
  read ``$HOME/.copilot/ide`` whatever ``COPILOT_HOME`` says.
* It reads every name ending in ``.lock``, in byte order (libuv sorts), decodes the
  bytes as UTF-8 (bad bytes become U+FFFD), ``JSON.parse``\\ s them (a byte-order mark or
  ``NaN`` is an error) and validates a schema: ``socketPath``, ``scheme``, ``ideName``
  strings, ``headers`` an object of strings, ``pid`` and ``timestamp`` numbers,
  ``workspaceFolders`` an array of strings, ``isTrusted`` absent or a boolean. A file
  that fails is read twice more, 100 ms apart (it may be half written), then skipped.
* ``process.kill(pid, 0)`` must succeed: a pid that is not a 32-bit integer, a process
  that does not exist, or one of another user (``EPERM``) counts as not running.
* The socket must accept a connection: one try with a 250 ms timeout, or, for a lock
  whose ``timestamp`` is at most 2 s old, tries for up to 1 s, 100 ms apart.
* Auto-connect at start-up: the first usable lock (by file name) with a folder equal to
  the CLI's working folder — its *physical* path (``process.cwd()``) — after lexical
  normalisation only (``.``/``..``/repeated or trailing slashes), case-sensitive, no
  symlink resolution of the lock's paths, no parent match. ``ide.autoConnect: false``
  in ``settings.json`` turns auto-connect off.
* Folder trust: trusted when ``COPILOT_ALLOW_ALL=true``, when ``config.json``'s
  ``trustedFolders`` holds the folder or a parent of it (those entries *are* resolved
  through symlinks), or when a usable lock for the folder says ``isTrusted: true``.

Nothing here writes, renames or deletes a file.
"""
from __future__ import annotations

import errno
import json
import os
import posixpath
import socket
import stat
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...common import lockfile

#: The CLI reads a lock that fails to parse this many times in all, this far apart.
READ_ATTEMPTS = 3
READ_RETRY_SECONDS = 0.1
#: Socket probe: one try this long for an old lock ...
PROBE_TIMEOUT_SECONDS = 0.25
#: ... or tries for this long, this far apart, for a lock at most FRESH_LOCK_MS old.
FRESH_PROBE_SECONDS = 1.0
FRESH_PROBE_INTERVAL_SECONDS = 0.1
FRESH_LOCK_MS = 2000
#: A lock is a few hundred bytes; doctor reads at most this much of one (the CLI has no
#: limit, so a larger file is reported rather than silently judged).
MAX_LOCK_BYTES = 16 * 1024 * 1024

LOCK_SUFFIX = ".lock"


# ----------------------------------------------------------------------- directories


def config_dir(env: Mapping[str, str], home: str, cli_config_dir: Optional[str] = None) -> str:
    """The CLI's config dir (``resolveCopilotHome``): ``--config-dir``, else a non-empty
    ``COPILOT_HOME`` as written, else ``~/.copilot``. May be relative (see `resolve_in`)."""
    if cli_config_dir:
        return cli_config_dir
    value = env.get("COPILOT_HOME") or ""
    if value:
        return value
    return os.path.join(home, ".copilot")


def resolve_in(path: str, cwd: str) -> str:
    """``path`` as the CLI's file system calls see it from its working folder ``cwd``."""
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def older_cli_lock_dir(home: str) -> str:
    """Where CLIs before 1.0 look: ``$HOME/.copilot/ide``, ignoring ``COPILOT_HOME``."""
    return os.path.join(home, ".copilot", "ide")


def lock_names(directory: str) -> Optional[List[str]]:
    """Every name in ``directory`` ending in ``.lock``, in the CLI's order (byte order),
    or ``None`` when the directory cannot be listed. Directories and broken links named
    ``*.lock`` are kept: the CLI tries to read them too (and skips them)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    return sorted((n for n in names if n.endswith(LOCK_SUFFIX)), key=os.fsencode)


# ------------------------------------------------------------------------ reading


class Problem(Exception):
    """A lock the CLI skips while reading it: ``code`` is ``invalid-json`` or ``schema``,
    ``field`` the wire key at fault (schema only)."""

    def __init__(self, code: str, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


def _reject_constant(name: str) -> Any:
    # JSON.parse has no NaN, Infinity or -Infinity literals (Python's json does).
    raise ValueError("%s is not JSON" % name)


def parse_json_as_cli(data: bytes) -> Any:
    """Decode a lock's bytes as the CLI does (``readFile(utf-8)`` then ``JSON.parse``).

    Invalid UTF-8 becomes U+FFFD instead of an error; a leading byte-order mark is kept,
    so ``JSON.parse`` fails on it (our own reader is more forgiving). Raises `Problem`.
    """
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        raise Problem("invalid-json", "the file starts with a UTF-8 byte-order mark, which the CLI's "
                      "JSON.parse rejects")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise Problem("invalid-json", "not valid JSON: %s" % exc) from None


def _json_type(value: Any) -> str:
    """``a string``, ``an object``, ``null``...: the JSON type of a value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The lock's fields in the order of the CLI's schema, each with what it wants.
SCHEMA: Tuple[Tuple[str, str], ...] = (
    ("socketPath", "a string"),
    ("scheme", "a string"),
    ("headers", "an object whose values are all strings"),
    ("pid", "a number"),
    ("timestamp", "a number (milliseconds since the epoch)"),
    ("workspaceFolders", "an array of strings"),
    ("ideName", "a string"),
)


def schema_problems(raw: Any) -> List[Problem]:
    """Every field the CLI's schema rejects (it reports them all), in schema order."""
    if not isinstance(raw, dict):
        return [Problem("schema", "the lock must be a JSON object, not %s" % _json_type(raw))]
    problems: List[Problem] = []
    for key, wants in SCHEMA:
        if key not in raw:
            problems.append(Problem("schema", 'field "%s" is missing; the CLI wants %s' % (key, wants), key))
            continue
        value = raw[key]
        if key == "headers":
            ok = isinstance(value, dict)
            if ok:
                for name, item in value.items():
                    if not isinstance(item, str):
                        problems.append(Problem("schema", 'field "headers" has "%s" as %s; the CLI wants %s'
                                                % (name, _json_type(item), wants), key))
                continue
        elif key == "workspaceFolders":
            ok = isinstance(value, list)
            if ok:
                for index, item in enumerate(value):
                    if not isinstance(item, str):
                        problems.append(Problem("schema", 'field "workspaceFolders" has item %d as %s; the CLI '
                                                'wants %s' % (index, _json_type(item), wants), key))
                continue
        elif key in ("pid", "timestamp"):
            ok = _is_number(value)
        else:
            ok = isinstance(value, str)
        if not ok:
            problems.append(Problem("schema", 'field "%s" is %s; the CLI wants %s' % (key, _json_type(value), wants),
                                    key))
    if "isTrusted" in raw and not isinstance(raw["isTrusted"], bool):
        problems.append(Problem("schema", 'field "isTrusted" is %s; the CLI wants true, false or no field at all'
                                % _json_type(raw["isTrusted"]), "isTrusted"))
    return problems


def _read_regular_file(path: str) -> bytes:
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


def read_lock_as_cli(path: str, sleep: Any = time.sleep) -> Tuple[Optional[Dict[str, Any]], List[Problem]]:
    """Read one lock as the CLI does: ``(content, [])`` when it passes, else ``(None or
    the decoded JSON, problems)``. A failure is retried like the CLI retries it, so a
    lock caught half written is not reported."""
    problems: List[Problem] = []
    raw: Any = None
    for attempt in range(READ_ATTEMPTS):
        if attempt:
            sleep(READ_RETRY_SECONDS)
        try:
            data = _read_regular_file(path)
        except OSError as exc:
            problems = [Problem("invalid-json", "cannot be read: %s" % (exc.strerror or exc))]
            continue
        if len(data) > MAX_LOCK_BYTES:
            return None, [Problem("invalid-json", "larger than %d bytes: not a lock file" % MAX_LOCK_BYTES)]
        try:
            raw = parse_json_as_cli(data)
        except Problem as exc:
            problems = [exc]
            continue
        problems = schema_problems(raw)
        if not problems:
            return raw, []
    return (raw if isinstance(raw, dict) else None), problems


# ---------------------------------------------------------------------- liveness


def pid_running_for_cli(pid: Any) -> Tuple[bool, str]:
    """``process.kill(pid, 0)`` as Node runs it: ``(alive, why not)``.

    Node refuses a pid that is not a 32-bit integer; any error counts as "not running"
    for the CLI, ``EPERM`` (a process of another user) included. A pid from another PID
    namespace (an IDE in a container, Flatpak or Snap) names no process here, or an
    unrelated one. ``0`` and negative pids address process groups: Node lets them
    through, and so does this function, to predict the CLI faithfully.
    """
    if not _is_number(pid) or not (-2 ** 31 <= pid < 2 ** 31) or pid != int(pid):  # NaN, inf fail
        return False, "%r is not a 32-bit integer, which the CLI cannot signal" % (pid,)
    if os.name == "nt":
        return lockfile.pid_alive(int(pid)), "no such process"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False, "no such process"
    except PermissionError:
        return False, "it belongs to another user (the CLI's kill(pid, 0) fails with EPERM)"
    except OSError as exc:
        return False, exc.strerror or str(exc)
    return True, ""


def _connect_once(path: str, timeout: float) -> Optional[str]:
    """Connect to a Unix socket and close at once without sending a byte (as the CLI's
    probe does); ``None`` on success, else the reason."""
    family = getattr(socket, "AF_UNIX", None)
    if family is None:
        return "Unix sockets are not available here"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        return None
    except socket.timeout:
        return "no connection within %d ms" % round(timeout * 1000)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "no such file"
        if exc.errno == errno.ECONNREFUSED:
            return "connection refused (nothing listens on it)"
        return exc.strerror or str(exc)
    except ValueError as exc:  # NUL byte in the path
        return str(exc)
    finally:
        sock.close()


def probe_socket_as_cli(socket_path: str, timestamp: Any, cwd: str, now_ms: Optional[float] = None,
                        sleep: Any = time.sleep) -> Optional[str]:
    """The CLI's socket probe; ``None`` when it would accept the lock, else the reason.

    A relative path is relative to the CLI's working folder ``cwd``. A Windows pipe name
    is checked by existence (``lockfile.socket_reachable``)."""
    if lockfile._is_pipe_path(socket_path):
        return None if lockfile.socket_reachable(socket_path) else "no such named pipe"
    if not socket_path:
        return "the path is empty"
    path = resolve_in(socket_path, cwd)
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    fresh = _is_number(timestamp) and now_ms - timestamp <= FRESH_LOCK_MS
    if not fresh:
        return _connect_once(path, PROBE_TIMEOUT_SECONDS)
    start = time.monotonic()
    reason = "no connection within %d ms" % round(FRESH_PROBE_SECONDS * 1000)
    while True:
        left = FRESH_PROBE_SECONDS - (time.monotonic() - start)
        if left <= 0:
            return reason
        reason = _connect_once(path, left)
        if reason is None:
            return None
        spent = time.monotonic() - start
        if spent >= FRESH_PROBE_SECONDS:
            return reason
        sleep(min(FRESH_PROBE_INTERVAL_SECONDS, FRESH_PROBE_SECONDS - spent))


# ------------------------------------------------------------------------ folders


def lexical(path: str) -> str:
    """A path normalised as the CLI's ``repoPathsEqual`` does before comparing: ``.``,
    ``..``, repeated and trailing slashes folded, nothing resolved on disk, case kept.
    (``posixpath.normpath`` keeps a leading ``//``; the CLI folds it to ``/``.)"""
    if not path:
        return path
    folded = posixpath.normpath(path)
    if folded.startswith("//"):
        folded = "/" + folded.lstrip("/")
    return folded


def same_folder(listed: str, cwd: str) -> bool:
    """The CLI's auto-connect test: ``listed`` equals its physical working folder."""
    return bool(listed) and lexical(listed) == lexical(cwd)


def _under(child: str, parent: str) -> bool:
    parent = parent.rstrip("/") or "/"
    return child != parent and child.startswith(parent if parent == "/" else parent + "/")


def _realpath(path: str) -> str:
    """``os.path.realpath``, or the path itself when it cannot name a file (a NUL byte or
    a lone surrogate from an untrusted lock)."""
    try:
        return os.path.realpath(path)
    except ValueError:
        return path


def relation(listed: str, cwd: str) -> Tuple[str, str]:
    """How a listed folder that does not match relates to the CLI's folder ``cwd``:
    ``(code, detail)`` with code ``symlinked-folder``, ``case-mismatch``,
    ``folder-is-parent`` (detail ``symlink`` when only the resolved path is a parent) or
    ``folder-mismatch`` (detail: ``above``, ``relative``, ``empty`` or ``other``). More specific relations win."""
    if not listed:
        return "folder-mismatch", "empty"
    if not os.path.isabs(listed):
        return "folder-mismatch", "relative"
    norm = lexical(listed)
    real = _realpath(norm)
    if real == cwd:
        return "symlinked-folder", real
    if norm.lower() == cwd.lower() or real.lower() == cwd.lower():
        return "case-mismatch", ""
    if _under(cwd, norm):
        return "folder-is-parent", ""
    if _under(cwd, real):
        return "folder-is-parent", "symlink"  # a parent, and listed through a symlink too
    if _under(norm, cwd) or _under(real, cwd):
        return "folder-mismatch", "above"
    return "folder-mismatch", "other"


# ------------------------------------------------------------------- settings, trust


def _read_json_object(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            value = json.loads(fh.read(MAX_LOCK_BYTES).decode("utf-8-sig"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def auto_connect_enabled(config: str) -> bool:
    """``ide.autoConnect`` in ``<config dir>/settings.json`` (the ``/ide`` picker's
    setting): only an explicit ``false`` turns start-up auto-connect off."""
    settings = _read_json_object(os.path.join(config, "settings.json")) or {}
    ide = settings.get("ide")
    return not (isinstance(ide, dict) and ide.get("autoConnect") is False)


def trusted_by_config(folder: str, config: str, env: Mapping[str, str]) -> Optional[str]:
    """Why the CLI already trusts ``folder`` without a lock's help, or ``None``:
    ``COPILOT_ALLOW_ALL=true``, or an entry of ``config.json``'s ``trustedFolders`` that
    is the folder or one of its parents (resolved through symlinks, unlike locks)."""
    if env.get("COPILOT_ALLOW_ALL") == "true":
        return "COPILOT_ALLOW_ALL=true"
    cfg = _read_json_object(os.path.join(config, "config.json")) or {}
    entries = cfg.get("trustedFolders")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, str) and os.path.isabs(entry):
            real = _realpath(lexical(entry))
            if real == folder or _under(folder, real):
                return "trustedFolders in %s" % os.path.join(config, "config.json")
    return None
