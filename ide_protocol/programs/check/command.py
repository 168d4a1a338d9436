"""`python3 -m ide_protocol check`: the command line of the checker (report lines,
`--json`, exit status 1 when a check FAILs: only what breaks the CLI or its security,
unless `--strict`)."""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import List, Optional

from ...client import ClientError, NoIdeFound
from ...client import discovery as lock_choice  # not the checks of §1 (.discovery)
from ..options import (LOCK_DIR_DEFAULT, add_folder, add_lock_dir, folder_of, no_ide_advice, one_line,
                       terminal_json)
from ..progname import program_name
from ..terminal.stdio import utf8_output
from .outcomes import DEFAULT_CHECK_TIMEOUT, DEFAULT_DEADLINE, FAIL, RULE_LABELS, Result
from .registry import CHECKS
from .runner import failed_by_rule, load_lock, run_checks, summary, summary_line


PROG = program_name("check")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG,
                                description="Check a running /ide server against PROTOCOL.md.")
    add_folder(p, "workspace folder of the IDE to check (default: the current one)")
    p.add_argument("--lock", metavar="FILE", help="check the server of this lock file")
    add_lock_dir(p, "where to look for lock files (default: %s)" % LOCK_DIR_DEFAULT)
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.add_argument("--with-diff", "--interactive", dest="with_diff", action="store_true",
                   help="also run the checks that need a person (accept a diff in the IDE)")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this check (repeatable)")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--strict", action="store_true",
                   help="fail every rule the server breaks, VS Code's and our recommendations included (without it "
                        "only what breaks the CLI or its security fails)")
    p.add_argument("--timeout", type=float, default=DEFAULT_CHECK_TIMEOUT, help="seconds per answer (default 15)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                   help="seconds for the whole run (default %g; 0: none): the checks that do not fit are skipped, "
                        "and say so" % DEFAULT_DEADLINE)
    return p


#: What the outcomes mean, printed under the report (PROTOCOL.md labels every rule).
LEGEND = ("(FAIL: breaks the CLI or its security. DIFF: VS Code's server does otherwise; the CLI does not mind. "
          "ADVICE: a recommendation of PROTOCOL.md; the CLI does not mind. --strict fails all three.)")


def main(argv: Optional[List[str]] = None) -> int:
    utf8_output()
    parser = _parser()
    args = parser.parse_args(argv)
    folder_of(parser, args)
    if args.deadline < 0 or args.timeout <= 0:
        parser.error("--timeout must be positive, --deadline positive or 0")
    if args.list:
        for c in CHECKS:
            print("%-37s %-3s %-17s %s%s" % (c.name, c.section, RULE_LABELS[c.rule], c.title,
                                             " (needs --with-diff)" if c.interactive else ""))
        return 0
    try:
        if args.lock:
            lock, raw = load_lock(args.lock)
        else:
            lock, passed_over = lock_choice.choose(args.folder, args.lock_dir)
            if passed_over:  # several IDEs serve the folder: say which one is checked, and why
                print(lock_choice.describe_choice(lock, passed_over, one_line), file=sys.stderr, flush=True)
            _, raw = load_lock(lock.path) if lock.path else (lock, None)
    except NoIdeFound as exc:
        print("%s: %s\n%s" % (PROG, exc.describe(one_line), no_ide_advice(args.folder)), file=sys.stderr)
        return 2
    except (ClientError, OSError, ValueError) as exc:
        print("%s: %s" % (PROG, one_line(exc)), file=sys.stderr)
        return 2
    if not args.json:  # (the lock's text, and each result's: `Result.line`, escaped)
        print("checking %s (pid %s) at %s" % (one_line(lock.ide_name), one_line(lock.pid), one_line(lock.socket_path)),
              flush=True)

    def show(result: Result) -> None:
        if not args.json:
            print(result.line(), flush=True)

    results = asyncio.run(run_checks(lock, raw, names=args.only, with_diff=args.with_diff, timeout=args.timeout,
                                     interactive=args.with_diff, on_result=show, strict=args.strict,
                                     deadline=args.deadline or None))
    counts = summary(results)
    if args.json:
        print(terminal_json({"lock": lock.path, "socket": lock.socket_path, "ide": lock.ide_name,
                             "strict": args.strict, "summary": counts, "failed_by_rule": failed_by_rule(results),
                             "results": [r.to_json() for r in results]}))
    else:
        print(summary_line(results))
        print(LEGEND)
    return 1 if counts[FAIL] else 0
