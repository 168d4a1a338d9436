"""Running checks: each on a fresh `CheckContext`, bounded in time (the whole run too,
by `deadline`), never raising (an unexpected exception breaks the rule the check tests),
graded by whose rule broke, its context cleaned up afterwards; and reading a lock file
leniently so that a lock with a bad field is still checked."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...wire import json_text, jsonrpc
from ...common import lock_rules, lockfile
from ...client import ClientError
from ...common.lockfile import LockInfo
from .outcomes import (ADVICE, DEFAULT_CHECK_TIMEOUT, DIFF, FAIL, INTERACTIVE_TIMEOUT, PASS, RULES, RULE_LABELS, SKIP,
                       STATUSES, WARN, grade, Outcome, Result)
from .registry import CHECKS, Check
from .context import ChangeFolders, CheckContext


async def run_check(c: Check, lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                    timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                    prompt: Optional[Callable[[str], None]] = None,
                    change_folders: Optional[ChangeFolders] = None, strict: bool = False,
                    limit: Optional[float] = None) -> Result:
    """Run one check on a fresh context; never raises. A broken rule is graded by whose
    rule it is (`registry.grade`; every one a FAIL when `strict`), and so is an error
    the check did not foresee (no answer, a closed connection, an answer it cannot
    read): the rule the check tests was not shown to hold. `limit` bounds the check
    (default: four answers' time; a person's, for a check that needs one) and the
    cleanup after it."""
    ctx = CheckContext(lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt,
                       change_folders=change_folders)
    if limit is None:
        limit = INTERACTIVE_TIMEOUT + timeout if (c.interactive and interactive) else timeout * 4

    def broken(message: str, evidence: Optional[str] = None, rule: Optional[str] = None) -> Result:
        kind = rule or c.rule
        return Result(c.name, grade(kind, strict), message, c.section, c.title, evidence, kind, c.situation)

    started = asyncio.get_event_loop().time()
    try:
        note = await asyncio.wait_for(c.func(ctx), limit)
        result = Result(c.name, PASS, note or "", c.section, c.title, rule=c.rule, situation=c.situation)
    except Outcome as out:
        if out.status is not None:  # WARN, SKIP: not a broken rule
            result = Result(c.name, out.status, out.message, c.section, c.title, out.evidence, c.rule, c.situation)
        else:
            result = broken(out.message, out.evidence, out.rule)
    except (ClientError, jsonrpc.JsonRpcError) as exc:
        # (Before asyncio.TimeoutError: a client's own timeout, IdeTimeout, is one too,
        # and says which answer it waited for.)
        result = broken("%s: %s" % (type(exc).__name__, exc))
    except asyncio.TimeoutError:
        result = broken("no answer within %.3g s" % limit)
    except OSError as exc:
        result = broken("%s: %s" % (type(exc).__name__, exc))
    except Exception as exc:  # an answer of a shape the check did not foresee: still a verdict
        result = broken("the server's answer has a shape this check cannot read (%s: %s)"
                        % (type(exc).__name__, str(exc)[:200]))
    finally:
        # The cleanup (DELETE of the check's sessions) shares the check's time, at least
        # a moment of it, so that a check that spent it all still leaves nothing open.
        spent = asyncio.get_event_loop().time() - started
        try:
            await asyncio.wait_for(ctx.cleanup(), max(min(CLEANUP_TIME, limit - spent), CLEANUP_MINIMUM))
        except (asyncio.TimeoutError, Exception):
            ctx.abandon()
    return result


#: Seconds the cleanup after a check may take at most, and at least.
CLEANUP_TIME = 10.0
CLEANUP_MINIMUM = 0.5


async def run_checks(lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                     names: Optional[Sequence[str]] = None, with_diff: bool = False,
                     timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                     on_result: Optional[Callable[[Result], None]] = None,
                     prompt: Optional[Callable[[str], None]] = None,
                     change_folders: Optional[ChangeFolders] = None, strict: bool = False,
                     deadline: Optional[float] = None) -> List[Result]:
    """Run the checks in order (all, or `names`); checks needing a person are SKIPped
    unless `with_diff`. `change_folders`: only for an IDE the caller started itself
    (`context.ChangeFolders`); without it `lock.folder_change` is SKIPped. `strict`
    makes every broken rule a FAIL. `deadline`: seconds for the whole run of the checks
    that need no person; each check gets at most the time left, and the checks that
    find none left are reported SKIP, so that the waits of a slow or silent server do
    not add up past it (None: no bound but each check's own)."""
    loop = asyncio.get_event_loop()
    end = None if deadline is None else loop.time() + deadline
    results = []
    for c in CHECKS:
        if names is not None and c.name not in names:
            continue
        if c.interactive and not with_diff:
            result = Result(c.name, SKIP, "needs a person in the IDE: run with --with-diff", c.section, c.title,
                            rule=c.rule, situation=c.situation)
        elif end is not None and not c.interactive and end - loop.time() < CLEANUP_MINIMUM:
            result = Result(c.name, SKIP, "not run: the run's %g s (--deadline) were spent; the checks above show "
                            "where the server was slow" % (deadline or 0), c.section, c.title, rule=c.rule,
                            situation=c.situation)
        else:
            limit = None
            if end is not None and not c.interactive:
                limit = min(timeout * 4, end - loop.time())
            result = await run_check(c, lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt,
                                      change_folders=change_folders, strict=strict, limit=limit)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def summary(results: Sequence[Result]) -> Dict[str, int]:
    """How many results of each status (`STATUSES`)."""
    counts = {status: 0 for status in STATUSES}
    for r in results:
        counts[r.status] += 1
    return counts


def failed_by_rule(results: Sequence[Result]) -> Dict[str, int]:
    """How many FAILs of each kind of rule (`RULES`): only the CLI's and security's,
    unless the run was strict."""
    counts = {rule: 0 for rule in RULES}
    for r in results:
        if r.status == FAIL:
            counts[r.rule] += 1
    return counts


def summary_line(results: Sequence[Result]) -> str:
    """The report's last line: every status counted, the FAILs by whose rule broke."""
    counts = summary(results)
    by_rule = failed_by_rule(results)
    failed = "%d failed" % counts[FAIL]
    if counts[FAIL]:
        failed += " (%s)" % ", ".join("%d %s" % (by_rule[rule], RULE_LABELS[rule]) for rule in RULES if by_rule[rule])
    return ("%d checks: %d passed, %s, %d differ from VS Code, %d advice, %d warnings, %d skipped"
            % (len(results), counts[PASS], failed, counts[DIFF], counts[ADVICE], counts[WARN], counts[SKIP]))


def load_lock(path: str) -> Tuple[LockInfo, Optional[Dict[str, Any]]]:
    """Read a lock file leniently: a lock with a bad field still gets checked (the
    `lock.fields` check reports the field), when at least the socket is known."""
    # Read as every lock reader reads (a regular file of bounded size, any JSON:
    # `lock_rules`), a byte-order mark forgiven: the `lock.fields` check reports it.
    data = lock_rules.read_regular_file(path)
    if len(data) > lock_rules.MAX_LOCK_BYTES:
        raise lockfile.LockFileError("larger than %d bytes: not a lock file" % lock_rules.MAX_LOCK_BYTES, path)
    try:
        raw = json_text.loads(data[3:] if data.startswith(b"\xef\xbb\xbf") else data, errors="replace")
    except json_text.JsonTextError as exc:
        raise lockfile.LockFileError("not valid JSON: %s" % exc, path, code=lock_rules.INVALID_JSON) from None
    try:
        return LockInfo.from_json(raw, path), raw
    except lockfile.LockFileError:
        if not isinstance(raw, dict) or not isinstance(raw.get("socketPath"), str):
            raise
        headers, folders, pid = raw.get("headers"), raw.get("workspaceFolders"), raw.get("pid")
        headers = headers if isinstance(headers, dict) else {}
        folders = folders if isinstance(folders, list) else []
        return LockInfo(raw["socketPath"], str(raw.get("scheme")), {str(k): str(v) for k, v in headers.items()},
                        pid if isinstance(pid, int) else 0, str(raw.get("ideName")),
                        0, [str(f) for f in folders], False, path), raw
