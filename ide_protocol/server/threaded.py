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
  `None` and answer later with `diff.accept()` / `diff.reject()` from any thread. An
  `on_diff` that raises or returns anything else answers the `open_diff` with an error
  result, as `IdeServer` does.
* `start()` blocks until the lock file is written (or `timeout`); `start(wait=False,
  on_started=fn)` returns at once and calls `fn(None)` through `call_in_editor` once the
  lock file is written, or `fn(error)` when the start failed: an editor's UI thread
  never waits for the socket or the lock file. `wait_started()` waits for it later.
* Every call may be made before the server is up. Before `start()` there is no loop and
  the work is done directly, in the calling thread; during a start it is queued on the
  loop and runs between the start's steps. Either way the state is kept: the latest
  `set_selection` is what a CLI gets when it connects (PROTOCOL.md §5), and
  diagnostics are there for `get_diagnostics`.
* `stop()` blocks until done (or `timeout`); it removes the lock file and the socket;
  an `atexit` hook does it too if the editor exits without calling it. A start still
  under way is cancelled: nothing of it stays, and its `on_started` is not called.
  A signal handler may call `stop()` on the thread that is inside `stop()` (a
  program's SIGTERM handler, Vim's exit run from its own): it goes through.
  `stop()` from the loop thread (inside a callback) only asks for the stop, since
  waiting there would wait for itself. Calls after `stop()` run directly and are
  harmless (nothing is sent; the state is kept for a later `start()`).
* `post(fn)` (and `set_selection(..., wait=False)`, `set_diagnostics(..., wait=False)`)
  hands work to the loop thread without waiting at all, for an editor's hot paths;
  posted work keeps its order with other calls, and its failures are logged.
* Every other keyword is one of `IdeServer`'s options (`max_body`, `max_sessions`,
  `connection_idle_timeout`, `socket_dir`, ...) and is passed to it unchanged; the set
  is read from `IdeServer.__init__`'s signature, so an option it gains is accepted here
  at once. The `IdeServer` is built in the constructor, on the caller's thread: an
  unknown keyword or a bad value raises there, before any thread or lock file exists.
* `on_exchange` (one of those options) runs on the loop thread.

The loop thread is a daemon thread, so it never keeps an editor from exiting. It blocks
the asynchronous signals for itself (`common/guest_threads.py`), and the threads it
starts inherit that: a signal sent to the editor's process is handled on one of the
editor's own threads, never on ours in the middle of the editor's work.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

from .ide_server import DiffRequest, IdeServer
from ..common.guest_threads import leave_signals_to_host
from ..common.tools import Diagnostic, Selection

log = logging.getLogger(__name__)

