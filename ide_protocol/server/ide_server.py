"""`IdeServer`: the IDE side of Copilot CLI's `/ide` protocol, for embedding (asyncio form).

An editor integration supplies what only it knows — its workspace folders, its name, how
to show a proposed diff and how to tell the user's decision — and tells the server when
things change (selection, diagnostics, file references). The server does the rest:
socket, lock file, MCP sessions, the six tools, debounced pushes, clean shutdown.

It is composed of parts with one job each, given their dependencies explicitly: the
editor's state (`EditorState`), the pending diffs (`PendingDiffs`), the tools
(`IdeTools`, `tool_calls.py`), the reporting callbacks' runner (`Reports`), the MCP
application (`McpApp`) and the socket (`Listener`).

    server = IdeServer(["/home/me/project"], ide_name="My Editor", on_diff=show_diff)
    await server.start()                  # listens, then writes the lock file
    server.set_selection(Selection(path, text, (0, 0), (3, 5)))
    ...
    await server.stop()                   # removes lock file and socket

`on_diff(diff)` is called for each `open_diff`; it may return a decision at once
(`True`/`"accept"` or `False`/`"reject"`), or `None` and later call `diff.accept()` /
`diff.reject()` (from the loop's thread; `ThreadedIdeServer` for other threads). The IDE
never writes the file: on accept the CLI writes it (PROTOCOL.md §4).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import rpc
from ..wire import jsonrpc
from ..common import lockfile, tools
from .callbacks import Reports
from .diffs import DiffRequest, PendingDiffs
from .editor_state import EditorState
from .options import Hooks, Limits, grouped
from .mcp import McpApp, Session
from .pushes import Debounced, DiagnosticsWindow
from ..common.tools import Diagnostic, Selection
from .tool_calls import IdeTools
from .listener import Listener

log = logging.getLogger(__name__)

DEFAULT_DEBOUNCE = 0.2


class IdeServer:
    """The `/ide` MCP server of one IDE window (asyncio form; see the module doc).

    Its options: the window's own (folders, name, trust, where the lock and socket go,
    the push debounce), then two groups, `limits` (`Limits`) and `hooks` (`Hooks`),
    each of whose fields may also be given as a keyword of its own
    (`IdeServer(folders, max_body=..., on_diff=...)`)."""

    def __init__(self, workspace_folders: Union[str, Sequence[str]] = (), *, ide_name: str = "Python IDE",
                 is_trusted: bool = False, ide_info: Optional[Dict[str, Any]] = None,
                 server_info: Optional[Dict[str, Any]] = None, lock_dir: Optional[str] = None,
                 socket_dir: Optional[str] = None, write_lock: bool = True, debounce: float = DEFAULT_DEBOUNCE,
                 json_response: bool = False, limits: Optional[Limits] = None, hooks: Optional[Hooks] = None,
                 **options: Any) -> None:
        self.limits, self.hooks = limits, hooks = grouped(limits, hooks, options, "IdeServer")
        if isinstance(workspace_folders, str):
            workspace_folders = [workspace_folders]
        self._folders = [os.path.abspath(f) for f in workspace_folders]
        self.ide_name = ide_name
        self.is_trusted = bool(is_trusted)
        self.lock_dir = lock_dir
        self.socket_dir = socket_dir
        self.debounce = debounce
        self.write_lock_file = write_lock
        # (Imported here, where a server is made: importing the class needs neither.)
        import secrets
        import uuid
        self.nonce = secrets.token_hex(16)  # 128 bits from the OS CSPRNG (PROTOCOL.md §1)
        self.instance_id = str(uuid.uuid4())
        self.lock_path: Optional[str] = None
        self._lock_timestamp: Optional[int] = None  # (when this run's lock was first written)
        self.socket_path: Optional[str] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.started = False
        self._stopping = False
        self._stopped: Optional[asyncio.Event] = None
        self._stop_task: Optional["asyncio.Task[None]"] = None  # a stop a signal asked for
        self.reports = Reports()  # runs on_session, on_tool_call, on_diff_closed
        self.editor = EditorState()
        self.diffs = PendingDiffs(on_closed=self._diff_closed)
        self.tools = IdeTools(self.editor, self.diffs, self.reports, ide_name=ide_name,
                              ide_info=dict(ide_info or {}), instance_id=self.instance_id, max_file=limits.max_body,
                              on_diff=hooks.on_diff, on_tool_call=hooks.on_tool_call,
                              on_renamed=lambda session: self._emit_session("renamed", session))

        self.dispatcher = rpc.Dispatcher()
        # Bounded before authentication (README "Limits and safety"): sessions (the one
        # idle longest makes room, else 503), connections (likewise), idle connections
        # closed after `connection_idle_timeout`; None lifts a limit. A session whose
        # client vanished without DELETE ends `orphan_timeout` after its last connection
        # (PROTOCOL.md §3, "When a session ends"): the listener tells the MCP layer.
        self.app = McpApp(self.dispatcher, self.nonce, server_info=server_info, json_response=json_response,
                          on_session_start=self._session_started, on_session_end=self._session_ended,
                          on_stream_open=self._stream_opened, on_exchange=hooks.on_exchange,
                          streams_early=self.tools.blocks, max_sessions=limits.max_sessions,
                          orphan_timeout=limits.orphan_timeout)
        self.listener = Listener(self.app.answer, limits.max_body, limits.request_timeout, judge=self.app.judge_head,
                                 max_connections=limits.max_connections, on_connection_closed=self.app.connection_closed)
        self.dispatcher.add("tools/list", lambda params, ctx: {"tools": tools.TOOLS})
        self.dispatcher.add("tools/call", self.tools.call)
        self._selection_push: Optional[Debounced] = None
        self._diagnostics_push: Optional[DiagnosticsWindow] = None
        self._reaper: Optional["asyncio.Task[None]"] = None
        self._signals: List[int] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def workspace_folders(self) -> List[str]:
        return list(self._folders)

    @property
    def headers(self) -> Dict[str, str]:
        return {"Authorization": "Nonce " + self.nonce}

    async def start(self) -> "IdeServer":
        """Listen, then write the lock file (the CLI probes the socket, PROTOCOL.md §1)."""
        if self.started:
            return self
        self.loop = asyncio.get_event_loop()
        # A server stopped earlier may start again (an editor's Stop then Start): this
        # run has its own stop to do, so the last run's stop-in-progress flag goes.
        self._stopping = False
        self.diffs.open = True
        self._stop_task = None
        self._stopped = asyncio.Event()
        self._selection_push = Debounced(self.debounce, self._push_selection, self.loop.call_later)
        self._diagnostics_push = DiagnosticsWindow(self.debounce, self._push_diagnostics, self.loop.call_later,
                                                   self.editor.diagnostics_json)
        try:
            if sys.platform == "win32":
                self.socket_path = await self.listener.start_pipe()
            else:
                self.socket_path = await self.listener.start_unix(self.socket_dir)
            if self.write_lock_file:
                try:
                    lockfile.remove_stale_locks(self.lock_dir)
                except OSError as exc:
                    log.warning("could not clean stale locks: %s", exc)
                self._lock_timestamp = None  # (now: each run has a lock of its own)
                info = self._lock_info()
                self._lock_timestamp = int(info.timestamp)  # kept when the folders change (VS Code does this, §1)
                self.lock_path = lockfile.write_lock(info, self.lock_dir)
        except BaseException:
            await self.listener.close()
            raise
        self.started = True
        self._reaper = asyncio.ensure_future(self._reap_idle())
        log.info("listening on %s (lock %s)", self.socket_path, self.lock_path)
        return self

    def _lock_info(self) -> lockfile.LockInfo:
        return lockfile.LockInfo.new(self.socket_path or "", self.headers, self._folders, self.ide_name,
                                     is_trusted=self.is_trusted, timestamp=self._lock_timestamp)

    async def stop(self) -> None:
        """Remove the lock (the only disconnect signal the CLI notices), end every
        session (pending diffs resolve `client_disconnected`), close the socket."""
        if self._stopping:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._stopping = True
        self.diffs.open = False  # (an open_diff still reading its file shows nothing)
        self._remove_lock()
        self.remove_signal_handlers()
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
            self._reaper = None
        self.app.end_all("server stopped")
        self.diffs.close()
        await self._let_answers_out()
        if self._selection_push is not None:
            self._selection_push.cancel()
        if self._diagnostics_push is not None:
            self._diagnostics_push.cancel()
        await self.listener.close()
        # A request read while the answers went out may have made a session (and the
        # connections' close started its orphan timer): none outlives the stop.
        self.app.end_all("server stopped")
        await self.reports.cancel()
        self.started = False
        if self._stopped is not None:
            self._stopped.set()

    async def _let_answers_out(self, timeout: float = 2.0) -> None:
        """Let the requests the stop just ended write their answers before the
        connections close: every pending diff is answered `client_disconnected`
        (PROTOCOL.md §4), not cut off. Bounded: a peer that does not read is dropped."""
        await self.listener.let_answers_out(timeout)

    def _remove_lock(self) -> None:
        if self.lock_path:
            lockfile.remove_lock(self.lock_path)
            self.lock_path = None

    async def wait_stopped(self) -> None:
        if self._stopped is not None:
            await self._stopped.wait()

    async def __aenter__(self) -> "IdeServer":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def stop_soon(self) -> None:
        """Start `stop()` from a callback that cannot await (a signal handler, the loop
        thread of `ThreadedIdeServer`): one task, owned by this server and kept until
        the stop has run, however often it is asked for; `wait_stopped()` waits for it."""
        if self._stop_task is None or self._stop_task.done():
            self._stop_task = asyncio.ensure_future(self.stop())

    def install_signal_handlers(self, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
        """Stop cleanly (lock removed) on SIGINT/SIGTERM; for programs that own the loop."""
        assert self.loop is not None
        for sig in signals:
            try:
                self.loop.add_signal_handler(sig, self.stop_soon)
                self._signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # Windows, or not the main thread

    def remove_signal_handlers(self) -> None:
        if self.loop is None:
            return
        for sig in self._signals:
            try:
                self.loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        self._signals = []

    def set_workspace_folders(self, folders: Sequence[str]) -> None:
        """Change the folders: the lock is rewritten in place, the same file, never
        deleted or replaced (PROTOCOL.md §1, "Changing folders": a CLI connected through
        it would take that for the IDE leaving and disconnect)."""
        self._folders = [os.path.abspath(f) for f in folders]
        if self.started and self.write_lock_file:
            info = self._lock_info()
            try:
                self.lock_path = (lockfile.rewrite_lock(info, self.lock_path) if self.lock_path
                                  else lockfile.write_lock(info, self.lock_dir))
            finally:
                if self.lock_path and not lockfile.written_here(self.lock_path):
                    self.lock_path = None  # a failed rewrite removed the damaged lock

    async def _reap_idle(self) -> None:
        limits = self.limits
        shortest = min(limits.idle_timeout, limits.connection_idle_timeout or limits.idle_timeout)
        period = max(0.05, min(shortest / 4.0, 30.0))
        while True:
            await asyncio.sleep(period)
            self.expire_idle_sessions()
            if limits.connection_idle_timeout is not None:
                self.listener.close_idle(limits.connection_idle_timeout)

    def expire_idle_sessions(self, now: Optional[float] = None) -> int:
        """End sessions abandoned without DELETE (no stream, no request, quiet for
        `idle_timeout`); the reaper calls it, tests may too."""
        return len(self.app.expire_idle(self.limits.idle_timeout, now))

    # ------------------------------------------------------------ state from the IDE

    def set_selection(self, selection: Optional[Selection]) -> None:
        """The active editor's selection changed. `None`: no active editor (the last
        selection stays available to `get_selection` with `current: false`)."""
        current = self.editor.set_selection(selection)
        if current is not None and self._selection_push is not None:
            self._selection_push.update(current.notification_params())

    @property
    def selection(self) -> Optional[Selection]:
        return self.editor.selection

    def set_diagnostics(self, path_or_uri: str, diagnostics: Sequence[Diagnostic]) -> None:
        """Replace one file's diagnostics (an empty list clears them)."""
        uri = self.editor.set_diagnostics(path_or_uri, diagnostics)
        if self._diagnostics_push is not None:
            self._diagnostics_push.changed(uri)

    def clear_diagnostics(self) -> None:
        for uri in list(self.editor.diagnostics):
            self.set_diagnostics(uri, [])

    # ---------------------------------------------------------------------- diffs

    def pending_diffs(self) -> List[DiffRequest]:
        return self.diffs.pending()

    def resolve_diff(self, tab_name: Optional[str] = None, accept: bool = True) -> bool:
        """Answer a pending diff by tab name (the most recent one when None)."""
        pending = self.diffs.pending()
        if tab_name is None:
            diff = pending[-1] if pending else None
        else:
            diff = self.diffs.get(tab_name)
        if diff is None:
            return False
        return diff.accept() if accept else diff.reject()

    def _diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        if self.hooks.on_diff_closed is not None:
            self.reports.report("on_diff_closed", self.hooks.on_diff_closed, diff, answer)

    def add_file_reference(self, file_path: str, start: Optional[Tuple[int, int]] = None,
                           end: Optional[Tuple[int, int]] = None, selected_text: Optional[str] = None,
                           session_id: Optional[str] = None) -> int:
        """The user sent a file (or a range of it) to the CLI: pushed at once (§5)."""
        params = tools.reference_params(os.path.abspath(file_path), start, end, selected_text)
        return self._notify("add_file_reference", params, session_id)

    def add_selection(self, file_path: str, start: Tuple[int, int], end: Tuple[int, int],
                      selected_text: Optional[str] = None, session_id: Optional[str] = None) -> int:
        params = tools.reference_params(os.path.abspath(file_path), start, end, selected_text)
        return self._notify("add_selection", params, session_id)

    def _notify(self, method: str, params: Dict[str, Any], session_id: Optional[str] = None) -> int:
        message = jsonrpc.notification(method, params)
        if session_id is None:
            return self.app.broadcast(message)
        session = self.app.sessions.get(session_id)
        return int(session is not None and self.app.send_on_stream(session, message))

    def _push_selection(self, params: Dict[str, Any]) -> None:
        self._notify("selection_changed", params)

    def _push_diagnostics(self, params: Dict[str, Any]) -> None:
        self._notify("diagnostics_changed", params)

    def flush_pushes(self) -> None:
        """Send debounced pushes now (e.g. before a test reads the stream)."""
        if self._selection_push is not None:
            self._selection_push.flush()
        if self._diagnostics_push is not None:
            self._diagnostics_push.flush()

    # --------------------------------------------------------------------- sessions

    def _session_started(self, session: Session) -> None:
        self._emit_session("connected", session)

    def _stream_opened(self, session: Session) -> None:
        # PROTOCOL.md §5: the CLI clears its cached selection on reconnect; send ours.
        selection = self.editor.selection
        if selection is not None and selection.current:
            self.app.send_on_stream(session, jsonrpc.notification(
                "selection_changed", selection.notification_params()))

    def _session_ended(self, session: Session, reason: str) -> None:
        self.diffs.resolve_all(tools.CLIENT_DISCONNECTED, session.id)
        self._emit_session("disconnected", session, reason=reason)

    def _emit_session(self, event: str, session: Session, **extra: Any) -> None:
        if self.hooks.on_session is None:
            return
        info = session.info()
        info.update(extra)
        self.reports.report("on_session", self.hooks.on_session, event, info)

    @property
    def sessions(self) -> List[Dict[str, Any]]:
        return [s.info() for s in self.app.sessions.values()]

    def stats(self) -> Dict[str, int]:
        """Counts of everything the server holds, for leak checks and status lines."""
        return {
            "sessions": len(self.app.sessions),
            "streams": sum(1 for s in self.app.sessions.values() if s.stream is not None),
            "running_requests": sum(len(s.running) for s in self.app.sessions.values()),
            "pending_diffs": len(self.diffs),
            "connections": len(self.listener.connections),
            "connection_tasks": self.listener.busy,
            "accepted_connections": self.listener.accepted,
        }
