"""`ThreadedIdeServer` used the way an editor with its own main loop uses it.

An "editor" thread runs a queue of callables (the shape of Tk's `after`, Sublime's
`set_timeout`, Qt's queued calls); it is the `call_in_editor` hook. The test's own
thread plays the editor's other code and runs the CLI-like client (`ide_wire`) on its
own asyncio loop. Neither is the server's loop thread. Waits are bounded only against
hangs.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest

from ide_protocol.common.paths import path_to_uri
from ide_protocol.server.ide_server import DiffRequest
from ide_protocol.server import threaded as threaded_module
from ide_protocol.server.threaded import ThreadedIdeServer
from ide_protocol.common.tools import Diagnostic, Selection

import ide_wire
import platforms
from ide_wire import Cli, Conn, tool_json


WAIT = 20.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class EditorThread:
    """A stand-in for an editor's main loop: runs posted callables one by one and
    records, for each callback, which thread it ran on."""

    def __init__(self) -> None:
        self.queue: "queue.Queue[Optional[Callable[[], None]]]" = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="editor", daemon=True)
        self.thread.start()

    def post(self, fn: Callable[[], None]) -> None:  # the call_in_editor hook
        self.queue.put(fn)

    def _run(self) -> None:
        while True:
            fn = self.queue.get()
            if fn is None:
                return
            fn()

    def sync(self) -> None:
        """Until everything posted so far has run."""
        done = threading.Event()
        self.post(done.set)
        assert done.wait(WAIT), "the editor thread is stuck"

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(WAIT)


class Recorder:
    """The IDE's callbacks; each records the thread it ran on."""

    def __init__(self) -> None:
        self.events: List[Tuple[str, Any, int]] = []
        self.diffs: "queue.Queue[DiffRequest]" = queue.Queue()
        self.decisions: Dict[str, Any] = {}  # tab name -> what on_diff returns

    def on_diff(self, diff: DiffRequest) -> Any:
        self.events.append(("diff", diff.tab_name, threading.get_ident()))
        self.diffs.put(diff)
        return self.decisions.get(diff.tab_name)

    def on_diff_closed(self, diff: DiffRequest, answer: Dict[str, Any]) -> None:
        self.events.append(("diff_closed", (diff.tab_name, answer["result"], answer["trigger"]), threading.get_ident()))

    def on_session(self, event: str, info: Dict[str, Any]) -> None:
        self.events.append(("session", (event, info["id"]), threading.get_ident()))

    def on_tool_call(self, call: Dict[str, Any], session_id: str, result: Any) -> None:
        self.events.append(("tool", call["name"], threading.get_ident()))

    def callbacks(self) -> Dict[str, Any]:
        return {"on_diff": self.on_diff, "on_diff_closed": self.on_diff_closed, "on_session": self.on_session,
                "on_tool_call": self.on_tool_call}

    def threads(self) -> set:
        return {ident for _, _, ident in self.events}

    def of(self, kind: str) -> List[Any]:
        return [value for k, value, _ in self.events if k == kind]


def workspace(tmp_path: Any) -> Tuple[str, str, str]:
    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "main.py")
    with open(path, "w", encoding="utf-8", newline="") as f:  # (no CRLF on Windows)
        f.write("print('hi')\n")
    return folder, path, os.path.join(str(tmp_path), "locks")


async def next_diff(recorder: Recorder) -> DiffRequest:
    return await asyncio.get_event_loop().run_in_executor(None, recorder.diffs.get, True, WAIT)


def diff_args(path: str, tab: str, contents: str = "print('bye')\n") -> Dict[str, str]:
    return {"original_file_path": path, "new_file_contents": contents, "tab_name": tab}


@pytest.fixture
def editor() -> Any:
    e = EditorThread()
    yield e
    e.close()


