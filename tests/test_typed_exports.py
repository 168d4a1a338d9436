"""The lazily loaded public names are typed for a user's type checker.

`ide_protocol` and `acp` load their public names on first use (`__getattr__`, so that
importing them stays cheap); a type checker does not run that, and without more would
type `from ide_protocol import IdeServer` as `Any`. So each package imports every lazy
name under `if TYPE_CHECKING:`, from the module `__getattr__` loads it from (or the one
that defines it), and that name is really there."""
from __future__ import annotations

import ast
import importlib
import os
from typing import Dict, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checker_imports(package: str) -> Dict[str, Tuple[str, int]]:
    """name -> (module, level) of each `from ... import name` under TYPE_CHECKING."""
    tree = ast.parse(open(os.path.join(ROOT, package, "__init__.py"), encoding="utf-8").read())
    found: Dict[str, Tuple[str, int]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.dump(statement.test):
            for node in ast.walk(statement):
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        found[alias.asname or alias.name] = (node.module or "", node.level)
    return found


@pytest.mark.parametrize("package", ["ide_protocol", "acp"])
def test_every_lazy_name_is_imported_for_the_type_checker(package: str) -> None:
    lazy = importlib.import_module(package)._LAZY  # type: ignore[attr-defined]
    imports = _checker_imports(package)
    assert set(lazy) - {"__version__"} <= set(imports)
    for name, (module, level) in imports.items():
        assert level == 1 and module
        loaded = getattr(importlib.import_module(package), name)
        assert getattr(importlib.import_module("%s.%s" % (package, module)), name) is loaded
