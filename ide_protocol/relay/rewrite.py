"""Paths inside JSON-RPC messages, rewritten by a `PathMap` (never on raw bytes).

Toward the IDE: `tools/call` arguments `original_file_path` (a path, open_diff) and
`uri` (get_diagnostics). Toward the CLI: tool results, whose text content is JSON
(PROTOCOL.md §4: `filePath`, `fileUrl`, `uri` at any depth, and open_diff's `message`
"User accepted changes for <path>"), and the pushes of PROTOCOL.md §5
(`selection_changed`, `add_file_reference`, `add_selection`, `diagnostics_changed`).
A message with nothing to change is returned as the same object, so the caller
re-frames only what changed. A path outside every mapping passes unchanged and is
reported once through `unmapped`.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional, Set

from .pathmap import PathMap

PUSHES = ("selection_changed", "add_file_reference", "add_selection", "diagnostics_changed")
MAX_DEPTH = 64
_MESSAGE_PATH = re.compile(r"^(User (?:accepted|rejected) changes for )(.+)$", re.S)


class Rewriter:
    def __init__(self, paths: PathMap, unmapped: Optional[Callable[[str], None]] = None) -> None:
        self.paths = paths
        self._report = unmapped
        self._seen: Set[str] = set()

    def _note(self, value: str) -> None:
        """Report a path outside every mapping once (its first 200 characters: a path can
        be as long as a message; at most 1000 of them are remembered)."""
        value = value[:200]
        if value not in self._seen and len(self._seen) < 1000:
            self._seen.add(value)
            if self._report is not None:
                self._report(value)

    def _path(self, value: Any, to_cli: bool) -> Any:
        if not isinstance(value, str):
            return value
        mapped = self.paths.path_to_cli(value) if to_cli else self.paths.path_to_ide(value)
        if mapped is None:
            self._note(value)
            return value
        return mapped

    def _uri(self, value: Any, to_cli: bool) -> Any:
        if not isinstance(value, str):
            return value
        mapped = self.paths.uri_to_cli(value) if to_cli else self.paths.uri_to_ide(value)
        if mapped is None:
            self._note(value)
            return value
        return mapped

    # ------------------------------------------------------------ toward the IDE

    def to_ide(self, message: Any) -> Any:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return message
        params = message.get("params")
        args = params.get("arguments") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(args, dict):
            return message
        new_args = dict(args)
        if "original_file_path" in args:
            new_args["original_file_path"] = self._path(args["original_file_path"], False)
        if "uri" in args:
            new_args["uri"] = self._uri(args["uri"], False)
        if new_args == args:
            return message
        return dict(message, params=dict(params, arguments=new_args))

    # ------------------------------------------------------------ toward the CLI

    def to_cli(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return message
        if message.get("method") in PUSHES and "params" in message:
            params = self._payload(message["params"], 0)
            return message if params is message["params"] else dict(message, params=params)
        result = message.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(content, list):
            return message
        new_content = [self._content_item(item) for item in content]
        if all(a is b for a, b in zip(new_content, content)):
            return message
        return dict(message, result=dict(result, content=new_content))

    def _content_item(self, item: Any) -> Any:
        if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
            return item
        try:
            payload = json.loads(item["text"])
        except (ValueError, RecursionError):
            return item
        new = self._payload(payload, 0)
        if new is payload:
            return item
        return dict(item, text=json.dumps(new, indent=2, ensure_ascii=False))

    def _payload(self, value: Any, depth: int) -> Any:
        """`value` with its path fields mapped toward the CLI (the same object if none)."""
        if depth > MAX_DEPTH:
            return value
        if isinstance(value, list):
            items = [self._payload(v, depth + 1) for v in value]
            return value if all(a is b for a, b in zip(items, value)) else items
        if not isinstance(value, dict):
            return value
        out = {}
        changed = False
        for key, item in value.items():
            if key == "filePath":
                new = self._path(item, True)
            elif key in ("fileUrl", "uri"):
                new = self._uri(item, True)
            elif key == "message" and isinstance(item, str) and _MESSAGE_PATH.match(item):
                m = _MESSAGE_PATH.match(item)
                assert m is not None
                new = m.group(1) + self._path(m.group(2), True)
                new = item if new == item else new
            else:
                new = self._payload(item, depth + 1)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
