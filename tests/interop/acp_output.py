"""Reading what `python3 -m acp --json` printed: the interop tests of both transports
(stdio and TCP) read it the same way."""
from __future__ import annotations

import json
from typing import Any, Dict


def result_line(proc: Any) -> Dict[str, Any]:
    """The final ``{"result": {...}}`` line printed by ``--json`` (it carries
    ``sessionId`` and ``stopReason``, so that a script can resume what it started)."""
    for line in reversed(proc.lines("out")):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "result" in obj:
            return obj["result"]
    raise AssertionError("no result line in --json output:\n" + proc.output())
