"""The conformance checker: every check passes against our server, and every check
FAILs against a server with exactly the matching fault (no check that cannot fail).

The faults live in this test double, not in the server: `FaultyServer` wraps the HTTP
application that the listener runs (requests can be rewritten or answered early,
responses rewritten on their way out), swaps dispatcher or tool handlers, or filters the
bytes a connection receives (a framing fault).

The rows of PROTOCOL.md §2 "Errors and edge cases" are held to more: `ROWS` lists each
row with its checks, and each switch of a row (the fault named after one of its checks,
or an extra one) must fail that check and no check of another row. These runs hand the
checker `change_folders`, since the test started the server (`lock.folder_change`).
"""
from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from ide_protocol.programs import check
from ide_protocol.wire import http11, jsonrpc, sse
from ide_protocol.common import lockfile, tools
from ide_protocol.server import answers, mcp
from ide_protocol.server.ide_server import IdeServer
from ide_protocol.common.tools import Diagnostic, Selection

import platforms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Seconds the checker waits for an answer when a fault makes it wait: the checks a
#: fault is meant to break are run with this (`check --timeout`), the checks that must
#: still pass with the checker's own default, so that a loaded machine slows those down
#: without failing them.
FAULT_TIMEOUT = 0.5


class Fault:
    """Default: no fault. Subclasses override the hooks they need."""

    def setup(self, server: "FaultyServer") -> None:
        pass

    def before_lock(self, server: "FaultyServer") -> None:
        pass

    def head(self, server: "FaultyServer", request: http11.Request) -> None:
        """Change a request's head before the server's judge sees it."""

    def intercept(self, server: "FaultyServer", request: http11.Request, body: bytes
                  ) -> Optional[Tuple[int, List[Tuple[str, str]], bytes]]:
        return None

    def out_send(self, request: http11.Request, body: bytes, status: int, headers: List[Tuple[str, str]],
                 payload: bytes) -> Tuple[int, List[Tuple[str, str]], bytes]:
        return status, headers, payload

    def out_start(self, request: http11.Request, status: int, headers: List[Tuple[str, str]]
                  ) -> Tuple[int, List[Tuple[str, str]]]:
        return status, headers

    def out_chunk(self, request: http11.Request, data: bytes) -> bytes:
        return data

    def close_after(self, request: http11.Request) -> bool:
        return False


class FaultyServer(IdeServer):
    """Our IdeServer with one fault switched on.

    The fault sits between the listener and the real judge and application
    (`judge(request)`, `app(request, body, connection) -> Reply | Stream | PendingReply`,
    `server.answers`): it can change a head before it is judged, answer a request
    itself, or rewrite the answer the application gives on its way out."""

    def __init__(self, folder: str, lock_dir: str, fault: Optional[Fault] = None, **kwargs: Any) -> None:
        super().__init__([folder], lock_dir=lock_dir, **kwargs)
        self.fault = fault or Fault()
        real_app = self.listener.app
        real_judge = self.listener.judge
        assert real_judge is not None

        def judge(request: http11.Request) -> Optional[answers.Reply]:
            self.fault.head(self, request)
            refusal = real_judge(request)
            return None if refusal is None else self._rewrite(request, b"", refusal)  # type: ignore[return-value]

        def app(request: http11.Request, body: bytes, connection: int) -> answers.Answer:
            early = self.fault.intercept(self, request, body)
            if early is not None:
                status, headers, payload = early
                return answers.Reply(status, headers, payload)
            return self._rewrite(request, body, real_app(request, body, connection))

        self.listener.app = app
        self.listener.judge = judge
        self.fault.setup(self)

    def _rewrite(self, request: http11.Request, body: bytes, answer: answers.Answer) -> answers.Answer:
        fault = self.fault
        close = fault.close_after(request)
        if isinstance(answer, answers.Reply):
            if answer.chunked:  # a chunked body of one chunk: the head, then its one chunk
                status, headers = fault.out_start(request, answer.status, list(answer.headers))
                return answers.Reply(status, headers, fault.out_chunk(request, answer.body), chunked=True,
                                     close_after=close or answer.close_after)
            status, headers, payload = fault.out_send(request, body, answer.status, list(answer.headers),
                                                      answer.body)
            return answers.Reply(status, headers, payload, close_after=close or answer.close_after)
        if isinstance(answer, answers.Stream):
            status, headers = fault.out_start(request, answer.status, list(answer.headers))

            async def chunks() -> Any:
                async for chunk in answer.chunks:
                    yield fault.out_chunk(request, chunk)

            return answers.Stream(status, headers, chunks(), answer.close, close_after=close or answer.close_after)
        pending = answer

        async def run() -> answers.Reply:
            return self._rewrite(request, body, await pending.run())  # type: ignore[return-value]

        return answers.PendingReply(run, pending.close)


def _method(body: bytes) -> Optional[str]:
    try:
        obj = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return obj.get("method") if isinstance(obj, dict) else None


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _rewrite_lock(server: IdeServer, change: Callable[[Dict[str, Any]], None]) -> None:
    with open(server.lock_path) as f:
        raw = json.load(f)
    change(raw)
    with open(server.lock_path, "w") as f:
        json.dump(raw, f)


def _sse_answer(request_id: Any, result: Any) -> bytes:
    return sse.encode_message(json.dumps(jsonrpc.result_response(request_id, result)))


# ------------------------------------------------------------------ the faults


class F(Fault):
    """A fault built from keyword hooks, to keep the table below short."""

    def __init__(self, **hooks: Any) -> None:
        for name, hook in hooks.items():
            setattr(self, "_" + name, hook)

    def setup(self, server: "FaultyServer") -> None:
        if hasattr(self, "_setup"):
            self._setup(server)

    def head(self, server: "FaultyServer", request: http11.Request) -> None:
        if hasattr(self, "_head"):
            self._head(server, request)

    def intercept(self, server: "FaultyServer", request: http11.Request, body: bytes) -> Any:
        if hasattr(self, "_intercept"):
            return self._intercept(server, request, body)
        return None

    def out_send(self, request: http11.Request, body: bytes, status: int, headers: Any, payload: bytes) -> Any:
        if hasattr(self, "_out_send"):
            return self._out_send(request, body, status, headers, payload)
        return status, headers, payload

    def out_start(self, request: http11.Request, status: int, headers: Any) -> Any:
        if hasattr(self, "_out_start"):
            return self._out_start(request, status, headers)
        return status, headers

    def out_chunk(self, request: http11.Request, data: bytes) -> bytes:
        if hasattr(self, "_out_chunk"):
            return self._out_chunk(request, data)
        return data

    def close_after(self, request: http11.Request) -> bool:
        return bool(getattr(self, "_close_after", lambda r: False)(request))


def _add_auth(server: IdeServer, request: http11.Request) -> None:
    request.headers.remove("authorization")
    request.headers.add("Authorization", "Nonce " + server.nonce)


