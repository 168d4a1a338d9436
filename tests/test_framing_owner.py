"""Every HTTP framing rule is decided in `wire/http11` and nowhere else.

The server (`ide_protocol/server/`) and the client (`ide_protocol/client/`) hear about
framing only through the wire layer: the parser's events (`Request.keep_alive`,
`Request.body_follows`, `Response.keep_alive`), its rules (`keeps_alive_after`) and
its writers (which spell `Content-Length`, `Transfer-Encoding` and `Connection`). This
reads their syntax trees for the framing vocabulary: a field name or token of the
framing rules written as a string, or a framing rule's helper called by name. The
wire layer itself is the control: it must be found to spell them.
"""
from __future__ import annotations

import ast
import os
from typing import List


ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ide_protocol")

#: Strings only a framing rule has reason to spell (compared without case).
FRAMING_WORDS = {"close", "keep-alive", "chunked", "connection", "content-length", "transfer-encoding"}
#: Byte strings of the chunked coding.
FRAMING_BYTES = {b"0\r\n\r\n", b"\r\n"}
#: The wire layer's framing helpers that only it should call.
FRAMING_HELPERS = {"body_framing", "connection_value", "keep_alive", "check_body_size",
                   "encode_chunked_body"}


def _not_words(tree: ast.AST) -> set:
    """The string constants that are no wire text: docstrings, and the attribute
    names of `__slots__`."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                found.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            found.update(id(n) for n in ast.walk(node.value))
    return found


def framing_decisions(folder: str) -> List[str]:
    """Where the modules of `folder` spell a framing token or call a framing helper."""
    found = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        docstrings = _not_words(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in docstrings:
                value = node.value
                if isinstance(value, str) and value.strip().lower() in FRAMING_WORDS:
                    found.append("%s:%d spells %r" % (name, node.lineno, value))
                elif isinstance(value, bytes) and value in FRAMING_BYTES:
                    found.append("%s:%d spells %r" % (name, node.lineno, value))
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in FRAMING_HELPERS:
                    found.append("%s:%d calls %s" % (name, node.lineno, called))
    return found


def test_the_wire_layer_spells_the_framing_vocabulary() -> None:
    # The control: the reader finds what it looks for where the rules live.
    found = " ".join(framing_decisions(os.path.join(ROOT, "wire", "http11")))
    for word in ("'close'", "'keep-alive'", "'chunked'", "'content-length'", "'transfer-encoding'", "'connection'"):
        assert word in found.lower(), word


def test_the_server_decides_no_framing_rule() -> None:
    assert framing_decisions(os.path.join(ROOT, "server")) == []


def test_the_client_decides_no_framing_rule() -> None:
    assert framing_decisions(os.path.join(ROOT, "client")) == []
