"""The checker's vocabulary: the four outcomes, a check's result, and the registry.

A check is a coroutine `func(ctx) -> Optional[str]` registered with `@check(name,
section, title)`: it returns (a note, or None) to PASS, or raises `Fail`, `Warn` or
`Skip` with a message and the evidence. `section` is the PROTOCOL.md section that
states the rule, printed on every report line so a plugin author knows what to read.
Checks are reported in the order they are registered: the section modules are
imported in the order of the contract (see the package's `__init__`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional

from ..options import one_line

if TYPE_CHECKING:  # (for the type checker only: context.py imports this module)
    from .context import CheckContext



PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"


DEFAULT_CHECK_TIMEOUT = 15.0


INTERACTIVE_TIMEOUT = 600.0


class Outcome(Exception):
    """Raised by a check to end with a status other than PASS."""

    status = FAIL

    def __init__(self, message: str, evidence: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence


class Fail(Outcome):
    status = FAIL


class Warn(Outcome):
    status = WARN


class Skip(Outcome):
    status = SKIP


class Result:
    """The outcome of one check."""

    __slots__ = ("name", "status", "message", "section", "title", "evidence")

    def __init__(self, name: str, status: str, message: str, section: str, title: str,
                 evidence: Optional[str] = None) -> None:
        self.name = name
        self.status = status
        self.message = message
        self.section = section
        self.title = title
        self.evidence = evidence

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "section": self.section,
                "title": self.title, "evidence": self.evidence}

    def line(self) -> str:
        """The result for a terminal: its line, then the evidence of a FAIL or a WARN.
        A message and the evidence quote the server (its headers, its body, its
        errors): each line is shown through `one_line`, so that none of it drives the
        terminal or prints a report line of the server's making."""
        text = "%-4s %-32s %s (PROTOCOL.md %s)" % (self.status, self.name, one_line(self.message or self.title),
                                                   self.section)
        if self.evidence and self.status in (FAIL, WARN):
            text += "\n" + "\n".join("       | " + one_line(l) for l in self.evidence.splitlines()[:40])
        return text

    def __repr__(self) -> str:
        return "Result(%r, %r, %r)" % (self.name, self.status, self.message)


CheckFunc = Callable[["CheckContext"], Awaitable[Optional[str]]]


class Check:
    """A registered check: `func(ctx)` returns None or a note (PASS) or raises an Outcome."""

    __slots__ = ("name", "section", "title", "func", "interactive")

    def __init__(self, name: str, section: str, title: str, func: CheckFunc, interactive: bool) -> None:
        self.name = name
        self.section = section
        self.title = title
        self.func = func
        self.interactive = interactive


CHECKS: List[Check] = []


def check(name: str, section: str, title: str, interactive: bool = False) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check (in definition order, which is the report order)."""

    def register(func: CheckFunc) -> CheckFunc:
        CHECKS.append(Check(name, section, title, func, interactive))
        return func

    return register


def get_check(name: str) -> Check:
    for c in CHECKS:
        if c.name == name:
            return c
    raise KeyError(name)
