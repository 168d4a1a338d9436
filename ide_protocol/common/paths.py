"""File paths, ``file://`` URIs and UTF-16 columns, as pure functions.

PROTOCOL.md §6: ``filePath`` is OS-native while ``fileUrl``/``uri`` are ``file://`` URIs
with forward slashes and percent-encoding; on Windows the drive letter is lower-cased
and its colon encoded (``file:///c%3A/Users/me/a.ts`` <-> ``c:\\Users\\me\\a.ts``), which
is what VS Code sends and what the CLI expects to see again. A path converted to a URI
and back must come out unchanged (spaces, ``#``, ``%``, ``?``, non-ASCII names).

Both rule sets live here and are selected by a ``windows`` flag (``None`` = the running
OS) so that the Windows rules are tested on a Linux CI box and vice versa: nothing in
this module touches the file system except :func:`resolve_path` (and only through
``os.path.abspath`` for a relative root).

The position helpers exist because the wire counts characters in UTF-16 code units
(PROTOCOL.md, introduction) while Python strings index code points: an editor line
holding an emoji has one more wire column than Python column after it.
"""

from __future__ import annotations

import ntpath
import os
import posixpath
import re
from typing import Optional, Tuple
# (`urllib.parse` is imported in the functions that convert: with `ipaddress` it adds
# about 3 ms to importing the server, which converts nothing until an editor reports.)

__all__ = [
    "wire_file_path",
    "path_to_uri",
    "uri_to_path",
    "resolve_path",
    "utf16_len",
    "utf16_column",
    "codepoint_column",
]

# A drive-letter path: "C:\..." or "C:/..." or the bare drive "C:" (PROTOCOL.md §6).
_DRIVE_PATH = re.compile(r"^([A-Za-z]):(?=[\\/]|$)")
# The path part of a Windows file URI after decoding: "/c:/..." (or the legacy "/c|/...").
_DRIVE_URI_PATH = re.compile(r"^/([A-Za-z])[:|](?=/|$)")
# A Windows drive mistakenly written in the authority: "file://C:/x" (seen in the wild).
_DRIVE_HOST = re.compile(r"^([A-Za-z])[:|]$")


def _is_windows(windows: Optional[bool]) -> bool:
    """Resolve the ``windows`` flag: ``None`` means the rules of the running OS."""
    if windows is None:
        return os.name == "nt"
    return bool(windows)


def _quote_path(data: bytes) -> str:
    """Percent-encode everything but RFC 3986 unreserved characters and ``/``.

    ``quote`` keeps ``A-Z a-z 0-9 - . _ ~`` (since Python 3.7) plus ``safe``; so ``:``,
    ``#``, ``?``, ``%``, spaces and every non-ASCII byte get encoded, matching VS Code's
    ``Uri.toString()`` closely enough for the CLI (PROTOCOL.md §6).
    """
    from urllib.parse import quote
    return quote(data, safe="/")


def wire_file_path(path: str, windows: Optional[bool] = None) -> str:
    """The ``filePath`` the wire carries for an editor's absolute path (PROTOCOL.md §6).

    On Windows a leading drive letter is lower-cased (``C:\\x`` -> ``c:\\x``), the
    form VS Code's ``fsPath`` gives and the one :func:`path_to_uri` puts in the URI, so
    that ``filePath`` and ``fileUrl`` name the file alike whatever case the editor
    used; the rest of the path is kept as it is. Other systems: unchanged.
    """
    if _is_windows(windows) and _DRIVE_PATH.match(path):
        return path[0].lower() + path[1:]
    return path


