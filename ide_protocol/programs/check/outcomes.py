"""The checker's vocabulary: whose rule a check tests, the outcomes, a check's result.

A check is a coroutine `func(ctx) -> Optional[str]` registered with `@check(name,
section, title, rule=...)`: it returns (a note, or None) to PASS, or raises an outcome
with a message and the evidence: `Fail` (the rule it tests is broken), `Differs` or
`Advise` (a lesser rule of VS Code's or ours is broken), `Warn` (it cannot judge),
`Skip` (nothing to inspect). `section` is the PROTOCOL.md section that states the rule,
printed on every report line so a plugin author knows what to read.

A broken rule is graded by whose rule it is, as PROTOCOL.md labels it: FAIL only for
what the real CLI needs and for security; DIFF where the server behaves otherwise than
VS Code's; ADVICE where it does not follow a recommendation of ours. `check --strict`
makes every broken rule a FAIL. (The registry of checks is `registry`; the context a
check runs in, `context`: both stand on this module, neither on the other's
vocabulary.)
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from ..options import one_line

PASS, FAIL, DIFF, ADVICE, WARN, SKIP = "PASS", "FAIL", "DIFF", "ADVICE", "WARN", "SKIP"
#: Every outcome, in the order the summary line counts them.
STATUSES = (PASS, FAIL, DIFF, ADVICE, WARN, SKIP)

# Whose rule a check tests: PROTOCOL.md labels every rule with one of these, and a
# broken rule is graded by it (`grade`). A check that tests several rules raises the
# outcome of the one it found broken (`Fail(rule=...)`, `Differs`, `Advise`).
#: The real CLI needs it: a server without it breaks the CLI (evidence in PROTOCOL.md:
#: a capture, the CLI's code, or an interop test that fails without it).
CLI = "cli"
#: A security rule (the nonce, the lock file's modes): a FAIL like the CLI's.
SECURITY = "security"
#: VS Code's server does this (PROTOCOL.md names the source file); the CLI does not mind.
VSCODE = "vscode"
#: This project recommends it (PROTOCOL.md says why); the CLI does not mind.
RECOMMENDED = "advice"
RULES = (CLI, SECURITY, VSCODE, RECOMMENDED)

#: How a broken rule of each kind is reported: only what breaks the CLI or its security
#: FAILs; `--strict` makes every broken rule a FAIL.
GRADES = {CLI: FAIL, SECURITY: FAIL, VSCODE: DIFF, RECOMMENDED: ADVICE}

#: What each kind is called in a report.
RULE_LABELS = {CLI: "the CLI needs it", SECURITY: "security", VSCODE: "VS Code does this",
               RECOMMENDED: "we recommend this"}


def grade(rule: str, strict: bool = False) -> str:
    """The outcome of a broken rule of the kind `rule`."""
    return FAIL if strict else GRADES[rule]


#: Seconds a check waits for each answer (`check --timeout`).
DEFAULT_CHECK_TIMEOUT = 15.0

#: Seconds a check waits for something that a conforming server sends at once and a
#: server breaking the rule never sends (an answer judged from the head alone, the end
#: of a cancelled request): a wait that only a broken server makes long, kept short so
#: that such waits do not add up (at most `--timeout`).
BRIEF_WAIT = 3.0

#: Seconds for the whole run of the non-interactive checks (`check --deadline`): a
#: server that answers slowly or never still gets its report in this time, the checks
#: that did not fit reported as SKIP.
DEFAULT_DEADLINE = 60.0

INTERACTIVE_TIMEOUT = 600.0


class Outcome(Exception):
    """Raised by a check to end with a status other than PASS. `rule` is the kind of the
    rule found broken (None: the check's own); the runner grades it (`grade`)."""

    status: Optional[str] = None  # None: graded by the rule broken

    def __init__(self, message: str, evidence: Optional[str] = None, rule: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence
        self.rule = rule


class Fail(Outcome):
    """The rule the check tests (or `rule`) is broken."""


class Differs(Outcome):
    """A rule of VS Code's is broken: the server behaves otherwise than VS Code, and the
    CLI does not mind."""

    def __init__(self, message: str, evidence: Optional[str] = None) -> None:
        super().__init__(message, evidence, VSCODE)


class Advise(Outcome):
    """A recommendation of ours is not followed; the CLI does not mind."""

    def __init__(self, message: str, evidence: Optional[str] = None) -> None:
        super().__init__(message, evidence, RECOMMENDED)


class Warn(Outcome):
    """Something the checker cannot judge (it says why): never a FAIL."""

    status = WARN


class Skip(Outcome):
    """Nothing to inspect, or the check cannot run here (it says why)."""

    status = SKIP


class Result:
    """The outcome of one check. `rule` is the kind of the rule broken (the check's own
    for a PASS, a WARN or a SKIP)."""

    __slots__ = ("name", "status", "message", "section", "title", "evidence", "rule", "situation")

    def __init__(self, name: str, status: str, message: str, section: str, title: str,
                 evidence: Optional[str] = None, rule: str = CLI, situation: Optional[str] = None) -> None:
        self.name = name
        self.status = status
        self.message = message
        self.section = section
        self.title = title
        self.evidence = evidence
        self.rule = rule
        self.situation = situation

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "status": self.status, "rule": self.rule, "message": self.message,
                "section": self.section, "title": self.title, "evidence": self.evidence,
                "situation": self.situation}

    def line(self) -> str:
        """The result for a terminal: its line, then the evidence of what is not a PASS
        or a SKIP. A message and the evidence quote the server (its headers, its body,
        its errors): each line is shown through `one_line`, so that none of it drives the
        terminal or prints a report line of the server's making."""
        message = self.message or self.title
        if self.status in (FAIL, DIFF, ADVICE) and self.situation:
            message += " [it matters to the CLI only %s]" % self.situation
        text = "%-6s %-37s %s (PROTOCOL.md %s)" % (self.status, self.name, one_line(message), self.section)
        if self.evidence and self.status in (FAIL, DIFF, ADVICE, WARN):
            text += "\n" + "\n".join("       | " + one_line(l) for l in self.evidence.splitlines()[:40])
        return text

    def __repr__(self) -> str:
        return "Result(%r, %r, %r)" % (self.name, self.status, self.message)
