"""Path mapping between the IDE's machine and the CLI's, as pure functions.

The CLI matches a lock's `workspaceFolders` against its own folder lexically (PROTOCOL.md
§1) and shows, opens and writes the paths the IDE sends; the IDE opens the paths the CLI
sends. Across a container, SSH host or WSL the two name the same file differently, so
the relay rewrites every path in the messages it carries by a table of prefix pairs
`IDE_PATH=CLI_PATH`:

* the longest matching prefix wins, matched on whole components (`/a/b` maps `/a/b/c`,
  never `/a/bc`);
* a prefix that starts with a drive letter (`C:\\`, `c:/`) or `\\\\server\\share` follows
  the Windows CLI's folder rules: either separator, any letter case; the others are
  POSIX paths, matched case-sensitively as the CLI does;
* `file://` URIs (PROTOCOL.md §6) are decoded, mapped as paths and encoded again by the
  rules of the side they go to (`file:///c%3A/...` for a drive);
* `--wsl` adds `X:\\` <-> `/mnt/x` for every drive letter.

A path outside every mapping is returned unchanged (`None` from the `map_*` functions so
that the caller can say so once).
"""
from __future__ import annotations

import ntpath
import posixpath
import re
import string
from typing import List, Optional, Sequence, Tuple

from ..common.lock_rules import folder_key
from ..common.paths import path_to_uri, uri_to_path

_DRIVE = re.compile(r"^[A-Za-z]:(?=[\\/]|$)")
_URI_DRIVE = re.compile(r"^file:(//[^/]*)?/[A-Za-z](:|%3[Aa]|\|)(/|$)")


def is_windows_path(path: str) -> bool:
    """A drive-letter path or a UNC path (either separator)."""
    return bool(_DRIVE.match(path)) or path.startswith("\\\\") or path.startswith("//")


class _Side:
    """One prefix of a mapping: the text to write, and the key to match."""

    __slots__ = ("text", "windows", "key", "sep")

    def __init__(self, prefix: str) -> None:
        self.windows = is_windows_path(prefix)
        self.sep = "\\" if self.windows else "/"
        text = prefix.replace("/", "\\") if self.windows else prefix
        while len(text) > 1 and text.endswith(self.sep) and not text.endswith(self.sep * 2):
            text = text[:-1]
        if text == "/":
            text = ""  # the root: every absolute path is under it
        self.text = text
        self.key = _key(text, self.windows)

    def remainder(self, path: str) -> Optional[str]:
        """What follows this prefix in `path` (starting with a separator or empty), or
        None when `path` is not under it."""
        if self.windows != is_windows_path(path):
            return None
        # `.` and `..` resolved first (as text: each side's system resolves them the same
        # way), so that `/w/p/../../etc/passwd` is not taken for a path under `/w/p`: it
        # would be mapped to a different file on the other side.
        path = ntpath.normpath(path).replace("/", "\\") if self.windows else posixpath.normpath(path)
        candidate = _key(path, self.windows)
        if candidate == self.key:
            return ""
        if candidate.startswith(self.key + self.sep) or (self.key.endswith(self.sep) and candidate.startswith(self.key)):
            if not self.windows:
                return candidate[len(self.key):]
            # The key is in lower case (whose length may differ): the path's own spelling
            # after as many components as the prefix has.
            depth = len(self.key.rstrip(self.sep).split(self.sep))
            return "".join(self.sep + part for part in path.split(self.sep)[depth:])
        return None

    def join(self, remainder: str, from_sep: str) -> str:
        rest = "" if remainder == from_sep else remainder.replace(from_sep, self.sep)
        if not self.text and not rest:
            return "/"
        if not rest and self.windows and _DRIVE.match(self.text) and len(self.text) == 2:
            return self.text + "\\"  # a drive's root is `C:\`, not `C:` (its cwd)
        return self.text + rest


def _key(path: str, windows: bool) -> str:
    """The form compared: a Windows path in lower case, as the Windows CLI compares
    folders (`lock_rules.folder_key`, PROTOCOL.md §1); a POSIX path as it is."""
    return folder_key(path, windows=True) if windows else path


def parse_map(spec: str) -> Tuple[str, str]:
    """`IDE_PATH=CLI_PATH` from the command line (the first `=` splits: a drive path has
    none, a POSIX path rarely has one)."""
    ide, sep, cli = spec.partition("=")
    if not sep or not ide or not cli:
        raise ValueError("a mapping is IDE_PATH=CLI_PATH, got %r" % spec)
    for side in (ide, cli):
        if not (side.startswith("/") or is_windows_path(side)):
            raise ValueError("a mapping needs absolute paths, got %r" % side)
    return ide, cli


def wsl_pairs() -> List[Tuple[str, str]]:
    """The WSL preset: every drive `X:\\` on the IDE's side is `/mnt/x` on the CLI's."""
    return [("%s:\\" % letter.upper(), "/mnt/%s" % letter) for letter in string.ascii_lowercase]


class PathMap:
    """A table of (IDE prefix, CLI prefix) pairs, applied both ways."""

    def __init__(self, pairs: Sequence[Tuple[str, str]]) -> None:
        sides = [(_Side(ide), _Side(cli)) for ide, cli in pairs]
        # longest prefix first, in each direction
        self._to_cli = sorted(sides, key=lambda pair: -len(pair[0].key))
        self._to_ide = sorted(((cli, ide) for ide, cli in sides), key=lambda pair: -len(pair[0].key))

    def __bool__(self) -> bool:
        return bool(self._to_cli)

    def path_to_cli(self, path: str) -> Optional[str]:
        return _map(self._to_cli, path)

    def path_to_ide(self, path: str) -> Optional[str]:
        return _map(self._to_ide, path)

    def uri_to_cli(self, uri: str) -> Optional[str]:
        return _map_uri(self._to_cli, uri)

    def uri_to_ide(self, uri: str) -> Optional[str]:
        return _map_uri(self._to_ide, uri)


def _map(table: Sequence[Tuple[_Side, _Side]], path: str) -> Optional[str]:
    hit = _match(table, path)
    return None if hit is None else hit[0]


def _match(table: Sequence[Tuple[_Side, _Side]], path: str) -> Optional[Tuple[str, _Side]]:
    if not isinstance(path, str) or not path:
        return None
    for source, target in table:
        rest = source.remainder(path)
        if rest is not None:
            return target.join(rest, source.sep), target
    return None


def _map_uri(table: Sequence[Tuple[_Side, _Side]], uri: str) -> Optional[str]:
    if not isinstance(uri, str) or not uri[:5].lower() == "file:":
        return None
    windows = bool(_URI_DRIVE.match(uri)) or not uri[5:].startswith("///") and uri[5:7] == "//"
    try:
        path = uri_to_path(uri, windows=windows)
    except ValueError:
        return None
    hit = _match(table, path)
    if hit is None:
        return None
    mapped, target = hit
    try:
        return path_to_uri(mapped, windows=target.windows)
    except ValueError:
        return None
