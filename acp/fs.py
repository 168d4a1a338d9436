"""`fs/read_text_file` and `fs/write_text_file` (ACP.md §5), confined to allowed roots.

The agent names absolute paths; we serve a path only when its real location (symlinks
and `..` resolved, so a link pointing out of the root does not count as inside) lies in
one of the roots. The roots are the session's cwd unless the client was given a list.
Refusals and failures are JSON-RPC errors; the connection is never affected.
"""
from __future__ import annotations

import errno
import os
from typing import Callable, List, Optional, Sequence

from ._core import jsonrpc

RESOURCE_NOT_FOUND = -32002  # ACP's code for a missing resource (the capture uses it)
ACCESS_DENIED_CODE = jsonrpc.INVALID_PARAMS

RootsFor = Callable[[Optional[str]], List[str]]


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def is_within(path: str, root: str) -> bool:
    """True when the real `path` is `root` or below it (both resolved)."""
    real_path, real_root = _real(path), _real(root)
    try:
        return os.path.commonpath([real_path, real_root]) == real_root
    except ValueError:  # different drives on Windows
        return False


class FileSystem:
    """The two fs handlers. `roots_for(session_id)` says which roots apply to a session
    (the client passes one returning the session's cwd, or a fixed list)."""

    def __init__(self, roots_for: RootsFor, read: bool = True, write: bool = True,
                 max_read_bytes: int = 64 * 1024 * 1024) -> None:
        self.roots_for = roots_for
        self.read = read
        self.write = write
        self.max_read_bytes = max_read_bytes

    def _check(self, params: dict) -> str:
        path = params["path"]
        if not isinstance(path, str) or not path:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: path must be a string")
        if not os.path.isabs(path):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: path must be absolute: %s" % path)
        roots = [r for r in self.roots_for(params.get("sessionId")) if r]
        if not any(is_within(path, root) for root in roots):
            raise jsonrpc.JsonRpcError(ACCESS_DENIED_CODE,
                                       "Access denied: %s is outside the allowed folders" % path,
                                       {"path": path})
        return os.path.realpath(path)

    async def read_text_file(self, params: object, _context: object = None) -> dict:
        """`{sessionId, path, line?, limit?}` → `{content}`; `line` is 1-based (ACP.md:
        positions are 1-based lines) and `limit` counts lines."""
        if not self.read:
            raise jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: fs/read_text_file")
        p = jsonrpc.require_params(params, ("path",), {"path": str, "line": int, "limit": int})
        real = self._check(p)
        line, limit = p.get("line"), p.get("limit")
        if line is not None and line < 1:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: line starts at 1")
        if limit is not None and limit < 0:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: limit must be >= 0")
        try:
            if os.path.getsize(real) > self.max_read_bytes:
                raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "File too large: %s" % p["path"])
            with open(real, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError as exc:
            raise _os_error(exc, p["path"]) from None
        if line is not None or limit is not None:
            # Split on "\n" only and keep the terminators, so the slice is byte-faithful.
            parts = text.split("\n")
            pieces = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
            start = (line or 1) - 1
            end = start + limit if limit is not None else None
            text = "".join(pieces[start:end])
        return {"content": text}

    async def write_text_file(self, params: object, _context: object = None) -> None:
        """`{sessionId, path, content}` → null (ACP.md §5). Creates the file and missing
        parent folders inside the root; writes through an in-root symlink to its target."""
        if not self.write:
            raise jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: fs/write_text_file")
        p = jsonrpc.require_params(params, ("path", "content"), {"path": str, "content": str})
        real = self._check(p)
        try:
            parent = os.path.dirname(real)
            if not os.path.isdir(parent):
                os.makedirs(parent, exist_ok=True)
            with open(real, "w", encoding="utf-8", newline="") as handle:
                handle.write(p["content"])
        except OSError as exc:
            raise _os_error(exc, p["path"]) from None
        return None


def _os_error(exc: OSError, path: str) -> jsonrpc.JsonRpcError:
    if exc.errno == errno.ENOENT:
        return jsonrpc.JsonRpcError(RESOURCE_NOT_FOUND, "Resource not found: %s" % path, {"path": path})
    return jsonrpc.JsonRpcError(jsonrpc.INTERNAL_ERROR, "%s: %s" % (exc.strerror or exc, path), {"path": path})


def fixed_roots(roots: Sequence[str]) -> RootsFor:
    resolved = [os.path.abspath(r) for r in roots]
    return lambda _session_id: resolved
