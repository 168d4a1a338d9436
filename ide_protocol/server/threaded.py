"""`ThreadedIdeServer`: the `/ide` server for editors that own their main loop.

Sublime Text, Vim, Qt and Tk run their own event loop on their main (UI) thread and
cannot run asyncio there. `ThreadedIdeServer` hosts an `IdeServer` on an asyncio loop
in one background thread and gives the editor a plain, blocking-for-an-instant API.

Threading rules (the whole contract):

* Every public method may be called from **any** thread. Each one hands its work to the
  loop thread (`loop.call_soon_threadsafe`) and waits for it to be done, bounded by
  `timeout` (the work is tiny: recording state, writing to sockets' buffers), then
  returns its result or raises its exception in the calling thread. Called from the
  loop thread itself (inside a callback run there), the work is done directly.
* `DiffRequest.accept()` / `reject()` are safe from any thread too (they marshal to
  the loop the same way), so a diff shown by the editor can be answered from its UI.
* IDE callbacks (`on_diff`, `on_diff_closed`, `on_session`, `on_tool_call`) are passed
  to `call_in_editor(fn)`, which must *schedule* `fn()` on the editor's thread and
  return at once: `sublime.set_timeout`, `QTimer.singleShot(0, fn)` (through a
  queued signal from a non-Qt thread), `root.after(0, fn)` via a queue for Tk, Vim's
  `timer_start`. It must never wait for the editor thread, or an editor thread that is
  waiting for the loop would deadlock. Without `call_in_editor` the callbacks run on
  the loop thread, where they must return quickly and not block.
* `on_diff(diff)` may return a decision (`True`/`"accept"`, `False`/`"reject"`) or
  `None` and answer later with `diff.accept()` / `diff.reject()` from any thread.
* `start()` and `stop()` block until done (or `timeout`). `stop()` removes the lock
  file and the socket; an `atexit` hook does it too if the editor exits without
  calling it. `stop()` from the loop thread (inside a callback) only schedules the
  stop, since waiting there would wait for itself.
* `post(fn)` (and `set_selection(..., wait=False)`, `set_diagnostics(..., wait=False)`)
  hands work to the loop thread without waiting at all, for an editor's hot paths;
  posted work keeps its order with other calls, and its failures are logged.
* Every other keyword is one of `IdeServer`'s options (`max_body`, `max_sessions`,
  `connection_idle_timeout`, `socket_dir`, ...) and is passed to it unchanged; the set
  is read from `IdeServer.__init__`'s signature, so an option it gains is accepted here
  at once. The `IdeServer` is built in the constructor, on the caller's thread: an
  unknown keyword or a bad value raises there, before any thread or lock file exists.
* `on_exchange` (one of those options) runs on the loop thread.

The loop thread is a daemon thread, so it never keeps an editor from exiting.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import difflib
import inspect
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

from .ide_server import DiffRequest, IdeServer
from ..common.tools import Diagnostic, Selection

log = logging.getLogger(__name__)

T = TypeVar("T")
CallInEditor = Callable[[Callable[[], None]], Any]

#: Default bound for one call into the loop (seconds); only a stuck loop reaches it.
DEFAULT_TIMEOUT = 10.0

#: `IdeServer`'s callbacks that `ThreadedIdeServer` wraps, to deliver them through
#: `call_in_editor`; its own keywords of the same names take them.
WRAPPED_CALLBACKS = ("on_diff", "on_diff_closed", "on_session", "on_tool_call")

#: Every other keyword of `IdeServer.__init__`, passed on unchanged. Read from the
#: signature itself (one place: an option `IdeServer` gains needs no edit here).
SERVER_OPTIONS: Dict[str, inspect.Parameter] = {
    name: param for name, param in inspect.signature(IdeServer).parameters.items()
    if param.kind is inspect.Parameter.KEYWORD_ONLY and name not in WRAPPED_CALLBACKS}


def _check_options(options: Dict[str, Any]) -> None:
    """TypeError naming this class (not `IdeServer.__init__`) for a keyword that is
    not one of `SERVER_OPTIONS`, with the closest option when there is one."""
    unknown = sorted(set(options) - set(SERVER_OPTIONS))
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(SERVER_OPTIONS), n=1)
        hints.append("%r%s" % (name, " (did you mean %r?)" % close[0] if close else ""))
    raise TypeError("ThreadedIdeServer() got unexpected keyword argument%s %s; its IdeServer options are: %s"
                    % ("s" if len(unknown) > 1 else "", ", ".join(hints), ", ".join(SERVER_OPTIONS)))


class ThreadedIdeServer:
    """An `IdeServer` on a background asyncio loop; every method is thread-safe.

        server = ThreadedIdeServer(["/home/me/project"], ide_name="Sublime Text",
                                   call_in_editor=lambda fn: sublime.set_timeout(fn, 0), on_diff=show_diff)
        server.start()                       # blocks until the lock file is written
        server.set_selection(Selection(path, text, (0, 0), (2, 4)))
        server.stop()                        # lock file and socket removed

    `call_in_editor`, `timeout` and the four callbacks are this class's own; every
    other keyword is one of `IdeServer`'s options (`SERVER_OPTIONS`: `ide_name`,
    `is_trusted`, `lock_dir`, `socket_dir`, `debounce`, the limits `max_body`,
    `request_timeout`, `max_connections`, `max_sessions`, `connection_idle_timeout`,
    `idle_timeout`, ...) and goes to it unchanged.

    Why `**options` and not a copy of `IdeServer`'s parameter list: a copy falls
    behind each time `IdeServer` gains an option; forwarding cannot. What a copy
    gives is kept: `inspect.signature(ThreadedIdeServer)` (so `help()`, a REPL's
    completion) lists every option with its default and type, built from
    `IdeServer`'s signature at import; a keyword that is none of them raises
    TypeError at construction, in the caller's thread, naming the nearest option.
    Static checkers see `**options: Any` (typing them needs `Unpack[TypedDict]`,
    Python 3.12).
    """

    def __init__(self, workspace_folders: Union[str, Sequence[str]] = (), *,
                 call_in_editor: Optional[CallInEditor] = None,
                 on_diff: Optional[Callable[[DiffRequest], Any]] = None,
                 on_diff_closed: Optional[Callable[[DiffRequest, Dict[str, Any]], Any]] = None,
                 on_session: Optional[Callable[[str, Dict[str, Any]], Any]] = None,
                 on_tool_call: Optional[Callable[[Dict[str, Any], str, Any], Any]] = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 **options: Any) -> None:
        _check_options(options)
        self.call_in_editor = call_in_editor
        self.on_diff = on_diff
        self.on_diff_closed = on_diff_closed
        self.on_session = on_session
        self.on_tool_call = on_tool_call
        self.timeout = timeout
        # IdeServer.__init__ creates no asyncio object, so it is built here, in the
        # caller's thread (its errors are raised to the caller, before any thread
        # starts); all that needs the loop happens in start(), on the loop thread.
        self.server = IdeServer(workspace_folders, on_diff=self._on_diff, on_diff_closed=self._on_diff_closed,
                                on_session=self._on_session, on_tool_call=self._on_tool_call, **options)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()  # start/stop against each other
        self._loop_stop: Optional["asyncio.Task[None]"] = None  # stop() called on the loop thread

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: Optional[float] = None) -> "ThreadedIdeServer":
        """Start the loop thread, listen, write the lock file; block until done.
        Raises what `IdeServer.start` raised (and then leaves no thread behind)."""
        with self._lock:
            if self.thread is not None:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                try:
                    loop.run_forever()
                finally:
                    try:
                        loop.run_until_complete(loop.shutdown_asyncgens())
                    finally:
                        loop.close()

            thread = threading.Thread(target=run, name="ide-protocol-loop", daemon=True)
            thread.start()
            ready.wait(self._timeout(timeout))
            self.loop, self.thread = loop, thread
            try:
                asyncio.run_coroutine_threadsafe(self.server.start(), loop).result(self._timeout(timeout))
            except BaseException:
                self._end_thread(timeout)
                raise
            atexit.register(self._at_exit)
            return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Remove the lock, end every session (pending diffs answer
        `client_disconnected`), close the socket, end the loop thread; block until done."""
        loop = self.loop
        if loop is None:
            return
        if self._on_loop_thread():
            # Waiting here would wait for ourselves: a task this object keeps runs it.
            if self._loop_stop is None or self._loop_stop.done():
                self._loop_stop = asyncio.ensure_future(self._stop_async())
            return
        with self._lock:
            if self.loop is None:
                return
            try:
                asyncio.run_coroutine_threadsafe(self.server.stop(), loop).result(self._timeout(timeout))
            except (RuntimeError, concurrent.futures.TimeoutError) as exc:
                log.warning("stopping the /ide server: %r", exc)
            finally:
                self._end_thread(timeout)

    async def _stop_async(self) -> None:
        """stop() called on the loop thread: stop the server, then the loop; the thread
        ends by itself (nobody joins it)."""
        await self.server.stop()
        if self.loop is not None:  # no lock here: a stop() in another thread may hold it
            self._end_thread(None)  # while it waits for this very loop

    def _end_thread(self, timeout: Optional[float]) -> None:
        loop, thread = self.loop, self.thread
        self.loop = self.thread = None
        atexit.unregister(self._at_exit)
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout(timeout))

    def _at_exit(self) -> None:
        # The editor exits without stop(): the lock must still go (PROTOCOL.md §1).
        self.stop(timeout=2.0)

    def __enter__(self) -> "ThreadedIdeServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive() and self.server.started

    # ------------------------------------------------------------- thread plumbing

    def _timeout(self, timeout: Optional[float]) -> float:
        return self.timeout if timeout is None else timeout

    def _on_loop_thread(self) -> bool:
        return self.thread is not None and threading.current_thread() is self.thread

    def call(self, fn: Callable[..., T], *args: Any, timeout: Optional[float] = None, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the loop thread and return its result here
        (its exception is raised here). Before start and after stop there is no loop
        and no concurrency: `fn` runs directly."""
        loop = self.loop
        if loop is None or self._on_loop_thread() or not loop.is_running():
            return fn(*args, **kwargs)
        outcome: "concurrent.futures.Future[T]" = concurrent.futures.Future()

        def run() -> None:
            if not outcome.set_running_or_notify_cancel():
                return
            try:
                outcome.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                outcome.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # closed meanwhile by stop(): no loop, no concurrency left
            return fn(*args, **kwargs)
        try:
            return outcome.result(self._timeout(timeout))
        except concurrent.futures.TimeoutError:
            outcome.cancel()
            raise TimeoutError("the /ide server's loop did not answer within %ss" % self._timeout(timeout))

    def post(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run `fn(*args, **kwargs)` on the loop thread later, without waiting for it: for
        an editor's hot paths (a cursor move), where even an instant's wait for the loop
        thread is too much. Posted work runs in order, before or after `call()`s in the
        order they were made. Its failure is logged, never raised. Before start and after
        stop `fn` runs directly, as in `call()`."""
        def run() -> None:
            try:
                fn(*args, **kwargs)
            except Exception:
                log.exception("/ide work posted from another thread failed")

        loop = self.loop
        if loop is None or self._on_loop_thread() or not loop.is_running():
            run()
            return
        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # closed meanwhile by stop()
            run()

    def submit(self, coro: Any) -> "concurrent.futures.Future[Any]":
        """Run a coroutine on the loop; returns a concurrent future (for advanced uses)."""
        if self.loop is None:
            raise RuntimeError("the server is not started")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def _in_editor(self, fn: Callable[[], Any]) -> None:
        """Run a user callback where the editor wants it; its failures are logged, never
        raised into the server."""
        def guarded() -> None:
            try:
                fn()
            except Exception:
                log.exception("/ide callback failed")

        if self.call_in_editor is None:
            guarded()
            return
        try:
            self.call_in_editor(guarded)
        except Exception:
            log.exception("call_in_editor failed")

    # ------------------------------------------------ callbacks (on the loop thread)

    def _on_diff(self, diff: DiffRequest) -> None:
        user = self.on_diff
        if user is None:
            return None  # answered later with resolve_diff()

        def deliver() -> None:
            decision = user(diff)
            if decision is not None:
                # From the editor's thread: `accept`/`reject` marshal back to the loop.
                diff.decide(decision)

        self._in_editor(deliver)
        return None

    def _on_diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        if self.on_diff_closed is not None:
            user = self.on_diff_closed
            self._in_editor(lambda: user(diff, answer))

    def _on_session(self, event: str, info: Dict[str, Any]) -> None:
        if self.on_session is not None:
            user = self.on_session
            self._in_editor(lambda: user(event, info))

    def _on_tool_call(self, call: Dict[str, Any], session_id: str, result: Any) -> None:
        if self.on_tool_call is not None:
            user = self.on_tool_call
            self._in_editor(lambda: user(call, session_id, result))

    # ------------------------------------------------------------- the IDE's state

    def set_selection(self, selection: Optional[Selection], timeout: Optional[float] = None,
                      wait: bool = True) -> None:
        """The active editor's selection changed (None: no active editor). With
        `wait=False` it is posted (see `post`): the caller never waits for the loop."""
        if wait:
            self.call(self.server.set_selection, selection, timeout=timeout)
        else:
            self.post(self.server.set_selection, selection)

    def set_diagnostics(self, path_or_uri: str, diagnostics: Sequence[Diagnostic],
                        timeout: Optional[float] = None, wait: bool = True) -> None:
        """Replace one file's diagnostics (an empty list clears them); `wait` as in
        `set_selection`."""
        if wait:
            self.call(self.server.set_diagnostics, path_or_uri, list(diagnostics), timeout=timeout)
        else:
            self.post(self.server.set_diagnostics, path_or_uri, list(diagnostics))

    def clear_diagnostics(self, timeout: Optional[float] = None) -> None:
        self.call(self.server.clear_diagnostics, timeout=timeout)

    def add_file_reference(self, file_path: str, start: Optional[Tuple[int, int]] = None,
                           end: Optional[Tuple[int, int]] = None, selected_text: Optional[str] = None,
                           session_id: Optional[str] = None, timeout: Optional[float] = None) -> int:
        """Send a file (or a range) to the CLI now; returns how many sessions got it."""
        return self.call(self.server.add_file_reference, file_path, start, end, selected_text, session_id,
                         timeout=timeout)

    def add_selection(self, file_path: str, start: Tuple[int, int], end: Tuple[int, int],
                      selected_text: Optional[str] = None, session_id: Optional[str] = None,
                      timeout: Optional[float] = None) -> int:
        return self.call(self.server.add_selection, file_path, start, end, selected_text, session_id,
                         timeout=timeout)

    def set_workspace_folders(self, folders: Sequence[str], timeout: Optional[float] = None) -> None:
        """New folders: a new lock file is written and the old one removed."""
        self.call(self.server.set_workspace_folders, list(folders), timeout=timeout)

    def flush_pushes(self, timeout: Optional[float] = None) -> None:
        """Send the debounced pushes now."""
        self.call(self.server.flush_pushes, timeout=timeout)

    # --------------------------------------------------------------------- diffs

    def pending_diffs(self, timeout: Optional[float] = None) -> List[DiffRequest]:
        return self.call(self.server.pending_diffs, timeout=timeout)

    def resolve_diff(self, tab_name: Optional[str] = None, accept: bool = True,
                     timeout: Optional[float] = None) -> bool:
        """Answer a pending diff by tab name (the most recent when None); True when it
        was pending."""
        return self.call(self.server.resolve_diff, tab_name, accept, timeout=timeout)

    # ---------------------------------------------------------------- inspection

    def stats(self, timeout: Optional[float] = None) -> Dict[str, int]:
        return self.call(self.server.stats, timeout=timeout)

    def sessions(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return self.call(lambda: self.server.sessions, timeout=timeout)

    @property
    def selection(self) -> Optional[Selection]:
        return self.server.selection

    @property
    def socket_path(self) -> Optional[str]:
        return self.server.socket_path

    @property
    def lock_path(self) -> Optional[str]:
        return self.server.lock_path

    @property
    def nonce(self) -> str:
        return self.server.nonce

    @property
    def headers(self) -> Dict[str, str]:
        return self.server.headers

    @property
    def workspace_folders(self) -> List[str]:
        return self.server.workspace_folders


def _signature() -> inspect.Signature:
    """`ThreadedIdeServer.__init__`'s own parameters, then `IdeServer`'s options in
    place of `**options`: what `inspect.signature` and `help()` show."""
    own = inspect.signature(ThreadedIdeServer.__init__)
    params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params.extend(p for name, p in SERVER_OPTIONS.items() if name not in own.parameters)
    return own.replace(parameters=params)


ThreadedIdeServer.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
