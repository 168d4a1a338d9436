"""The six tools of PROTOCOL.md §4, called over a real socket the way the CLI calls them."""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, List

from ide_protocol.common.paths import path_to_uri, uri_to_path
from ide_protocol.common.tools import Diagnostic, Selection
from ide_wire import cli_for, make_server, run, tool_error, tool_json, until
import platforms

SCHEMA = "http://json-schema.org/draft-07/schema#"
EXEC = {"taskSupport": "forbidden"}


def _with_params(props: Dict[str, str], required: List[str]) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "object",
                              "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
                              "additionalProperties": False, "$schema": SCHEMA}
    if required:
        schema["required"] = required
    return schema


# Transcribed from the table of PROTOCOL.md §4 (not from ide_protocol.common.tools).
EXPECTED_TOOLS = [
    {"name": "get_vscode_info", "description": "Get information about the current VS Code instance",
     "inputSchema": {"type": "object", "properties": {}}, "execution": EXEC},
    {"name": "get_selection",
     "description": "Get text selection. Returns current selection if an editor is active, otherwise returns "
                    "the latest cached selection. The \"current\" field indicates if this is from the active "
                    "editor (true) or cached (false).",
     "inputSchema": {"type": "object", "properties": {}}, "execution": EXEC},
    {"name": "open_diff",
     "description": "Opens a diff view comparing original file content with new content. Blocks until user "
                    "accepts, rejects, or closes the diff.",
     "inputSchema": _with_params({"original_file_path": "Path to the original file",
                                  "new_file_contents": "The new file contents to compare against",
                                  "tab_name": "Name for the diff tab"},
                                 ["original_file_path", "new_file_contents", "tab_name"]),
     "execution": EXEC},
    {"name": "close_diff",
     "description": "Closes a diff tab by its tab name. Use this when the client rejects an edit to close the "
                    "corresponding diff view.",
     "inputSchema": _with_params({"tab_name": "The tab name of the diff to close (must match the tab_name used "
                                              "when opening the diff)"}, ["tab_name"]),
     "execution": EXEC},
    {"name": "get_diagnostics", "description": "Gets language diagnostics (errors, warnings, hints) from VS Code",
     "inputSchema": _with_params({"uri": "File URI to get diagnostics for. Optional. If not provided, returns "
                                         "diagnostics for all files."}, []),
     "execution": EXEC},
    {"name": "update_session_name", "description": "Update the display name for the current CLI session",
     "inputSchema": _with_params({"name": "The new session name"}, ["name"]), "execution": EXEC},
]


