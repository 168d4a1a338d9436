"""Find the `ide_protocol` library: vendored next to this package, else on `sys.path`,
else in the source checkout this plugin folder lives in.

`make vim-plugin` copies the library to `copilot_ide_vim/ide_protocol/`, so an
installed plugin uses its own copy whatever else is on Vim's `sys.path`. A plugin run
from the repository (`set rtp^=REPO/editors/vim`) finds the checkout two folders up.
"""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Tuple


HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))


class Library:
    """The parts of `ide_protocol` the plugin uses, wherever they came from."""

    def __init__(self, package: ModuleType, origin: str) -> None:
        name = package.__name__
        threaded = importlib.import_module(name + ".server.threaded")
        tools = importlib.import_module(name + ".common.tools")
        self.lockfile = importlib.import_module(name + ".common.lockfile")
        self.ThreadedIdeServer = threaded.ThreadedIdeServer
        self.Selection = tools.Selection
        self.Diagnostic = tools.Diagnostic
        self.origin = origin
        self.path = os.path.dirname(os.path.abspath(package.__file__ or ""))
        self.version = getattr(package, "__version__", "?")


def find() -> Tuple[ModuleType, str]:
    """The library's package (only its `__init__`, which imports nothing of it) and where
    it came from, or ImportError saying where it was looked for."""
    if os.path.isfile(os.path.join(HERE, "ide_protocol", "__init__.py")):
        return importlib.import_module(__package__ + ".ide_protocol"), "vendored"
    try:
        return importlib.import_module("ide_protocol"), "sys.path"
    except ImportError:
        pass
    if os.path.isfile(os.path.join(CHECKOUT, "ide_protocol", "__init__.py")):
        sys.path.append(CHECKOUT)
        return importlib.import_module("ide_protocol"), "checkout"
    raise ImportError("ide_protocol not found: not vendored in %s (make vim-plugin), not on sys.path, "
                      "not in a checkout at %s" % (HERE, CHECKOUT))


def load() -> Library:
    """The library, or ImportError saying where it was looked for."""
    return Library(*find())


def guest_threads() -> ModuleType:
    """The library's `common.guest_threads` alone (it imports only `signal`): for a thread
    to call before it imports the rest."""
    return importlib.import_module(find()[0].__name__ + ".common.guest_threads")
