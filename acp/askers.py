"""The questions the command line asks a person on the terminal: may the agent use
this tool call (`session/request_permission`, ACP.md §5), may it run this command
(`terminal/create`), which login to use (ACP.md §11), what the agent wants to know
(`elicitation/create`, ACP.md §12). Each is a policy callable (see `permissions`,
`terminal`, `auth`, `elicitation`): it shows the question through `render`, reads the
answer from a console (`console`), and turns the typed words into a decision. Kept
apart from the policies themselves, which need no terminal.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Dict, Optional, Sequence, Tuple

from . import elicitation, render
from .auth import LoginMethod
from .console import Console, OneQuestionAtATime, write_stderr
from .elicitation import ElicitationRequest, Field
from .permissions import REFUSALS, Decision, PermissionRequest, reject


def on_stdin() -> "TerminalAsker":
    """The `"ask"` permission policy: questions on stderr, answers from this process's
    stdin (its one console, shared with every other asker of it)."""
    console = Console.for_stdin()
    return TerminalAsker(console.readline, write_stderr, questions=console.questions)


def elicitation_on_stdin() -> "ElicitationAsker":
    """The `"ask"` elicitation policy, on this process's stdin as `on_stdin`."""
    console = Console.for_stdin()
    return ElicitationAsker(console.readline, write_stderr, questions=console.questions)


def consent_on_stdin() -> "TerminalConsentAsker":
    """The `"ask"` terminal policy, on this process's stdin as `on_stdin`."""
    console = Console.for_stdin()
    return TerminalConsentAsker(console.readline, write_stderr, questions=console.questions)


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
                    return choice
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
    "n": REFUSALS, "no": REFUSALS, "deny": REFUSALS, "reject": REFUSALS,
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
        if decision is not None or kinds is REFUSALS:
            fits.add(decision)
    if len(fits) == 1:
        return fits.pop()
    return _INVALID


class LoginAsker:
    """Asks a person which of the agent's login methods to use, if any (ACP.md §11):
    the methods shown with what each runs (`render.login_methods`), then one question.
    With one usable method: allow it (`y`) or not; with several: its number. An empty
    line, end of input or any other answer refuses, and nothing runs. `questions` as
    for `TerminalAsker`."""

    def __init__(self, readline: Callable[[], Awaitable[Optional[str]]],
                 write: Callable[[str], None], questions: Optional[OneQuestionAtATime] = None) -> None:
        self.readline = readline
        self.write = write
        self.questions = questions or OneQuestionAtATime()

    async def __call__(self, methods: Sequence[LoginMethod]) -> Optional[LoginMethod]:
        usable = [method for method in methods if method.runnable]
        async with self.questions:
            self.write(render.login_methods(methods))
            if not usable:
                self.write("(none of them can be used here)\n")
                return None
            if len(usable) == 1:
                self.write("Log in with [%d]? [y/N] " % (list(methods).index(usable[0]) + 1))
                answer = ((await self.readline()) or "").strip().lower()
                chosen = usable[0] if answer in ("y", "yes") else None
            else:
                self.write("Which one? (its number; Enter: none) ")
                answer = ((await self.readline()) or "").strip()
                picked = methods[int(answer) - 1] if answer.isdigit() and 0 < int(answer) <= len(methods) else None
                chosen = picked if picked is not None and picked.runnable else None
            if chosen is None:
                self.write("(not logged in)\n")
            return chosen


#: How long a person has to answer the agent's request for information; then it is
#: declined (the agent waits meanwhile, and the turn with it).
ELICITATION_TIMEOUT = 300.0


class ElicitationAsker:
    """Asks a person what the agent wants to know (ACP.md §12). A form: each field in
    turn (a choice by its number or label, a yes/no, a number; Enter takes the default
    or leaves an optional field empty), then the answers shown for review: send, edit
    again, or decline. A URL: shown whole with its host and warnings; this client opens
    nothing, the person answers whether they agree to open it themselves. End of input,
    an answer that does not fit three times, or no answer within `timeout` seconds
    declines. `completed` is told when the agent says a URL step is over."""

    def __init__(self, readline: Callable[[], Awaitable[Optional[str]]],
                 write: Callable[[str], None], questions: Optional[OneQuestionAtATime] = None,
                 timeout: float = ELICITATION_TIMEOUT, attempts: int = 3) -> None:
        self.readline = readline
        self.write = write
        self.questions = questions or OneQuestionAtATime()
        self.timeout = timeout
        self.attempts = attempts

    async def __call__(self, request: ElicitationRequest) -> Dict[str, Any]:
        async with self.questions:
            self.write(render.elicitation_question(request))
            try:
                return await asyncio.wait_for(self._ask(request), self.timeout)
            except asyncio.TimeoutError:
                self.write("\n(no answer in %g s: declined)\n" % self.timeout)
                return elicitation.answer("decline")

    async def _ask(self, request: ElicitationRequest) -> Dict[str, Any]:
        if request.mode == "url":
            self.write("Do you agree to open it? [y: yes, n: no; Enter: not now] ")
            answer = ((await self.readline()) or "").strip().lower()
            action = "accept" if answer in ("y", "yes") else "decline" if answer in ("n", "no") else "cancel"
            return elicitation.answer(action)
        while True:
            content: Dict[str, Any] = {}
            for field in request.fields:
                value = await self._field(field)
                if value is _DECLINED:
                    self.write("(declined)\n")
                    return elicitation.answer("decline")
                if value is not _EMPTY:
                    content[field.name] = value
            self.write("Your answers:\n" + "".join("    %s: %s\n" % (render.one_line(name),
                                                                        render.one_line(json.dumps(value)))
                                                    for name, value in content.items()))
            self.write("Send them? [y: send, e: edit, n: decline] ")
            answer = ((await self.readline()) or "").strip().lower()
            if answer in ("y", "yes", "s", "send"):
                return elicitation.answer("accept", content)
            if answer not in ("e", "edit"):
                self.write("(declined)\n")
                return elicitation.answer("decline")

    async def _field(self, field: Field) -> Any:
        for _ in range(self.attempts):
            self.write(render.field_prompt(field))
            line = await self.readline()
            if line is None:
                return _DECLINED
            if not line.strip():
                if field.default is not None:
                    return field.default
                if not field.required:
                    return _EMPTY
                self.write("    (required)\n")
                continue
            try:
                return field.parse(line)
            except ValueError as exc:
                self.write("    (expected %s)\n" % exc)
        return _DECLINED

    def completed(self, request: ElicitationRequest) -> None:
        self.write("(the agent says the step at %s is done)\n" % render.one_line(request.url or "?"))


_DECLINED = object()
_EMPTY = object()
