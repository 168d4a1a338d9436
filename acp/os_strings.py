"""The one check of the agent's strings that go to the operating system as they are:
a file's path (`fs/*`), a command, its arguments and environment (`terminal/*`,
ACP.md §5).

The system takes strings of bytes ended by a NUL: a NUL inside would end one early,
and a lone surrogate (JSON can carry `"\\ud800"`) has no bytes at all, except the
ones `os.fsencode` maps back to the undecodable bytes of a POSIX name. Python
raises ValueError or UnicodeEncodeError for them deep inside `os` or `subprocess`,
which the dispatcher can only answer as its own failure (`-32603`, a traceback in
the log). Checked before anything is used, they are what they are, the agent's
mistake: `-32602 Invalid params`, naming the field.
"""
from __future__ import annotations

import os
import sys

from ._core import jsonrpc


def check_os_string(value: object, field: str) -> None:
    """Raise `-32602` when the string `value` cannot be handed to the system; `field`
    names it in the message (`path`, `args[1]`). Values of other types are left to
    the caller's own type checks."""
    if not isinstance(value, str):
        return
    if "\x00" in value:
        raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: %s contains a NUL character" % field)
    try:
        os.fsencode(value)
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        what = ("a lone surrogate (U+%04X)" % code if 0xD800 <= code <= 0xDFFF else
                "U+%04X, which the system's encoding (%s) lacks" % (code, sys.getfilesystemencoding()))
        raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: %s holds %s" % (field, what)) from None
