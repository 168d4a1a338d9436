"""Debounced, de-duplicated notifications (PROTOCOL.md §5), with time injected.

`selection_changed` and `diagnostics_changed` follow the user's typing and cursor: sending
each change would flood the CLI. Both are debounced (trailing: the timer restarts on each
change and the latest state wins), a send that repeats the previous one is skipped, and
diagnostics carry the *union* of the URIs changed inside the window (VS Code loses the
earlier ones; we do not).

The scheduler is a parameter (`call_later(delay, callback) -> handle with .cancel()`), so
tests drive time by hand and the server passes `loop.call_later`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

Emit = Callable[[Any], None]
CallLater = Callable[[float, Callable[[], None]], Any]


class Debounced:
    """Trailing debounce of a value with de-duplication of repeated sends.

    `update(value)` records the latest value and (re)starts the timer; when it fires,
    `emit(value)` is called unless the value equals the last one emitted. A delay of 0
    (or less) emits synchronously, still de-duplicated.
    """

    def __init__(self, delay: float, emit: Emit, call_later: CallLater, dedupe: bool = True) -> None:
        self.delay = delay
        self.dedupe = dedupe
        self._emit = emit
        self._call_later = call_later
        self._handle: Any = None
        self._pending: Any = None
        self._has_pending = False
        self._last: Any = None
        self._has_last = False

    @property
    def pending(self) -> bool:
        return self._has_pending

    def update(self, value: Any) -> None:
        self._pending = value
        self._has_pending = True
        if self.delay <= 0:
            self.flush()
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._call_later(self.delay, self.flush)

    def flush(self) -> None:
        """Send the pending value now (the timer's callback)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
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
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
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
