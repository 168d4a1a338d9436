"""`ide_protocol/wire/` is sans-IO: bytes in, events out, nothing else.

The modules there hold the wire rules (HTTP/1.1 framing, SSE, NDJSON, the JSON-RPC
codec) and must stay usable from any event loop, any thread, any test, with no socket
at hand: no event loop, no sockets or selectors, no threads or processes, no files.
This test reads each module's syntax tree (it never imports them, so nothing a module
does at import time can hide a violation) and fails on:

* an import of `asyncio`, `socket`, `selectors`, `threading`, `_thread`, `subprocess`,
  `concurrent`, `multiprocessing`, `ssl`, `signal`, `io`, `pathlib`, `tempfile`,
  `shutil`, `mmap` or `fcntl`, as `import X`, `import X.Y`, `from X import ...`, or
  through `__import__("X")` / `importlib.import_module("X")`;
* a relative import that leaves the `wire` package (the rest of `ide_protocol` is
  allowed to do I/O, so importing it would bring I/O in);
* file or stream I/O by call: `open(...)`, `io.open`, `codecs.open`, `os.open`,
  `os.read`, `os.write`, `os.fdopen`, `os.pipe`, file-system calls of `os`
  (`remove`, `rename`, `listdir`, `stat`, ...), the `pathlib` methods that touch the
  disk (`read_text`, `write_bytes`, ...), `print(...)`, `input(...)`, and any use of
  `sys.stdin`, `sys.stdout` or `sys.stderr`.
"""
from __future__ import annotations

import ast
import os
from typing import Iterator, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIRE = os.path.join(ROOT, "ide_protocol", "wire")

FORBIDDEN_MODULES = {"asyncio", "socket", "selectors", "threading", "_thread", "subprocess", "concurrent",
                     "multiprocessing", "ssl", "signal", "io", "pathlib", "tempfile", "shutil", "mmap", "fcntl"}
FORBIDDEN_BUILTINS = {"open", "print", "input"}
OS_IO = {"open", "read", "write", "fdopen", "pipe", "close", "dup", "dup2", "remove", "unlink", "rename",
         "replace", "mkdir", "makedirs", "rmdir", "removedirs", "listdir", "scandir", "stat", "lstat", "walk",
         "chmod", "chown", "truncate", "sendfile", "readv", "writev", "pread", "pwrite", "mkfifo", "symlink",
         "link", "readlink", "utime", "popen", "system", "spawnv", "fork", "kill"}
#: Methods of `pathlib.Path` that touch the disk and that no str/bytes/dict has.
PATH_IO = {"read_text", "read_bytes", "write_text", "write_bytes", "touch", "unlink", "mkdir", "rmdir",
           "iterdir", "rglob", "is_file", "is_dir", "samefile", "symlink_to", "hardlink_to"}
STREAMS = {"stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__"}


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def violations(source: str, package_depth: int = 1) -> List[str]:
    """What in `source` breaks the sans-IO rule, one line each ("line N: why").

    `package_depth` is how deep the module sits below `wire` (1: `wire/x.py`), so that
    a relative import can be told to stay inside the package or not.
    """
    tree = ast.parse(source)
    found: List[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in FORBIDDEN_MODULES:
                    found.append("line %d: imports %s" % (line, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _top(node.module) in FORBIDDEN_MODULES:
                found.append("line %d: imports from %s" % (line, node.module))
            if node.level > package_depth:
                found.append("line %d: relative import %s%s leaves the wire package"
                             % (line, "." * node.level, node.module or ""))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS:
                found.append("line %d: calls %s()" % (line, func.id))
            if isinstance(func, ast.Name) and func.id == "__import__" or (
                    isinstance(func, ast.Attribute) and func.attr == "import_module"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                        _top(arg.value.lstrip(".")) in FORBIDDEN_MODULES:
                    found.append("line %d: imports %s at run time" % (line, arg.value))
                elif not isinstance(arg, ast.Constant):
                    found.append("line %d: imports a module named at run time" % line)
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner, attr = func.value.id, func.attr
                if owner == "os" and attr in OS_IO:
                    found.append("line %d: calls os.%s()" % (line, attr))
                if owner in ("io", "codecs") and attr == "open":
                    found.append("line %d: calls %s.open()" % (line, owner))
            if isinstance(func, ast.Attribute) and func.attr in PATH_IO:
                found.append("line %d: calls .%s() (path I/O)" % (line, func.attr))
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "sys" and node.attr in STREAMS:
                found.append("line %d: uses sys.%s" % (line, node.attr))
    return found


def wire_modules() -> Iterator[str]:
    for folder, dirs, files in os.walk(WIRE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _depth(path: str) -> int:
    return os.path.relpath(path, WIRE).count(os.sep) + 1


MODULES = list(wire_modules())


def test_the_wire_package_has_the_codecs() -> None:
    names = {os.path.relpath(p, WIRE) for p in MODULES}
    assert "__init__.py" in names and len(names) >= 4, names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: os.path.relpath(p, ROOT))
def test_module_is_sans_io(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    problems = violations(source, _depth(path))
    assert not problems, "%s is not sans-IO:\n  %s" % (os.path.relpath(path, ROOT), "\n  ".join(problems))


# The checker itself: each kind of violation is caught (so the test above can fail).

@pytest.mark.parametrize("source", [
    "import asyncio",
    "import concurrent.futures",
    "from socket import socketpair",
    "from multiprocessing.pool import Pool",
    "import threading as t",
    "from selectors import DefaultSelector",
    "import subprocess",
    "from pathlib import Path",
    "import io",
    "from .. import server",
    "from ..common import lockfile",
    "data = open('f').read()",
    "fd = os.open('f', 0)",
    "os.write(1, b'x')",
    "os.read(0, 10)",
    "codecs.open('f')",
    "print('debug')",
    "sys.stdout.write('x')",
    "p.read_text()",
    "p.write_bytes(b'')",
    "__import__('asyncio')",
    "importlib.import_module('socket')",
])
def test_each_kind_of_violation_is_caught(source: str) -> None:
    assert violations(source), source


@pytest.mark.parametrize("source", [
    "import json\nimport re\nfrom typing import Any",
    "from .jsonrpc import dumps",
    "from . import http11",
    "data = b'x'.split(b'\\n')",
    "text = value.encode('utf-8')",
    "from _json import make_encoder",
    "os_name = 'posix'",
    "text = text.replace('a', 'b')",
])
def test_pure_code_passes(source: str) -> None:
    assert violations(source) == [], source
