"""The command line's exit status (ACP.md §9): one place for every code, and for how a
turn's ending becomes one, so that a script can rely on them."""
from __future__ import annotations

from typing import Optional, Tuple

from ._core import safe_text

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: How a turn ended, as the exit status (ACP.md §9): 0 only when the agent ended it on
#: its own (`end_turn`); each other stop reason has a code of its own, so that a script
#: can tell them from success and from one another. A cancelled turn is 130, as after
#: Ctrl-C; an `Error:` answer (ACP.md §6) is 1 whatever the stop reason.
EXIT_REFUSAL, EXIT_MAX_TOKENS, EXIT_MAX_TURN_REQUESTS = 3, 4, 5
STOP_REASONS = {  # stop reason: (exit status, what is said on stderr)
    "end_turn": (EXIT_OK, ""),
    "refusal": (EXIT_REFUSAL, "the agent refused to continue"),
    "max_tokens": (EXIT_MAX_TOKENS, "the model reached its token limit"),
    "max_turn_requests": (EXIT_MAX_TURN_REQUESTS, "the turn reached its limit of model requests"),
    "cancelled": (EXIT_INTERRUPTED, "turn cancelled"),
}
EXIT_STATUS_HELP = """exit status:
  0    the turn ended (stop reason end_turn), or nothing to do
  1    an error: an `Error:` answer, a failed start, a lost connection, a dead agent,
       an unknown stop reason, a protocol version other than 1
  2    a usage error (a bad option, or one the agent does not offer)
  %d    the agent refused to continue (stop reason refusal)
  %d    the model reached its token limit (stop reason max_tokens)
  %d    the turn reached its limit of model requests (stop reason max_turn_requests)
  130  cancelled (Ctrl-C, or stop reason cancelled)""" % (EXIT_REFUSAL, EXIT_MAX_TOKENS, EXIT_MAX_TURN_REQUESTS)


def turn_status(stop_reason: Optional[str], error: Optional[str]) -> Tuple[int, str]:
    """The exit status of a turn and the note said on stderr (ACP.md §9): an `Error:`
    answer is 1 whatever the stop reason (ACP.md §6: errors come as `end_turn`); a
    stop reason the agent should not send is 1 too, never taken for success."""
    if error is not None:
        return EXIT_ERROR, ""
    known = STOP_REASONS.get(stop_reason or "")
    if known is None:
        return EXIT_ERROR, "the agent ended the turn with an unknown stop reason: %s" % safe_text(
            repr(stop_reason), multiline=False)
    return known