def test_tools_list_equals_protocol_table(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            result = await cli.request("tools/list", {"_meta": {"progressToken": 0}})
            assert result == {"tools": EXPECTED_TOOLS}
            # Order of keys aside, no extra fields anywhere (e.g. no annotations).
            for tool in result["tools"]:
                assert set(tool) == {"name", "description", "inputSchema", "execution"}
            cli.close()
    run(main())


def test_get_vscode_info(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path, ide_name="Test IDE", ide_info={"version": "9.9"}) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            for args in (None, {}):
                info = tool_json(await cli.call_tool("get_vscode_info", args))
                assert set(info) >= {"version", "appName", "appRoot", "language", "machineId", "sessionId",
                                     "uriScheme", "shell"}
                assert info["appName"] == "Test IDE" and info["version"] == "9.9"
                assert all(isinstance(info[k], str) for k in info)
            cli.close()
    run(main())


def test_get_selection(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            result = await cli.call_tool("get_selection", {})
            assert result["content"][0]["text"] == "null" and not result.get("isError")
            path = str(tmp_path / "dir with space" / "a#b.py")
            server.set_selection(Selection(path, "héllo", (1, 2), (3, 4)))
            value = tool_json(await cli.call_tool("get_selection"))
            assert value == {"text": "héllo", "filePath": platforms.wire_path(path), "fileUrl": path_to_uri(path),
                             "selection": {"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 4},
                                           "isEmpty": False},
                             "current": True}
            assert value["fileUrl"].startswith("file:///") and " " not in value["fileUrl"]
            # VS Code pretty-prints with 2 spaces.
            text = (await cli.call_tool("get_selection"))["content"][0]["text"]
            assert text == json.dumps(value, indent=2, ensure_ascii=False)
            # No active editor: the cached one, current false.
            server.set_selection(None)
            value = tool_json(await cli.call_tool("get_selection"))
            assert value["current"] is False and value["text"] == "héllo"
            server.set_selection(Selection(path, "", (5, 0), (5, 0)))
            value = tool_json(await cli.call_tool("get_selection"))
            assert value["selection"]["isEmpty"] is True and value["current"] is True
            cli.close()
    run(main())


def test_get_diagnostics_filter_and_severities(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            assert tool_json(await cli.call_tool("get_diagnostics", {})) == []
            a = str(tmp_path / "a.py")
            b = str(tmp_path / "b b.py")
            server.set_diagnostics(a, [Diagnostic("bad", "error", (1, 0), (1, 3), "lint", "E1"),
                                       Diagnostic("meh", "warning", (2, 0))])
            server.set_diagnostics(path_to_uri(b), [Diagnostic("fyi", "info", (0, 0)), Diagnostic("h", "hint")])
            server.set_diagnostics(str(tmp_path / "clean.py"), [])
            everything = tool_json(await cli.call_tool("get_diagnostics"))
            # Given as a path or as a URI, a file comes back with the same filePath: on
            # Windows with VS Code's lower-case drive letter (PROTOCOL.md §6).
            a_path, b_path = platforms.wire_path(a), platforms.wire_path(b)
            assert b_path == uri_to_path(path_to_uri(b))
            assert [e["filePath"] for e in everything] == [a_path, b_path]
            assert [e["uri"] for e in everything] == [path_to_uri(a), path_to_uri(b)]
            assert [d["severity"] for e in everything for d in e["diagnostics"]] == [
                "Error", "Warning", "Information", "Hint"]
            assert everything[0]["diagnostics"][0] == {
                "message": "bad", "severity": "Error",
                "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}},
                "source": "lint", "code": "E1"}
            only_b = tool_json(await cli.call_tool("get_diagnostics", {"uri": path_to_uri(b)}))
            assert [e["filePath"] for e in only_b] == [b_path]
            only_a = tool_json(await cli.call_tool("get_diagnostics", {"uri": path_to_uri(a)}))
            assert [e["filePath"] for e in only_a] == [a_path]
            none = tool_json(await cli.call_tool("get_diagnostics", {"uri": path_to_uri(str(tmp_path / "clean.py"))}))
            assert none == []
            # Clearing drops the file from the answer.
            server.set_diagnostics(a, [])
            assert [e["filePath"] for e in tool_json(await cli.call_tool("get_diagnostics"))] == [b_path]
            cli.close()
    run(main())


def test_unknown_tool_and_bad_arguments_are_is_error(tmp_path) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            assert "no_such_tool" in tool_error(await cli.call_tool("no_such_tool", {}))
            bad = [("open_diff", {}), ("open_diff", {"original_file_path": "/x", "tab_name": "t"}),
                   ("open_diff", {"original_file_path": 1, "new_file_contents": "", "tab_name": "t"}),
                   ("close_diff", {}), ("close_diff", {"tab_name": None}),
                   ("get_diagnostics", {"uri": 5}), ("update_session_name", {}),
                   ("update_session_name", {"name": ["x"]}), ("get_selection", {"extra": "x"})]
            if not platforms.WINDOWS:  # (on Windows it names a UNC path)
                bad.append(("get_diagnostics", {"uri": "file://remote-host/x"}))
            for name, args in bad:
                tool_error(await cli.call_tool(name, args))
            reply = await cli.send_request("tools/call", {"name": "get_selection", "arguments": "x"})
            assert reply.status == 200
            assert reply.message["result"].get("isError") is True or reply.message["error"]["code"] == -32602
            reply = await cli.send_request("tools/call", {})
            assert reply.status == 200
            msg = reply.message
            assert ("error" in msg and msg["error"]["code"] == -32602) or msg["result"]["isError"] is True
            # Nothing was left pending by the failed calls.
            assert server.stats()["pending_diffs"] == 0
            assert tool_json(await cli.call_tool("get_diagnostics")) == []
            cli.close()
    run(main())


def test_update_session_name_is_per_session(tmp_path) -> None:
    async def main() -> None:
        events: List[Any] = []
        async with make_server(tmp_path, on_session=lambda ev, info: events.append((ev, info))) as server:
            one, two = cli_for(server), cli_for(server)
            await one.handshake(probes=0)
            await two.handshake(probes=0)
            assert tool_json(await one.call_tool("update_session_name", {"name": "fix the bug"})) == {"success": True}
            assert tool_json(await two.call_tool("update_session_name", {"name": "write docs"})) == {"success": True}
            names = {s["id"]: s["name"] for s in server.sessions}
            assert names == {one.session_id: "fix the bug", two.session_id: "write docs"}
            assert ("renamed", "fix the bug") in [(e, i["name"]) for e, i in events]
            one.close()
            two.close()
    run(main())


def _diff_args(path: str, tab: str, contents: str = "new\n") -> Dict[str, str]:
    return {"original_file_path": path, "new_file_contents": contents, "tab_name": tab}


def test_open_diff_accepted_and_rejected_by_callback(tmp_path) -> None:
    async def main() -> None:
        shown: List[Any] = []
        decisions = {"tab-accept": True, "tab-reject": "reject", "tab-async": None}

        def on_diff(diff: Any) -> Any:
            shown.append((diff.tab_name, diff.original_contents, diff.new_file_contents, diff.is_new_file))
            if diff.tab_name == "tab-async":
                asyncio.get_event_loop().call_soon(diff.accept)
            return decisions[diff.tab_name]

        original = tmp_path / "hello.txt"
        original.write_bytes(b"old\n")
        async with make_server(tmp_path, on_diff=on_diff) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            saved = tool_json(await cli.call_tool("open_diff", _diff_args(str(original), "tab-accept")))
            assert saved == {"success": True, "result": "SAVED", "trigger": "accepted_via_button",
                             "tab_name": "tab-accept", "message": "User accepted changes for %s" % original}
            rejected = tool_json(await cli.call_tool("open_diff", _diff_args(str(original), "tab-reject")))
            assert rejected == {"success": True, "result": "REJECTED", "trigger": "rejected_via_button",
                                "tab_name": "tab-reject", "message": "User rejected changes for %s" % original}
            new_file = str(tmp_path / "new.txt")
            later = tool_json(await cli.call_tool("open_diff", _diff_args(new_file, "tab-async")))
            assert later["result"] == "SAVED"
            assert shown == [("tab-accept", "old\n", "new\n", False), ("tab-reject", "old\n", "new\n", False),
                             ("tab-async", "", "new\n", True)]
            # The IDE never writes the file (the CLI does, PROTOCOL.md §4).
            assert original.read_text() == "old\n" and not os.path.exists(new_file)
            assert server.stats()["pending_diffs"] == 0
            cli.close()
    run(main())


def test_close_diff_on_another_connection_while_open_diff_blocks(tmp_path) -> None:
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None,
                               on_diff_closed=lambda d, answer: closed.append(answer)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            tab = "[Copilot CLI] - hello.txt (6fd0d0)"
            blocked = asyncio.ensure_future(cli.call_tool("open_diff", _diff_args(str(tmp_path / "hello.txt"), tab)))
            await until(lambda: server.stats()["pending_diffs"] == 1, what="diff pending")
            assert not blocked.done()
            # Other tools keep working on other connections meanwhile.
            assert tool_json(await cli.call_tool("get_diagnostics")) == []
            assert len([c for c in cli.pool if c.busy]) == 1
            answer = tool_json(await cli.call_tool("close_diff", {"tab_name": tab}))
            assert answer == {"success": True, "already_closed": False, "tab_name": tab,
                              "message": "Diff \"%s\" closed successfully" % tab}
            result = tool_json(await blocked)
            assert result["result"] == "REJECTED" and result["trigger"] == "closed_via_tool"
            assert result["tab_name"] == tab
            assert [a["trigger"] for a in closed] == ["closed_via_tool"]
            # Closing again: already closed.
            again = tool_json(await cli.call_tool("close_diff", {"tab_name": tab}))
            assert again == {"success": True, "already_closed": True, "tab_name": tab,
                             "message": "No active diff found with tab name \"%s\" (may already be closed)" % tab}
            assert server.stats()["pending_diffs"] == 0
            assert server.stats()["running_requests"] == 0
            cli.close()
    run(main())


def test_a_repeated_tab_name_opens_a_second_diff_and_close_diff_takes_the_oldest_of_any_session(tmp_path) -> None:
    """PROTOCOL.md §4, as VS Code: one registry of diffs for every session; a second
    open_diff with a tab name already open waits beside the first; close_diff (from
    whichever session) closes the oldest diff of that name."""
    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: None) as server:
            mine, other = cli_for(server), cli_for(server)
            await mine.handshake(probes=0)
            await other.handshake(probes=0)
            path = str(tmp_path / "x.txt")
            first = asyncio.ensure_future(mine.call_tool("open_diff", _diff_args(path, "same", "one")))
            await until(lambda: server.stats()["pending_diffs"] == 1, what="first diff")
            second = asyncio.ensure_future(other.call_tool("open_diff", _diff_args(path, "same", "two")))
            await until(lambda: server.stats()["pending_diffs"] == 2, what="second diff beside the first")
            assert not first.done()
            closed = tool_json(await other.call_tool("close_diff", {"tab_name": "same"}))
            assert closed["already_closed"] is False
            old = tool_json(await first)  # the other session's close_diff closed mine: the oldest
            assert old["result"] == "REJECTED" and old["trigger"] == "closed_via_tool"
            assert [d.new_file_contents for d in server.pending_diffs()] == ["two"]
            assert server.resolve_diff("same", accept=True)
            new = tool_json(await second)
            assert new["result"] == "SAVED" and new["trigger"] == "accepted_via_button"
            assert server.stats()["pending_diffs"] == 0
            mine.close()
            other.close()
    run(main())


def test_delete_resolves_the_sessions_diffs_client_disconnected(tmp_path) -> None:
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None,
                               on_diff_closed=lambda d, a: closed.append((d.tab_name, a))) as server:
            mine, other = cli_for(server), cli_for(server)
            await mine.handshake(probes=0)
            await other.handshake(probes=0)
            blocked = asyncio.ensure_future(mine.call_tool("open_diff", _diff_args(str(tmp_path / "a"), "mine")))
            kept = asyncio.ensure_future(other.call_tool("open_diff", _diff_args(str(tmp_path / "b"), "other")))
            await until(lambda: server.stats()["pending_diffs"] == 2, what="two diffs")
            assert (await mine.delete()).status == 200
            await until(lambda: len(closed) == 1, what="diff resolved")
            assert closed[0][0] == "mine"
            assert closed[0][1]["result"] == "REJECTED" and closed[0][1]["trigger"] == "client_disconnected"
            # The open_diff request itself is answered (its connection is still open).
            result = tool_json(await blocked)
            assert result["trigger"] == "client_disconnected"
            # The other session's diff is untouched.
            assert [d.tab_name for d in server.pending_diffs()] == ["other"]
            assert not kept.done()
            assert server.resolve_diff("other", accept=False)
            assert tool_json(await kept)["trigger"] == "rejected_via_button"
            mine.close()
            other.close()
    run(main())


def test_dropped_connection_resolves_a_blocking_diff(tmp_path) -> None:
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None,
                               on_diff_closed=lambda d, a: closed.append(a)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()
            conn.send_raw(cli.encode("POST", {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                                              "params": {"name": "open_diff",
                                                         "arguments": _diff_args(str(tmp_path / "a"), "t")}}),
                          expect="POST")
            await until(lambda: server.stats()["pending_diffs"] == 1, what="diff pending")
            conn.abort()
            await until(lambda: len(closed) == 1, what="diff resolved")
            assert closed[0]["result"] == "REJECTED" and closed[0]["trigger"] == "client_disconnected"
            await until(lambda: server.stats()["running_requests"] == 0, what="request ended")
            assert server.stats()["pending_diffs"] == 0
            # The session itself lives on (the CLI reconnects connections freely).
            assert await cli.request("ping") == {}
            cli.close()
    run(main())


def test_cancelled_notification_cancels_running_handler(tmp_path) -> None:
    async def main() -> None:
        closed: List[Any] = []
        async with make_server(tmp_path, on_diff=lambda d: None,
                               on_diff_closed=lambda d, a: closed.append(a)) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            request_id = cli.next_id
            blocked = asyncio.ensure_future(cli.send_request("tools/call", {
                "name": "open_diff", "arguments": _diff_args(str(tmp_path / "a"), "t")}))
            await until(lambda: server.stats()["running_requests"] == 1, what="request running")
            # Another session cancelling the same id does nothing.
            other = cli_for(server)
            await other.handshake(probes=0)
            assert (await other.notify("notifications/cancelled", {"requestId": request_id})).status == 202
            assert server.stats()["running_requests"] == 1
            reply = await cli.notify("notifications/cancelled", {"requestId": request_id, "reason": "timeout"})
            assert reply.status == 202
            await until(lambda: server.stats()["running_requests"] == 0, what="request cancelled")
            assert server.stats()["pending_diffs"] == 0
            assert len(closed) == 1 and closed[0]["result"] == "REJECTED"
            # No answer is due for a cancelled request; the response ends cleanly.
            reply = await blocked
            assert reply.status == 200 and reply.complete and reply.events == []
            assert await cli.request("ping") == {}
            cli.close()
            other.close()
    run(main())


def test_custom_slow_handler_cancelled(tmp_path) -> None:
    """notifications/cancelled cancels any running handler, not only open_diff."""
    async def main() -> None:
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def slow(params: Any, ctx: Any) -> Any:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async with make_server(tmp_path) as server:
            server.dispatcher.add("test/slow", slow)
            cli = cli_for(server)
            await cli.handshake(probes=0)
            request_id = cli.next_id
            pending = asyncio.ensure_future(cli.send_request("test/slow", {}))
            await asyncio.wait_for(started.wait(), 20)
            await cli.notify("notifications/cancelled", {"requestId": request_id, "reason": "timeout"})
            await asyncio.wait_for(cancelled.wait(), 20)
            reply = await pending
            assert reply.status == 200 and reply.complete and reply.events == []
            assert server.stats()["running_requests"] == 0
            cli.close()
    run(main())


def test_open_diff_sends_its_head_at_once_while_the_user_decides(tmp_path) -> None:
    # A blocking open_diff shows the client a live `200` SSE head before the decision;
    # the answer follows on the same response when the user decides.
    async def main() -> None:
        async with make_server(tmp_path, on_diff=lambda d: None) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            conn = await cli.new_conn()
            body = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                    "params": {"name": "open_diff", "arguments": _diff_args(str(tmp_path / "x.txt"), "tab-head")}}
            conn.send_raw(cli.encode("POST", body), expect="POST")
            response = await asyncio.wait_for(conn.open_stream(), 10)  # before any decision
            assert response.status == 200
            assert response.headers.get("content-type") == "text/event-stream"
            assert [d.tab_name for d in server.pending_diffs()] == ["tab-head"]
            assert server.resolve_diff("tab-head", accept=True)
            event = await conn.next_sse()
            assert event is not None and json.loads(event.data)["id"] == 77
            cli.close()
    run(main())


