"""Try a usable lock's server the way the CLI connects to it, and time each step.

PROTOCOL.md §3: the CLI sends ``server/discover`` first (an error answer is expected and
it falls back to ``initialize`` at once; ``401`` aborts the attempt), then
``initialize`` (``200`` with an ``mcp-session-id`` header and a result), then
``notifications/initialized`` (``202``: only then does it open its GET stream). Every
request carries the lock's ``headers`` verbatim (§2). A server/discover that takes
seconds costs the user that much at every start of the CLI, so its time is reported.

The probe ends its session with ``DELETE`` (§2) and closes every connection: it leaves
nothing open in the IDE. It goes through `IdeClient`, whose headers and bodies are the
CLI's, but reads each answer itself so that it can tell a refusal from a failure.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ...client import (CLIENT_NAME, CLIENT_VERSION, DRAFT_PROTOCOL_VERSION, PROTOCOL_VERSION, ClientError,
                       ClientResponse, IdeClient, IdeTimeout, program_client_info)
from ...common.lockfile import LockInfo
from ...wire import jsonrpc


@dataclass
class Handshake:
    """What the probe saw. ``failure`` is ``(code, message)`` with code ``auth-refused``
    or ``handshake-failed``; the times are seconds, ``None`` for a step not reached."""

    discover_seconds: Optional[float] = None
    discover_answer: str = ""
    initialize_seconds: Optional[float] = None
    server_info: Dict[str, Any] = field(default_factory=dict)
    failure: Optional[Tuple[str, str]] = None
    notes: List[str] = field(default_factory=list)


def _discover_params() -> Dict[str, Any]:
    return {"_meta": {"io.modelcontextprotocol/protocolVersion": DRAFT_PROTOCOL_VERSION,
                      "io.modelcontextprotocol/clientInfo": {"name": CLIENT_NAME, "version": CLIENT_VERSION},
                      "io.modelcontextprotocol/clientCapabilities": {}}}


def _initialize_params() -> Dict[str, Any]:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": program_client_info("doctor")}  # who we are (client/identity.py)


def _answer(messages: List[Any], request_id: int) -> Optional[Dict[str, Any]]:
    return next((m for m in messages if jsonrpc.answers(m, request_id)), None)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return "JSON-RPC error %s %s" % (error.get("code"), error.get("message"))
    return "JSON-RPC error %r" % (error,)


async def _post(client: IdeClient, request_id: int, method: str, params: Any,
                timeout: float) -> Tuple[ClientResponse, List[Any]]:
    response = await client.post(jsonrpc.request(request_id, method, params), with_session=False, timeout=timeout)
    messages: List[Any] = []
    if response.status != 200:
        await response.read_body(timeout)
        return response, messages
    # Read up to the answer only: a server that leaves the stream open after it is
    # not made to look slow (the CLI, too, takes the answer when it comes).
    while _answer(messages, request_id) is None:
        message = await response.next_message(timeout)
        if message is None:
            break
        messages.append(message)
    return response, messages


def _auth_refused(method: str, response: ClientResponse) -> Tuple[str, str]:
    """A 401 at any step: the CLI gives up on this IDE (PROTOCOL.md §3), and the lock's
    headers are what the server did not accept (§2)."""
    return ("auth-refused", "%s was refused with HTTP 401 %s: the server does not accept the lock's headers"
            % (method, response.reason))


async def _run(client: IdeClient, result: Handshake, timeout: float) -> None:
    started = time.monotonic()
    response, messages = await _post(client, 0, "server/discover", _discover_params(), timeout)
    result.discover_seconds = time.monotonic() - started
    if response.status == 401:
        result.failure = _auth_refused("server/discover", response)
        return
    answer = _answer(messages, 0)
    if response.status != 200:
        result.discover_answer = "HTTP %d" % response.status
    elif answer is not None and "error" in answer:
        result.discover_answer = _error_text(answer["error"])
    elif answer is not None:
        result.discover_answer = "a result"
        result.notes.append("server/discover answered with a result: the CLI then speaks the draft stateless "
                            "protocol %s and sends no initialize (PROTOCOL.md §3)" % DRAFT_PROTOCOL_VERSION)
        return
    else:
        result.discover_answer = "no answer in the body"

    started = time.monotonic()
    response, messages = await _post(client, 1, "initialize", _initialize_params(), timeout)
    result.initialize_seconds = time.monotonic() - started
    if response.status == 401:
        result.failure = _auth_refused("initialize", response)
        return
    if response.status != 200:
        result.failure = ("handshake-failed", "initialize answered HTTP %d %s" % (response.status, response.reason))
        return
    answer = _answer(messages, 1)
    if answer is None:
        result.failure = ("handshake-failed", "initialize answered HTTP 200 without a JSON-RPC answer")
        return
    if "error" in answer:
        result.failure = ("handshake-failed", "initialize answered %s" % _error_text(answer["error"]))
        return
    session_id = response.headers.get("mcp-session-id")
    if not session_id:
        result.failure = ("handshake-failed", "initialize answered without an mcp-session-id header")
        return
    info = answer.get("result")
    if not isinstance(info, dict):
        result.failure = ("handshake-failed", "initialize answered with a result that is not a JSON object; "
                          "the CLI cannot read its capabilities (PROTOCOL.md §3)")
        return
    if isinstance(info.get("serverInfo"), dict):
        result.server_info = info["serverInfo"]
    client.session_id = session_id
    response = await client.post(jsonrpc.notification("notifications/initialized"), timeout=timeout)
    await response.read_body(timeout)
    if response.status != 202:
        result.failure = ("handshake-failed", "notifications/initialized answered HTTP %d; the CLI needs 202 before "
                          "it opens its event stream" % response.status)


async def handshake(lock: LockInfo, timeout: float) -> Handshake:
    """Connect to ``lock``'s server as the CLI does; never raises for a server's fault."""
    result = Handshake()
    client = IdeClient(lock, timeout=timeout, connect_timeout=timeout)
    try:
        # Each answer has `timeout`; the whole exchange is bounded too, against a server
        # that trickles a body byte by byte.
        await asyncio.wait_for(_run(client, result, timeout), timeout * 4)
    except (IdeTimeout, asyncio.TimeoutError):
        step = "server/discover" if result.discover_seconds is None else "initialize"
        if result.discover_seconds is None:
            result.discover_seconds = timeout  # at least that long: reported as slow
        result.failure = ("handshake-failed", "%s got no answer within %g s" % (step, timeout))
    except (ClientError, OSError, ValueError) as exc:
        result.failure = ("handshake-failed", "%s: %s" % (type(exc).__name__, exc))
    finally:
        try:
            await asyncio.wait_for(client.close(), timeout)
        except (ClientError, OSError, asyncio.TimeoutError):
            pass
    return result
