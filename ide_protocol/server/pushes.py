"""Debounced, de-duplicated notifications (PROTOCOL.md §5), with time injected.

`selection_changed` and `diagnostics_changed` follow the user's typing and cursor: sending
each change would flood the CLI. Both are debounced (trailing: the timer restarts on each
change and the latest state wins), a send that repeats the previous one is skipped, and
diagnostics carry the *union* of the URIs changed inside the window (VS Code loses the
earlier ones; we do not).

A trailing debounce alone starves under a change that never pauses (a held key, a
script moving the cursor): the timer restarts for ever and nothing is sent. So each
burst also has a maximum wait, `MAX_WAIT_FACTOR` times the delay (0.8 s at the
server's default 0.2 s): while changes keep coming, the latest one is sent at least
that often.

The scheduler is a parameter (`call_later(delay, callback) -> handle with .cancel()`), so
tests drive time by hand and the server passes `loop.call_later`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

Emit = Callable[[Any], None]
CallLater = Callable[[float, Callable[[], None]], Any]

#: A burst of changes is sent at the latest this many delays after its first change.
MAX_WAIT_FACTOR = 4.0


class Debounced:
    """Trailing debounce of a value with de-duplication of repeated sends.

    `update(value)` records the latest value and (re)starts the timer; when it fires,
    `emit(value)` is called unless the value equals the last one emitted. The first
    update of a burst also starts a timer that is not restarted (`max_wait`, by default
    `MAX_WAIT_FACTOR` delays): whichever fires first sends. A delay of 0 (or less) emits
    synchronously, still de-duplicated. After `cancel()` (the server stopped: its loop
    may be closed) nothing is scheduled or sent any more.
    """

    def __init__(self, delay: float, emit: Emit, call_later: CallLater, dedupe: bool = True,
                 max_wait: Optional[float] = None) -> None:
        self.delay = delay
        self.max_wait = max(delay, MAX_WAIT_FACTOR * delay if max_wait is None else max_wait)
        self.dedupe = dedupe
        self._emit = emit
        self._call_later = call_later
        self._handle: Any = None
        self._deadline: Any = None  # the burst's maximum wait
        self._cancelled = False
        self._pending: Any = None
        self._has_pending = False
        self._last: Any = None
        self._has_last = False

    @property
    def pending(self) -> bool:
        return self._has_pending

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def update(self, value: Any) -> None:
        if self._cancelled:
            return
        self._pending = value
        self._has_pending = True
        if self.delay <= 0:
            self.flush()
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._call_later(self.delay, self.flush)
        if self._deadline is None:
            self._deadline = self._call_later(self.max_wait, self.flush)

    def _cancel_timers(self) -> None:
        for handle in (self._handle, self._deadline):
            if handle is not None:
                handle.cancel()
        self._handle = self._deadline = None

    def flush(self) -> None:
        """Send the pending value now (the timers' callback)."""
        self._cancel_timers()
        if not self._has_pending:
            return
        value, self._pending, self._has_pending = self._pending, None, False
        if self.dedupe and self._has_last and value == self._last:
            return
        self._last, self._has_last = value, True
        self._emit(value)

    def forget_last(self) -> None:
        """Allow the next value to be sent even if it repeats the last one."""
        self._last, self._has_last = None, False

    def cancel(self) -> None:
        """Drop the pending value and stop for good: later updates are ignored."""
        self._cancelled = True
        self._cancel_timers()
        self._pending, self._has_pending = None, False


class DiagnosticsWindow:
    """Collects the URIs whose diagnostics changed during one debounce window and emits
    `diagnostics_changed` params for their union, each with its diagnostics as they are
    when the window closes. A window whose params repeat the previous send is skipped."""

    def __init__(self, delay: float, emit: Emit, call_later: CallLater,
                 current: Callable[[str], List[Dict[str, Any]]]) -> None:
        self._changed: Dict[str, None] = {}  # an insertion-ordered set
        self._current = current
        self._emit = emit
        self._last_params: Optional[Dict[str, Any]] = None
        self._debounced = Debounced(delay, self._emit_window, call_later, dedupe=False)

    @property
    def pending(self) -> bool:
        return self._debounced.pending

    def changed(self, uri: str) -> None:
        if self._debounced.cancelled:
            return
        self._changed[uri] = None
        self._debounced.update(None)

    def _emit_window(self, _value: Any) -> None:
        uris, self._changed = list(self._changed), {}
        if not uris:
            return
        params = {"uris": [{"uri": uri, "diagnostics": self._current(uri)} for uri in uris]}
        if params == self._last_params:
            return
        self._last_params = params
        self._emit(params)

    def flush(self) -> None:
        self._debounced.flush()

    def cancel(self) -> None:
        self._debounced.cancel()
        self._changed = {}
