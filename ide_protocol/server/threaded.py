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
* `post(fn, *args)` hands work to the loop thread without waiting at all, for an
  editor's hot paths (`server.post(server.set_selection, selection)` on a cursor move);
  posted work keeps its order with other calls, and its failures are logged.
* The methods that change or read the IDE's state are `IdeServer`'s own, run on the
  loop thread (`_on_loop`): the same names, parameters and documentation.
* Every other keyword is one of `IdeServer`'s options (its own, the fields of `Limits`,
  `on_exchange`), or the groups `limits` and `hooks`, and is passed to it; the four
  callbacks above are wrapped first. The `IdeServer` is built in the constructor, on
  the caller's thread: an unknown keyword or a bad value raises there, before any
  thread or lock file exists.
* `on_exchange` runs on the loop thread.

The loop thread is a daemon thread, so it never keeps an editor from exiting. It blocks
the asynchronous signals for itself (`common/guest_threads.py`), and the threads it
starts inherit that: a signal sent to the editor's process is handled on one of the
editor's own threads, never on ours in the middle of the editor's work.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, TypeVar, Union

from ..common.guest_threads import leave_signals_to_host
from ..common.tools import Selection
from .ide_server import DiffRequest, IdeServer
from .options import HOOK_NAMES, Hooks, grouped

log = logging.getLogger(__name__)

CallInEditor = Callable[[Callable[[], None]], Any]
StartCallback = Callable[[Optional[BaseException]], Any]

#: Default bound for one call into the loop (seconds); only a stuck loop reaches it.
DEFAULT_TIMEOUT = 10.0

R = TypeVar("R")


def _on_loop(method: Callable[..., R]) -> Callable[..., R]:
    """`IdeServer`'s method, offered from any thread: run on the loop thread by
    `ThreadedIdeServer.call`, with the method's own name, parameters and documentation
    (`help()` and `inspect.signature` show them: one definition, so a method that
    `IdeServer` changes needs no edit here). Static checkers see its result type; its
    parameters would need `typing.ParamSpec`, which Python 3.8's typing lacks."""
    @functools.wraps(method)
    def on_loop(self: ThreadedIdeServer, *args: Any, **kwargs: Any) -> R:
        return self.call(method, self.server, *args, **kwargs)
    return on_loop


