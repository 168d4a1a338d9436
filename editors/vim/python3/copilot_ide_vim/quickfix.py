"""Diagnostics from Vim's quickfix list and every window's location list.

The plugin's timer compares the lists' ids and change ticks in Vim script (cheap:
autoload/copilot_ide.vim), and `collect()` runs only when a list changed. Lists of
search results (`:grep`, `:vimgrep`, `:helpgrep` and their location-list forms) are no
diagnostics and are left out.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import vim  # type: ignore

from . import positions
from .vimtext import as_int

# The search commands as Vim abbreviates them: (shortest form, full name).
SEARCHES = (("gr", "grep"), ("vim", "vimgrep"), ("lgr", "lgrep"), ("lv", "lvimgrep"), ("helpg", "helpgrep"),
            ("lh", "lhelpgrep"), ("grepa", "grepadd"), ("vimgrepa", "vimgrepadd"), ("lgrepa", "lgrepadd"),
            ("lvimgrepa", "lvimgrepadd"))
MODIFIERS = ("sil", "sile", "silen", "silent", "silent!", "sil!", "noa", "noautocmd", "keepa", "keepalt",
             "keepj", "keepjumps", "unsilent")


def is_search(title: str) -> bool:
    """True for the title of a list a search command made (`:silent vimgrep /x/ *`):
    Vim sets it to the command line as typed."""
    words = title.lstrip(":").split()
    while words and words[0] in MODIFIERS:
        words.pop(0)
    if not words:
        return False
    name = words[0].split("/", 1)[0].rstrip("!")
    return any(full.startswith(name) and len(name) >= len(short) for short, full in SEARCHES)

_LISTS = ("[extend(getqflist({'title': 0}), {'items': getqflist(), 'kind': 'quickfix'})] + "
          "map(filter(getwininfo(), {_, w -> getloclist(w.winid, {'id': 0}).id != 0}), "
          "{_, w -> extend(getloclist(w.winid, {'title': 0}), "
          "{'items': getloclist(w.winid), 'kind': 'location list'})})")


def collect(make_diagnostic: Any) -> Dict[str, List[Any]]:
    """path -> diagnostics, from every list that is not a search's."""
    out: Dict[str, List[Any]] = {}
    seen = set()
    lines = _Lines()
    for qf in vim.eval(_LISTS):
        title = qf.get("title") or ""
        if is_search(title):
            continue
        source = title.lstrip(":").strip() or qf["kind"]
        for item in qf["items"]:
            bufnr = as_int(item.get("bufnr"))
            if not bufnr or not as_int(item.get("valid")):
                continue
            path = lines.path(bufnr)
            if not path:
                continue
            lnum = as_int(item.get("lnum"))
            end_lnum = as_int(item.get("end_lnum"))
            col = as_int(item.get("col"))
            end_col = as_int(item.get("end_col"))
            text = " ".join((item.get("text") or "").split())
            key = (path, lnum, col, end_lnum, end_col, text, item.get("type"))
            if key in seen:  # the same entry in two lists (a location list copied from :make)
                continue
            seen.add(key)
            line = lines.line(bufnr, path, lnum)
            end_text = lines.line(bufnr, path, end_lnum) if end_lnum and end_lnum != lnum else None
            start, end = positions.range_of_entry(line, col, end_col, end_lnum, lnum, end_text)
            code = item.get("nr")
            out.setdefault(path, []).append(make_diagnostic(
                text or "(no message)", positions.severity(item.get("type") or ""), start, end,
                source=source, code=as_int(code) if as_int(code) else None))
    return out


class _Lines:
    """Line texts of buffers (loaded ones from Vim, others from disk, read once)."""

    def __init__(self) -> None:
        self._paths: Dict[int, Optional[str]] = {}
        self._files: Dict[str, List[str]] = {}

    def path(self, bufnr: int) -> Optional[str]:
        if bufnr not in self._paths:
            name = vim.eval("fnamemodify(bufname(%d), ':p')" % bufnr)
            self._paths[bufnr] = os.path.realpath(name) if name else None
        return self._paths[bufnr]

    def line(self, bufnr: int, path: str, lnum: int) -> str:
        if lnum <= 0:
            return ""
        try:
            buf = vim.buffers[bufnr]
            if buf.valid and as_int(vim.eval("bufloaded(%d)" % bufnr)):
                return buf[lnum - 1] if lnum <= len(buf) else ""
        except (KeyError, IndexError, vim.error):
            pass
        if path not in self._files:
            try:
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    self._files[path] = positions.lines_of(f.read())
            except OSError:
                self._files[path] = []
        lines = self._files[path]
        return lines[lnum - 1] if lnum <= len(lines) else ""


def diff_sets(old: Dict[str, List[Any]], new: Dict[str, List[Any]]) -> List[Tuple[str, List[Any]]]:
    """What to send: every file whose diagnostics changed, `[]` for a file that has none
    any more."""
    changes = [(path, diags) for path, diags in new.items()
               if [d.to_json() for d in diags] != [d.to_json() for d in old.get(path, [])]]
    changes += [(path, []) for path in old if path not in new]
    return changes