def _tools_list_with(change: Callable[[List[Dict[str, Any]]], None]) -> Callable[[IdeServer], None]:
    def setup(server: IdeServer) -> None:
        listed = json.loads(json.dumps(tools.TOOLS))
        change(listed)
        server.dispatcher.add("tools/list", lambda params, ctx: {"tools": listed})
    return setup


def _tool_handler(name: str, handler: Callable[[Dict[str, Any], Any], Any]) -> Callable[[IdeServer], None]:
    def setup(server: IdeServer) -> None:
        server.tools.add(name, handler)
    return setup


def _deleted_twice(server: IdeServer, request: http11.Request, body: bytes) -> Any:
    if request.method == "DELETE" and request.headers.get("mcp-session-id") not in server.app.sessions:
        return 200, [], b""
    return None


def _repeated_tab_replaces(server: IdeServer) -> None:
    real = server.tools.handler("open_diff")
    assert real is not None

    async def open_diff(arguments: Dict[str, Any], ctx: Any) -> Any:
        for diff in server.pending_diffs():  # a repeated tab name answers the first (VS Code keeps both)
            if diff.tab_name == arguments.get("tab_name"):
                diff.reject()
        return await real(arguments, ctx)
    server.tools.add("open_diff", open_diff)


def _write_then_accept(diff: Any) -> bool:
    with open(diff.original_file_path, "w") as f:
        f.write(diff.new_file_contents)
    return True


def _unknown_tool_succeeds(server: IdeServer) -> None:
    real = server.tools.call

    async def tools_call(params: Any, ctx: Any) -> Any:
        if isinstance(params, dict) and params.get("name") not in server.tools:
            return tools.text_result({"ok": True})
        result = real(params, ctx)
        return (await result) if inspect.isawaitable(result) else result
    server.dispatcher.add("tools/call", tools_call)


def _no_allow(request: http11.Request, body: bytes, status: int, headers: Any, payload: bytes) -> Any:
    return status, [(k, v) for k, v in headers if k.lower() != "allow"], payload



# -- faults of the errors and edge cases table (PROTOCOL.md §2): one per row

def _judge(refuse_first: Callable[[IdeServer, http11.Request], Optional[answers.Reply]]) -> Callable[[IdeServer], None]:
    """A judge that applies one rule of its own before the real ones (a wrong order)."""
    def setup(server: IdeServer) -> None:
        inner = server.listener.judge
        assert inner is not None

        def judge(request: http11.Request) -> Optional[answers.Reply]:
            return refuse_first(server, request) or inner(request)
        server.listener.judge = judge
    return setup


def _authorized(server: IdeServer, request: http11.Request) -> bool:
    return request.headers.get("authorization") == "Nonce " + server.nonce


def _has_origin(request: http11.Request) -> bool:
    return "origin" in request.headers


def _judge_rewrite(status: int, close: bool) -> Callable[[IdeServer], None]:
    """The real judge, but its refusal with `status` closes (or not) otherwise."""
    def setup(server: IdeServer) -> None:
        inner = server.listener.judge
        assert inner is not None

        def judge(request: http11.Request) -> Optional[answers.Reply]:
            refusal = inner(request)
            if refusal is not None and refusal.status == status:
                return answers.Reply(refusal.status, refusal.headers, refusal.body, close_after=close)
            return refusal
        server.listener.judge = judge
    return setup


def _refused_after_the_body(status: int, refused: Callable[[IdeServer, http11.Request], bool],
                            answer: answers.Reply) -> Callable[[IdeServer], None]:
    """A server that reads a request's whole body before it refuses it with `status`
    (`refused` says when; `answer` is the refusal)."""
    def setup(server: IdeServer) -> None:
        inner = server.listener.judge
        assert inner is not None

        def judge(request: http11.Request) -> Optional[answers.Reply]:
            refusal = inner(request)
            return None if refusal is not None and refusal.status == status else refusal
        server.listener.judge = judge
        app = server.listener.app

        def late(request: http11.Request, body: bytes, connection: int) -> answers.Answer:
            return answer if refused(server, request) else app(request, body, connection)
        server.listener.app = late
    return setup


def _as_text(marker: bytes) -> Callable[..., Any]:
    """An error answer whose body contains `marker`, sent as text/plain."""
    def out_send(request: http11.Request, body: bytes, status: int, headers: Any, payload: bytes) -> Any:
        if status >= 400 and marker in payload:
            return status, [("Content-Type", "text/plain")], payload
        return status, headers, payload
    return out_send


def _wrap_initialize(server: IdeServer, before: Callable[[IdeServer, Any], Optional[answers.Reply]]) -> None:
    real = server.app._initialize

    def initialize(request: http11.Request, msg: Any, connection: int = 0) -> answers.Reply:
        return before(server, request) or real(request, msg, connection)
    server.app._initialize = initialize  # type: ignore[method-assign]


def _steal(server: IdeServer, request: http11.Request) -> None:
    old = server.app.sessions.get(request.headers.get("x-copilot-session-id") or "")
    if old is not None:
        old.stream = None  # (forgets the live stream: the live session is taken over)


def _refuse_known(server: IdeServer, request: http11.Request) -> Optional[answers.Reply]:
    """A stale session (its stream closed) is not taken over: 409 as for a live one."""
    old = server.app.sessions.get(request.headers.get("x-copilot-session-id") or "")
    if old is not None and old.stream is None:
        return answers.Reply(409, (("Content-Type", "application/json"),), b'{"jsonrpc":"2.0","id":null,"error":'
                             b'{"code":-32600,"message":"Conflict"}}')
    return None


def _ignore_cancel(server: IdeServer) -> None:
    server.dispatcher.add("notifications/cancelled", lambda params, ctx: None)


def _input_filter(change: Callable[[Any, bytes], bytes]) -> Callable[[IdeServer], None]:
    """Every connection's bytes pass through `change(connection, data)` before its
    parser sees them (a server whose framing is wrong in one way)."""
    def setup(server: IdeServer) -> None:
        listener = server.listener
        make = listener._connection

        def connection() -> Any:
            conn = make()
            real = conn.data_received

            def data_received(data: bytes) -> None:
                data = change(conn, data)
                if data:
                    real(data)
            conn.data_received = data_received  # type: ignore[method-assign]
            return conn
        listener._connection = connection  # type: ignore[method-assign]
    return setup


def _answer_raw(conn: Any, status: int, text: bytes, close: bool) -> bytes:
    """Answer `text/plain` on `conn` by hand; the bytes that came are dropped."""
    conn.write_nowait(http11.write_response(status, [("Content-Type", "text/plain")], text, keep_alive=not close))
    if close:
        conn.close()
    return b""


def _refuse_when(pattern: bytes, status: int, close: bool = True) -> Callable[[IdeServer], None]:
    import re
    found = re.compile(pattern)
    return _input_filter(lambda conn, data: _answer_raw(conn, status, b"refused\n", close)
                         if found.search(data) else data)


def _first_request_of_each_read(conn: Any, data: bytes) -> bytes:
    """A server that handles one request per read and drops what came with it."""
    second = data.find(b"POST /mcp HTTP/1.1", data.find(b"POST /mcp HTTP/1.1") + 1)
    return data if second <= 0 else data[:second]


