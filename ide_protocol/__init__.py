"""GitHub Copilot CLI's `/ide` protocol in pure Python (standard library only).

The IDE side (`IdeServer`, `ThreadedIdeServer`), the client side (`IdeClient`) and the
sans-IO wire core (`ide_protocol.wire`) they stand on. The public
names below are imported lazily, so `import ide_protocol` stays cheap inside editors.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what `__getattr__` gives, for a type checker (nothing is imported at run time)
    from .client import IdeClient
    from .common.tools import Diagnostic, Selection
    from .server.diffs import DiffRequest
    from .server.ide_server import IdeServer
    from .server.options import Hooks, Limits
    from .server.threaded import ThreadedIdeServer
    from .wire.jsonrpc import JsonRpcError

__version__ = "0.1.0"

_LAZY = {
    "IdeServer": "server.ide_server",
    "ThreadedIdeServer": "server.threaded",
    "IdeClient": "client",
    "DiffRequest": "server.ide_server",
    "Limits": "server.options",
    "Hooks": "server.options",
    "Selection": "common.tools",
    "Diagnostic": "common.tools",
    "JsonRpcError": "wire.jsonrpc",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:  # PEP 562: load submodules on first use
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import importlib

    module = importlib.import_module("." + module_name, __name__)
    value = getattr(module, name)
    globals()[name] = value
    return value