def path_to_uri(path: str, windows: Optional[bool] = None) -> str:
    """Convert an absolute OS path to a ``file://`` URI (PROTOCOL.md §6).

    POSIX: ``/home/a b/x#.py`` -> ``file:///home/a%20b/x%23.py``; the path is encoded
    as UTF-8 with ``surrogateescape`` so that names which are not valid UTF-8 (they
    come out of ``os.listdir`` as lone surrogates) still round-trip.

    Windows: ``C:\\Users\\me\\a.ts`` -> ``file:///c%3A/Users/me/a.ts`` (drive letter
    lower-cased, colon encoded, like VS Code) and UNC ``\\\\server\\share\\x`` ->
    ``file://server/share/x``. Both separators are accepted. A ``\\\\?\\`` long-path
    prefix is dropped (the URI has no way to carry it).

    Raises ``ValueError`` for a relative path, because a URI for it would silently
    depend on the current directory of whoever reads it.
    """
    if not isinstance(path, str):
        raise TypeError("path must be a str, not %s" % type(path).__name__)
    if "\x00" in path:
        raise ValueError("path contains a NUL character")
    if _is_windows(windows):
        return _windows_path_to_uri(path)
    if not path.startswith("/"):
        raise ValueError("not an absolute POSIX path: %r" % (path,))
    return "file://" + _quote_path(path.encode("utf-8", "surrogateescape"))


def _windows_path_to_uri(path: str) -> str:
    """Windows half of :func:`path_to_uri`; see there for the rules."""
    p = path.replace("/", "\\")
    # Long-path prefixes: "\\?\C:\x" is "C:\x", "\\?\UNC\srv\share" is "\\srv\share".
    if p[:8].upper() == "\\\\?\\UNC\\":
        p = "\\\\" + p[8:]
    elif p.startswith("\\\\?\\"):
        p = p[4:]
    m = _DRIVE_PATH.match(p)
    if m:
        # "C:\Users" -> "/c:/Users": lower-case drive, then the colon gets encoded.
        rest = p[2:].replace("\\", "/")
        data = ("/" + m.group(1).lower() + ":" + rest).encode("utf-8", "surrogatepass")
        return "file://" + _quote_path(data)
    if p.startswith("\\\\"):
        # UNC: "\\server\share\x" -> host "server", path "/share/x".
        host, sep, rest = p[2:].partition("\\")
        if not host:
            raise ValueError("UNC path without a server name: %r" % (path,))
        from urllib.parse import quote
        host_enc = quote(host.encode("utf-8", "surrogatepass"), safe="")
        data = ("/" + rest.replace("\\", "/")).encode("utf-8", "surrogatepass")
        return "file://" + host_enc + _quote_path(data)
    raise ValueError("not an absolute Windows path: %r" % (path,))


def _split_file_uri(uri: str) -> Tuple[str, str]:
    """Split ``file:`` URI into (decoded authority, still-encoded path).

    The query and fragment are dropped (RFC 3986 §3): a literal ``#`` or ``?`` in a
    file name is always percent-encoded by :func:`path_to_uri`, so a bare one starts a
    fragment/query, as in VS Code's URI parser. ``file:/x`` (no authority) is accepted.
    """
    if not isinstance(uri, str):
        raise TypeError("uri must be a str, not %s" % type(uri).__name__)
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme.lower() != "file":
        raise ValueError("not a file: URI: %r" % (uri,))
    rest = rest.split("#", 1)[0].split("?", 1)[0]
    if rest.startswith("//"):
        rest = rest[2:]
        slash = rest.find("/")
        if slash < 0:
            host, path = rest, ""
        else:
            host, path = rest[:slash], rest[slash:]
    else:
        host, path = "", rest
    from urllib.parse import unquote
    return unquote(host), path