def test_threaded_server_from_non_loop_threads(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    rec = Recorder()
    rec.decisions["auto"] = True  # on_diff may decide at once, from the editor thread
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir, debounce=0.05,
                               ide_name="Test Editor", **rec.callbacks())
    assert server.start() is server
    try:
        assert server.running
        assert server.thread is not None and server.thread is not threading.current_thread()
        loop_ident = server.thread.ident
        assert server.lock_path is not None and os.path.exists(server.lock_path)
        with open(server.lock_path, encoding="utf-8") as f:
            lock = json.load(f)
        assert lock["ideName"] == "Test Editor" and lock["socketPath"] == server.socket_path
        accepted_from: List[Tuple[bool, bool, int]] = []

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            _, stream = await cli.open_stream()

            # State set from this (non-loop) thread reaches the CLI.
            server.set_selection(Selection(path, "print", (0, 0), (0, 5)))
            note = await stream.next_notification()
            assert note["method"] == "selection_changed"
            assert note["params"]["text"] == "print" and note["params"]["filePath"] == platforms.wire_path(path)
            assert tool_json(await cli.call_tool("get_selection", {}))["current"] is True

            # A diff shown in the editor and accepted from the editor's thread.
            pending = asyncio.ensure_future(cli.call_tool("open_diff", diff_args(path, "tab-accept")))
            diff = await next_diff(rec)
            assert diff.tab_name == "tab-accept" and diff.original_contents == "print('hi')\n"
            assert not pending.done()
            editor.post(lambda: accepted_from.append((diff.accept(), diff.accept(), threading.get_ident())))
            answer = tool_json(await asyncio.wait_for(pending, WAIT))
            assert answer == {"success": True, "result": "SAVED", "trigger": "accepted_via_button",
                              "tab_name": "tab-accept", "message": "User accepted changes for %s" % path}

            # One rejected by tab name from this thread.
            pending = asyncio.ensure_future(cli.call_tool("open_diff", diff_args(path, "tab-reject")))
            diff = await next_diff(rec)
            assert [d.tab_name for d in server.pending_diffs()] == ["tab-reject"]
            assert server.resolve_diff("tab-reject", accept=False) is True
            answer = tool_json(await asyncio.wait_for(pending, WAIT))
            assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
            assert server.resolve_diff("tab-reject") is False  # no longer pending

            # One decided by on_diff's return value (run on the editor thread).
            answer = tool_json(await cli.call_tool("open_diff", diff_args(path, "auto")))
            assert answer["result"] == "SAVED"
            await next_diff(rec)

            # Diagnostics and references from this thread.
            server.set_diagnostics(path, [Diagnostic("undefined name", "Error", (0, 0), (0, 5), source="lint")])
            diags = tool_json(await cli.call_tool("get_diagnostics", {}))
            assert diags[0]["uri"] == path_to_uri(path)
            assert diags[0]["diagnostics"][0]["severity"] == "Error"
            assert server.add_file_reference(path, (0, 0), (0, 5), "print") == 1
            note = await stream.next_notification()
            while note["method"] != "add_file_reference":
                note = await stream.next_notification()
            assert note["params"]["selectedText"] == "print"

            infos = server.sessions()
            assert [i["id"] for i in infos] == [cli.session_id] and infos[0]["stream_open"] is True
            stats = server.stats()
            assert stats["sessions"] == 1 and stats["pending_diffs"] == 0
            cli.close()

        ide_wire.run(scenario(), timeout=60)
        editor.sync()
        assert accepted_from == [(True, False, editor.thread.ident)]
        # Every IDE callback ran on the editor's thread, none on the loop's or ours.
        assert rec.threads() == {editor.thread.ident}
        assert loop_ident not in rec.threads()
        assert rec.of("diff") == ["tab-accept", "tab-reject", "auto"]
        assert rec.of("diff_closed") == [("tab-accept", "SAVED", "accepted_via_button"),
                                         ("tab-reject", "REJECTED", "rejected_via_button"),
                                         ("auto", "SAVED", "accepted_via_button")]
        assert "open_diff" in rec.of("tool") and "get_diagnostics" in rec.of("tool")
        assert rec.of("session")[0][0] == "connected"
        socket_path, lock_path = server.socket_path, server.lock_path
    finally:
        server.stop()
    assert not server.running and server.thread is None
    assert not os.path.exists(lock_path)
    assert platforms.WINDOWS or not os.path.exists(os.path.dirname(socket_path))  # (a pipe has no folder)
    editor.sync()
    assert rec.of("session")[-1][0] == "disconnected"


