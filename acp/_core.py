"""The one place that finds the shared wire core (`ide_protocol`'s JSON-RPC and NDJSON).

`acp` has no JSON-RPC code of its own (one core serves both transports). When both
folders are vendored side by side inside another package, the sibling is found
relatively; otherwise the top-level `ide_protocol` is used.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type checker reads the top-level package (the same code either way)
    from ide_protocol import __version__, rpc
    from ide_protocol.common.stream_close import close_stream
    from ide_protocol.common.child_process import start_child
    from ide_protocol.common import win32
    from ide_protocol.common.terminal_text import safe_text
    from ide_protocol.wire import jsonrpc, ndjson
else:
    try:  # vendored: <host>/acp and <host>/ide_protocol
        from ..ide_protocol import __version__, rpc
        from ..ide_protocol.wire import jsonrpc, ndjson
        from ..ide_protocol.common.terminal_text import safe_text
        from ..ide_protocol.common.stream_close import close_stream
        from ..ide_protocol.common.child_process import start_child
        from ..ide_protocol.common import win32
    except (ImportError, ValueError):  # top level (installed, or run from the checkout)
        from ide_protocol import __version__, rpc
        from ide_protocol.wire import jsonrpc, ndjson
        from ide_protocol.common.terminal_text import safe_text
        from ide_protocol.common.stream_close import close_stream
        from ide_protocol.common.child_process import start_child
        from ide_protocol.common import win32

__all__ = ["__version__", "close_stream", "jsonrpc", "ndjson", "rpc", "safe_text", "start_child", "win32"]  # one version for both packages
