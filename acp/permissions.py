"""Answering `session/request_permission` (ACP.md §5) through a replaceable policy.

A policy is a callable taking a `PermissionRequest` and returning the chosen
`optionId`, or None for `cancelled` (sync or async). Named policies: `"allow"` (allow
once), `"always"` (allow always), `"reject"` (the library default: nothing happens without consent) and
`"cancel"`; `Client` also takes `"ask"`, a question on the terminal (`askers`). Whatever a policy returns, only an id the
agent offered is ever sent; anything else becomes `cancelled`, which the agent counts as
a denial.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from ._core import jsonrpc

log = logging.getLogger(__name__)

Decision = Optional[str]
PermissionCallback = Callable[["PermissionRequest"], Union[Decision, Awaitable[Decision]]]
PolicySpec = Union[str, PermissionCallback, None]


class PermissionRequest:
    """The agent's question: which tool call (`tool_call`, shared `toolCallId` with the
    session's tool calls, ACP.md §4) and which options (`allow_once`, `allow_always`,
    `reject_once` on Copilot)."""

    __slots__ = ("session_id", "tool_call", "options", "raw")

    def __init__(self, session_id: Optional[str], tool_call: Dict[str, Any],
                 options: List[Dict[str, Any]], raw: Any = None) -> None:
        self.session_id = session_id
        self.tool_call = tool_call
        self.options = options
        self.raw = raw

    @classmethod
    def from_params(cls, params: Any) -> "PermissionRequest":
        params = jsonrpc.require_params(params, ("options",), {"options": list})
        options = [o for o in params["options"]
                   if isinstance(o, dict) and isinstance(o.get("optionId"), str)]
        tool_call = params.get("toolCall")
        session_id = params.get("sessionId")
        return cls(session_id if isinstance(session_id, str) else None,
                   tool_call if isinstance(tool_call, dict) else {}, options, params)

    @property
    def option_ids(self) -> List[str]:
        return [o["optionId"] for o in self.options]

    @property
    def tool_call_id(self) -> Optional[str]:
        value = self.tool_call.get("toolCallId")
        return value if isinstance(value, str) else None

    @property
    def title(self) -> str:
        return str(self.tool_call.get("title") or "tool call")

    def option_of_kind(self, *kinds: str) -> Optional[str]:
        """The first offered option id of the first kind in `kinds` that is offered."""
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind:
                    return option["optionId"]
        return None

    def outcome(self, decision: Decision) -> Dict[str, Any]:
        """The response object; an id that was not offered is refused (becomes cancelled)."""
        if decision is not None and decision not in self.option_ids:
            log.warning("permission policy chose %r, which the agent did not offer; "
                        "answering cancelled", decision)
            decision = None
        if decision is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": decision}}

    @staticmethod
    def cancelled() -> Dict[str, Any]:
        return {"outcome": {"outcome": "cancelled"}}


# --------------------------------------------------------------- named policies


def allow_once(request: PermissionRequest) -> Decision:
    """Allow this one call; `allow_always` only when no once-option is offered."""
    return request.option_of_kind("allow_once", "allow_always")


def allow_always(request: PermissionRequest) -> Decision:
    """Allow this kind of call from now on; `allow_once` when no always-option is offered."""
    return request.option_of_kind("allow_always", "allow_once")


REFUSALS = ("reject_once", "reject_always")  # the kinds of option that deny


def reject(request: PermissionRequest) -> Decision:
    """Deny; with no reject option offered, answer cancelled (also a denial)."""
    return request.option_of_kind(*REFUSALS)


def cancel(request: PermissionRequest) -> Decision:
    return None


_NAMED = {
    "allow": allow_once, "allow_once": allow_once, "yes": allow_once, "once": allow_once, "y": allow_once,
    "always": allow_always, "allow_always": allow_always,
    "reject": reject, "deny": reject, "no": reject, "n": reject,
    "cancel": cancel,
}


def resolve_policy(spec: PolicySpec) -> PermissionCallback:
    """A policy name or callable as a callable. `"ask"` is not among them: it needs a
    console, and `Client` makes it (`askers.on_stdin`)."""
    if spec is None:
        return reject
    if callable(spec):
        return spec
    try:
        return _NAMED[spec]
    except KeyError:
        raise ValueError("unknown permission policy %r (allow, reject, cancel, ask or a callable)"
                         % (spec,)) from None


async def decide(policy: PermissionCallback, request: PermissionRequest) -> Decision:
    """Run a sync or async policy."""
    decision = policy(request)
    if inspect.isawaitable(decision):
        decision = await decision
    return decision