def test_default_callbacks_run_on_the_loop_thread(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    rec = Recorder()
    rec.decisions["t"] = "reject"
    with ThreadedIdeServer([folder], lock_dir=lock_dir, **rec.callbacks()) as server:
        assert server.thread is not None
        loop_ident = server.thread.ident

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            answer = tool_json(await cli.call_tool("open_diff", diff_args(path, "t")))
            assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
            cli.close()

        ide_wire.run(scenario())
        assert rec.threads() == {loop_ident}
        lock_path = server.lock_path
    assert not os.path.exists(lock_path)


def test_pending_diff_answered_client_disconnected_on_stop(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    rec = Recorder()
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir, **rec.callbacks()).start()

    async def scenario() -> None:
        cli = Cli(server.socket_path, server.nonce)
        await cli.handshake()
        pending = asyncio.ensure_future(cli.call_tool("open_diff", diff_args(path, "left open")))
        diff = await next_diff(rec)
        await asyncio.get_event_loop().run_in_executor(None, server.stop)
        assert diff.done and diff.result["trigger"] == "client_disconnected"
        assert diff.accept() is False  # too late, and harmless from this thread
        try:
            await asyncio.wait_for(pending, WAIT)
        except (AssertionError, EOFError, ConnectionError):
            pass  # the server went away: the connection may close before an answer
        cli.close()

    ide_wire.run(scenario())
    editor.sync()
    assert ("left open", "REJECTED", "client_disconnected") in rec.of("diff_closed")
    assert os.listdir(lock_dir) == []


def test_state_set_before_start_and_calls_after_stop(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir)
    server.set_selection(Selection(path, "p", (0, 0), (0, 1)))  # no loop yet: applied directly
    server.start()
    try:
        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            result = tool_json(await cli.call_tool("get_selection", {}))
            assert result["text"] == "p" and result["current"] is True
            cli.close()

        ide_wire.run(scenario())
        assert server.call(lambda: threading.current_thread()) is server.thread
        with pytest.raises(ZeroDivisionError):
            server.call(lambda: 1 // 0)  # raised in the calling thread
    finally:
        server.stop()
    server.stop()  # idempotent
    assert server.stats()["sessions"] == 0


def test_set_workspace_folders_from_a_thread_rewrites_the_lock(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    other = os.path.join(str(tmp_path), "other")
    os.makedirs(other)
    with ThreadedIdeServer([folder], lock_dir=lock_dir) as server:
        first = server.lock_path
        done: List[Optional[str]] = []
        worker = threading.Thread(target=lambda: (server.set_workspace_folders([other]),
                                                  done.append(server.lock_path)))
        worker.start()
        worker.join(WAIT)
        assert done == [first]  # the same lock, rewritten in place (PROTOCOL.md §1)
        with open(first, encoding="utf-8") as f:
            assert json.load(f)["workspaceFolders"] == [os.path.realpath(other)]
    assert os.listdir(lock_dir) == []


@platforms.socket_folder
def test_start_failure_raises_and_leaves_no_thread(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    before = set(threading.enumerate())
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, socket_dir=os.path.join(str(tmp_path), "missing"))
    with pytest.raises(OSError):
        server.start()
    assert server.thread is None and not server.running
    assert not [t for t in set(threading.enumerate()) - before if t.name == "ide-protocol-loop" and t.is_alive()]
    assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []


def test_stop_from_a_callback_on_the_loop_thread(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    holder: Dict[str, ThreadedIdeServer] = {}

    def on_tool_call(call: Dict[str, Any], session_id: str, result: Any) -> None:
        holder["server"].stop()  # on the loop thread: must not wait for itself

    server = ThreadedIdeServer([folder], lock_dir=lock_dir, on_tool_call=on_tool_call)
    holder["server"] = server
    server.start()
    thread = server.thread
    assert thread is not None

    async def scenario() -> None:
        cli = Cli(server.socket_path, server.nonce)
        await cli.handshake()
        try:
            await cli.call_tool("update_session_name", {"name": "bye"})
        except (AssertionError, EOFError, ConnectionError):
            pass
        cli.close()

    ide_wire.run(scenario())
    thread.join(WAIT)
    assert not thread.is_alive()
    assert os.listdir(lock_dir) == []


def test_exit_without_stop_removes_the_lock(tmp_path: Any) -> None:
    """An editor that exits without calling stop(): the atexit hook removes the lock."""
    folder, path, lock_dir = workspace(tmp_path)
    script = ("import sys; from ide_protocol.server.threaded import ThreadedIdeServer\n"
              "s = ThreadedIdeServer([sys.argv[1]], lock_dir=sys.argv[2]).start()\n"
              "print(s.lock_path, s.socket_path, flush=True)\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script, folder, lock_dir], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=WAIT, check=True)
    lock_path, socket_path = out.stdout.decode().split()
    assert lock_path.startswith(lock_dir)
    assert not os.path.exists(lock_path)
    assert platforms.WINDOWS or not os.path.exists(os.path.dirname(socket_path))  # (a pipe has no folder)


@pytest.mark.skipif(platforms.WINDOWS, reason="Windows runs a Python signal handler between the main thread's "
                    "waits, never inside one: a stop cannot be entered again there")
def test_a_signal_handler_that_stops_during_a_stop_does_not_wait_for_itself(tmp_path: Any) -> None:
    """A program whose SIGTERM handler calls `stop()` (the usual way to end on a
    signal) gets the signal while its main thread is inside `stop()`, waiting for the
    server's thread: the handler runs on that same thread, on top of the waiting
    `stop()`. The second `stop()` must go through (the start/stop lock is the
    thread's own already), not wait for ever; the lock file goes."""
    folder, _path, lock_dir = workspace(tmp_path)
    script = ("import asyncio, os, signal, sys\n"
              "from ide_protocol.server.threaded import ThreadedIdeServer\n"
              "s = ThreadedIdeServer([sys.argv[1]], lock_dir=sys.argv[2]).start()\n"
              "stop = s.server.stop\n"
              "async def stop_after_a_signal():  # on the loop thread: the main thread is inside stop()\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    await asyncio.sleep(0.5)\n"
              "    await stop()\n"
              "s.server.stop = stop_after_a_signal\n"
              "depth, seen = [0], []\n"
              "def counted_stop(stop=s.stop):\n"
              "    depth[0] += 1\n"
              "    try:\n"
              "        stop()\n"
              "    finally:\n"
              "        depth[0] -= 1\n"
              "def on_term(*a):\n"
              "    seen.append(depth[0])\n"
              "    counted_stop()\n"
              "signal.signal(signal.SIGTERM, on_term)\n"
              "counted_stop()\n"
              "print(seen, os.listdir(sys.argv[2]), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", script, folder, lock_dir], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the stop inside the signal handler waited for the stop it interrupted")
    assert proc.returncode == 0, err.decode(errors="replace")
    assert out.decode().strip() == "[1] []"  # the handler ran inside the first stop(); no lock file
    assert os.listdir(lock_dir) == []


def test_stop_then_start_again_on_the_same_server(tmp_path: Any) -> None:
    """An editor's Stop then Start commands (or a restart on a folder change) reuse the
    object: the second run serves, and its stop is as quick and as clean as the first."""
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT)
    server.start()
    first_socket = server.socket_path
    server.stop()
    assert os.listdir(lock_dir) == []
    server.start()
    lock_path, socket_path = server.lock_path, server.socket_path
    assert lock_path is not None and os.path.exists(lock_path)
    assert socket_path is not None and socket_path != first_socket
    server.set_selection(Selection(path, "print", (0, 0), (0, 5)))

    async def scenario() -> None:
        cli = Cli(socket_path, server.nonce)
        await cli.handshake()
        assert tool_json(await cli.call_tool("get_selection", {}))["text"] == "print"
        cli.close()

    ide_wire.run(scenario())
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    # A stop that does nothing would wait out the whole timeout (WAIT): the lock must be
    # gone long before that.
    stopping.join(WAIT / 2)
    assert not stopping.is_alive(), "the second stop() hangs"
    assert not os.path.exists(lock_path)
    assert platforms.WINDOWS or not os.path.exists(os.path.dirname(socket_path))  # (a pipe has no folder)
    assert not server.running


def test_posted_work_runs_in_order_without_waiting_and_failures_are_logged(tmp_path: Any, caplog: Any) -> None:
    """`post` never waits for the loop thread: work posted while the
    loop is busy is queued behind it, runs in order, and a failure is only logged."""
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT).start()
    try:
        release = threading.Event()
        ran: List[Tuple[str, Any]] = []
        server.post(lambda: release.wait(WAIT))          # the loop thread is busy ...
        server.post(lambda: ran.append(("first", threading.current_thread())))
        server.post(lambda: 1 // 0)
        server.post(server.set_selection, Selection(path, "print", (0, 0), (0, 5)))
        server.post(server.set_diagnostics, path, [Diagnostic("bad", "Error", (0, 0), (0, 1))])
        assert ran == []                                  # ... and none of it waited for it
        release.set()
        assert server.call(lambda: [name for name, _ in ran]) == ["first"]
        assert ran[0][1] is server.thread
        assert server.selection is not None and server.selection.text == "print"

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            (entry,) = tool_json(await cli.call_tool("get_diagnostics", {}))
            assert entry["diagnostics"][0]["message"] == "bad"
            cli.close()

        ide_wire.run(scenario())
        assert any("posted" in r.getMessage() and r.exc_info and r.exc_info[0] is ZeroDivisionError
                   for r in caplog.records)
    finally:
        server.stop()
    done: List[int] = []
    server.post(done.append, 1)  # stopped: runs at once, here
    assert done == [1]


def test_work_posted_as_the_loop_ends_is_run_not_lost(tmp_path: Any) -> None:
    """`post` racing `stop()`: work handed to the loop after its last pass, before it
    closed, was dropped with the loop's queue (an editor's last cursor move lost, and
    with it the selection a later `start()` would serve). Such work runs once the loop
    has closed, as work posted after the stop does; a `call()` in the same window is run
    by its caller. (The loop's close is held here until the work has been posted: the
    window a thread can hit by chance, made certain.)"""
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT).start()
    loop = server.loop
    assert loop is not None
    close, closing, posted = loop.close, threading.Event(), threading.Event()

    def held_close() -> None:  # on the loop thread, after its last pass
        closing.set()
        posted.wait(WAIT)
        close()

    loop.close = held_close  # type: ignore[method-assign]
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    assert closing.wait(WAIT)
    ran: List[Any] = []
    server.post(ran.append, "posted")
    server.post(server.set_selection, Selection(path, "the last move", (0, 0), (0, 1)))
    calling = threading.Thread(target=lambda: ran.append(server.call(lambda: "called")))
    calling.start()
    while not server._waiting:  # (the call is handed to the loop, and waits)
        assert calling.is_alive()
        threading.Event().wait(0.01)
    posted.set()
    stopping.join(WAIT)
    calling.join(WAIT)
    assert sorted(ran) == ["called", "posted"]
    assert server.selection is not None and server.selection.text == "the last move"


# ------------------------------------------------------ IdeServer's options, through here


def test_every_ide_server_option_is_a_threaded_option_and_its_methods_are_ide_servers() -> None:
    """Every option of `IdeServer` (its own keywords, each field of `Limits` and `Hooks`,
    and the groups) is accepted by `ThreadedIdeServer` at construction, at its default;
    its state methods are `IdeServer`'s own (the same signature and documentation,
    which `help()` shows), not copies."""
    import dataclasses
    from ide_protocol import Hooks, Limits
    from ide_protocol.server.ide_server import IdeServer

    own = {name: p.default for name, p in inspect.signature(IdeServer).parameters.items()
           if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {f.name: f.default for group in (Limits, Hooks) for f in dataclasses.fields(group)}
    assert {"max_body", "max_sessions", "connection_idle_timeout", "request_timeout", "on_diff"} <= set(fields)
    for name, default in list(own.items()) + list(fields.items()):
        server = ThreadedIdeServer(["/nonexistent"], **{name: default})
        assert server.thread is None
    server = ThreadedIdeServer(["/nonexistent"], limits=Limits(max_sessions=3), max_body=5, on_session=print)
    assert (server.server.limits.max_sessions, server.server.limits.max_body) == (3, 5)
    assert server.hooks.on_session is print and server.server.hooks.on_session is not print  # wrapped
    for name in ("set_selection", "set_diagnostics", "add_file_reference", "resolve_diff", "stats"):
        ours, theirs = getattr(server, name), getattr(IdeServer, name)
        assert inspect.signature(ours) == inspect.signature(theirs.__get__(server.server)), name
        assert ours.__doc__ == theirs.__doc__, name


def test_unknown_keyword_raises_in_the_callers_thread_before_any_thread_or_lock(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    before = set(threading.enumerate())
    with pytest.raises(TypeError) as raised:
        ThreadedIdeServer([folder], lock_dir=lock_dir, max_bdy=10)
    message = str(raised.value)
    assert "ThreadedIdeServer" in message and "'max_bdy'" in message and "did you mean 'max_body'" in message
    assert raised.traceback[-1].frame.code.name == "__init__"  # raised here, not on a loop thread
    assert set(threading.enumerate()) == before
    assert not os.path.exists(lock_dir)


def test_limit_options_reach_the_running_server(tmp_path: Any) -> None:
    """max_body, max_sessions, connection_idle_timeout, idle_timeout and request_timeout
    given to ThreadedIdeServer bind the server on its loop thread (each default would
    let the step wait out its bound and fail)."""
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT, max_body=4096, max_sessions=1,
                               connection_idle_timeout=0.5, idle_timeout=0.5,
                               request_timeout=0.5).start()
    try:
        async def scenario() -> None:
            # max_body: a body over 4096 bytes is refused (413) and its connection closed.
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake(probes=0)
            big = {"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"pad": "x" * 8192}}
            reply, conn = await cli.exchange("POST", big, conn=await cli.new_conn())
            assert reply.status == 413, reply
            assert await conn.wait_closed()
            assert await cli.request("ping") == {}  # a small one still goes through

            # max_sessions=1: with the only session busy (its stream open), a second
            # initialize is refused.
            _, stream = await cli.open_stream()
            other = Cli(server.socket_path, server.nonce)
            reply = await other.send_request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                            "clientInfo": {"name": "x", "version": "1"}})
            assert reply.status == 503 and "too many sessions (limit 1)" in reply.message["error"]["message"]
            other.close()

            # connection_idle_timeout=0.5: a connection that sends nothing is closed.
            silent = await Conn.open(server.socket_path)
            assert await silent.wait_closed()
            silent.close()

            # request_timeout=0.5: a request left half-sent is answered 408.
            partial = await Conn.open(server.socket_path)
            partial.send_raw(b"POST /mcp HTTP/1.1\r\nHost: loc", expect="POST")
            assert (await partial.read_reply()).status == 408
            partial.close()

            # idle_timeout=0.5: a session with no stream and no request is ended.
            cli.close()
            await ide_wire.until(lambda: server.stats()["sessions"] == 0, what="the idle session ended")

        ide_wire.run(scenario(), timeout=90)
    finally:
        server.stop()
    assert os.listdir(lock_dir) == []


def test_max_connections_reaches_the_running_server(tmp_path: Any) -> None:
    """max_connections=2 (idle connections otherwise kept 120 s): a third connection
    makes the one idle longest close."""
    folder, path, lock_dir = workspace(tmp_path)
    with ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT, max_connections=2) as server:
        async def scenario() -> None:
            first = await Conn.open(server.socket_path)
            second = await Conn.open(server.socket_path)
            await ide_wire.until(lambda: server.stats()["connections"] == 2, what="two connections")
            third = await Conn.open(server.socket_path)
            assert await first.wait_closed()
            await ide_wire.until(lambda: server.stats()["connections"] == 2, what="room made")
            for conn in (first, second, third):
                conn.close()

        ide_wire.run(scenario())


def test_wire_options_reach_the_running_server(tmp_path: Any) -> None:
    """json_response, server_info, socket_dir and write_lock=False through
    ThreadedIdeServer; on_exchange runs on the loop thread."""
    folder, path, lock_dir = workspace(tmp_path)
    socket_dir = os.path.join(str(tmp_path), "sockets")
    os.makedirs(socket_dir, mode=0o700)
    seen: List[Tuple[str, Any, threading.Thread]] = []
    server = ThreadedIdeServer([folder], lock_dir=lock_dir, timeout=WAIT, json_response=True, write_lock=False,
                               server_info={"name": "threaded-test", "version": "9"}, socket_dir=socket_dir,
                               on_exchange=lambda way, msg: seen.append((way, msg.get("method"),
                                                                         threading.current_thread())))
    server.start()
    try:
        assert server.lock_path is None and not os.path.exists(lock_dir)
        assert server.socket_path is not None
        assert platforms.WINDOWS or server.socket_path.startswith(socket_dir + os.sep)  # (a pipe has no folder)

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            result = await cli.handshake(probes=0)
            assert result["serverInfo"] == {"name": "threaded-test", "version": "9"}
            reply = await cli.send_request("ping")
            assert reply.status == 200 and reply.content_type.startswith("application/json"), reply
            cli.close()

        ide_wire.run(scenario())
        assert ("in", "initialize", server.thread) in seen
        assert {thread for _, _, thread in seen} == {server.thread}
    finally:
        server.stop()


# ------------------------------------------------------------ a start that never blocks


class HeldStart:
    """Holds the server's start at its listening step (a slow socket folder, say) until
    `release()`: the test decides when the start is "in progress"."""

    def __init__(self, server: ThreadedIdeServer) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        listener = server.server.listener
        step = "start_pipe" if platforms.WINDOWS else "start_unix"
        original = getattr(listener, step)

        async def held_start_unix(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            while not self.gate.is_set():
                await asyncio.sleep(0.01)
            return await original(*args, **kwargs)

        setattr(listener, step, held_start_unix)

    def release(self) -> None:
        self.gate.set()


def loop_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ide-protocol-loop" and t.is_alive()]


def test_start_without_waiting_reports_through_call_in_editor(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir)
    held = HeldStart(server)
    reports: "queue.Queue[Tuple[Optional[BaseException], int, Optional[str]]]" = queue.Queue()
    try:
        returned = server.start(wait=False, on_started=lambda error: reports.put(
            (error, threading.get_ident(), server.lock_path)))
        assert returned is server
        assert held.entered.wait(WAIT)
        # The start is under way and the caller is free: no lock yet, nothing reported.
        assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []
        assert reports.empty() and not server.running
        held.release()
        error, thread, lock_path = reports.get(timeout=WAIT)
        assert error is None and thread == editor.thread.ident
        assert lock_path and os.path.exists(lock_path) and server.running
        server.wait_started()  # done already: returns at once
    finally:
        server.stop()
    assert os.listdir(lock_dir) == []


@platforms.socket_folder
def test_a_failed_start_without_waiting_reaches_call_in_editor(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir,
                               socket_dir=os.path.join(str(tmp_path), "missing"))
    reports: "queue.Queue[Tuple[Optional[BaseException], int]]" = queue.Queue()
    server.start(wait=False, on_started=lambda error: reports.put((error, threading.get_ident())))
    error, thread = reports.get(timeout=WAIT)
    assert isinstance(error, OSError) and thread == editor.thread.ident
    with pytest.raises(OSError):
        server.wait_started()
    assert server.thread is None and not server.running and loop_threads() == []
    assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []
    server.set_selection(Selection(path, "p", (0, 0), (0, 1)))  # harmless: no loop
    server.stop()


def test_stop_during_a_start_in_progress_ends_cleanly(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    socket_dir = os.path.join(str(tmp_path), "sockets")
    os.makedirs(socket_dir)
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir, socket_dir=socket_dir)
    held = HeldStart(server)
    reports: List[Optional[BaseException]] = []
    server.start(wait=False, on_started=reports.append)
    assert held.entered.wait(WAIT)
    server.stop()
    assert server.thread is None and not server.running and loop_threads() == []
    held.release()
    editor.sync()
    assert reports == []  # a start that stop() ended reports nothing
    assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []
    assert os.listdir(socket_dir) == []
    with pytest.raises(RuntimeError):
        server.wait_started()
    # And the same object starts again, for real this time.
    server.start()
    try:
        assert server.running and os.path.exists(server.lock_path or "")
    finally:
        server.stop()
    assert os.listdir(lock_dir) == [] and loop_threads() == []


def test_a_stop_from_a_signal_handler_before_the_loop_thread_begins_ends_the_start(tmp_path: Any,
                                                                                   monkeypatch: Any) -> None:
    """A signal handler may call `stop()` at any point of `start()` on the same thread,
    also after the loop thread is made but before it begins (here: where `start()`
    registers its exit hook). That stop cannot wait for the thread; the start must
    still end as a start that `stop()` ended first: nothing serves, no lock file, and
    `start()` says so."""
    folder, _path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir)
    register = threaded_module.atexit.register

    def register_then_a_signal_arrives(fn: Any) -> Any:
        register(fn)
        monkeypatch.setattr(threaded_module.atexit, "register", register)
        server.stop()  # what a SIGTERM handler running here would do
        return fn

    monkeypatch.setattr(threaded_module.atexit, "register", register_then_a_signal_arrives)
    with pytest.raises(RuntimeError, match="stopped before it started"):
        server.start()
    assert not server.running and loop_threads() == []
    assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []
    server.start()  # and the same object starts again, for real this time
    try:
        assert server.running and os.path.exists(server.lock_path or "")
    finally:
        server.stop()
    assert os.listdir(lock_dir) == [] and loop_threads() == []


def test_a_selection_set_during_the_start_reaches_the_cli_once_it_connects(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    server = ThreadedIdeServer([folder], lock_dir=lock_dir)
    held = HeldStart(server)
    server.start(wait=False)
    try:
        assert held.entered.wait(WAIT)
        server.post(server.set_selection, Selection(path, "early", (0, 0), (0, 5)))
        server.set_selection(Selection(path, "latest", (0, 0), (0, 6)))
        held.release()
        server.wait_started()

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            response, conn = await cli.open_stream()
            assert response.status == 200
            message = await asyncio.wait_for(conn.next_notification(), WAIT)
            assert message is not None and message["method"] == "selection_changed"
            assert message["params"]["text"] == "latest"
            cli.close()

        ide_wire.run(scenario())
    finally:
        server.stop()


def test_calls_racing_stop_are_harmless(tmp_path: Any) -> None:
    folder, path, lock_dir = workspace(tmp_path)
    for _ in range(3):
        server = ThreadedIdeServer([folder], lock_dir=lock_dir, debounce=0.001).start()
        errors: List[BaseException] = []
        go = threading.Event()
        done = threading.Event()

        def hammer(n: int) -> None:
            go.wait(WAIT)
            i = 0
            while not done.is_set() or i < 50:
                i += 1
                try:
                    selection = Selection(path, "t%d" % i, (0, 0), (0, 1))
                    diagnostics = [Diagnostic("x", "Error", (0, 0), (0, 1))]
                    if n % 2:  # half the threads wait for the loop, half post
                        server.set_selection(selection)
                        server.post(server.set_diagnostics, path, diagnostics)
                    else:
                        server.post(server.set_selection, selection)
                        server.set_diagnostics(path, diagnostics)
                    server.add_file_reference(path)
                    server.flush_pushes()
                except BaseException as exc:  # noqa: B902 - any of them is the failure
                    errors.append(exc)
                    return

        workers = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
        for w in workers:
            w.start()
        go.set()
        server.stop()
        done.set()
        for w in workers:
            w.join(WAIT)
        assert errors == []
        assert os.listdir(lock_dir) == []


def test_a_failing_or_invalid_on_diff_answers_the_diff_with_an_error(tmp_path: Any, editor: EditorThread) -> None:
    folder, path, lock_dir = workspace(tmp_path)

    def on_diff(diff: DiffRequest) -> Any:
        if diff.tab_name == "raises":
            raise KeyError("the editor's handler broke")
        return "maybe"  # neither a decision nor None

    closed: List[Tuple[str, str]] = []
    server = ThreadedIdeServer([folder], call_in_editor=editor.post, lock_dir=lock_dir, on_diff=on_diff,
                               on_diff_closed=lambda d, a: closed.append((d.tab_name, a["result"]))).start()
    try:
        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            for tab in ("raises", "invalid"):
                result = await asyncio.wait_for(cli.call_tool("open_diff", diff_args(path, tab)), WAIT)
                assert result.get("isError") is True, result
            cli.close()

        ide_wire.run(scenario())
        assert server.pending_diffs() == []
        editor.sync()
        assert sorted(closed) == [("invalid", "REJECTED"), ("raises", "REJECTED")]
    finally:
        server.stop()


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="threads have no signal masks here")
def test_the_loop_thread_and_its_threads_leave_signals_to_the_host(tmp_path: Any) -> None:
    """A signal sent to the editor's process must be handled on one of the editor's own
    threads (its C handlers are written for them): the loop thread blocks SIGHUP,
    SIGTERM, SIGINT, SIGCHLD... for itself, and so does a thread it starts (asyncio's
    executor), while the faults a thread raises itself stay unblocked and the calling
    thread's own mask is left as it was."""
    folder, path, lock_dir = workspace(tmp_path)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    masks: "queue.Queue[Tuple[str, Set[int]]]" = queue.Queue()

    def own_mask(where: str) -> None:
        masks.put((where, {int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])}))

    with ThreadedIdeServer([folder], lock_dir=lock_dir, on_session=lambda event, info: own_mask(event)) as server:
        assert server.loop is not None

        async def scenario() -> None:
            cli = Cli(server.socket_path, server.nonce)
            await cli.handshake()
            cli.close()

        ide_wire.run(scenario())
        where, loop_mask = masks.get(timeout=WAIT)  # on_session ran on the loop thread (no call_in_editor)

        async def in_executor() -> None:
            await asyncio.get_running_loop().run_in_executor(None, own_mask, "executor")

        asyncio.run_coroutine_threadsafe(in_executor(), server.loop).result(WAIT)
        while True:
            where, executor_mask = masks.get(timeout=WAIT)
            if where == "executor":
                break
    for mask in (loop_mask, executor_mask):
        assert {signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGUSR1} <= mask
        assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT} & mask
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before  # the caller's thread: untouched
    assert signal.SIGHUP not in before
