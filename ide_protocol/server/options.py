"""`IdeServer`'s options, in two groups: `Limits` (what a client can make the server
hold, README "Limits and safety") and `Hooks` (the IDE's callbacks).

An embedder may pass the groups (`IdeServer(folders, limits=Limits(max_body=...),
hooks=Hooks(on_diff=...))`) or each option as a keyword of its own
(`IdeServer(folders, max_body=..., on_diff=...)`), as in earlier versions; `grouped`
turns the keyword form into the groups, once, for `IdeServer` and `ThreadedIdeServer`
alike, and refuses a keyword that is neither (naming the nearest one).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .diffs import DiffRequest
from .limits import (DEFAULT_CONNECTION_IDLE_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS,
                     DEFAULT_MAX_SESSIONS, DEFAULT_ORPHAN_TIMEOUT, REQUEST_TIMEOUT)

__all__ = ["DiffHandler", "Hooks", "Limits", "grouped"]

DiffHandler = Callable[[DiffRequest], Any]


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a client can make the server hold, and for how long (docs/LIMITS.md;
    where each is enforced: `server/limits.py`). None (or 0) lifts a limit that allows it."""

    max_body: int = DEFAULT_MAX_BODY
    request_timeout: float = REQUEST_TIMEOUT
    max_connections: Optional[int] = DEFAULT_MAX_CONNECTIONS
    max_sessions: Optional[int] = DEFAULT_MAX_SESSIONS
    connection_idle_timeout: Optional[float] = DEFAULT_CONNECTION_IDLE_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    orphan_timeout: float = DEFAULT_ORPHAN_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Hooks:
    """The IDE's callbacks. `on_diff(diff)` shows a proposed edit (it may return a
    decision, or None and answer later with `diff.accept()`/`diff.reject()`);
    `on_diff_closed(diff, answer)`, `on_session(event, info)` and
    `on_tool_call(call, session_id, result)` report, and may return a coroutine;
    `on_exchange(direction, message)` sees every JSON-RPC message (a tracer's)."""

    on_diff: Optional[DiffHandler] = None
    on_diff_closed: Optional[Callable[[DiffRequest, Dict[str, Any]], Any]] = None
    on_session: Optional[Callable[[str, Dict[str, Any]], Any]] = None
    on_tool_call: Optional[Callable[[Dict[str, Any], str, Any], Any]] = None
    on_exchange: Optional[Callable[[str, Dict[str, Any]], None]] = None


LIMIT_NAMES = tuple(field.name for field in dataclasses.fields(Limits))
HOOK_NAMES = tuple(field.name for field in dataclasses.fields(Hooks))


def grouped(limits: Optional[Limits], hooks: Optional[Hooks], options: Mapping[str, Any],
            who: str) -> Tuple[Limits, Hooks]:
    """The groups, with each option given as a keyword of its own in place of the
    group's value. A keyword that names no option is a TypeError naming `who` and the
    nearest option (a typo must not pass silently)."""
    unknown = sorted(set(options) - set(LIMIT_NAMES) - set(HOOK_NAMES))
    if unknown:
        import difflib  # only for this error's hint

        known = LIMIT_NAMES + HOOK_NAMES
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1)
            hints.append("%r%s" % (name, " (did you mean %r?)" % close[0] if close else ""))
        raise TypeError("%s() got unexpected keyword argument%s %s; its options are the fields of Limits (%s) "
                        "and Hooks (%s)" % (who, "s" if len(unknown) > 1 else "", ", ".join(hints),
                                            ", ".join(LIMIT_NAMES), ", ".join(HOOK_NAMES)))
    limits = dataclasses.replace(limits or Limits(), **{k: v for k, v in options.items() if k in LIMIT_NAMES})
    hooks = dataclasses.replace(hooks or Hooks(), **{k: v for k, v in options.items() if k in HOOK_NAMES})
    return limits, hooks
