"""docs/WIRE.md is generated from a traced session with our own server; it must match
a fresh generation (`make wire-doc` rewrites it)."""
from __future__ import annotations

import difflib
import importlib.util
import os
from typing import Any

import platforms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "make_wire_doc.py")
WIRE = os.path.join(ROOT, "docs", "WIRE.md")


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("make_wire_doc", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)  # type: ignore[attr-defined]
    return module


@platforms.wire_doc_on_posix
def test_wire_doc_is_up_to_date(tmp_path: Any) -> None:
    module = _load()
    fresh = tmp_path / "WIRE.md"
    assert module.main(["--out", str(fresh)]) == 0
    with open(WIRE, encoding="utf-8") as f:
        current = f.read()
    text = fresh.read_text(encoding="utf-8")
    if current != text:
        diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True), "docs/WIRE.md",
                                            "fresh", n=1))
        raise AssertionError("docs/WIRE.md is stale: run `make wire-doc`\n" + diff[:4000])
    assert module.main(["--check", "--out", WIRE]) == 0


def test_wire_doc_shows_a_complete_session() -> None:
    with open(WIRE, encoding="utf-8") as f:
        text = f.read()
    for needle in ('"method":"server/discover"', '"method":"initialize"', "HTTP/1.1 202 Accepted",
                   "GET /mcp HTTP/1.1", '"method":"tools/list"', '"name":"open_diff"', "SAVED",
                   '"method":"selection_changed"', '"method":"diagnostics_changed"', '"method":"add_file_reference"',
                   '"method":"add_selection"', "DELETE /mcp HTTP/1.1", "Nonce <nonce>"):
        assert needle in text, needle
    assert "/tmp/wire-doc-" not in text and "wire-doc-" not in text.replace("make wire-doc", "")


@platforms.wire_doc_on_posix
def test_a_stale_file_is_detected(tmp_path: Any) -> None:
    module = _load()
    stale = tmp_path / "WIRE.md"
    with open(WIRE, encoding="utf-8") as f:
        stale.write_text(f.read().replace("HTTP/1.1 202 Accepted", "HTTP/1.1 200 OK", 1), encoding="utf-8")
    assert module.main(["--check", "--out", str(stale)]) == 1