class ThreadedIdeServer:
    """An `IdeServer` on a background asyncio loop; every method is thread-safe.

        server = ThreadedIdeServer(["/home/me/project"], ide_name="Sublime Text",
                                   call_in_editor=lambda fn: sublime.set_timeout(fn, 0), on_diff=show_diff)
        server.start()                       # blocks until the lock file is written, or:
        server.start(wait=False, on_started=report)  # returns at once; report(None | error)
        server.set_selection(Selection(path, text, (0, 0), (2, 4)))
        server.stop()                        # lock file and socket removed

    `call_in_editor` and `timeout` are this class's own; the callbacks (`hooks`, or
    `on_diff`, `on_diff_closed`, `on_session`, `on_tool_call` as keywords) are wrapped
    to run through `call_in_editor`; every other keyword is one of `IdeServer`'s
    options (`ide_name`, `lock_dir`, `limits`, `max_body`, ...) and goes to it as it is,
    so an option `IdeServer` gains is accepted here at once.
    """

    def __init__(self, workspace_folders: Union[str, Sequence[str]] = (), *,
                 call_in_editor: Optional[CallInEditor] = None, timeout: float = DEFAULT_TIMEOUT,
                 hooks: Optional[Hooks] = None, **options: Any) -> None:
        self.call_in_editor = call_in_editor
        self.timeout = timeout
        # The user's callbacks, kept here; IdeServer gets the wrappers that deliver
        # them through call_in_editor (on_exchange goes as it is: see the module doc).
        own = {name: options.pop(name) for name in HOOK_NAMES if name in options}
        limits, self.hooks = grouped(options.pop("limits", None), hooks, own, "ThreadedIdeServer")
        wrapped = Hooks(on_diff=self._on_diff, on_diff_closed=self._on_diff_closed, on_session=self._on_session,
                        on_tool_call=self._on_tool_call, on_exchange=self.hooks.on_exchange)
        # IdeServer.__init__ creates no asyncio object, so it is built here, in the
        # caller's thread (its errors are raised to the caller, before any thread
        # starts); all that needs the loop happens in start(), on the loop thread.
        try:
            self.server = IdeServer(workspace_folders, limits=limits, hooks=wrapped, **options)
        except TypeError as exc:
            raise TypeError(str(exc).replace("IdeServer()", "ThreadedIdeServer()")) from None
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
        # Work handed to the loop that callers wait for (`call`): what the loop's end
        # leaves unrun is cancelled, so that its caller runs it itself.
        self._waiting: "Set[concurrent.futures.Future[Any]]" = set()
        # Work posted to the loop (`post`) and not run yet, in the order posted: what the
        # loop's end leaves unrun is run by the loop thread once the loop has closed.
        self._posted: Dict[Callable[[], None], None] = {}

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
                    for outcome in list(self._waiting):
                        outcome.cancel()  # (not run, and never will be: its caller runs it)
                    for posted in list(self._posted):
                        posted()  # (posted, and never run by the loop: no loop, no concurrency left)
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

    def call(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run `fn(*args, **kwargs)` on the loop thread and return its result here
        (its exception is raised here), waiting `timeout` seconds at most (only a stuck
        loop takes that long). Before start and after stop there is no loop and no
        concurrency: `fn` runs directly, as it does when the loop ends before running
        it. A loop not running yet (its thread is starting) gets the work queued, as a
        running one does."""
        loop = self.loop
        if loop is None or self._on_loop_thread() or loop.is_closed():
            return fn(*args, **kwargs)
        outcome: "concurrent.futures.Future[R]" = concurrent.futures.Future()

        def run() -> None:
            if not outcome.set_running_or_notify_cancel():
                return
            try:
                outcome.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                outcome.set_exception(exc)

        self._waiting.add(outcome)
        try:
            try:
                loop.call_soon_threadsafe(run)
            except RuntimeError:  # closed meanwhile by stop(): no loop, no concurrency left
                return fn(*args, **kwargs)
            try:
                return outcome.result(self.timeout)
            except concurrent.futures.CancelledError:
                return fn(*args, **kwargs)  # the loop ended before it ran `fn` (see `_launch`)
            except concurrent.futures.TimeoutError:
                outcome.cancel()
                raise TimeoutError("the /ide server's loop did not answer within %ss" % self.timeout) from None
        finally:
            self._waiting.discard(outcome)

    def post(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run `fn(*args, **kwargs)` on the loop thread later, without waiting for it: for
        an editor's hot paths (a cursor move), where even an instant's wait for the loop
        thread is too much. Posted work runs in order, before or after `call()`s in the
        order they were made. Its failure is logged, never raised. Before start and after
        stop `fn` runs directly, as in `call()`; work the loop's end leaves unrun runs
        once the loop has closed."""
        def run() -> None:
            if self._posted.pop(run, False) is False:
                return  # run already: by the loop, or after its end
            try:
                fn(*args, **kwargs)
            except Exception:
                log.exception("/ide work posted from another thread failed")

        self._posted[run] = None
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
        user = self.hooks.on_diff
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
        user = self.hooks.on_diff_closed
        if user is not None:
            self._in_editor(lambda: user(diff, answer))

    def _on_session(self, event: str, info: Dict[str, Any]) -> None:
        user = self.hooks.on_session
        if user is not None:
            self._in_editor(lambda: user(event, info))

    def _on_tool_call(self, call: Dict[str, Any], session_id: str, result: Any) -> None:
        user = self.hooks.on_tool_call
        if user is not None:
            self._in_editor(lambda: user(call, session_id, result))

    # ------------------------------------------------ the IDE's state, from any thread

    set_selection = _on_loop(IdeServer.set_selection)
    set_diagnostics = _on_loop(IdeServer.set_diagnostics)
    clear_diagnostics = _on_loop(IdeServer.clear_diagnostics)
    add_file_reference = _on_loop(IdeServer.add_file_reference)
    add_selection = _on_loop(IdeServer.add_selection)
    set_workspace_folders = _on_loop(IdeServer.set_workspace_folders)
    flush_pushes = _on_loop(IdeServer.flush_pushes)
    pending_diffs = _on_loop(IdeServer.pending_diffs)
    resolve_diff = _on_loop(IdeServer.resolve_diff)
    stats = _on_loop(IdeServer.stats)

    def sessions(self) -> List[Dict[str, Any]]:
        """The connected sessions (`IdeServer.sessions`), read on the loop thread."""
        return self.call(lambda: self.server.sessions)

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