T = TypeVar("T")
CallInEditor = Callable[[Callable[[], None]], Any]
StartCallback = Callable[[Optional[BaseException]], Any]

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
    import difflib  # only for this error's hint

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
        server.start()                       # blocks until the lock file is written, or:
        server.start(wait=False, on_started=report)  # returns at once; report(None | error)
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
        # start/stop against each other. Re-entrant: a signal handler may call stop() on
        # the thread that is inside stop() (a program's SIGTERM handler, or an editor's
        # exit run from its handler, as Vim's is); that stop goes through, where a plain
        # lock would wait for itself for ever.
        self._lock = threading.RLock()
        self._ready: "Optional[concurrent.futures.Future[None]]" = None  # the last start's outcome
        # The loop thread's own (see `_serve`): the start's task, the stop's event.
        self._main: "Optional[asyncio.Future[Any]]" = None
        self._stopped_event: Optional[asyncio.Event] = None
        self._stop_requested = False

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: Optional[float] = None, wait: bool = True,
              on_started: Optional[StartCallback] = None) -> "ThreadedIdeServer":
        """Start the loop thread, which listens and writes the lock file.

        `wait=True` (the default) blocks until the lock file is written and raises what
        `IdeServer.start` raised (leaving no thread behind). `wait=False` returns at once:
        an editor's UI thread never waits for the socket or the lock file. Either way
        `on_started(error)` is then called through `call_in_editor`, with None once the
        lock file is written, or with the exception the start failed with (a start that
        `stop()` ended first calls nothing). A second `start()` while one is under way or
        done starts nothing (its `on_started` is called as for the first)."""
        with self._lock:
            if self.thread is None or not self.thread.is_alive():
                self._launch()
            ready = self._ready
            assert ready is not None
        if on_started is not None:
            ready.add_done_callback(lambda f: self._report_start(f, on_started))
        if wait:
            self.wait_started(timeout)
        return self

    def wait_started(self, timeout: Optional[float] = None) -> None:
        """Block until a `start()` has written the lock file; raise what the start raised
        (RuntimeError when there is none, or when `stop()` ended it first). A start that
        does not finish within `timeout` is stopped, then TimeoutError is raised."""
        ready = self._ready
        if ready is None:
            raise RuntimeError("the /ide server was not started")
        try:
            ready.result(self._timeout(timeout))
        except concurrent.futures.CancelledError:
            self._join(timeout)  # the loop thread ends by itself once its start is cancelled
            raise RuntimeError("the /ide server was stopped before it started") from None
        except concurrent.futures.TimeoutError:
            self.stop(timeout)
            raise TimeoutError("the /ide server did not start within %ss" % self._timeout(timeout)) from None
        except BaseException:
            self._join(timeout)  # the loop thread ends by itself after a failed start
            raise

    def _launch(self) -> None:
        """A new loop and its thread, which owns the server's run: start, serve until
        asked to stop, stop (see `_serve`)."""
        loop = asyncio.new_event_loop()
        ready: "concurrent.futures.Future[None]" = concurrent.futures.Future()

        def run() -> None:
            leave_signals_to_host()  # the host's signal handlers run on its threads, never here
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(ready))
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()
                    if not ready.done():  # never reached: the loop itself failed
                        ready.set_exception(RuntimeError("the /ide server's loop ended"))

        self.loop, self._ready, self._stop_requested = loop, ready, False
        self._main = self._stopped_event = None
        self.thread = threading.Thread(target=run, name="ide-protocol-loop", daemon=True)
        atexit.register(self._at_exit)  # also an exit during the start removes what it wrote
        self.thread.start()

    async def _serve(self, ready: "concurrent.futures.Future[None]") -> None:
        """The loop thread's one task: start the server, report it, wait for `stop()`,
        stop the server. A stop asked for during the start cancels the start (whose own
        clean-up closes what it opened); one asked for after it is awaited in full."""
        if self._stop_requested:  # stopped before this thread began: nothing is started
            ready.cancel()
            return
        self._stopped_event = asyncio.Event()
        self._main = asyncio.ensure_future(self.server.start())
        try:
            await self._main
        except BaseException as exc:
            # What the start made is closed by its own clean-up; the server's stop ends
            # the rest (its pushes: later calls run directly and must not reach this loop).
            try:
                await self.server.stop()
            except Exception:
                log.exception("cleaning up after a failed /ide server start")
            if isinstance(exc, asyncio.CancelledError) or self._stop_requested:
                ready.cancel()
            else:
                ready.set_exception(exc)
            return
        ready.set_result(None)
        await self._stopped_event.wait()
        await self.server.stop()

    def _request_stop(self) -> None:
        """On the loop thread: end `_serve` (cancel the start, or let it stop the server)."""
        self._stop_requested = True
        main = self._main
        if main is not None and not main.done():
            main.cancel()
        if self._stopped_event is not None:
            self._stopped_event.set()

    def _report_start(self, ready: "concurrent.futures.Future[None]", on_started: StartCallback) -> None:
        if ready.cancelled():
            return
        error = ready.exception()
        self._in_editor(lambda: on_started(error))

    def stop(self, timeout: Optional[float] = None) -> None:
        """Remove the lock, end every session (pending diffs answer
        `client_disconnected`), close the socket, end the loop thread; block until done.
        A start under way is cancelled (nothing of it is left). From the loop thread
        (inside a callback) it only asks for the stop, since waiting there would wait
        for itself."""
        loop = self.loop
        if loop is None:
            return
        if self._on_loop_thread():
            self._request_stop()
            return
        with self._lock:
            loop = self.loop
            if loop is None:
                return
            try:
                loop.call_soon_threadsafe(self._request_stop)
            except RuntimeError:  # the loop has closed already (its start failed)
                pass
            self._join(timeout)

    def _join(self, timeout: Optional[float]) -> None:
        """Wait for the loop thread to end, then forget it (a loop stuck past `timeout`
        is logged and left to its daemon thread)."""
        thread = self.thread
        if thread is not None and thread.ident is None:
            # Not begun: a stop from a signal handler inside `start()`, on this thread,
            # before the thread's start. The stop asked of its loop runs first there
            # (`_serve`), and `start()` goes on to say the start was stopped.
            return
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout(timeout))
            if thread.is_alive():
                log.warning("the /ide server's loop did not stop within %ss", self._timeout(timeout))
        if thread is self.thread:
            self.loop = self.thread = None
            atexit.unregister(self._at_exit)

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
        and no concurrency: `fn` runs directly. A loop not running yet (its thread is
        starting) gets the work queued, as a running one does."""
        loop = self.loop
        if loop is None or self._on_loop_thread() or loop.is_closed():
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
        deadline = time.monotonic() + self._timeout(timeout)
        while True:
            try:
                return outcome.result(max(0.0, min(0.05, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                pass
            if loop.is_closed() and outcome.cancel():
                # stop() closed the loop before it ran `fn`: no loop, no concurrency left.
                return fn(*args, **kwargs)
            if time.monotonic() >= deadline:
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
        if loop is None or self._on_loop_thread() or loop.is_closed():
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

    def _on_diff(self, diff: DiffRequest) -> Any:
        """`IdeServer`'s `on_diff`: the user's runs on the editor's thread, so its
        outcome comes back as an awaitable, which `IdeServer` awaits as it awaits an
        asyncio `on_diff`'s: a decision answers the diff, None leaves it to
        `diff.accept()`/`reject()`, and an exception or an invalid value answers the
        `open_diff` with an error result (as `IdeServer` does)."""
        user = self.on_diff
        if user is None:
            return None  # answered later with resolve_diff()
        loop = asyncio.get_event_loop()
        outcome: "asyncio.Future[Any]" = loop.create_future()

        def settle(decision: Any, error: Optional[BaseException]) -> None:  # on the loop thread
            if outcome.done():
                return
            if error is not None:
                outcome.set_exception(error)
            else:
                outcome.set_result(decision)

        def deliver() -> None:  # on the editor's thread
            try:
                decision, error = user(diff), None
            except Exception as exc:
                decision, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, decision, error)
            except RuntimeError:  # the loop closed: the diff was answered at the stop
                pass
            if error is not None:
                raise error  # logged by _in_editor, as every callback's failure

        self._in_editor(deliver)
        return self._decision(outcome, diff)

    @staticmethod
    async def _decision(outcome: "asyncio.Future[Any]", diff: DiffRequest) -> Any:
        """The editor's decision, or None when the diff is answered first (an
        `accept()` from the editor, the CLI's close_diff, a disconnect): the diff does
        not wait for an editor thread that never runs its callback."""
        await asyncio.wait([outcome, diff.future], return_when=asyncio.FIRST_COMPLETED)
        if not outcome.done():
            outcome.cancel()
            return None
        return outcome.result()

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
