"""What can go wrong when talking to an IDE, as exception classes.

One hierarchy under `ClientError`, so a caller can catch everything the client raises
(besides `JsonRpcError`, which is the server's own answer) in one place, and tell a
server that vanished (`ServerGone`, never a hang) from one that is slow (`IdeTimeout`),
one that refuses (`HttpStatusError`) and one that speaks garbage (`ProtocolViolation`).
"""
from __future__ import annotations

import asyncio
from typing import Callable, Sequence, Tuple

from ..common.lockfile import LockInfo
from ..wire import http11

__all__ = ["ClientError", "ServerGone", "IdeTimeout", "ProtocolViolation", "HttpStatusError", "NoIdeFound"]


class ClientError(Exception):
    """Base of the errors this module raises (besides `jsonrpc.JsonRpcError`)."""


class ServerGone(ClientError, ConnectionError):
    """The server closed the connection (or refused one) before the exchange was complete."""


class IdeTimeout(ClientError, asyncio.TimeoutError):
    """The server did not answer within the configured timeout."""


class ProtocolViolation(ClientError):
    """The server answered something unparsable (bad HTTP framing, not JSON, ...)."""


class HttpStatusError(ClientError):
    """An HTTP status other than the expected one; carries the whole answer as evidence."""

    def __init__(self, status: int, reason: str, headers: http11.Headers, body: bytes, what: str = "") -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        text = body[:300].decode("utf-8", "replace")
        super().__init__("%sHTTP %d %s%s" % (what + ": " if what else "", status, reason,
                                              (" — " + text) if text else ""))


class NoIdeFound(ClientError):
    """No lock file matches the folder. `others` are the usable locks the CLI would list
    in its `/ide` picker, `rejected` the lock files it would skip, with the reason."""

    def __init__(self, folder: str, directory: str, others: Sequence[LockInfo],
                 rejected: Sequence[Tuple[str, str]]) -> None:
        self.folder = folder
        self.directory = directory
        self.others = list(others)
        self.rejected = list(rejected)
        super().__init__(self.describe())

    def describe(self, show: Callable[[str], str] = str) -> str:
        """The message, one line per lock, with every value it quotes (the locks' names,
        folders and paths, the reasons that quote a lock's content) passed through
        `show`: a lock file is anyone's to write, so a program printing this on a
        terminal gives its escaper, which keeps each value on its line."""
        lines = ["no IDE lock in %s lists the folder %s (the physical folder, compared lexically with each listed one, PROTOCOL.md §1)"
                 % (show(self.directory), show(self.folder))]
        for info in self.others:
            lines.append("  other IDE: %s (pid %d) folders %s — lock %s"
                         % (show(info.ide_name), info.pid, show(", ".join(info.workspace_folders)),
                            show(str(info.path))))
        for path, reason in self.rejected:
            lines.append("  skipped: %s: %s" % (show(path), show(reason)))
        return "\n".join(lines)