def uri_to_path(uri: str, windows: Optional[bool] = None) -> str:
    """Convert a ``file://`` URI back to an OS path (PROTOCOL.md §6).

    Inverse of :func:`path_to_uri`. On input it is lenient where real clients differ:
    ``file:///C:/x``, ``file:///c%3A/x``, ``file:///c|/x`` and ``file://C:/x`` all give
    ``c:\\x`` (drive lower-cased, as VS Code's ``fsPath`` does); ``file://localhost/x``
    is the local ``/x``; raw non-ASCII characters are taken as UTF-8.

    Raises ``ValueError`` for a non-``file`` URI, a relative or empty path, a NUL byte,
    and (POSIX rules) a remote host, which has no POSIX path.
    """
    host, enc_path = _split_file_uri(uri)
    win = _is_windows(windows)
    if host.lower() == "localhost":
        host = ""
    if win:
        m = _DRIVE_HOST.match(host)
        if m:
            enc_path = "/" + m.group(1) + ":" + enc_path
            host = ""
    from urllib.parse import unquote_to_bytes
    raw = unquote_to_bytes(enc_path)
    if b"\x00" in raw:
        raise ValueError("file URI contains an encoded NUL: %r" % (uri,))
    if win:
        return _windows_uri_path(host, raw.decode("utf-8", "surrogatepass"), uri)
    if host:
        raise ValueError("file URI names a remote host %r: %r" % (host, uri))
    path = raw.decode("utf-8", "surrogateescape")
    if not path.startswith("/"):
        raise ValueError("file URI without an absolute path: %r" % (uri,))
    return path


def _windows_uri_path(host: str, path: str, uri: str) -> str:
    """Windows half of :func:`uri_to_path`, given the decoded authority and path."""
    if host:
        return "\\\\" + host + path.replace("/", "\\")
    m = _DRIVE_URI_PATH.match(path)
    if m:
        return m.group(1).lower() + ":" + path[3:].replace("/", "\\")
    if not path.startswith("/"):
        raise ValueError("file URI without an absolute path: %r" % (uri,))
    # No drive: a path rooted on the current drive. Rare, but better than refusing.
    return path.replace("/", "\\")


def resolve_path(path: str, root: str, windows: Optional[bool] = None) -> str:
    """Resolve a user-typed path against a workspace root and normalise it.

    The terminal IDE takes paths from its user (``open src/x.py``) and tool arguments
    (``original_file_path``) that may be relative; both must become one canonical
    absolute form so that diff tabs and diagnostics of the same file compare equal.

    * absolute ``path``: normalised, ``root`` ignored;
    * relative ``path``: joined to ``root`` (made absolute first when it is not);
    * a ``file:`` URI: converted with :func:`uri_to_path`, as a convenience for
      pasted ``fileUrl`` values.

    ``..`` is collapsed lexically (``normpath``), symlinks are *not* resolved: the path
    shown to the user should stay the one they know. ``~`` is not expanded (a file may
    really be called ``~x``). ``windows`` picks ``ntpath``/``posixpath`` like the other
    functions; a relative ``root`` is only made absolute for the running OS's rules.
    """
    win = _is_windows(windows)
    mod = ntpath if win else posixpath
    if path[:6].lower() == "file:/":
        path = uri_to_path(path, windows=win)
    if not mod.isabs(root) and win == (os.name == "nt"):
        root = os.path.abspath(root)
    joined = mod.join(root, path)
    return wire_file_path(mod.normpath(joined), windows=win)


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units, the unit of ``character`` on the wire.

    Characters outside the Basic Multilingual Plane (emoji, many CJK extensions) count
    as two. ``surrogatepass`` lets lone surrogates (possible in editor buffers) count
    as one unit instead of raising.
    """
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def utf16_column(line_text: str, codepoint_col: int) -> int:
    """Convert a Python (code point) column in ``line_text`` to a UTF-16 column.

    A column past the end of the line is clamped to the line length (LSP behaviour,
    which the CLI's consumers follow); a negative one to 0.
    """
    col = min(max(codepoint_col, 0), len(line_text))
    return utf16_len(line_text[:col])


def codepoint_column(line_text: str, utf16_col: int) -> int:
    """Convert a wire (UTF-16) column in ``line_text`` back to a Python column.

    Inverse of :func:`utf16_column`. A column that falls between the two halves of a
    surrogate pair is rounded down to the start of that character (it cannot point
    inside a Python character); past the end it is clamped to ``len(line_text)``.
    """
    if utf16_col <= 0:
        return 0
    units = 0
    for index, ch in enumerate(line_text):
        width = 2 if ord(ch) > 0xFFFF else 1
        if units + width > utf16_col:
            return index
        units += width
    return len(line_text)
