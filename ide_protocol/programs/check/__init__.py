"""`python3 -m ide_protocol check [--lock FILE | FOLDER]`: a conformance checker.

It runs, against a running IDE-side server, every requirement of PROTOCOL.md that a
client can observe, and prints one line per check — PASS, FAIL, WARN or SKIP — with the
evidence on failure and the PROTOCOL.md section that states the rule, so that someone
writing an IDE plugin in another language knows exactly what to fix. `--json` prints a
machine-readable report; the exit status is 1 when any check FAILs.

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

from .registry import (CHECKS, DEFAULT_CHECK_TIMEOUT, FAIL, INTERACTIVE_TIMEOUT, PASS, SKIP, WARN, Check, Fail,
                       Outcome, Result, Skip, Warn, check, get_check)
from .context import ChangeFolders, CheckContext, PendingCall, Reply, expect_error_code, expect_status, tool_value

# The section modules register their checks when imported: this order is the report's.
from . import discovery, http, sessions, tools, notifications  # noqa: E402,F401  isort: skip

from .runner import load_lock, run_check, run_checks, summary
from .command import main

__all__ = ["CHECKS", "DEFAULT_CHECK_TIMEOUT", "INTERACTIVE_TIMEOUT", "PASS", "FAIL", "WARN", "SKIP", "ChangeFolders", "Check",
           "CheckContext", "Fail", "Outcome", "PendingCall", "Reply", "Result", "Skip", "Warn", "check",
           "expect_error_code", "expect_status", "get_check", "load_lock", "main", "run_check", "run_checks",
           "summary", "tool_value"]
