"""An Agent Client Protocol client (ACP v1, checked against Copilot CLI 1.0.102).

Drives `copilot --acp --stdio` or any ACP agent from asyncio code (`Client`) and from
the terminal (`python3 -m acp`). It stands on the same JSON-RPC core and NDJSON framing
as `ide_protocol` (see `_core.py`). Public names load lazily, so `import acp` is cheap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what `__getattr__` gives, for a type checker (nothing is imported at run time)
    from ._core import __version__
    from .client import Client, default_agent
    from .connection import USE_DEFAULT, AgentConnection
    from .endpoints import DEFAULT_AGENT, parse_address
    from .errors import (AcpError, AgentConnectError, AgentExited, AgentNotAcp, AgentStartError, JsonRpcError,
                         LineTooLong, LoginFailed, LoginRefused, NotAdvertised, ProtocolVersionError, RequestTimeout,
                         SessionBusy)
    from .fs import FileSystem
    from .askers import TerminalAsker, TerminalConsentAsker
    from .auth import LoginCommand, LoginMethod
    from .permissions import PermissionRequest, allow_always, allow_once, reject
    from .session import PromptResult, Session, Turn
    from .terminal import TerminalRequest, Terminals

_LAZY = {
    "__version__": "_core",  # the project's one version, defined in ide_protocol
    "Client": "client",
    "default_agent": "client",
    "Session": "session",
    "Turn": "session",
    "PromptResult": "session",
    "AgentConnection": "connection",
    "DEFAULT_AGENT": "endpoints",
    "parse_address": "endpoints",
    "PermissionRequest": "permissions",
    "TerminalAsker": "askers",
    "TerminalConsentAsker": "askers",
    "allow_once": "permissions",
    "allow_always": "permissions",
    "reject": "permissions",
    "FileSystem": "fs",
    "Terminals": "terminal",
    "TerminalRequest": "terminal",
    "USE_DEFAULT": "connection",
    "AcpError": "errors",
    "AgentStartError": "errors",
    "AgentConnectError": "errors",
    "AgentNotAcp": "errors",
    "AgentExited": "errors",
    "RequestTimeout": "errors",
    "SessionBusy": "errors",
    "NotAdvertised": "errors",
    "ProtocolVersionError": "errors",
    "LoginFailed": "errors",
    "LoginRefused": "errors",
    "LoginMethod": "auth",
    "LoginCommand": "auth",
    "LineTooLong": "errors",
    "JsonRpcError": "errors",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:  # PEP 562: import the submodule on first use
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import importlib

    value = getattr(importlib.import_module("." + module_name, __name__), name)
    globals()[name] = value
    return value
