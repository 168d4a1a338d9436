"""Answering `session/request_permission` (ACP.md §5) through a replaceable policy.

A policy is a callable taking a `PermissionRequest` and returning the chosen
`optionId`, or None for `cancelled` (sync or async). Named policies: `"allow"` (allow
once), `"always"` (allow always), `"reject"` (the library default: nothing happens without consent), `"cancel"`,
and `"ask"` (a question on the terminal). Whatever a policy returns, only an id the
agent offered is ever sent; anything else becomes `cancelled`, which the agent counts as
a denial.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union

from ._core import jsonrpc
from . import render
from .console import OneQuestionAtATime

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


_REFUSALS = ("reject_once", "reject_always")


def reject(request: PermissionRequest) -> Decision:
    """Deny; with no reject option offered, answer cancelled (also a denial)."""
    return request.option_of_kind(*_REFUSALS)


def cancel(request: PermissionRequest) -> Decision:
    return None


class TerminalAsker:
    """Asks a person: the question goes to `write`, the answer comes from `readline`
    (an async function returning a line, or None at end of input).

    Answers: a choice's number or the label shown for it (`allow once`, `allow always`,
    `reject`), or `y`/`yes` (allow once), `a`/`always`, `n`/`no` (reject). Never the
    agent's own option ids or names, which are not shown and which the agent chose (an
    allow option named "n" would turn a refusal into consent); an answer that fits more
    than one choice is asked again. An empty line or end of input rejects, so a script
    piping too few answers never approves by accident. Askers sharing one console share
    its `questions` (one question and its answer at a time).
    """

    def __init__(self, readline: Callable[[], Awaitable[Optional[str]]],
                 write: Callable[[str], None], attempts: int = 3,
                 questions: Optional[OneQuestionAtATime] = None) -> None:
        self.readline = readline
        self.write = write
        self.attempts = attempts
        self.questions = questions or OneQuestionAtATime()

    async def __call__(self, request: PermissionRequest) -> Decision:
        async with self.questions:
            self.write(render.permission_question(request))
            for _ in range(self.attempts):
                self.write(render.permission_choices(request))
                line = await self.readline()
                if line is None:
                    self.write("\n(no answer: denied)\n")
                    return reject(request)
                choice = parse_answer(line, request)
                if choice is not _INVALID:
                    return choice  # type: ignore[return-value]
                self.write("Please answer with one of the numbers shown.\n")
            return reject(request)


_INVALID = object()


class TerminalConsentAsker:
    """Asks a person whether a `terminal/create` may run (ACP.md §5): the command, its
    folder and the variables the agent sets shown escaped, then allow once, allow for
    this session, or refuse. An empty line, end of input or an unknown answer refuses.
    `questions` as for `TerminalAsker`."""

    def __init__(self, readline: Callable[[], Awaitable[Optional[str]]],
                 write: Callable[[str], None], questions: Optional[OneQuestionAtATime] = None) -> None:
        self.readline = readline
        self.write = write
        self.questions = questions or OneQuestionAtATime()

    async def __call__(self, request: Any) -> Optional[str]:
        async with self.questions:
            self.write(render.terminal_question(request))
            line = await self.readline()
            answer = (line or "").strip().lower()
            if answer in ("1", "y", "yes", "once"):
                return "once"
            if answer in ("2", "s", "session", "a", "always"):
                return "session"
            self.write("(refused)\n")
            return None


#: The documented words and the kinds of option each chooses (strictly: `y` never
#: grants `allow_always`). A refusal with no reject option offered is `cancelled`.
_WORDS: Dict[str, Tuple[str, ...]] = {
    "y": ("allow_once",), "yes": ("allow_once",), "allow": ("allow_once",), "once": ("allow_once",),
    "a": ("allow_always",), "always": ("allow_always",),
    "n": _REFUSALS, "no": _REFUSALS, "deny": _REFUSALS, "reject": _REFUSALS,
}


def parse_answer(line: str, request: PermissionRequest) -> Any:
    """Map a typed answer to an option id (None: cancelled); `_INVALID` to ask again.
    Only what the person was shown counts (a number, a label) and the documented words;
    an answer that fits two different choices is asked again."""
    answer = line.strip().lower()
    if not answer:
        return reject(request)
    if answer.isdigit():
        index = int(answer) - 1
        if 0 <= index < len(request.options):
            return request.options[index]["optionId"]
        return _INVALID
    fits = {option["optionId"] for option in request.options if render.choice_label(option).lower() == answer}
    kinds = _WORDS.get(answer)
    if kinds is not None:
        decision = request.option_of_kind(*kinds)
        if decision is not None or kinds is _REFUSALS:
            fits.add(decision)  # type: ignore[arg-type]
    if len(fits) == 1:
        return fits.pop()
    return _INVALID


_NAMED = {
    "allow": allow_once, "allow_once": allow_once, "yes": allow_once, "once": allow_once, "y": allow_once,
    "always": allow_always, "allow_always": allow_always,
    "reject": reject, "deny": reject, "no": reject, "n": reject,
    "cancel": cancel,
}


def resolve_policy(spec: PolicySpec) -> PermissionCallback:
    """A policy name or callable as a callable (`"ask"` reads this process's stdin)."""
    if spec is None:
        return reject
    if callable(spec):
        return spec
    if spec == "ask":
        from .console import Console, write_stderr  # late: only interactive use needs it

        console = Console.for_stdin()
        return TerminalAsker(console.readline, write_stderr, questions=console.questions)
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
    return decision  # type: ignore[return-value]
