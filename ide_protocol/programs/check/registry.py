"""The registry of checks: `@check(name, section, title, rule=...)` adds a coroutine
`func(ctx) -> Optional[str]`, which returns (a note, or None) to PASS or raises one of
the outcomes of `outcomes`. Checks are reported in the order they are registered: the
section modules are imported in the order of the contract (see the package's
`__init__`).
"""
from __future__ import annotations

from typing import Awaitable, Callable, List, Optional

from .context import CheckContext
from .outcomes import RULES

CheckFunc = Callable[[CheckContext], Awaitable[Optional[str]]]


class Check:
    """A registered check: `func(ctx)` returns None or a note (PASS) or raises an Outcome."""

    __slots__ = ("name", "section", "title", "func", "interactive", "rule", "situation")

    def __init__(self, name: str, section: str, title: str, func: CheckFunc, interactive: bool, rule: str,
                 situation: Optional[str] = None) -> None:
        if rule not in RULES:
            raise ValueError("check %s: rule %r is not one of %s" % (name, rule, ", ".join(RULES)))
        self.name = name
        self.section = section
        self.title = title
        self.func = func
        self.interactive = interactive
        self.rule = rule
        self.situation = situation


CHECKS: List[Check] = []


def check(name: str, section: str, title: str, *, rule: str, situation: Optional[str] = None,
          interactive: bool = False) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check (in definition order, which is the report order). `rule` says
    whose rule it tests (CLI, SECURITY, VSCODE, RECOMMENDED), as PROTOCOL.md labels it;
    `situation`, for a rule that matters to the CLI only sometimes, says when ("when a
    CLI that crashed resumes its session"), and is shown with the check's outcome."""

    def register(func: CheckFunc) -> CheckFunc:
        CHECKS.append(Check(name, section, title, func, interactive, rule, situation))
        return func

    return register


def get_check(name: str) -> Check:
    for c in CHECKS:
        if c.name == name:
            return c
    raise KeyError(name)
