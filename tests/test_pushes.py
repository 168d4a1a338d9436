"""Pushes of PROTOCOL.md §5: debounce (trailing), de-duplication and the diagnostics union
with a fake clock; then the real GET stream over a socket."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Optional

from ide_protocol.common.paths import path_to_uri
from ide_protocol.server.pushes import Debounced, DiagnosticsWindow
from ide_protocol.common.tools import Diagnostic, Selection
import platforms
from ide_wire import cli_for, make_server, run, until


class FakeClock:
    """`call_later` with time advanced by hand."""

    class Handle:
        def __init__(self, when: float, callback: Callable[[], None]) -> None:
            self.when = when
            self.callback = callback
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.now = 0.0
        self.handles: List["FakeClock.Handle"] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> "FakeClock.Handle":
        handle = FakeClock.Handle(self.now + delay, callback)
        self.handles.append(handle)
        return handle

    @property
    def live(self) -> int:
        return sum(1 for h in self.handles if not h.cancelled)

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while True:
            due = sorted((h for h in self.handles if not h.cancelled and h.when <= target), key=lambda h: h.when)
            if not due:
                break
            handle = due[0]
            self.handles.remove(handle)
            self.now = handle.when
            handle.callback()
        self.now = target
        self.handles = [h for h in self.handles if not h.cancelled]


def test_debounce_is_trailing_latest_wins() -> None:
    clock, sent = FakeClock(), []
    d = Debounced(0.2, sent.append, clock.call_later)
    d.update(1)
    clock.advance(0.1)
    d.update(2)
    clock.advance(0.1)
    d.update(3)
    clock.advance(0.19)
    assert sent == []  # the timer restarts on each change
    assert d.pending
    clock.advance(0.01)
    assert sent == [3]
    assert not d.pending and clock.live == 0
    clock.advance(10)
    assert sent == [3]


def test_debounce_skips_repeats() -> None:
    clock, sent = FakeClock(), []
    d = Debounced(0.2, sent.append, clock.call_later)
    d.update({"a": 1})
    clock.advance(0.2)
    d.update({"a": 1})
    clock.advance(0.2)
    assert sent == [{"a": 1}]
    d.update({"a": 2})
    d.update({"a": 1})  # back to the last sent value inside the window: nothing new
    clock.advance(0.2)
    assert sent == [{"a": 1}]
    d.update({"a": 2})
    clock.advance(0.2)
    assert sent == [{"a": 1}, {"a": 2}]
    d.forget_last()
    d.update({"a": 2})
    clock.advance(0.2)
    assert sent == [{"a": 1}, {"a": 2}, {"a": 2}]


def test_debounce_flush_cancel_and_zero_delay() -> None:
    clock, sent = FakeClock(), []
    d = Debounced(0.2, sent.append, clock.call_later)
    d.update("x")
    d.flush()
    assert sent == ["x"] and clock.live == 0
    d.update("y")
    d.cancel()
    clock.advance(1)
    assert sent == ["x"] and clock.live == 0
    zero = Debounced(0, sent.append, clock.call_later)
    zero.update("z")
    zero.update("z")
    assert sent == ["x", "z"] and clock.live == 0


def test_diagnostics_union_of_the_window() -> None:
    clock, sent = FakeClock(), []
    state = {"a": [{"m": 1}], "b": [{"m": 2}], "c": []}
    w = DiagnosticsWindow(0.2, sent.append, clock.call_later, lambda uri: state[uri])
    w.changed("a")
    clock.advance(0.1)
    w.changed("b")
    clock.advance(0.1)
    w.changed("a")
    clock.advance(0.1)
    assert sent == []
    state["a"] = [{"m": 3}]  # the state when the window closes is what is sent
    clock.advance(0.1)
    assert sent == [{"uris": [{"uri": "a", "diagnostics": [{"m": 3}]}, {"uri": "b", "diagnostics": [{"m": 2}]}]}]
    # The next window only carries what changed in it.
    w.changed("c")
    clock.advance(0.2)
    assert sent[-1] == {"uris": [{"uri": "c", "diagnostics": []}]}
    # A window repeating the previous send is skipped.
    w.changed("c")
    clock.advance(0.2)
    assert len(sent) == 2
    w.changed("a")
    w.cancel()
    clock.advance(1)
    assert len(sent) == 2 and clock.live == 0


# ------------------------------------------------------------------ over the socket


async def _stream(server: Any) -> Any:
    cli = cli_for(server)
    await cli.handshake(probes=0)
    response, conn = await cli.open_stream()
    assert response.status == 200
    await until(lambda: all(s["stream_open"] for s in server.sessions), what="stream registered")
    return cli, conn


def test_stream_gets_current_selection_at_once(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=3600) as server:
            path = str(tmp_path / "a.py")
            server.set_selection(Selection(path, "abc", (0, 1), (0, 4)))
            cli, conn = await _stream(server)
            msg = await conn.next_notification()
            assert msg == {"jsonrpc": "2.0", "method": "selection_changed", "params": {
                "text": "abc", "filePath": platforms.wire_path(path), "fileUrl": path_to_uri(path),
                "selection": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 4},
                              "isEmpty": False}}}
            cli.close()
    run(main())


def test_debounced_pushes_on_the_stream_with_controlled_time(tmp_path) -> None:
    """A debounce of an hour: nothing goes out until the window closes (flush_pushes
    stands for the timer firing); then only the latest selection, and the union of
    diagnostics."""
    async def main() -> None:
        async with make_server(tmp_path, debounce=3600) as server:
            cli, conn = await _stream(server)
            a, b = str(tmp_path / "a.py"), str(tmp_path / "b.py")
            for i in range(5):
                server.set_selection(Selection(a, "x" * i, (i, 0), (i, i)))
            server.set_diagnostics(a, [Diagnostic("one", "Error", (1, 0))])
            server.set_diagnostics(b, [Diagnostic("two", "Warning", (2, 0))])
            server.set_diagnostics(a, [Diagnostic("three", "Hint", (3, 0))])
            await asyncio.sleep(0.05)
            assert conn._events == []  # nothing sent inside the window
            server.flush_pushes()
            first = await conn.next_notification()
            second = await conn.next_notification()
            assert first["method"] == "selection_changed" and first["params"]["text"] == "xxxx"
            assert second == {"jsonrpc": "2.0", "method": "diagnostics_changed", "params": {"uris": [
                {"uri": path_to_uri(a), "diagnostics": [{"message": "three", "severity": "Hint", "range": {
                    "start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}},
                    "source": None, "code": None}]},
                {"uri": path_to_uri(b), "diagnostics": [{"message": "two", "severity": "Warning", "range": {
                    "start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}},
                    "source": None, "code": None}]}]}}
            # Repeats are skipped: the same selection again sends nothing; a marker push
            # (sent at once) proves nothing came before it.
            server.set_selection(Selection(a, "xxxx", (4, 0), (4, 4)))
            server.flush_pushes()
            server.add_file_reference(a)
            marker = await conn.next_notification()
            assert marker["method"] == "add_file_reference"
            cli.close()
    run(main())


def test_real_pushes_with_zero_debounce(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=0) as server:
            cli, conn = await _stream(server)
            other, other_conn = await _stream(server)
            path = str(tmp_path / "f.py")
            server.set_selection(Selection(path, "sel", (2, 0), (2, 3)))
            for c in (conn, other_conn):
                msg = await c.next_notification()
                assert msg["method"] == "selection_changed" and msg["params"]["text"] == "sel"
            server.set_diagnostics(path, [Diagnostic("boom", "error", (0, 0), (0, 1))])
            for c in (conn, other_conn):
                msg = await c.next_notification()
                assert msg["method"] == "diagnostics_changed"
                assert msg["params"]["uris"][0]["uri"] == path_to_uri(path)
                assert msg["params"]["uris"][0]["diagnostics"][0]["severity"] == "Error"

            # add_file_reference / add_selection: to all sessions, both keys present.
            assert server.add_file_reference(path) == 2
            for c in (conn, other_conn):
                msg = await c.next_notification()
                assert msg == {"jsonrpc": "2.0", "method": "add_file_reference", "params": {
                    "filePath": platforms.wire_path(path), "fileUrl": path_to_uri(path), "selection": None, "selectedText": None}}
            # To one session only.
            assert server.add_selection(path, (1, 0), (3, 2), "text", session_id=other.session_id) == 1
            assert server.add_file_reference(path, (4, 0), (5, 0), session_id=cli.session_id) == 1
            msg = await other_conn.next_notification()
            assert msg == {"jsonrpc": "2.0", "method": "add_selection", "params": {
                "filePath": platforms.wire_path(path), "fileUrl": path_to_uri(path),
                "selection": {"start": {"line": 1, "character": 0}, "end": {"line": 3, "character": 2}},
                "selectedText": "text"}}
            msg = await conn.next_notification()
            assert msg["method"] == "add_file_reference"
            assert msg["params"]["selection"] == {"start": {"line": 4, "character": 0},
                                                  "end": {"line": 5, "character": 0}}
            assert "selectedText" in msg["params"] and msg["params"]["selectedText"] is None
            assert server.add_file_reference(path, session_id="unknown") == 0
            # A session without a stream receives nothing and breaks nothing.
            quiet = cli_for(server)
            await quiet.handshake(probes=0)
            assert server.add_file_reference(path) == 2
            cli.close()
            other.close()
            quiet.close()
    run(main())


def test_pushes_survive_a_vanished_stream(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, debounce=0) as server:
            gone, gone_conn = await _stream(server)
            cli, conn = await _stream(server)
            gone_conn.abort()
            path = str(tmp_path / "g.py")
            for i in range(20):
                server.set_selection(Selection(path, str(i), (i, 0), (i, 1)))
                await asyncio.sleep(0)
            texts = []
            while len(texts) < 20:
                msg = await conn.next_notification()
                texts.append(msg["params"]["text"])
            assert texts == [str(i) for i in range(20)]
            await until(lambda: server.stats()["streams"] == 1, what="dead stream dropped")
            cli.close()
    run(main())


def test_a_change_that_never_pauses_is_still_sent_at_the_maximum_wait() -> None:
    # A trailing debounce alone restarts for ever under continuous change: nothing sent.
    clock, sent = FakeClock(), []
    d = Debounced(0.2, sent.append, clock.call_later)
    assert d.max_wait == 0.8
    for n in range(300):  # a change every 10 ms for 3 s
        d.update(n)
        clock.advance(0.01)
    assert len(sent) >= 3  # at 0.8, 1.6, 2.4 s at the latest
    assert sent == sorted(sent) and sent[-1] >= 239
    clock.advance(1.0)
    assert sent[-1] == 299 and clock.live == 0


def test_a_pause_still_sends_after_the_delay_and_restarts_the_maximum_wait() -> None:
    clock, sent = FakeClock(), []
    d = Debounced(0.2, sent.append, clock.call_later, max_wait=0.5)
    d.update(1)
    clock.advance(0.3)
    assert sent == [1] and clock.live == 0
    d.update(2)
    clock.advance(0.1)
    d.update(3)
    clock.advance(0.1)
    assert sent == [1]  # a new burst's maximum wait counts from its own first change


def test_after_cancel_updates_schedule_nothing() -> None:
    # The server stopped and its loop is closed: a late update must not reach call_later.
    def closed_loop(delay: float, callback: Callable[[], None]) -> Any:
        raise RuntimeError("Event loop is closed")

    sent: List[Any] = []
    d = Debounced(0.2, sent.append, closed_loop)
    d.cancel()
    d.update(1)
    d.flush()
    w = DiagnosticsWindow(0.2, sent.append, closed_loop, lambda uri: [])
    w.cancel()
    w.changed("file:///x")
    w.flush()
    assert sent == [] and not d.pending and not w.pending