def _length_wins(conn: Any, data: bytes) -> bytes:
    """A server that frames by Content-Length and ignores Transfer-Encoding."""
    import re
    head, sep, rest = data.partition(b"\r\n\r\n")
    if sep and re.search(rb"(?i)\r\ntransfer-encoding: chunked\r\n", head + b"\r\n") \
            and re.search(rb"(?i)\r\ncontent-length:", head):
        head = re.sub(rb"(?i)\r\ntransfer-encoding: chunked", b"", head)
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        body = rest.split(b"\r\n")[1][:length]  # the one chunk's data
        head = re.sub(rb"(?i)(\r\ncontent-length: *)\d+", b"\\g<1>%d" % len(body), head)
        return head + sep + body
    return data


def _ignore_extra_arguments(server: IdeServer) -> None:
    real = server.tools.call
    listed = {t["name"]: set(t["inputSchema"]["properties"]) for t in tools.TOOLS}

    async def tools_call(params: Any, ctx: Any) -> Any:
        if isinstance(params, dict) and isinstance(params.get("arguments"), dict) and params.get("name") in listed:
            params = dict(params, arguments={k: v for k, v in params["arguments"].items()
                                             if k in listed[params["name"]]})
        result = real(params, ctx)
        return (await result) if inspect.isawaitable(result) else result
    server.dispatcher.add("tools/call", tools_call)


def _folders_in_a_new_lock(server: IdeServer) -> None:
    """A folder change writes a new lock, then deletes the old one (this project's way
    before the real CLI was watched doing it: it disconnects)."""
    def set_workspace_folders(folders: List[str]) -> None:
        server._folders = list(folders)
        old, server.lock_path = server.lock_path, lockfile.write_lock(server._lock_info(), server.lock_dir)
        lockfile.remove_lock(old)
    server.set_workspace_folders = set_workspace_folders  # type: ignore[method-assign]


def _folders_renamed_over(server: IdeServer) -> None:
    """A folder change writes a temporary file and renames it over the lock: atomic, but
    another file, which the CLI takes for the lock's deletion."""
    def set_workspace_folders(folders: List[str]) -> None:
        server._folders = list(folders)
        assert server.lock_path
        tmp = server.lock_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(server._lock_info().to_json(), f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, server.lock_path)
    server.set_workspace_folders = set_workspace_folders  # type: ignore[method-assign]


def _folders_rewritten_open_to_others(server: IdeServer) -> None:
    """The rewrite leaves the lock, and the nonce in it, readable by every user."""
    real = server.set_workspace_folders

    def set_workspace_folders(folders: List[str]) -> None:
        real(folders)
        assert server.lock_path
        os.chmod(server.lock_path, 0o644)
    server.set_workspace_folders = set_workspace_folders  # type: ignore[method-assign]


def _folders_with_a_new_nonce(server: IdeServer) -> None:
    """A folder change announces another nonce in the lock (the server keeps the old)."""
    real = server._lock_info

    def lock_info() -> lockfile.LockInfo:
        info = real()
        if server.started:
            info.headers = {"Authorization": "Nonce " + "0" * 32}
        return info
    server._lock_info = lock_info  # type: ignore[method-assign]


ALLOW = (("Allow", "GET, POST, DELETE"),)


def _close_diff_as_button(server: IdeServer) -> None:
    """close_diff answers its diffs as if the user had rejected them."""
    real = server.tools.handler("close_diff")
    assert real is not None

    def close_diff(arguments: Dict[str, Any], ctx: Any) -> Any:
        if set(arguments) != {"tab_name"} or not isinstance(arguments["tab_name"], str):
            return real(arguments, ctx)  # (its argument checks as they are)
        found = [d for d in server.pending_diffs() if d.tab_name == arguments.get("tab_name")][:1]
        for diff in found:
            diff.reject()
        return tools.close_diff_answer(arguments.get("tab_name", ""), bool(found))
    server.tools.add("close_diff", close_diff)


def _close_diff_writes_the_file(server: IdeServer) -> None:
    """close_diff writes the proposed contents before it closes the diff (the IDE must
    never write the file: the CLI does, when its user says yes)."""
    real = server.tools.handler("close_diff")
    assert real is not None

    def close_diff(arguments: Dict[str, Any], ctx: Any) -> Any:
        for diff in server.pending_diffs():
            if diff.tab_name == arguments.get("tab_name"):
                with open(diff.original_file_path, "w") as f:
                    f.write(diff.new_file_contents)
        return real(arguments, ctx)
    server.tools.add("close_diff", close_diff)


ERROR_ROW_FAULTS: Dict[str, Fault] = {
    "errors.order_origin_first": F(setup=_judge(lambda s, r: None if _authorized(s, r) else
                                                 answers.plain(401, "Unauthorized", close_after=True))),
    "errors.order_nonce_before_path": F(setup=_judge(lambda s, r: answers.plain(404, "Not Found") if
                                                      not _has_origin(r) and r.target not in mcp.MCP_PATHS else None)),
    "errors.order_path_before_method": F(setup=_judge(lambda s, r: answers.plain(405, "Method Not Allowed", *ALLOW) if
                                                       not _has_origin(r) and _authorized(s, r)
                                                       and r.method not in mcp.METHODS else None)),
    "errors.refused_before_body": F(setup=_refused_after_the_body(401, lambda s, r: not _authorized(s, r),
                                                                  answers.plain(401, "Unauthorized", close_after=True))),
    "errors.close_after_401": F(setup=_judge_rewrite(401, close=False)),
    "errors.close_after_403": F(setup=_judge_rewrite(403, close=False)),
    "errors.open_after_404": F(setup=_judge_rewrite(404, close=True)),
    "errors.open_after_405": F(setup=_judge_rewrite(405, close=True)),
    "errors.body_limit": F(setup=lambda s: setattr(s.listener, "max_body", 1 << 62)),
    "errors.parse_error_body": F(out_send=_as_text(b"-32700")),
    "errors.batch_body": F(out_send=_as_text(b"Batches")),
    "errors.invalid_message": F(out_send=_as_text(b'"id":7')),
    "errors.missing_session_body": F(out_send=_as_text(b"missing mcp-session-id")),
    "errors.unknown_session_body": F(out_send=_as_text(b"Session not found")),
    "errors.second_stream": F(out_send=_as_text(b"stream is already open")),
    "errors.stream_accept": F(out_send=_as_text(b"Not Acceptable")),
    "session.initialize_no_steal": F(setup=lambda s: _wrap_initialize(s, lambda s, r: _steal(s, r))),
    "session.reconnect_after_stream_closed": F(setup=lambda s: _wrap_initialize(s, _refuse_known)),
    "session.ends_when_client_vanishes": F(setup=lambda s: setattr(s.app, "orphan_timeout", 3600.0)),
    "session.cancel_ends_request": F(setup=_ignore_cancel, on_diff=lambda diff: None),
    "errors.close_after_404_with_body": F(setup=_refused_after_the_body(
        404, lambda s, r: r.target not in mcp.MCP_PATHS, answers.plain(404, "Not Found"))),
    "errors.malformed_http": F(setup=_refuse_when(rb"^NOT AN HTTP", 400, close=False)),
    "framing.chunk_extensions": F(setup=_refuse_when(rb"\r\n[0-9a-fA-F]+;", 400)),
    "framing.trailers": F(setup=_refuse_when(rb"\r\n0\r\n[!-~]", 400)),
    "framing.length_and_chunked": F(setup=_input_filter(_length_wins)),
    "framing.expect_continue": F(setup=_judge(lambda s, r: answers.plain(417, "Expectation Failed", close_after=True)
                                              if "expect" in r.headers else None)),
    "framing.pipelining": F(setup=_input_filter(_first_request_of_each_read)),
    "framing.optional_headers": F(intercept=lambda s, r, b: (415, [("Content-Type", "text/plain")], b"no type")
                                  if r.method == "POST" and "content-type" not in r.headers else None),
    "tool.arguments": F(setup=_ignore_extra_arguments),
    "diff.session_end": F(setup=lambda s: setattr(s.app, "on_session_end", None)),
    "lock.folder_change": F(setup=_folders_in_a_new_lock),
    "lock.directory_mode": F(dir_chmod=0o755),
}

