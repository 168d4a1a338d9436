"""No import cycle among the modules of `ide_protocol` and `acp`: each module can be read
(and vendored) knowing only what it imports. Imports inside functions count too (a
deferred import hides a cycle, it does not remove it), and so do those under
`TYPE_CHECKING` (they never run, but a reader still has to know the other module to
read this one). A package importing its own submodules is no cycle."""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("ide_protocol", "acp")


def _module_name(path: str) -> str:
    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _imports(path: str, module: str) -> Set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found.update(target + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def import_graph() -> Dict[str, Set[str]]:
    files = {}
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(ROOT, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    files[_module_name(path)] = path
    return {module: {other for other in _imports(path, module) if other in files and other != module
                     and not other.startswith(module + ".") and not module.startswith(other + ".")}
            for module, path in files.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    found: List[List[str]] = []
    state: Dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: List[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                found.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_the_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]




def test_no_module_imports_one_that_imports_it() -> None:
    graph = import_graph()
    assert "ide_protocol.common.lock_cleanup" in graph["ide_protocol.common.lockfile"]  # (the walk sees imports)
    assert "acp.permissions" in graph["acp.render"]  # (imports for the type checker count)
    assert cycles(graph) == []
