"""UTF-8 output for the command-line programs, whatever the locale says.

The programs print paths, folder and IDE names, which can hold any character. Python
writes a pipe or a file in the locale's encoding: on Windows the ANSI code page (cp1252
and the like), which cannot write a Cyrillic or CJK folder name (``UnicodeEncodeError``)
and writes "§" as a byte a UTF-8 reader rejects. `serve` encodes its own output as
UTF-8 (`terminal.output`); the other programs call `utf8_output()` first, so that all of
them write the same bytes. A console needs nothing: Python writes it as UTF-16.
"""
from __future__ import annotations

import io
import sys

__all__ = ["utf8_output"]


def utf8_output() -> None:
    """Make `sys.stdout` and `sys.stderr` write UTF-8; what UTF-8 cannot encode (a lone
    surrogate from an undecodable file name) becomes a backslash escape, as in `serve`."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if reconfigure is None or (encoding == "utf8" and getattr(stream, "errors", "") == "backslashreplace"):
            continue
        try:
            stream.flush()
            reconfigure(encoding="utf-8", errors="backslashreplace")
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            pass  # a replaced stream that cannot change: it keeps its own encoding
