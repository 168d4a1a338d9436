"""`python3 -m ide_protocol check [--lock FILE | FOLDER]`: a conformance checker.

It runs, against a running IDE-side server, every requirement of PROTOCOL.md that a
client can observe, and prints one line per check with the evidence and the PROTOCOL.md
section that states the rule, so that someone writing an IDE plugin in another language
knows exactly what to fix, and what matters. Each check tests a rule that PROTOCOL.md
labels by whose it is, and a broken rule is graded by that label: FAIL for what the real
CLI needs and for security (the nonce, the lock file's modes), DIFF where the server
does otherwise than VS Code's own (the CLI does not mind), ADVICE where it does not
follow a recommendation of ours; WARN where the checker cannot judge, SKIP where there
is nothing to inspect. `--strict` makes every broken rule a FAIL (this project's own
`serve` passes it). `--json` prints a machine-readable report; the exit status is 1
when any check FAILs. The whole run is bounded (`--deadline`, 60 s), and so is the
memory an answer may take (`context.ANSWER_LIMIT`).

The checks are grouped by the contract section they test, one module per section:

* `discovery` — §1, the lock file and its socket;
* `http` — §2, HTTP/1.1: auth, paths, methods, framing, keep-alive, the GET stream,
  and one `errors.*` check per row of the errors and edge cases table;
* `sessions` — §3, the handshake, session ids, plain JSON-RPC, and the table's session
  rows (a vanished client, cancel, reconnect);
* `tools` — §4, the six tools and the diff life cycle;
* `notifications` — §5, pushes on the GET stream.

They are reported in that order. Around them: `registry` (outcomes, results, the
`@check` decorator and `CHECKS`), `context` (`CheckContext`: raw requests, sessions and
tool calls through `client.ClientConnection`, so there is one HTTP client in this
package, not two), `runner` (each check on a fresh context, bounded in time) and
`command` (the command line). Checks that need a person (accepting a diff) are skipped
unless `--with-diff`/`--interactive` is given.
"""
from __future__ import annotations

from .outcomes import (ADVICE, BRIEF_WAIT, CLI, DEFAULT_CHECK_TIMEOUT, DEFAULT_DEADLINE, DIFF, FAIL,
                       INTERACTIVE_TIMEOUT, PASS, RECOMMENDED, RULES, RULE_LABELS, SECURITY, SKIP, STATUSES, VSCODE,
                       WARN, grade, Advise, Differs, Fail, Outcome, Result, Skip, Warn)
from .registry import CHECKS, Check, check, get_check
from .context import (ANSWER_LIMIT, ChangeFolders, CheckContext, PendingCall, Reply, expect_error_code,
                      expect_status, read_reply, tool_value)

# The section modules register their checks when imported: this order is the report's.
from . import discovery, http, sessions, tools, notifications  # noqa: E402,F401  isort: skip

from .runner import failed_by_rule, load_lock, run_check, run_checks, summary, summary_line
from .command import main

__all__ = ["ANSWER_LIMIT", "BRIEF_WAIT", "CHECKS", "DEFAULT_CHECK_TIMEOUT", "DEFAULT_DEADLINE", "INTERACTIVE_TIMEOUT",
           "PASS", "FAIL", "DIFF", "ADVICE", "WARN", "SKIP", "STATUSES", "CLI", "SECURITY", "VSCODE", "RECOMMENDED",
           "RULES", "RULE_LABELS", "Advise", "ChangeFolders", "Check", "CheckContext", "Differs", "Fail", "Outcome",
           "PendingCall", "Reply", "Result", "Skip", "Warn", "check", "expect_error_code", "expect_status",
           "failed_by_rule", "get_check", "grade", "load_lock", "main", "read_reply", "run_check", "run_checks",
           "summary", "summary_line", "tool_value"]
