"""`EditorState`: what the IDE told the server about its editor — the selection and
each file's diagnostics — kept in one place that the tools read (`get_selection`,
`get_diagnostics`) and the pushes follow (PROTOCOL.md §4, §5).

It only holds and normalises the state; `IdeServer` decides when to push a change.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..common.paths import path_to_uri, uri_to_path, wire_file_path
from ..common.tools import Diagnostic, Selection


def uri_and_path(path_or_uri: str) -> Tuple[str, str]:
    """The `file:` URI and the absolute path (as the wire carries it, PROTOCOL.md §6)
    of a file named either way; raises ValueError for a URI that names no local file."""
    if path_or_uri.startswith("file:"):
        return path_or_uri, uri_to_path(path_or_uri)
    path = wire_file_path(os.path.abspath(path_or_uri))  # §6, as `file_fields` gives it
    return path_to_uri(path), path


class EditorState:
    """The active editor's selection and the diagnostics per file."""

    def __init__(self) -> None:
        self.selection: Optional[Selection] = None
        self.diagnostics: Dict[str, Tuple[str, List[Diagnostic]]] = {}  # uri -> (path, diagnostics)

    def set_selection(self, selection: Optional[Selection]) -> Optional[Selection]:
        """Record a new selection; returns it (marked current) when it is one to push.
        `None` (no active editor) keeps the last selection, marked not current."""
        if selection is None:
            if self.selection is not None:
                self.selection = self.selection.with_current(False)
            return None
        self.selection = selection.with_current(True)
        return self.selection

    def set_diagnostics(self, path_or_uri: str, diagnostics: Sequence[Diagnostic]) -> str:
        """Replace one file's diagnostics (empty clears them); returns the file's URI."""
        uri, path = uri_and_path(path_or_uri)
        if diagnostics:
            self.diagnostics[uri] = (path, list(diagnostics))
        else:
            self.diagnostics.pop(uri, None)
        return uri

    def diagnostics_json(self, uri: str) -> List[Dict[str, Any]]:
        """One file's diagnostics as `diagnostics_changed` carries them (§5)."""
        entry = self.diagnostics.get(uri)
        return [d.to_json() for d in entry[1]] if entry else []

    def diagnostics_result(self, wanted_uri: Optional[str] = None) -> List[Dict[str, Any]]:
        """`get_diagnostics`' answer (§4): every file with diagnostics, or only one."""
        return [{"uri": uri, "filePath": path, "diagnostics": [d.to_json() for d in diags]}
                for uri, (path, diags) in self.diagnostics.items()
                if diags and (not wanted_uri or uri == wanted_uri)]
