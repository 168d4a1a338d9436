"""The name of the running program, as the user typed it, for usage and error lines.

The same code runs as `python3 -m ide_protocol serve` and as the `copilot-ide serve`
console script (setup.cfg), so a fixed `prog=` in a parser would tell one of them a
command that does not exist. `sys.argv[0]` says which: the script's own path for a
console script, the package's `__main__.py` for `-m`.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

MODULE_FORM = "python3 -m ide_protocol"


def program_name(command: Optional[str] = None, module_form: str = MODULE_FORM,
                 argv0: Optional[str] = None) -> str:
    """`copilot-ide serve` when started through a console script, `python3 -m
    ide_protocol serve` otherwise (`-m`, an interpreter, `-c`, or a test runner that
    calls `main()` in process). `command` is appended when given."""
    path = sys.argv[0] if argv0 is None else argv0
    base = os.path.basename(path or "")
    if base.endswith(".py") or base.startswith("python") or base in ("", "-c", "-m", "pytest", "py.test"):
        name = module_form
    else:
        name = base[:-4] if base.lower().endswith(".exe") else base  # Windows launchers
    return "%s %s" % (name, command) if command else name