def test_the_tools_stand_alone_on_the_parts_given_to_them(tmp_path) -> None:
    # `IdeTools` answers from the editor state, pending diffs and reports it was given,
    # with no server around it: what it depends on is what it is handed.
    from ide_protocol.server.callbacks import Reports
    from ide_protocol.server.diffs import PendingDiffs
    from ide_protocol.server.editor_state import EditorState
    from ide_protocol.server.sessions import CallContext
    from ide_protocol.server.tool_calls import IdeTools

    async def main() -> None:
        state, diffs, seen = EditorState(), PendingDiffs(), []
        tools = IdeTools(state, diffs, Reports(), ide_name="Alone", ide_info={}, instance_id="i-1", max_file=1024,
                         on_diff=lambda diff: "accept", on_tool_call=lambda call, sid, result: seen.append(call))
        ctx = CallContext(None, 1, None)
        assert tool_json(tools.call({"name": "get_selection"}, ctx)) is None
        path = str(tmp_path / "a.py")
        state.set_selection(Selection(path, "x", (0, 0), (0, 1)))
        assert tool_json(tools.call({"name": "get_selection", "arguments": {}}, ctx))["text"] == "x"
        assert tool_json(tools.call({"name": "get_vscode_info"}, ctx))["appName"] == "Alone"
        state.set_diagnostics(path, [Diagnostic("bad", "error", (0, 0))])
        assert [e["filePath"] for e in tool_json(tools.call({"name": "get_diagnostics"}, ctx))] == [
            platforms.wire_path(path)]
        waiting = tools.call({"name": "open_diff", "arguments": {"original_file_path": path, "tab_name": "t",
                                                                  "new_file_contents": "y"}}, ctx)
        assert asyncio.iscoroutine(waiting)  # a tool that waits: the dispatcher runs it
        assert tool_json(await waiting)["result"] == "SAVED" and len(diffs) == 0
        assert [call["name"] for call in seen] == ["get_selection", "get_selection", "get_vscode_info",
                                                   "get_diagnostics", "open_diff"]

    run(main())
