"""Who is connected to `serve`, told the way its user thinks of them.

A session says who it is in the `clientInfo` of its `initialize` (PROTOCOL.md §3) and
which process it is in its `X-Copilot-PID` header (§2). Copilot CLI says `copilot-cli`;
our own programs say `copilot-ide-doctor`, `copilot-ide-check`, `copilot-ide-client`
(client/identity.py), so `serve` can tell the user that `doctor` looked in, rather
than that Copilot connected.

`check` opens dozens of short sessions, some of which propose diffs that it closes
again itself. Printed one by one they would bury everything else, so a `check` run
(its process id) is announced once and its sessions, tool calls and diffs are folded
into that line; a diff of a run that is still waiting after `DIFF_GRACE` seconds
(`check --with-diff` waits for a person) is shown as one line with its number.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Optional

from ...client.identity import PROGRAM_PREFIX, describe_client

#: The `clientInfo.name` of a `check` run: its sessions are folded into one line.
CHECK_CLIENT = PROGRAM_PREFIX + "check"
#: Seconds a folded diff may stay open before `serve` shows it (check closes its own).
DIFF_GRACE = 2.0
#: Check runs and folded sessions remembered at most (oldest forgotten first).
REMEMBERED = 256


class Peers:
    """The sessions `serve` has seen and which of them are folded into a `check` run."""

    def __init__(self) -> None:
        self._check_pids: "OrderedDict[str, None]" = OrderedDict()
        self._folded: "OrderedDict[str, None]" = OrderedDict()

    @staticmethod
    def describe(info: Dict[str, Any]) -> str:
        """"Copilot CLI 1.0.102 (pid 4242)", "copilot-ide doctor (pid 17)", ..."""
        who = describe_client(info.get("client"), info.get("client_version"))
        pid = info.get("client_pid")
        return "%s (pid %s)" % (who, pid) if pid else who

    def connected(self, info: Dict[str, Any]) -> Optional[str]:
        """A new session: the line to print, or None when it is folded into a check
        run already announced."""
        sid = str(info.get("id"))
        pid = str(info.get("client_pid") or "?")
        if info.get("client") != CHECK_CLIENT and pid not in self._check_pids:
            return "session %s, %s" % (sid[:8], self.describe(info))
        _remember(self._folded, sid)
        if pid in self._check_pids:
            return None
        _remember(self._check_pids, pid)
        return ("%s is checking this server (its sessions, tool calls and the diffs it closes itself "
                "are not shown)" % self.describe(info))

    def folded(self, session_id: Any) -> bool:
        """Whether this session belongs to a `check` run (nothing of it is printed)."""
        return session_id is not None and str(session_id) in self._folded

    def ended(self, session_id: Any) -> bool:
        """A session ended; True when its end is to be printed. A folded session stays
        folded: a tool call of it can finish after its end (an `open_diff` answered
        `client_disconnected` when `check` deletes its session, PROTOCOL.md §4)."""
        return str(session_id) not in self._folded


def _remember(seen: "OrderedDict[str, None]", key: str) -> None:
    seen[key] = None
    seen.move_to_end(key)
    while len(seen) > REMEMBERED:
        seen.popitem(last=False)
