"""The exceptions the ACP client raises, kept apart so every module can share them.

They subclass the wire core's own classes where one fits (`TransportClosed`,
`asyncio.TimeoutError`), so code written against `ide_protocol.jsonrpc` catches them too.
Errors the agent answers with stay `jsonrpc.JsonRpcError` (code, message, data).
"""
from __future__ import annotations

import asyncio
import signal
from typing import Optional, Sequence

from ._core import jsonrpc

JsonRpcError = jsonrpc.JsonRpcError


class AcpError(Exception):
    """Base of the errors raised by this package (not of the agent's JSON-RPC errors)."""


class AgentStartError(AcpError):
    """The agent program could not be started at all (not found, not executable)."""


class AgentConnectError(AgentStartError):
    """No connection to an agent listening on TCP (refused, unknown host, no answer)."""


class AgentExited(jsonrpc.TransportClosed, AcpError):
    """The agent's stdout ended: it exited, crashed or closed the pipe.

    Every request still waiting fails with this (ACP.md §7: a prompt pending at EOF is
    never answered). The message carries the exit status and the last stderr lines,
    because a failed start explains itself only there (ACP.md §1).
    """

    def __init__(self, message: str, returncode: Optional[int] = None,
                 stderr_tail: Sequence[str] = ()) -> None:
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)
        super().__init__(message)

    @classmethod
    def describe(cls, returncode: Optional[int], stderr_tail: Sequence[str],
                 expected: bool = False, where: str = "the agent", socket: bool = False,
                 error: Optional[BaseException] = None) -> "AgentExited":
        """The one sentence a user sees when the agent goes away: why, as far as we
        know (exit status or signal of a child; reset or close of a socket)."""
        if expected:
            text = "the agent connection was closed"
        elif isinstance(error, ConnectionResetError):
            text = "%s reset the connection" % where
        elif error is not None:
            text = "reading from %s failed: %s" % (where, getattr(error, "strerror", None) or error)
        elif socket:
            text = "%s closed the connection" % where
        elif returncode is None:
            text = "the agent closed its output"
        elif returncode < 0:
            text = "the agent was killed by signal %d (%s)" % (-returncode, _signal_name(-returncode))
        else:
            text = "the agent exited with status %d" % returncode
        last = [line for line in stderr_tail if line.strip()]
        if last:
            text += ": " + " | ".join(last[-3:])
        return cls(text, returncode, stderr_tail)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


class AgentNotAcp(AgentExited):
    """The agent's first output lines are not JSON-RPC: most likely `--agent` names a
    program that is not an ACP agent. `first_line` is the first such line."""

    def __init__(self, message: str, first_line: bytes) -> None:
        self.first_line = first_line
        super().__init__(message)


class LineTooLong(AgentExited):
    """The agent sent a line longer than the client's `max_line`: the line (perhaps an
    answer someone waits for) is lost, so the connection is ended, naming the limit."""

    def __init__(self, message: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(message)


class RequestTimeout(AcpError, asyncio.TimeoutError):
    """No answer in time. The agent drops lines it cannot parse without replying
    (ACP.md §1), so a request can otherwise wait forever."""

    def __init__(self, method: str, timeout: float) -> None:
        self.method = method
        self.timeout = timeout
        super().__init__("the agent did not answer %s within %g s" % (method, timeout))


class NotAdvertised(AcpError):
    """The agent did not advertise the capability a call needs (`loadSession`,
    `sessionCapabilities.list`): nothing was sent."""


class ProtocolVersionError(AcpError):
    """The agent answered `initialize` with a protocol version this client does not
    speak (ACP's version negotiation: the client should then close the connection and
    say so). `version` is what the agent answered (None when it named none)."""

    def __init__(self, message: str, version: object) -> None:
        self.version = version
        super().__init__(message)


class LoginRefused(AcpError):
    """No login happened: the person (or the host's consent callback) said no, or
    there was nobody to ask (ACP.md §11)."""


class LoginFailed(AcpError):
    """A login that did not succeed: the agent refused `authenticate`, or the login
    command could not run or exited with a status other than 0 (ACP.md §11)."""


class SessionBusy(AcpError):
    """Raised only by `Session.prompt(..., queue=False)` when a turn is running."""
