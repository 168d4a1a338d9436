"""`IdeClient`: one MCP session with an IDE, run as Copilot CLI runs it.

The high layer of the client: the handshake (`server/discover`, `initialize`,
`notifications/initialized`, PROTOCOL.md §3), requests with the CLI's timeout and its
`notifications/cancelled`, the six tools with typed helpers (§4), the GET stream and the
pushes it carries (§5), DELETE at the end, and a small pool of keep-alive connections
(§2: the CLI pools them too). Every byte goes through `connection.ClientConnection`.

Tasks: the GET stream's follower (and the coroutines an `on_push` callback returns)
belong to the client's `pushes.PushFeed`; `close()` ends the session, waits briefly for
the stream to end, then cancels and awaits them and closes every connection.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from ..common import lock_rules, tools
from ..common.lockfile import LockInfo
from ..wire import jsonrpc
from ..wire.json_text import json_type
from .connection import (DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, ClientConnection, ClientResponse, WireHook,
                         deadline_after, time_left)
from .discovery import discover
from .errors import ClientError, HttpStatusError, IdeTimeout, ProtocolViolation, ServerGone
from .identity import (CLIENT_NAME, CLIENT_VERSION, DRAFT_PROTOCOL_VERSION, PROTOCOL_VERSION, STREAM_ACCEPT,
                       cli_headers)
from .pushes import END, Push, PushCallback, PushFeed, PushQueue

__all__ = ["IdeClient"]


class IdeClient:
    """An `/ide` client session, connected as Copilot CLI connects (PROTOCOL.md §2–5).

        client = IdeClient.discover("/home/me/project")
        async with client:                     # handshake + GET stream
            sel = await client.get_selection()
            async for push in client.pushes():
                print(push.method, push.params)

    `timeout` bounds ordinary requests (the CLI's 60 s); `open_diff` waits without limit
    unless given one. Pushes go to `on_push` and to every `pushes()` iterator.
    """

    def __init__(self, lock: LockInfo, *, session_id: Optional[str] = None,
                 client_name: str = CLIENT_NAME, client_version: str = CLIENT_VERSION,
                 protocol_version: str = PROTOCOL_VERSION,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                 pool_size: int = 4,
                 on_push: Optional[PushCallback] = None,
                 on_wire: Optional[WireHook] = None,
                 pid: Optional[int] = None, parent_pid: Optional[int] = None) -> None:
        self.lock = lock
        #: X-Copilot-Session-Id: the CLI's own session UUID (PROTOCOL.md §2).
        if not session_id:
            import uuid  # (here: slow to import, and serve, bridge, relay load this module but seldom open a session)
            session_id = str(uuid.uuid4())
        self.client_session_id = session_id
        self.client_name = client_name
        self.client_version = client_version
        self.protocol_version = protocol_version
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.pool_size = pool_size
        self.on_wire = on_wire
        self.pid = pid
        self.parent_pid = parent_pid
        self.session_id: Optional[str] = None       # mcp-session-id from initialize
        self.server_info: Dict[str, Any] = {}
        self.initialize_result: Dict[str, Any] = {}
        self.discover_error: Optional[Dict[str, Any]] = None
        self.tools: Optional[List[Dict[str, Any]]] = None
        self.connections_opened = 0
        self._idle: List[ClientConnection] = []
        self._all: List[ClientConnection] = []
        self._ids = itertools.count(0)          # request ids restart at 0 per session (§3)
        self._progress = itertools.count(0)
        self._feed = PushFeed(on_push)
        self._closed = False

    @property
    def on_push(self) -> Optional[PushCallback]:
        """Called with every push (a coroutine it returns is run, owned by the client)."""
        return self._feed.on_push

    @on_push.setter
    def on_push(self, callback: Optional[PushCallback]) -> None:
        self._feed.on_push = callback

    # ------------------------------------------------------------------ discovery

    @classmethod
    def discover(cls, folder: Optional[str] = None, lock_dir: Optional[str] = None, **kwargs: Any) -> "IdeClient":
        """A client for the IDE whose lock lists `folder` (see the module function)."""
        return cls(discover(folder, lock_dir), **kwargs)

    @classmethod
    def from_lock_file(cls, path: str, **kwargs: Any) -> "IdeClient":
        """A client for the server described by one lock file, read and validated by
        the CLI's rules (`lock_rules.read_lock`: a regular file of bounded size, never
        a FIFO or a device; any JSON). Raises `LockFileError` (a `ValueError`)."""
        raw, problems = lock_rules.read_lock(path, attempts=1)
        if problems:
            raise problems[0]
        return cls(LockInfo.from_json(raw, path), **kwargs)

    # ----------------------------------------------------------------- connections

    async def _acquire(self) -> Tuple[ClientConnection, bool]:
        """An idle pooled connection (True) or a fresh one (False)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                return conn, True
            await conn.aclose()  # (the server may have reset it while it waited)
        conn = await ClientConnection.open(self.lock.socket_path, self.connect_timeout, self.on_wire)
        self.connections_opened += 1
        self._all.append(conn)
        self._all = [c for c in self._all if not c.closed or c is conn]
        return conn, False

    def _release(self, conn: ClientConnection) -> None:
        if conn.reusable and not self._closed and len(self._idle) < self.pool_size:
            self._idle.append(conn)
        elif not conn.busy:
            conn.close()

    async def _exchange(self, method: str, headers: List[Tuple[str, str]], body: Optional[bytes],
                        timeout: Optional[float]) -> ClientResponse:
        """Send on a pooled connection; a pooled one the server closed meanwhile is
        retried once on a fresh connection (it failed before any answer arrived)."""
        deadline = deadline_after(timeout)
        conn, reused = await self._acquire()
        try:
            return await conn.request(method, "/mcp", headers, body, timeout=time_left(deadline))
        except ServerGone:
            conn.close()
            if not reused:
                raise
        except BaseException:
            conn.close()  # (cancelled, timed out: its state is unknown)
            raise
        conn, _ = await self._acquire()
        try:
            return await conn.request(method, "/mcp", headers, body, timeout=time_left(deadline))
        except BaseException:
            conn.close()
            raise

    def headers(self, method: str = "POST", with_session: bool = True) -> List[Tuple[str, str]]:
        """The headers the CLI sends for `method` (PROTOCOL.md §2; order as captured)."""
        sid = self.session_id if with_session else None
        if method == "POST":
            return cli_headers(self.lock.headers, self.client_session_id, mcp_session_id=sid,
                               pid=self.pid, parent_pid=self.parent_pid)
        if method == "GET":
            return cli_headers(self.lock.headers, self.client_session_id, accept=STREAM_ACCEPT, content_type=None,
                               mcp_session_id=sid, pid=self.pid, parent_pid=self.parent_pid)
        return cli_headers(self.lock.headers, self.client_session_id, accept=None, content_type=None,
                           mcp_session_id=sid, pid=self.pid, parent_pid=self.parent_pid)

    # -------------------------------------------------------------------- JSON-RPC

    async def post(self, message: Dict[str, Any], *, with_session: bool = True,
                   timeout: Optional[float] = None) -> ClientResponse:
        """POST one JSON-RPC message; returns the response with its head read."""
        timeout = self.timeout if timeout is None else timeout
        return await self._exchange("POST", self.headers("POST", with_session), jsonrpc.dumps(message), timeout)

    async def _await_answer(self, response: ClientResponse, request_id: Any, deadline: Optional[float]) -> Any:
        """Read a POST's body up to the answer to `request_id` by `deadline` (loop
        time; notifications on the way do not extend it); they are delivered as
        pushes. Returns the whole response object."""
        answer = None
        try:
            while True:
                message = await response.next_message(time_left(deadline))
                if message is None:
                    break
                if jsonrpc.answers(message, request_id):
                    answer = message
                    # The answer is in; the end of the body must follow promptly.
                    if deadline is None:
                        deadline = deadline_after(DEFAULT_TIMEOUT)
                elif isinstance(message, dict) and "method" in message and "id" not in message:
                    self._feed.deliver(message, response.last_message_size)
            return answer
        finally:
            if response.complete:
                self._release(response.conn)
            else:
                response.conn.close()

    async def request(self, method: str, params: Any = None, *, timeout: Optional[float] = -1.0,
                      with_session: bool = True) -> Any:
        """Send a request and return its `result`; raises `JsonRpcError` for an error
        answer, `HttpStatusError` for an HTTP refusal. `timeout=None`: wait forever;
        default: the client's. On timeout, `notifications/cancelled` is sent as the
        CLI does (PROTOCOL.md §3) and `IdeTimeout` raised."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        request_id = next(self._ids)
        message = jsonrpc.request(request_id, method, params)
        deadline = deadline_after(timeout)  # the whole request: head, body, answer
        try:
            response = await self._exchange("POST", self.headers("POST", with_session), jsonrpc.dumps(message),
                                            time_left(deadline))
            if response.status != 200:
                body = await self._drain(response, time_left(deadline))
                error = _json_error(body)
                if error is not None:
                    raise error
                raise HttpStatusError(response.status, response.reason, response.headers, body, method)
            answer = await self._await_answer(response, request_id, deadline)
        except IdeTimeout as exc:
            await self._cancel_quietly(request_id, "timed out after %s s" % timeout)
            raise IdeTimeout("%s got no complete answer within %s s: %s" % (method, timeout, exc)) from None
        if answer is None:
            raise ProtocolViolation("the %d response to %s (id %r) carried no answer: %r"
                                    % (response.status, method, request_id, bytes(response.body)[:300]))
        if "error" in answer:
            raise jsonrpc.JsonRpcError.from_dict(answer["error"])
        return answer.get("result")

    async def _drain(self, response: ClientResponse, timeout: Optional[float] = -1.0) -> bytes:
        try:
            return await response.read_body(self.timeout if timeout is not None and timeout < 0 else timeout)
        finally:
            if response.complete:
                self._release(response.conn)
            else:
                response.conn.close()

    async def _cancel_quietly(self, request_id: Any, reason: str) -> None:
        try:
            await asyncio.wait_for(self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason}),
                                   5)
        except (ClientError, asyncio.TimeoutError, jsonrpc.JsonRpcError, OSError):
            pass

    async def notify(self, method: str, params: Any = None, *, expect_status: int = 202) -> ClientResponse:
        """Send a notification; the server must answer `202` (PROTOCOL.md §2)."""
        message = jsonrpc.notification(method, params)
        response = await self._exchange("POST", self.headers("POST"), jsonrpc.dumps(message), self.timeout)
        body = await self._drain(response)
        if response.status != expect_status:
            raise HttpStatusError(response.status, response.reason, response.headers, body,
                                  "%s (expected %d)" % (method, expect_status))
        return response

    # ------------------------------------------------------------------- handshake

    async def connect(self, *, follow_stream: bool = True, list_tools: bool = True) -> "IdeClient":
        """The CLI's handshake (PROTOCOL.md §3): `server/discover` (an error is the
        expected answer), `initialize`, `notifications/initialized` (202), then the GET
        stream (its head is awaited, so pushes after `connect()` are not missed) and
        `tools/list`."""
        self._ids = itertools.count(0)
        self._progress = itertools.count(0)
        self.session_id = None
        self._feed.reset()
        discover_params = {"_meta": {
            "io.modelcontextprotocol/protocolVersion": DRAFT_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": self.client_name, "version": self.client_version},
            "io.modelcontextprotocol/clientCapabilities": {}}}
        try:
            await self.request("server/discover", discover_params, with_session=False)
        except jsonrpc.JsonRpcError as exc:
            self.discover_error = exc.to_dict()  # expected: fall back to initialize at once
        except HttpStatusError as exc:
            if exc.status == 401:
                raise  # the CLI aborts the attempt on 401 (§3)
            self.discover_error = {"status": exc.status}
        init_id = next(self._ids)
        message = jsonrpc.request(init_id, "initialize", {
            "protocolVersion": self.protocol_version, "capabilities": {},
            "clientInfo": {"name": self.client_name, "version": self.client_version}})
        deadline = deadline_after(self.timeout)  # the whole request: head, body, answer
        response = await self.post(message, with_session=False, timeout=time_left(deadline))
        if response.status != 200:
            body = await self._drain(response, time_left(deadline))
            raise HttpStatusError(response.status, response.reason, response.headers, body, "initialize")
        session_id = response.headers.get("mcp-session-id")
        answer = await self._await_answer(response, init_id, deadline)
        if answer is None or "error" in answer:
            if answer is not None:
                raise jsonrpc.JsonRpcError.from_dict(answer["error"])
            raise ProtocolViolation("initialize answered without a result")
        if not session_id:
            raise ProtocolViolation("initialize answered without an mcp-session-id header (PROTOCOL.md §3)")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise ProtocolViolation("initialize answered with a result that is not an object: %s"
                                    % json_type(result))
        self.session_id = session_id
        self.initialize_result = result
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        await self.notify("notifications/initialized")
        if follow_stream:
            await self.open_stream()
        if list_tools:
            await self.list_tools()
        return self

    async def open_stream(self) -> None:
        """Open the GET stream (PROTOCOL.md §2) and follow it in a background task."""
        response = await self._exchange("GET", self.headers("GET"), None, self.timeout)
        if response.status != 200 or not response.is_sse:
            body = await self._drain(response)
            raise HttpStatusError(response.status, response.reason, response.headers, body, "GET stream")
        self._feed.follow(response, self._release)

    # ---------------------------------------------------------------------- pushes

    END = END  # what a `subscribe()` queue receives when the stream has ended

    @property
    def stream_ended(self) -> bool:
        """The server ended the GET stream normally."""
        return self._feed.ended

    @property
    def stream_error(self) -> Optional[BaseException]:
        """What ended the GET stream abnormally (`ServerGone`, ...), if anything."""
        return self._feed.error

    def pushes(self, timeout: Optional[float] = None) -> AsyncIterator[Push]:
        """Pushes from now on, until the stream ends (normal end: the iteration stops;
        the server vanishing: `ServerGone`). `timeout`: the longest wait for one push.
        Pushes that came before the iteration started are not replayed: to catch the
        selection sent when the stream opens (§5), `subscribe()` before `connect()`."""
        return self._feed.pushes(timeout)

    def subscribe(self) -> "PushQueue":
        """A queue receiving every later push, then the end marker `IdeClient.END`.
        It is bounded (`PushQueue`): a subscriber that stops reading loses its oldest
        pushes (counted in `dropped`), never the client's memory."""
        return self._feed.subscribe()

    async def wait_push(self, method: Optional[str] = None, timeout: Optional[float] = -1.0,
                        queue: Optional[PushQueue] = None) -> Push:
        """The next push (of `method`, when given). Subscribe first (`subscribe()`) to
        be sure to catch a push that the next action causes."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        return await self._feed.wait_push(method, timeout, queue)

    async def wait_stream_end(self, timeout: Optional[float] = -1.0) -> None:
        """Until the GET stream ends; raises its error if it failed."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        if not await self._feed.wait_end(timeout):
            raise IdeTimeout("the GET stream did not end within %s s" % timeout)
        self._feed.raise_error()

    # ------------------------------------------------------------------------ tools

    async def list_tools(self) -> List[Dict[str, Any]]:
        result = await self.request("tools/list", {"_meta": {"progressToken": next(self._progress)}})
        listed = result.get("tools") if isinstance(result, dict) else None
        # Only tools shaped as the spec says (objects) are kept: a server's junk is not
        # handed on to code that reads `tool["name"]`.
        self.tools = [tool for tool in listed if isinstance(tool, dict)] if isinstance(listed, list) else []
        return self.tools

    async def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None, *,
                        timeout: Optional[float] = -1.0) -> Dict[str, Any]:
        """`tools/call`; returns the raw result (`content`, maybe `isError`)."""
        params = {"_meta": {"progressToken": next(self._progress)}, "name": name, "arguments": arguments or {}}
        return await self.request("tools/call", params, timeout=timeout)

    async def call_tool_json(self, name: str, arguments: Optional[Dict[str, Any]] = None, *,
                             timeout: Optional[float] = -1.0) -> Any:
        """`tools/call` and decode the JSON of its text (`tools.ToolError` on isError)."""
        return tools.parse_text_result(await self.call_tool(name, arguments, timeout=timeout))

    async def get_selection(self) -> Optional[Dict[str, Any]]:
        """The editor's selection (`current` false when cached), None when there is none."""
        return await self.call_tool_json("get_selection")

    async def get_diagnostics(self, uri: Optional[str] = None) -> List[Dict[str, Any]]:
        return await self.call_tool_json("get_diagnostics", {"uri": uri} if uri else {})

    async def get_vscode_info(self) -> Dict[str, Any]:
        return await self.call_tool_json("get_vscode_info")

    async def update_session_name(self, name: str) -> Dict[str, Any]:
        return await self.call_tool_json("update_session_name", {"name": name})

    async def open_diff(self, original_file_path: str, new_file_contents: str, tab_name: str, *,
                        timeout: Optional[float] = None) -> Dict[str, Any]:
        """Propose an edit and wait for the user's decision (no time limit by default,
        as in the CLI, PROTOCOL.md §4). The IDE does not write the file: on `SAVED` the
        caller writes `new_file_contents` itself."""
        return await self.call_tool_json("open_diff", {"original_file_path": original_file_path,
                                                       "new_file_contents": new_file_contents,
                                                       "tab_name": tab_name}, timeout=timeout)

    async def close_diff(self, tab_name: str) -> Dict[str, Any]:
        return await self.call_tool_json("close_diff", {"tab_name": tab_name})

    async def ping(self) -> Any:
        return await self.request("ping")

    # ---------------------------------------------------------------------- the end

    async def delete(self) -> int:
        """DELETE the session (PROTOCOL.md §2); returns the status (200, or 404 when it
        was already gone)."""
        response = await self._exchange("DELETE", self.headers("DELETE"), None, self.timeout)
        await self._drain(response)
        return response.status

    async def close(self) -> None:
        """DELETE the session, let the GET stream end, close every connection."""
        if self._closed:
            return
        try:
            if self.session_id is not None:
                try:
                    await self.delete()
                except (ClientError, OSError):
                    pass
                await self._feed.wait_end(5)  # the server ends the stream of a deleted session
        finally:
            self._closed = True
            await self._feed.close()
            conns, self._all, self._idle = self._all + self._idle, [], []
            for conn in conns:
                conn.close()  # all closed at once, even if this close is cancelled in the wait below
            await asyncio.gather(*(conn.aclose() for conn in conns))

    async def __aenter__(self) -> "IdeClient":
        try:
            return await self.connect()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _json_error(body: bytes) -> Optional[jsonrpc.JsonRpcError]:
    """A JSON-RPC error carried by a non-200 body (e.g. `404` + `-32001`), if any."""
    try:
        obj = jsonrpc.loads(body)
    except jsonrpc.JsonRpcError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        return jsonrpc.JsonRpcError.from_dict(obj["error"])
    return None
