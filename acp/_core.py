"""The one place that finds the shared wire core (`ide_protocol`'s JSON-RPC and NDJSON).

`acp` has no JSON-RPC code of its own (one core serves both transports). When both
folders are vendored side by side inside another package, the sibling is found
relatively; otherwise the top-level `ide_protocol` is used.
"""
from __future__ import annotations

try:  # vendored: <host>/acp and <host>/ide_protocol
    from ..ide_protocol import __version__, rpc  # type: ignore[misc]
    from ..ide_protocol.wire import jsonrpc, ndjson  # type: ignore[misc]
    from ..ide_protocol.common.terminal_text import safe_text  # type: ignore[misc]
except (ImportError, ValueError):  # top level (installed, or run from the checkout)
    from ide_protocol import __version__, rpc  # type: ignore[no-redef]
    from ide_protocol.wire import jsonrpc, ndjson  # type: ignore[no-redef]
    from ide_protocol.common.terminal_text import safe_text  # type: ignore[no-redef]

__all__ = ["__version__", "jsonrpc", "ndjson", "rpc", "safe_text"]  # one version for both packages