#: Faults beyond the one named after each check outside the rows (a check that tests
#: several rules, broken in another of them).
EXTRA_FAULTS: Dict[str, Fault] = {
    "stream.get/not_sse": F(out_start=lambda r, st, h: (st, [(k, v) for k, v in h if k.lower() != "content-type"]
                                                         + [("Content-Type", "application/json")])
                            if r.method == "GET" else (st, h)),
    "initialize.result/no_session_id": F(out_start=lambda r, st, h: (st, [(k, v) for k, v in h
                                                                          if k.lower() != "mcp-session-id"])
                                         if r.method == "POST" and "mcp-session-id" not in r.headers else (st, h)),
    "tool.get_diagnostics/no_filter": F(setup=_tool_handler("get_diagnostics", lambda a, c: [
        {"uri": "file:///%s" % name, "filePath": "/" + name, "diagnostics": [{
            "message": "m", "severity": "Error",
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}]}
        for name in ("a", "b")])),
}

#: Switches beyond the one named after each check (a row broken another way).
EXTRA_SWITCHES: Dict[str, Fault] = {
    "diff.close_via_tool/writes_the_file": F(setup=_close_diff_writes_the_file),
    "lock.folder_change/new_nonce": F(setup=_folders_with_a_new_nonce),
    "lock.folder_change/renamed_over": F(setup=_folders_renamed_over),
    "lock.folder_change/open_to_others": F(setup=_folders_rewritten_open_to_others),
    "errors.unknown_session_body/closes": F(close_after=lambda r: (r.headers.get("mcp-session-id") or "")
                                            .startswith("no-such-session-")),
    "diff.close_via_tool/success_false": F(out_chunk=lambda r, d: d.replace(
        b'\\"success\\": true,\\n  \\"result\\": \\"REJECTED\\",\\n  \\"trigger\\": \\"closed_via_tool',
        b'\\"success\\": false,\\n  \\"result\\": \\"REJECTED\\",\\n  \\"trigger\\": \\"closed_via_tool')),
}

#: The rows of PROTOCOL.md §2 "Errors and edge cases" (its table, its framing rows, its
#: rules) and the checks of each, as the contract's `check` column names them. A
#: switch breaking a row makes some of that row's checks fail and no other row's.
ROWS: List[Tuple[str, Tuple[str, ...]]] = [
    ("`Origin` header", ("errors.order_origin_first", "errors.close_after_403", "auth.origin")),
    ("no or wrong nonce", ("errors.order_nonce_before_path", "errors.close_after_401", "errors.refused_before_body",
                           "auth.missing", "auth.wrong_nonce")),
    ("path other than `/mcp`, `/`", ("errors.order_path_before_method", "errors.open_after_404",
                                     "errors.close_after_404_with_body", "http.path")),
    ("method other than GET, POST, DELETE", ("errors.open_after_405", "http.method")),
    ("body over the limit", ("errors.body_limit", "http.large_body")),
    ("malformed HTTP", ("errors.malformed_http",)),
    ("body not JSON", ("errors.parse_error_body", "jsonrpc.parse_error")),
    ("JSON array (batch)", ("errors.batch_body", "jsonrpc.batch")),
    ("JSON but not a JSON-RPC message", ("errors.invalid_message",)),
    ("`server/discover` without a session id", ("discover.fallback",)),
    ("any other request without `mcp-session-id`", ("errors.missing_session_body", "session.missing")),
    ("unknown or ended session id", ("errors.unknown_session_body", "session.unknown", "delete.session")),
    ("a second GET stream", ("errors.second_stream",)),
    ("GET whose `Accept` excludes `text/event-stream`", ("errors.stream_accept",)),
    ("`initialize` reusing a live session's id", ("session.initialize_no_steal",)),
    ("unknown method", ("jsonrpc.unknown_method",)),
    ("request cancelled (what a cancel writes)", ("session.cancel_ends_request",)),
    ("chunk extensions", ("framing.chunk_extensions",)),
    ("trailers", ("framing.trailers",)),
    ("`Content-Length` with `Transfer-Encoding`", ("framing.length_and_chunked",)),
    ("`Expect: 100-continue`", ("framing.expect_continue",)),
    ("pipelining", ("framing.pipelining",)),
    ("no `Content-Type`, no `Accept`", ("framing.optional_headers",)),
    ("tool arguments (extra, missing, mistyped)", ("tool.arguments",)),
    ("when a session ends", ("session.ends_when_client_vanishes",)),
    ("reconnecting with the same `X-Copilot-Session-Id`", ("session.reconnect_after_stream_closed",)),
    ("changing folders", ("lock.folder_change",)),
    ("the lock directory's mode", ("lock.directory_mode",)),
    ("`open_diff` rejected: `closed_via_tool`", ("diff.close_via_tool", "diff.same_tab")),
    ("`open_diff` rejected: its session ends (`client_disconnected`)", ("diff.session_end",)),
]

#: Checks that can only WARN (their message says why): their switch gives a WARN.
WARN_ONLY = ("lock.directory_mode",)

#: The faults and switches that break a lesser rule than the one of the check they are
#: named after (a check that tests several rules reports the kind of the one it found
#: broken); `EXTRA_FAULTS` and `EXTRA_SWITCHES` break the check's own.
BROKEN_RULE: Dict[str, str] = {
    "stream.get": check.VSCODE,                    # Cache-Control
    "initialize.result": check.VSCODE,             # protocolVersion
    "tool.get_diagnostics": check.RECOMMENDED,     # lower-case severities (VS Code's)
    "delete.session": check.RECOMMENDED,           # a second DELETE answered 200
    "diff.close_via_tool": check.VSCODE,           # trigger
    "diff.close_via_tool/success_false": check.VSCODE,
    "tool.arguments": check.RECOMMENDED,           # an extra argument ignored (VS Code's way)
    "lock.folder_change/open_to_others": check.SECURITY,  # the rewritten lock's mode
}

