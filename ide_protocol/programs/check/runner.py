"""Running checks: each on a fresh `CheckContext`, bounded in time, never raising (an
unexpected exception is a FAIL), its context cleaned up afterwards; and reading a lock
file leniently so that a lock with a bad field is still checked."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...wire import json_text, jsonrpc
from ...common import lock_rules, lockfile
from ...client import ClientError
from ...common.lockfile import LockInfo
from .registry import CHECKS, Check, DEFAULT_CHECK_TIMEOUT, FAIL, INTERACTIVE_TIMEOUT, Outcome, PASS, Result, SKIP, WARN
from .context import ChangeFolders, CheckContext


async def run_check(c: Check, lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                    timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                    prompt: Optional[Callable[[str], None]] = None,
                    change_folders: Optional[ChangeFolders] = None) -> Result:
    """Run one check on a fresh context; never raises (an exception is a FAIL)."""
    ctx = CheckContext(lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt,
                       change_folders=change_folders)
    limit = INTERACTIVE_TIMEOUT + timeout if (c.interactive and interactive) else timeout * 4
    try:
        note = await asyncio.wait_for(c.func(ctx), limit)
        result = Result(c.name, PASS, note or "", c.section, c.title)
    except Outcome as out:
        result = Result(c.name, out.status, out.message, c.section, c.title, out.evidence)
    except (ClientError, jsonrpc.JsonRpcError) as exc:
        # (Before asyncio.TimeoutError: a client's own timeout, IdeTimeout, is one too,
        # and says which answer it waited for.)
        result = Result(c.name, FAIL, "%s: %s" % (type(exc).__name__, exc), c.section, c.title)
    except asyncio.TimeoutError:
        result = Result(c.name, FAIL, "no answer within %s s" % limit, c.section, c.title)
    except OSError as exc:
        result = Result(c.name, FAIL, "%s: %s" % (type(exc).__name__, exc), c.section, c.title)
    except Exception as exc:  # an answer of a shape the check did not foresee: still a verdict
        result = Result(c.name, FAIL, "the server's answer has a shape this check cannot read (%s: %s)"
                        % (type(exc).__name__, str(exc)[:200]), c.section, c.title)
    finally:
        try:
            await asyncio.wait_for(ctx.cleanup(), 10)
        except (asyncio.TimeoutError, Exception):
            pass
    return result


async def run_checks(lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                     names: Optional[Sequence[str]] = None, with_diff: bool = False,
                     timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                     on_result: Optional[Callable[[Result], None]] = None,
                     prompt: Optional[Callable[[str], None]] = None,
                     change_folders: Optional[ChangeFolders] = None) -> List[Result]:
    """Run the checks in order (all, or `names`); checks needing a person are SKIPped
    unless `with_diff`. `change_folders`: only for an IDE the caller started itself
    (`context.ChangeFolders`); without it `lock.folder_change` is SKIPped."""
    results = []
    for c in CHECKS:
        if names is not None and c.name not in names:
            continue
        if c.interactive and not with_diff:
            result = Result(c.name, SKIP, "needs a person in the IDE: run with --with-diff", c.section, c.title)
        else:
            result = await run_check(c, lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt,
                                      change_folders=change_folders)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def summary(results: Sequence[Result]) -> Dict[str, int]:
    counts = {PASS: 0, FAIL: 0, WARN: 0, SKIP: 0}
    for r in results:
        counts[r.status] += 1
    return counts


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