ROW_OF = {name: row for row, names in ROWS for name in names}

FAULTS: Dict[str, Fault] = {
    "lock.fields": F(lock=lambda raw: raw.update(pid=str(raw["pid"]))),
    "lock.permissions": F(chmod=0o644),
    "lock.folders": F(lock=lambda raw: raw.update(workspaceFolders=["relative/project"])),
    "lock.socket": F(lock=lambda raw: raw.update(socketPath="/nonexistent/mcp-x/mcp.sock")),
    "auth.missing": F(head=lambda s, r: _add_auth(s, r) if "authorization" not in r.headers else None),
    "auth.wrong_nonce": F(head=_add_auth),
    "auth.origin": F(head=lambda s, r: r.headers.remove("origin")),
    "http.path": F(head=lambda s, r: setattr(r, "target", "/mcp")),
    "http.method": F(out_send=_no_allow),
    "http.content_length": F(intercept=lambda s, r, b: (411, [("Content-Type", "text/plain")], b"chunked only")
                             if "content-length" in r.headers else None),
    "http.large_body": F(intercept=lambda s, r, b: (413, [("Content-Type", "text/plain")], b"too large")
                         if len(b) > 1024 * 1024 else None),
    "http.response_format": F(intercept=lambda s, r, b: (200, [("Content-Type", "text/plain")],
                                                         json.dumps(jsonrpc.result_response(
                                                             json.loads(b)["id"], {})).encode())
                              if _method(b) == "ping" else None),
    "http.keep_alive_after_stream": F(close_after=lambda r: r.method == "GET"),
    "discover.fallback": F(intercept=lambda s, r, b: (401, [("Content-Type", "text/plain")], b"Unauthorized")
                           if _method(b) == "server/discover" else None),
    "initialize.result": F(out_chunk=lambda r, d: d.replace(b'"protocolVersion":"2025-11-25"',
                                                            b'"protocolVersion":"2024-11-05"')),
    "initialize.versions": F(setup=lambda s: setattr(mcp, "SUPPORTED_VERSIONS", ("2025-11-25",))),
    "initialized.202": F(intercept=lambda s, r, b: (200, [("Content-Type", "text/plain")], b"")
                         if _method(b) == "notifications/initialized" else None),
    "session.unknown": F(intercept=lambda s, r, b: (400, [("Content-Type", "text/plain")], b"bad session")
                         if r.headers.get("mcp-session-id") not in (None,) and
                         r.headers.get("mcp-session-id") not in s.app.sessions else None),
    "session.missing": F(intercept=lambda s, r, b: (404, [("Content-Type", "text/plain")], b"no session")
                         if r.headers.get("mcp-session-id") is None
                         and _method(b) not in ("initialize", "server/discover") else None),
    "jsonrpc.ping": F(setup=lambda s: s.dispatcher.add("ping", lambda p, c: {"pong": True})),
    "jsonrpc.unknown_method": F(setup=lambda s: s.dispatcher.set_fallback(lambda p, c: None)),
    "jsonrpc.parse_error": F(intercept=lambda s, r, b: (400, [("Content-Type", "application/json")],
                                                        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
                                                        b'"message":"Invalid Request"}}')
                             if r.method == "POST" and not _is_json(b) else None),
    "jsonrpc.batch": F(intercept=lambda s, r, b: (200, [("Content-Type", "application/json")], b"[]")
                       if b.startswith(b"[") else None),
    "delete.session": F(intercept=_deleted_twice),
    "stream.get": F(out_start=lambda r, st, h: (st, [(k, v) for k, v in h if k.lower() != "cache-control"])
                    if r.method == "GET" else (st, h)),
    "stream.selection_on_open": F(setup=lambda s: setattr(s.app, "on_stream_open", None)),
    "tools.names": F(setup=_tools_list_with(lambda listed: listed.pop())),
    "tools.descriptions": F(setup=_tools_list_with(lambda listed: listed[1].update(description=""))),
    "tools.schemas": F(setup=_tools_list_with(lambda listed: listed[2]["inputSchema"].pop("additionalProperties"))),
    "tools.execution": F(setup=_tools_list_with(lambda listed: [t.update(taskSupport="forbidden") or
                                                                t.pop("execution") for t in listed])),
    "tool.get_selection": F(setup=_tool_handler("get_selection", lambda a, c: {
        "text": "x", "filePath": "/a", "fileUrl": "file:///a",
        "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "current": True})),
    "tool.get_diagnostics": F(setup=_tool_handler("get_diagnostics", lambda a, c: [{
        "uri": "file:///a", "filePath": "/a", "diagnostics": [{
            "message": "m", "severity": "error",
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}]}])),
    "tool.get_vscode_info": F(setup=_tool_handler("get_vscode_info", lambda a, c: {"version": "1", "appName": "x"})),
    "tool.update_session_name": F(setup=_tool_handler("update_session_name", lambda a, c: {"ok": True})),
    "tool.close_diff_unknown": F(setup=_tool_handler("close_diff", lambda a, c: tools.close_diff_answer(
        a["tab_name"], True))),
    "tool.unknown": F(setup=_unknown_tool_succeeds),
    "diff.close_via_tool": F(setup=_close_diff_as_button),
    "diff.same_tab": F(setup=_repeated_tab_replaces),
    "diff.accept": F(on_diff=_write_then_accept),
    **ERROR_ROW_FAULTS,
}


#: Every switch of a row: the fault named after each of its checks, and the extra ones
#: ("<check>/<how>").
SWITCHES: Dict[str, Fault] = dict([(name, FAULTS[name]) for name in ROW_OF], **EXTRA_SWITCHES)


def test_every_check_has_a_fault() -> None:
    assert sorted(FAULTS) == sorted(c.name for c in check.CHECKS)


def test_every_row_of_the_contract_names_its_checks() -> None:
    """The `check` column of PROTOCOL.md §2's table and the paragraphs of its edge
    cases name exactly the checks of `ROWS`, and each is a registered check."""
    with open(os.path.join(ROOT, "docs", "PROTOCOL.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### Errors and edge cases"):text.index("## 3. ")]
    import re
    named = set(re.findall(r"`((?:errors|framing|session|auth|http|jsonrpc|discover|delete|lock|diff|tool)"
                           r"\.[a-z_0-9]+)`", section))
    named.discard("diff.accept")  # (named there as the check that needs a person, of no row)
    assert named == set(ROW_OF), (sorted(named - set(ROW_OF)), sorted(set(ROW_OF) - named))
    registered = {c.name for c in check.CHECKS}
    assert set(ROW_OF) <= registered, sorted(set(ROW_OF) - registered)


#: The labels PROTOCOL.md gives a rule, and the kind of rule each names.
LABELS = {"the CLI needs it": check.CLI, "security": check.SECURITY, "VS Code does this": check.VSCODE,
          "we recommend this": check.RECOMMENDED}


def test_each_row_of_the_contract_says_whose_rule_it_is_as_check_grades_it() -> None:
    """The errors table and the framing table of PROTOCOL.md §2 label each row (its
    "whose rule" column), give VS Code's answer beside ours, and grade as `check` does:
    the rule each row's switch breaks is of a kind the row's label names."""
    import re
    with open(os.path.join(ROOT, "docs", "PROTOCOL.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### Errors and edge cases"):text.index("## 3. ")]
    tables = [block for block in re.findall(r"(?m)^\|.*\|\n(?:^\|.*\|\n)+", section) if block.startswith("| case |")]
    assert len(tables) == 2, tables
    seen = set()
    for table in tables:
        header, _, *rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
        assert "whose rule" in header and "VS Code's answer" in header, header
        whose, vscode, named = header.index("whose rule"), header.index("VS Code's answer"), header.index("`check`")
        for row in rows:
            kinds = {kind for label, kind in LABELS.items() if "*%s*" % label in row[whose]
                     or (label == "we recommend this" and "*we recommend" in row[whose])}
            assert kinds, row
            assert row[vscode], row
            for name in re.findall(r"`([a-z_]+\.[a-z_0-9]+)`", row[named]):
                seen.add(name)
                assert broken_rule(name) in kinds, (name, broken_rule(name), row[whose])
    assert seen <= set(ROW_OF) and len(seen) > 30


def test_checks_live_in_the_module_of_the_section_they_test() -> None:
    """One module per contract section; the report follows the contract's order."""
    modules = {"§1": "discovery", "§2": "http", "§3": "sessions", "§4": "tools", "§5": "notifications"}
    misplaced = ["%s (%s) in %s" % (c.name, c.section, c.func.__module__) for c in check.CHECKS
                 if c.func.__module__ != "ide_protocol.programs.check." + modules.get(c.section, "?")]
    assert not misplaced, misplaced
    sections = [c.section for c in check.CHECKS]
    assert sections == sorted(sections, key=lambda s: int(s[1:]))


# ------------------------------------------------------------------ running


def _prepare(server: IdeServer, folder: str) -> None:
    path = os.path.join(folder, "a.py")
    with open(path, "w") as f:
        f.write("print('hi')\nx = 1\n")
    server.set_selection(Selection(path, "print", (0, 0), (0, 5)))
    server.set_diagnostics(path, [Diagnostic("undefined name", "Error", (1, 0), (1, 1), source="test")])
    server.flush_pushes()  # debounced pushes go now (to nobody), not into a check's stream


async def _run(fault: Optional[Fault], names: Optional[List[str]] = None, with_diff: bool = False,
               timeout: float = check.DEFAULT_CHECK_TIMEOUT, broken: Optional[List[str]] = None,
               strict: bool = True, prepare: bool = True, **server_options: Any) -> List[check.Result]:
    """Run the checks `names` (all by default) against a server with `fault`, in the
    checker's order, each as `check` runs it (`--strict` unless `strict` is False: every
    broken rule a FAIL); those in `broken` with `timeout`, the others with the checker's
    default (all with `timeout` when `broken` is None). `prepare`: the IDE has a file
    open, a selection and a diagnostic (False: nothing)."""
    base = tempfile.mkdtemp(prefix="ide-check-test-")
    folder = os.path.join(base, "project")
    os.mkdir(folder)
    on_diff = getattr(fault, "_on_diff", None)
    if on_diff is None and with_diff:
        on_diff = lambda diff: True  # the person who accepts
    saved = mcp.SUPPORTED_VERSIONS
    server = FaultyServer(folder, os.path.join(base, "ide"), fault, on_diff=on_diff, **server_options)
    await server.start()
    try:
        if prepare:
            _prepare(server, folder)
        if fault is not None and hasattr(fault, "_lock"):
            _rewrite_lock(server, fault._lock)
        if fault is not None and hasattr(fault, "_chmod"):
            os.chmod(server.lock_path, fault._chmod)
        if fault is not None and hasattr(fault, "_dir_chmod"):  # (as if the server had made it so)
            os.chmod(os.path.dirname(server.lock_path), fault._dir_chmod)
        lock, raw = check.load_lock(server.lock_path)

        async def change_folders(folders: List[str]) -> None:  # (this test started the server)
            server.set_workspace_folders(folders)

        async def run_all() -> List[check.Result]:
            if broken is None:
                return await check.run_checks(lock, raw, names=names, with_diff=with_diff, timeout=timeout,
                                              prompt=lambda text: None, change_folders=change_folders, strict=strict)
            results: List[check.Result] = []
            for c in check.CHECKS:  # (one at a time, in the order run_checks keeps)
                if names is None or c.name in names:
                    results += await check.run_checks(
                        lock, raw, names=[c.name], with_diff=with_diff, prompt=lambda text: None,
                        timeout=timeout if c.name in broken else check.DEFAULT_CHECK_TIMEOUT,
                        change_folders=change_folders, strict=strict)
            return results
        return await asyncio.wait_for(run_all(), 240)
    finally:
        mcp.SUPPORTED_VERSIONS = saved
        await server.stop()


def test_all_checks_pass_against_our_server() -> None:
    """Every rule holds, VS Code's and our recommendations too (`_run` is strict)."""
    results = asyncio.run(_run(None))
    # diff.accept needs a person; lock.permissions and lock.directory_mode are for POSIX modes only.
    may_skip = ("diff.accept", "lock.permissions", "lock.directory_mode") if platforms.WINDOWS else ("diff.accept",)
    bad = [r.line() for r in results if r.status != check.PASS and r.name not in may_skip]
    assert not bad, "\n".join(bad)
    assert [r.status for r in results if r.name == "diff.accept"] == [check.SKIP]
    assert len(results) == len(check.CHECKS)


def test_the_diff_check_passes_when_a_person_accepts() -> None:
    results = asyncio.run(_run(None, ["diff.accept"], with_diff=True))
    assert [(r.name, r.status) for r in results] == [("diff.accept", check.PASS)], results[0].line()


def broken_rule(switch: str) -> str:
    """Whose rule the fault `switch` breaks: the rule of the check it is named after,
    unless `BROKEN_RULE` says it breaks a lesser rule that check also tests."""
    return BROKEN_RULE.get(switch, check.get_check(switch.split("/")[0]).rule)


@pytest.mark.parametrize("name", [c.name for c in check.CHECKS if c.name not in ROW_OF] + sorted(EXTRA_FAULTS))
def test_each_check_fails_against_its_fault(name: str) -> None:
    """Under --strict each fault FAILs its check, and the report says whose rule broke
    (without --strict that rule's grade: `test_a_broken_rule_is_graded_by_whose_it_is`)."""
    # (The checks of the errors and edge cases rows are proved more strictly below.)
    if name == "lock.permissions":
        platforms.skip_on_windows("the check is for POSIX file modes; Windows locks have ACLs")
    results = asyncio.run(_run(EXTRA_FAULTS[name] if name in EXTRA_FAULTS else FAULTS[name], [name.split("/")[0]],
                               with_diff=True, timeout=FAULT_TIMEOUT))
    assert len(results) == 1
    result = results[0]
    assert result.status == check.FAIL, result.line()
    assert result.rule == broken_rule(name), result.line()
    assert result.section.startswith("§")
    assert result.message


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_a_broken_row_fails_exactly_its_checks(switch: str) -> None:
    """A server breaking one row of PROTOCOL.md §2 "Errors and edge cases" fails the
    check the switch is named after (or, for a WARN-only check, warns), perhaps other
    checks of the same row, and no check of another row."""
    name = switch.split("/")[0]
    if name == "lock.directory_mode":
        platforms.skip_on_windows("the check is for POSIX directory modes")
    if switch == "lock.folder_change/open_to_others":
        platforms.skip_on_windows("the check of the rewritten lock's mode is for POSIX file modes")
    # (A client gone is taken for gone after 0.1 s here, not serve's 1 s: the vanished
    # client's check then waits less in each of these runs; its bound stays the contract's.
    # The checks of the broken row wait FAULT_TIMEOUT for what the fault withholds.)
    row = [n for n in ROW_OF if ROW_OF[n] == ROW_OF[name]]
    results = asyncio.run(_run(SWITCHES[switch], sorted(ROW_OF), timeout=FAULT_TIMEOUT, broken=row,
                               orphan_timeout=0.1))
    assert len(results) == len(ROW_OF)
    # On Windows the checks of POSIX modes skip whatever the server does.
    posix_modes = ("lock.permissions", "lock.directory_mode") if platforms.WINDOWS else ()
    broken = {r.name: r for r in results if r.status != check.PASS
              and not (r.status == check.SKIP and r.name in posix_modes)}
    lines = "\n".join(r.line() for r in broken.values())
    assert name in broken, lines
    assert broken[name].status == (check.WARN if name in WARN_ONLY else check.FAIL), lines
    assert broken[name].rule == broken_rule(switch), lines
    assert {ROW_OF[n] for n in broken} == {ROW_OF[name]}, lines


def test_json_report_and_exit_status(tmp_path: Any) -> None:
    """The command line: one line per check, --json, exit 1 on a FAIL: a broken rule of
    the CLI's fails; one of VS Code's is a DIFF and exits 0, unless --strict."""

    async def scenario() -> Dict[str, Tuple[int, str]]:
        folder = str(tmp_path / "project")
        os.mkdir(folder)
        both = F(setup=lambda s: FAULTS["jsonrpc.ping"].setup(s),
                 intercept=FAULTS["initialized.202"]._intercept)  # type: ignore[attr-defined]
        server = FaultyServer(folder, str(tmp_path / "ide"), both)
        await server.start()
        try:
            _prepare(server, folder)
            loop = asyncio.get_event_loop()
            env = dict(os.environ, PYTHONPATH=ROOT)

            def run(args: List[str]) -> Tuple[int, str]:
                p = subprocess.run([sys.executable, "-m", "ide_protocol", "check"] + args, cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                                   encoding="utf-8")  # the checker writes UTF-8, whatever the locale
                return p.returncode, p.stdout
            lock = ["--lock", server.lock_path]
            runs = {
                "cli": ["--only", "initialized.202", "--only", "jsonrpc.ping", "--only", "tools.names"],
                "vscode": ["--only", "jsonrpc.ping", "--only", "tools.names"],
                "strict": ["--only", "jsonrpc.ping", "--only", "tools.names", "--strict"],
            }
            out = {}
            for name, args in runs.items():
                out[name] = await loop.run_in_executor(None, run, lock + args)
            out["json"] = await loop.run_in_executor(None, run, ["--lock-dir", str(tmp_path / "ide"), folder,
                                                                  "--json", "--only", "initialized.202",
                                                                  "--only", "jsonrpc.ping", "--only", "diff.accept"])
            return out
        finally:
            await server.stop()

    out = asyncio.run(scenario())
    rc, text = out["cli"]
    assert rc == 1, text
    assert "FAIL   initialized.202" in text and "DIFF   jsonrpc.ping" in text and "PASS   tools.names" in text
    assert "(PROTOCOL.md §3)" in text
    assert "3 checks: 1 passed, 1 failed (1 the CLI needs it), 1 differ from VS Code, 0 advice" in text, text
    rc, text = out["vscode"]
    assert rc == 0, text
    assert "2 checks: 1 passed, 0 failed, 1 differ from VS Code, 0 advice, 0 warnings, 0 skipped" in text, text
    assert "DIFF: VS Code's server does otherwise" in text  # (the legend)
    rc, text = out["strict"]
    assert rc == 1 and "FAIL   jsonrpc.ping" in text, text
    assert "1 failed (1 VS Code does this)" in text, text
    rc, text = out["json"]
    report = json.loads(text)
    assert rc == 1
    by_name = {r["name"]: r for r in report["results"]}
    assert (by_name["initialized.202"]["status"], by_name["initialized.202"]["rule"]) == ("FAIL", "cli")
    assert (by_name["jsonrpc.ping"]["status"], by_name["jsonrpc.ping"]["rule"]) == ("DIFF", "vscode")
    assert by_name["diff.accept"]["status"] == "SKIP"
    assert report["summary"]["FAIL"] == 1 and report["summary"]["DIFF"] == 1
    assert report["failed_by_rule"] == {"cli": 1, "security": 0, "vscode": 0, "advice": 0}
    assert report["strict"] is False


@pytest.mark.parametrize("limit, status", [(10 * 1024 * 1024, check.PASS), (10 * 1000 * 1000, check.PASS),
                                           (10 * 1000 * 1000 - 1, check.FAIL)])
def test_the_large_body_is_the_documented_10_mb(limit: int, status: str) -> None:
    """`http.large_body` sends 10 MB, envelope included: a server whose limit is VS
    Code's (10 MiB, `express.json({limit: '10mb'})`) or exactly 10 MB passes (it sent
    10 MiB of padding plus the envelope, over both)."""
    results = asyncio.run(_run(F(setup=lambda s: setattr(s.listener, "max_body", limit)), ["http.large_body"]))
    assert [r.status for r in results] == [status], results[0].line()


def test_nothing_to_inspect_is_a_skip() -> None:
    """An IDE with no selection and no diagnostics: the checks of their shapes have
    nothing to look at, and say so (they passed)."""
    results = asyncio.run(_run(None, ["tool.get_selection", "tool.get_diagnostics", "stream.selection_on_open"],
                               prepare=False))
    assert [r.status for r in results] == [check.SKIP] * 3, "\n".join(r.line() for r in results)
    assert "select some text" in results[0].message and "open a file with a problem" in results[1].message


def _as_vscode_conflict(request: http11.Request, body: bytes, status: int, headers: Any, payload: bytes) -> Any:
    if status == 409 and b'"method"' not in payload:
        return 409, [("Content-Type", "application/json")], (b'{"jsonrpc":"2.0","error":{"code":-32000,"message":'
                                                              b'"Conflict: A connection for this session already '
                                                              b'exists"},"id":null}')
    return status, headers, payload


def _as_html(request: http11.Request, body: bytes, status: int, headers: Any, payload: bytes) -> Any:
    if status == 404:
        return 404, [("Content-Type", "text/html; charset=utf-8")], b"<pre>Cannot POST /not-mcp</pre>"
    return status, headers, payload


@pytest.mark.parametrize("name, fault", [("session.initialize_no_steal", F(out_send=_as_vscode_conflict)),
                                         ("http.path", F(out_send=_as_html))], ids=["409", "404"])
def test_the_lenient_checks_hold_to_the_table(name: str, fault: Fault) -> None:
    """A 409 with -32000 and id null, a 404 in HTML (VS Code's answers) passed these
    checks while the table's `errors.*` checks failed them: now both follow the table,
    as advice."""
    results = asyncio.run(_run(fault, [name], strict=False))
    assert [r.status for r in results] == [check.ADVICE], results[0].line()


def _made_check(rule: str, raises: Any, situation: Optional[str] = None) -> check.Check:
    """A check (not registered) whose run raises `raises` (None: passes)."""
    async def func(ctx: check.CheckContext) -> Optional[str]:
        if raises is not None:
            raise raises
        return None
    return check.Check("made.check", "§2", "a made check", func, False, rule, situation)


@pytest.mark.parametrize("rule, raises, strict, expected, expected_rule", [
    (check.CLI, check.Fail("x"), False, check.FAIL, check.CLI),
    (check.SECURITY, check.Fail("x"), False, check.FAIL, check.SECURITY),
    (check.VSCODE, check.Fail("x"), False, check.DIFF, check.VSCODE),
    (check.RECOMMENDED, check.Fail("x"), False, check.ADVICE, check.RECOMMENDED),
    (check.CLI, check.Differs("x"), False, check.DIFF, check.VSCODE),
    (check.CLI, check.Advise("x"), False, check.ADVICE, check.RECOMMENDED),
    (check.RECOMMENDED, check.Fail("x", rule=check.SECURITY), False, check.FAIL, check.SECURITY),
    (check.RECOMMENDED, asyncio.TimeoutError(), False, check.ADVICE, check.RECOMMENDED),
    (check.VSCODE, OSError("gone"), False, check.DIFF, check.VSCODE),
    (check.VSCODE, check.Fail("x"), True, check.FAIL, check.VSCODE),
    (check.RECOMMENDED, check.Advise("x"), True, check.FAIL, check.RECOMMENDED),
    (check.CLI, check.Warn("x"), True, check.WARN, check.CLI),
    (check.CLI, check.Skip("x"), True, check.SKIP, check.CLI),
    (check.RECOMMENDED, None, True, check.PASS, check.RECOMMENDED),
])
def test_a_broken_rule_is_graded_by_whose_it_is(rule: str, raises: Any, strict: bool, expected: str,
                                                expected_rule: str) -> None:
    """FAIL for the CLI's rules and security's; DIFF for VS Code's; ADVICE for ours;
    --strict makes every broken rule a FAIL; WARN and SKIP are no broken rule."""
    lock = lockfile.LockInfo("/nonexistent/mcp.sock", "unix", {}, os.getpid(), "x", 0, [], False)
    result = asyncio.run(check.run_check(_made_check(rule, raises), lock, strict=strict, timeout=1))
    assert (result.status, result.rule) == (expected, expected_rule), result.line()


def test_a_situational_rule_says_its_situation() -> None:
    lock = lockfile.LockInfo("/nonexistent/mcp.sock", "unix", {}, os.getpid(), "x", 0, [], False)
    made = _made_check(check.RECOMMENDED, check.Fail("refused"), situation="when a CLI resumes its session")
    result = asyncio.run(check.run_check(made, lock))
    assert result.status == check.ADVICE
    assert "[it matters to the CLI only when a CLI resumes its session]" in result.line()
    passed = asyncio.run(check.run_check(_made_check(check.RECOMMENDED, None, "when x"), lock))
    assert "matters" not in passed.line()


def test_every_check_says_whose_rule_it_tests() -> None:
    """Each check is labelled (the registry refuses a check without one), and the labels
    are spread as the contract's are: the CLI's and security's FAIL, the rest do not."""
    assert all(c.rule in check.RULES for c in check.CHECKS)
    kinds = {c.rule for c in check.CHECKS}
    assert kinds == set(check.RULES), kinds
    with pytest.raises(ValueError):
        check.Check("x", "§2", "x", _made_check(check.CLI, None).func, False, "nobody's")


@pytest.mark.skipif(platforms.WINDOWS, reason="expects lock.permissions to pass (POSIX modes); on Windows "
                    "tests/test_programs_piped.py runs check against serve over a pipe")
def test_all_checks_pass_against_the_serve_command(tmp_path: Any) -> None:
    """`serve` passes every check, --strict: every rule of PROTOCOL.md holds, VS Code's
    and our recommendations too."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.py").write_text("print('hi')\nx = 1\n")
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=ROOT, COPILOT_HOME=str(home))
    proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", str(folder), "--color", "never"],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        lock_dir = str(home / "ide")
        deadline = time.monotonic() + 30
        locks: List[Any] = []
        while time.monotonic() < deadline and not locks:
            locks = [info for _, info in lockfile.read_locks(lock_dir) if isinstance(info, lockfile.LockInfo)]
            if not locks:
                assert proc.poll() is None, "serve exited early"
                time.sleep(0.05)
        assert locks, "serve wrote no lock under $COPILOT_HOME/ide"
        assert proc.stdin is not None
        proc.stdin.write(b"select a.py 1:1-1:6\ndiag a.py 2 error undefined name\n")
        proc.stdin.flush()

        async def checks() -> List[check.Result]:
            lock, raw = check.load_lock(locks[0].path)
            # The commands above travel through a pipe: wait until the server has them.
            from ide_protocol.client import IdeClient
            async with IdeClient(lock, timeout=10) as client:
                for _ in range(200):
                    sel, diags = await client.get_selection(), await client.get_diagnostics()
                    if sel and sel.get("current") and diags:
                        break
                    await asyncio.sleep(0.05)
            return await check.run_checks(lock, raw, prompt=lambda text: None, strict=True)

        results = asyncio.run(asyncio.wait_for(checks(), 120))
        # serve cannot be made to change its folders from outside: that check says so.
        bad = [r.line() for r in results if r.status not in (check.PASS,)
               and r.name not in ("diff.accept", "lock.folder_change")]
        assert not bad, "\n".join(bad)
        skipped = [r for r in results if r.name == "lock.folder_change"]
        assert [r.status for r in skipped] == [check.SKIP] and "cannot make an IDE change its folders" \
            in skipped[0].message, skipped[0].line()
    finally:
        if proc.stdin is not None:
            try:
                proc.stdin.write(b"quit\n")
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
