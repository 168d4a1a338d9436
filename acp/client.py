"""The ACP client API: the conversation of ACP.md §3 over an `AgentConnection`, the
routing of `session/update` to `Session` objects (§2, §4), and the client-side handlers
of §5 (permissions, fs, terminals) wired into the shared `rpc.Dispatcher`.

    async with Client("copilot --acp --stdio", permission="allow") as client:
        await client.initialize()
        session = await client.new_session("/path/to/project")
        turn = session.prompt("Say hello")
        async for update in turn: ...
        result = await turn
"""
from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import os
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from ._core import __version__, jsonrpc, ndjson, rpc
from . import permissions as _permissions
from .connection import (DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, MAX_UNSENT, USE_DEFAULT,
                         AgentConnection, Timeout)
from .endpoints import DEFAULT_AGENT, Argv, parse_address
from . import auth, elicitation
from .elicitation import ElicitationRequest
from .errors import AcpError, LoginFailed, LoginRefused, NotAdvertised, ProtocolVersionError
from .fs import FileSystem, fixed_roots, session_folder
from .session import PromptInput, Session, Turn, Update
from .terminal import TerminalPolicy, Terminals, allow_terminals, refuse_terminals

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({PROTOCOL_VERSION})  # what an `initialize` answer may name
CLIENT_INFO = {"name": "acp-python", "title": "ACP client (Python)", "version": __version__}
MAX_EARLY_SESSIONS = 32  # session ids whose updates we hold before their session exists
MAX_EARLY_UPDATES = 1000
MAX_SESSION_PAGES = 10000  # pages of session/list followed at most
#: What the agent may ask of the client only as requests (ACP.md §2, §5): sent without an
#: id, such a message is dropped, never handled inside the reading (its handler may wait).
REQUEST_METHODS = frozenset({"session/request_permission", "elicitation/create", "fs/read_text_file",
                             "fs/write_text_file",
                             "terminal/create", "terminal/output", "terminal/wait_for_exit",
                             "terminal/kill", "terminal/release"})

#: The notification by which either side gives up on a request (ACP's cancellation):
#: sent when we give up on one, honoured (the handler cancelled, `-32800`) when received.
CANCEL_REQUEST = "$/cancel_request"

Handler = Callable[[Any, Any], Any]
UpdateListener = Callable[[str, Update], None]


def _terminal_policy(spec: Union[bool, str, TerminalPolicy, None]) -> TerminalPolicy:
    if spec is True or spec == "allow":
        return allow_terminals
    if spec is False or spec is None or spec == "reject":
        return refuse_terminals
    if spec == "ask":
        from .askers import consent_on_stdin  # late: only interactive use needs a console

        return consent_on_stdin()
    if callable(spec):
        return spec
    raise ValueError("unknown terminal policy %r (True, False, 'allow', 'reject', 'ask' or a callable)" % (spec,))


def _permission_policy(spec: _permissions.PolicySpec) -> _permissions.PermissionCallback:
    if spec == "ask":
        from .askers import on_stdin  # late: only interactive use needs a console

        return on_stdin()
    return _permissions.resolve_policy(spec)


#: Answers the agent's `elicitation/create`: `{"action": "accept", "content": {...}}`,
#: `{"action": "decline"}` or `{"action": "cancel"}` (`elicitation.answer` builds them).
ElicitationPolicy = Callable[[ElicitationRequest], Union[Dict[str, Any], Awaitable[Dict[str, Any]]]]


def _elicitation_policy(spec: Union[None, str, ElicitationPolicy]) -> Optional[ElicitationPolicy]:
    if spec is None:
        return None
    if spec == "decline":
        return lambda request: elicitation.answer("decline")
    if spec == "ask":
        from .askers import elicitation_on_stdin  # late: only interactive use needs a console

        return elicitation_on_stdin()
    if callable(spec):
        return spec
    raise ValueError("unknown elicitation policy %r (None, 'decline', 'ask' or a callable)" % (spec,))


async def _call(policy: Callable[[Any], Any], request: Any) -> Any:
    """A host's callback, plain or a coroutine function."""
    answer = policy(request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def default_agent() -> str:
    """`ACP_AGENT` from the environment, else `copilot --acp --stdio`."""
    return os.environ.get("ACP_AGENT") or DEFAULT_AGENT


class Client:
    """An ACP client for one agent.

    `agent` is a command line (string or argv) to spawn on stdio; or `connect="[HOST:
    ]PORT"` (or `(host, port)`) reaches an agent listening on TCP (`copilot --acp
    --port P`; the host defaults to 127.0.0.1), which keeps running when the client
    closes; or `streams=(reader, writer)` uses an open pair. Sessions, handlers and
    errors are the same whichever way the bytes travel. Handlers for the agent's requests: `permission` (a
    policy name or callable, see `acp.permissions`; default `"reject"`), `fs` (read and
    write inside `fs_roots`, default each session's cwd), `terminal` (real subprocesses),
    and `handlers` to add or replace any method (`{method: fn(params, client)}`; `None`
    removes one, which then answers `-32601`).

    Terminals (`terminal/*`) are offered only when the host says so: `terminal=True`
    (or `"allow"`) runs what the agent asks, `"ask"` asks on this process's terminal, a
    callable `fn(TerminalRequest)` returns `"once"`, `"session"` or None (refuse); the
    default, False, offers none. A command's `cwd` must lie inside the session's folder
    (or `fs_roots`) unless `terminal_any_cwd=True`.
    """

    def __init__(self, agent: Optional[Argv] = None, *, streams: Optional[Sequence[Any]] = None,
                 connect: Optional[Union[str, int, Sequence[Any]]] = None,
                 connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                 cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                 permission: _permissions.PolicySpec = "reject", fs: bool = True,
                 fs_roots: Optional[Sequence[str]] = None,
                 terminal: Union[bool, str, TerminalPolicy] = False, terminal_any_cwd: bool = False,
                 handlers: Optional[Mapping[str, Optional[Handler]]] = None,
                 request_timeout: Optional[float] = DEFAULT_REQUEST_TIMEOUT,
                 prompt_timeout: Optional[float] = None, client_info: Optional[Dict[str, Any]] = None,
                 max_line: int = ndjson.DEFAULT_MAX_LINE,
                 on_stderr: Optional[Callable[[str], None]] = None,
                 new_process_group: bool = True, max_unsent: int = MAX_UNSENT,
                 elicitation: Union[None, str, "ElicitationPolicy"] = None) -> None:
        self.agent = agent if agent is not None else default_agent()
        self.streams = streams
        # Checked here, so a bad address fails where it was given (ValueError).
        self.address = parse_address(connect) if connect is not None else None
        self.connect_timeout = connect_timeout
        self.cwd = cwd
        self.env = env
        self.request_timeout = request_timeout
        self.prompt_timeout = prompt_timeout
        self.client_info = dict(client_info or CLIENT_INFO)
        self.max_line = max_line
        self.on_stderr = on_stderr
        self.new_process_group = new_process_group
        self.max_unsent = max_unsent
        self.permission_policy = _permission_policy(permission)
        self.fs_roots = list(fs_roots) if fs_roots is not None else None
        self.connection: Optional[AgentConnection] = None
        self.sessions: Dict[str, Session] = {}
        self.initialize_result: Dict[str, Any] = {}
        self._listeners: List[UpdateListener] = []
        self._early: "collections.OrderedDict[str, Deque[Update]]" = collections.OrderedDict()
        self._cleanup: List["asyncio.Task[None]"] = []
        self._initialize_params: Optional[Tuple[int, Optional[Dict[str, Any]], Timeout]] = None

        self.dispatcher = rpc.Dispatcher()
        self.dispatcher.add("session/update", self._on_update)
        self.dispatcher.add("session/request_permission", self._on_permission)
        self.elicitation_policy = _elicitation_policy(elicitation)
        self._open_elicitations: Dict[str, ElicitationRequest] = {}  # accepted URL ones, by id
        if self.elicitation_policy is not None:  # (ACP.md §12: advertised only when answered)
            self.dispatcher.add("elicitation/create", self._on_elicitation)
            self.dispatcher.add("elicitation/complete", self._on_elicitation_complete)
        roots = fixed_roots(self.fs_roots) if self.fs_roots is not None else self._session_roots
        self.files = FileSystem(roots, room_for=self._room_for)
        if fs:
            self.dispatcher.add("fs/read_text_file", self.files.read_text_file)
            self.dispatcher.add("fs/write_text_file", self.files.write_text_file)
        self.terminals = Terminals(self._session_cwd, policy=_terminal_policy(terminal),
                                   roots_for=None if terminal_any_cwd else roots)
        if terminal is not False and terminal is not None:
            for method, handler in self.terminals.methods().items():
                self.dispatcher.add(method, handler)
        for method, given in (handlers or {}).items():
            if given is None:
                self.dispatcher.remove(method)
            else:
                self.dispatcher.add(method, given)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> "Client":
        """Spawn the agent, connect to it, or adopt the streams. Raises
        `AgentStartError` (`AgentConnectError` over TCP)."""
        if self.connection is not None:
            return self
        options: Dict[str, Any] = dict(dispatcher=self.dispatcher, context=self,
                                       request_timeout=self.request_timeout,
                                       max_line=self.max_line, on_stderr=self.on_stderr,
                                       requests_only=REQUEST_METHODS, cancel_method=CANCEL_REQUEST,
                                       max_unsent=self.max_unsent)
        if self.streams is not None:
            reader, writer = self.streams
            self.connection = AgentConnection.from_streams(reader, writer, **options)
        elif self.address is not None:
            self.connection = await AgentConnection.connect(
                self.address, connect_timeout=self.connect_timeout, **options)
        else:
            self.connection = await AgentConnection.spawn(
                self.agent, cwd=self.cwd, env=self.env, new_process_group=self.new_process_group,
                **options)
        self.connection.peer.on_unmatched = self._on_unmatched
        self.connection.add_close_callback(self._on_connection_closed)
        return self

    async def close(self, grace: float = 3.0, term_grace: float = 2.0) -> Optional[int]:
        """Release terminals, then shut the agent down (ACP.md §7), or over TCP close
        the socket and leave the agent running. Waiting requests and turns fail with
        `AgentExited`. Returns the agent's exit status (None over TCP)."""
        await self.terminals.release_all()
        if self.connection is None:
            return None
        code = await self.connection.close(grace, term_grace)
        if self._cleanup:
            await asyncio.gather(*self._cleanup, return_exceptions=True)
        return code

    async def __aenter__(self) -> "Client":
        return await self.start()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def _on_connection_closed(self, exc: BaseException) -> None:
        # The agent is gone: nothing it started through us may outlive it.
        if len(self.terminals):
            self._cleanup.append(asyncio.ensure_future(self.terminals.release_all()))

    def _on_unmatched(self, msg: jsonrpc.Message) -> None:
        log.warning("ignored a response nobody waits for: %r", msg)

    @property
    def conn(self) -> AgentConnection:
        if self.connection is None:
            raise AcpError("the client is not started (use `async with Client(...)` or `await client.start()`)")
        return self.connection

    # ------------------------------------------------------------------ raw access

    async def request(self, method: str, params: Any = None, timeout: Timeout = USE_DEFAULT) -> Any:
        """Any request (extension methods too); `timeout` in seconds, None for no limit,
        by default the client's `request_timeout`."""
        return await self.conn.request(method, params, timeout=timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.conn.notify(method, params)

    def add_update_listener(self, listener: UpdateListener) -> Callable[[], None]:
        """`listener(session_id, update)` for every `session/update`, as it arrives, even
        for sessions not known yet. Must not block (it runs in the read path). Returns a
        function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # ------------------------------------------------------------------ conversation

    def capabilities(self) -> Dict[str, Any]:
        """What we advertise follows what is registered (ACP.md §5: agents send fs and
        terminal requests only to clients that advertise them)."""
        d = self.dispatcher
        return {"fs": {"readTextFile": "fs/read_text_file" in d,
                       "writeTextFile": "fs/write_text_file" in d},
                "terminal": "terminal/create" in d,
                "session": {"configOptions": {"boolean": {}}},  # boolean options: sent with their type
                # A terminal login runs the agent's own program: only an agent we start (ACP.md §11).
                "auth": {"terminal": self.streams is None and self.address is None},
                **({"elicitation": {"form": {}, "url": {}}} if "elicitation/create" in d else {})}

    async def initialize(self, protocol_version: int = PROTOCOL_VERSION,
                         client_capabilities: Optional[Dict[str, Any]] = None,
                         timeout: Timeout = USE_DEFAULT) -> Dict[str, Any]:
        """ACP.md §3.1. Returns the answer; also kept in `initialize_result`. Raises
        `ProtocolVersionError` when the agent answers a protocol version this client
        does not speak (only 1 exists), or none: what follows would be undefined."""
        self._initialize_params = (protocol_version, client_capabilities, timeout)
        result = await self.request("initialize", {
            "protocolVersion": protocol_version,
            "clientCapabilities": client_capabilities if client_capabilities is not None else self.capabilities(),
            "clientInfo": self.client_info}, timeout=timeout)
        self.initialize_result = result if isinstance(result, dict) else {}
        version = self.initialize_result.get("protocolVersion")
        if type(version) is not int or version not in SUPPORTED_VERSIONS:
            raise ProtocolVersionError(
                "the agent speaks ACP protocol version %s; this client speaks version %s (ACP.md §3.1)"
                % (version if type(version) is int else "(none given: %s)" % json.dumps(version)[:40],
                   ", ".join(str(v) for v in sorted(SUPPORTED_VERSIONS))), version)
        return self.initialize_result

    @property
    def agent_capabilities(self) -> Dict[str, Any]:
        value = self.initialize_result.get("agentCapabilities")
        return value if isinstance(value, dict) else {}

    @property
    def prompt_capabilities(self) -> Dict[str, Any]:
        """What a prompt may hold besides text (ACP.md §3.3): `image`, `audio`,
        `embeddedContext`."""
        value = self.agent_capabilities.get("promptCapabilities")
        return value if isinstance(value, dict) else {}

    @property
    def agent_info(self) -> Dict[str, Any]:
        value = self.initialize_result.get("agentInfo")
        return value if isinstance(value, dict) else {}

    def session_capability(self, name: str) -> bool:
        """The agent advertised `sessionCapabilities.<name>` (`list`, `resume`,
        `delete`, `close`, `additionalDirectories`): present and not null."""
        advertised = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(advertised, dict) and advertised.get(name) not in (None, False)

    @property
    def can_list_sessions(self) -> bool:
        """The agent advertised `session/list` (`sessionCapabilities.list`)."""
        return self.session_capability("list")

    @property
    def can_load_sessions(self) -> bool:
        """The agent advertised `session/load` (`loadSession`, ACP.md §3.5)."""
        return self.agent_capabilities.get("loadSession") is True

    @property
    def auth_methods(self) -> List[Dict[str, Any]]:
        value = self.initialize_result.get("authMethods")
        return value if isinstance(value, list) else []

    async def authenticate(self, method_id: str) -> Any:
        """`authenticate {methodId}`, for a method the agent handles itself. A terminal
        method is never sent (ACP forbids it): `login` runs it."""
        if any(method.id == method_id and method.terminal for method in self.login_methods()):
            raise AcpError("%s is a terminal login method: it is run, not sent (use login)" % method_id)
        return await self.request("authenticate", {"methodId": method_id})

    def login_methods(self) -> List[auth.LoginMethod]:
        """The agent's `authMethods` (ACP.md §11): a terminal method carries the command
        it would run (its ACP form runs the agent's own program, so it has one only
        where this client started the agent)."""
        connection = self.connection
        argv = connection.argv if connection is not None and connection.process is not None else None
        return auth.login_methods(self.auth_methods, argv)

    async def login(self, method_id: Optional[str] = None,
                    consent: Optional[auth.LoginConsent] = None) -> auth.LoginMethod:
        """Log in (ACP.md §11) with `method_id`, or the agent's first method this client
        can use. `consent(method)` decides, and nothing happens without it (no callback:
        `LoginRefused`). The agent's own method is `authenticate`; a terminal method's
        command runs in this process's terminal, and on its success (exit status 0)
        the client starts afresh (`reconnect`), as ACP asks. Raises `LoginRefused`,
        `LoginFailed`, or `AcpError` for a method unknown or not runnable here."""
        methods = self.login_methods()
        if method_id is not None:
            chosen = next((method for method in methods if method.id == method_id), None)
            if chosen is None:
                raise AcpError("the agent offers no login method %r: it offers %s"
                               % (method_id, ", ".join(m.id for m in methods) or "none"))
            if not chosen.runnable:
                raise AcpError("login method %s runs the agent's own program, which this client did not start "
                               "(over TCP): log in where the agent runs" % method_id)
        else:
            runnable = [method for method in methods if method.runnable]
            if not runnable:
                raise AcpError("the agent offers no login method this client can use")
            chosen = runnable[0]
        allowed = consent(chosen) if consent is not None else False
        if inspect.isawaitable(allowed):
            allowed = await allowed
        if not allowed:
            raise LoginRefused("logging in with %s was not allowed" % chosen.id)
        if chosen.command is None:
            try:
                await self.authenticate(chosen.id)
            except jsonrpc.JsonRpcError as exc:
                raise LoginFailed("the agent refused to log in with %s: %s" % (chosen.id, exc)) from exc
            return chosen
        status = await auth.run_login(chosen.command, cwd=self.cwd, base_env=self.env)  # the agent's environment
        if status != 0:
            raise LoginFailed("%s exited with status %d: not logged in" % (chosen.command.command_line, status))
        await self.reconnect()
        return chosen

    async def logout(self) -> Any:
        """`logout` (ACP.md §11), only when the agent advertises `auth.logout`."""
        advertised = self.agent_capabilities.get("auth")
        if not (isinstance(advertised, dict) and advertised.get("logout") not in (None, False)):
            raise NotAdvertised("the agent does not advertise auth.logout (ACP.md §11)")
        return await self.request("logout", {})

    async def reconnect(self) -> Dict[str, Any]:
        """Start afresh (after a login, ACP.md §11): the connection closed (a child shut
        down as in ACP.md §7), opened again, and `initialize` sent again as before.
        The old connection's sessions are gone; a stored one can be loaded again."""
        if self.streams is not None:
            raise AcpError("streams given by the caller cannot be opened again")
        await self.terminals.release_all()
        if self.connection is not None:
            await self.connection.close()
        self.connection = None
        self.sessions.clear()
        self._early.clear()
        await self.start()
        if self._initialize_params is None:
            return {}
        return await self.initialize(*self._initialize_params)

    def _session_params(self, cwd: Optional[str], mcp_servers: Optional[List[Dict[str, Any]]],
                        additional_directories: Optional[Sequence[str]]) -> Dict[str, Any]:
        """What `session/new`, `session/load` and `session/resume` carry: the folder
        (made absolute when it is one here, else sent as given: it may be a folder of
        an agent on another machine or OS, ACP.md §8), the MCP servers, and the
        additional folders, only when there are some and the agent advertised them."""
        params: Dict[str, Any] = {"cwd": session_folder(cwd or self.cwd or os.getcwd()),
                                  "mcpServers": list(mcp_servers or [])}
        if additional_directories:
            if not self.session_capability("additionalDirectories"):
                raise NotAdvertised("the agent does not advertise sessionCapabilities.additionalDirectories: "
                                    "a session has its one folder (ACP.md §3.2)")
            params["additionalDirectories"] = [session_folder(folder) for folder in additional_directories]
        return params

    async def new_session(self, cwd: Optional[str] = None, mcp_servers: Optional[List[Dict[str, Any]]] = None,
                          additional_directories: Optional[Sequence[str]] = None) -> Session:
        """ACP.md §3.2. Updates the agent sent for this session before its answer
        (`available_commands_update` usually) are applied before this returns (§2)."""
        params = self._session_params(cwd, mcp_servers, additional_directories)
        result = await self.request("session/new", params)
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            raise AcpError("session/new answered without a sessionId: %r" % (result,))
        session = Session(self, session_id, params["cwd"], params.get("additionalDirectories", ()))
        session.apply_response(result)
        self._register(session)
        return session

    async def load_session(self, session_id: str, cwd: Optional[str] = None,
                           mcp_servers: Optional[List[Dict[str, Any]]] = None,
                           additional_directories: Optional[Sequence[str]] = None) -> Session:
        """ACP.md §3.5: the history is replayed as updates before the answer; they land
        in the returned session (`history`, `tool_calls`)."""
        if not self.can_load_sessions:
            raise NotAdvertised("the agent does not advertise loadSession: it cannot resume a session "
                                "(ACP.md §3.5)")
        return await self._reopen("session/load", session_id, cwd, mcp_servers, additional_directories)

    async def resume_session(self, session_id: str, cwd: Optional[str] = None,
                             mcp_servers: Optional[List[Dict[str, Any]]] = None,
                             additional_directories: Optional[Sequence[str]] = None) -> Session:
        """`session/resume` (ACP.md §3.5): the session goes on without its history being
        replayed. Only when the agent advertises `sessionCapabilities.resume`."""
        if not self.session_capability("resume"):
            raise NotAdvertised("the agent does not advertise sessionCapabilities.resume (ACP.md §3.5)")
        return await self._reopen("session/resume", session_id, cwd, mcp_servers, additional_directories)

    async def _reopen(self, method: str, session_id: str, cwd: Optional[str],
                      mcp_servers: Optional[List[Dict[str, Any]]],
                      additional_directories: Optional[Sequence[str]]) -> Session:
        params = dict(self._session_params(cwd, mcp_servers, additional_directories), sessionId=session_id)
        session = Session(self, session_id, params["cwd"], params.get("additionalDirectories", ()))
        previous = self.sessions.get(session_id)
        self._register(session)  # (session/load replays the history into it before it answers)
        try:
            result = await self.request(method, params)
        except BaseException:
            if previous is not None:
                self.sessions[session_id] = previous
            else:
                self.sessions.pop(session_id, None)
            raise
        session.apply_response(result)
        return session

    async def delete_session(self, session_id: str) -> Any:
        """`session/delete` (ACP.md §3.5): the stored session is gone from `session/list`.
        Only when the agent advertises `sessionCapabilities.delete`."""
        if not self.session_capability("delete"):
            raise NotAdvertised("the agent does not advertise sessionCapabilities.delete (ACP.md §3.5)")
        result = await self.request("session/delete", {"sessionId": session_id})
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
        return result

    def _register(self, session: Session) -> None:
        self.sessions[session.session_id] = session
        for update in self._early.pop(session.session_id, ()):
            session.apply(update)

    async def list_sessions(self, cwd: Optional[str] = None, cursor: Optional[str] = None) -> List[Dict[str, Any]]:
        """`session/list` (ACP.md §3.5): `[{sessionId, cwd, title, updatedAt}]`, every
        page (from `cursor` when given) joined; `iter_sessions` gives them as they
        come, `list_sessions_page` one page and the cursor of the next."""
        return [entry async for entry in self.iter_sessions(cwd, cursor)]

    async def iter_sessions(self, cwd: Optional[str] = None,
                            cursor: Optional[str] = None) -> AsyncIterator[Dict[str, Any]]:
        """The stored sessions, page after page as the agent's `nextCursor` leads
        (ACP.md §3.5). A cursor that comes back, or more than `MAX_SESSION_PAGES`
        pages, is an `AcpError`: an agent cannot keep us listing for ever."""
        seen = set()
        for _ in range(MAX_SESSION_PAGES):
            sessions, cursor = await self.list_sessions_page(cwd, cursor)
            for entry in sessions:
                yield entry
            if cursor is None:
                return
            if cursor in seen:
                raise AcpError("session/list: the agent's nextCursor %r came back a second time" % cursor[:100])
            seen.add(cursor)
        raise AcpError("session/list: more than %d pages" % MAX_SESSION_PAGES)

    async def list_sessions_page(self, cwd: Optional[str] = None, cursor: Optional[str] = None
                                 ) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """One page of `session/list`: its sessions and the cursor of the next page
        (None on the last)."""
        if not self.can_list_sessions:
            raise NotAdvertised("the agent does not advertise sessionCapabilities.list: it cannot list "
                                "its sessions (ACP.md §3.5)")
        params: Dict[str, Any] = {}
        if cwd is not None:
            params["cwd"] = session_folder(cwd)
        if cursor is not None:
            params["cursor"] = cursor
        result = await self.request("session/list", params)
        sessions = result.get("sessions") if isinstance(result, dict) else None
        following = result.get("nextCursor") if isinstance(result, dict) else None
        return ([entry for entry in sessions if isinstance(entry, dict)] if isinstance(sessions, list) else [],
                following if isinstance(following, str) else None)

    async def close_session(self, session_id: str) -> Any:
        result = await self.request("session/close", {"sessionId": session_id})
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
        await self.terminals.release_all(session_id)
        return result

    def session(self, session_id: str) -> Session:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise AcpError("unknown session %s" % session_id) from None

    def prompt(self, session_id: str, prompt: PromptInput, *, queue: bool = True) -> Turn:
        return self.session(session_id).prompt(prompt, queue=queue)

    async def cancel(self, session_id: str) -> None:
        """`session/cancel`; pending permission requests of the session are answered
        `cancelled` (ACP.md §5)."""
        session = self.sessions.get(session_id)
        if session is not None:
            await session.cancel()
            return
        await self.notify("session/cancel", {"sessionId": session_id})

    async def set_mode(self, session_id: str, mode_id: str) -> Any:
        return await self.session(session_id).set_mode(mode_id)

    async def set_config_option(self, session_id: str, config_id: str, value: Any) -> Any:
        return await self.session(session_id).set_config_option(config_id, value)

    # ------------------------------------------------------------------ handlers

    def _on_update(self, params: Any, _context: Any = None) -> None:
        # Kept synchronous on purpose: notifications then finish in dispatch order,
        # before a later response wakes its waiter (ACP.md §3.3, updates precede answer).
        p = jsonrpc.require_params(params, ("sessionId", "update"), {"sessionId": str, "update": dict})
        session_id, update = p["sessionId"], p["update"]
        session = self.sessions.get(session_id)
        if session is not None:
            session.apply(update)
        else:
            # ACP.md §2: updates may name a session before session/new answers.
            held = self._early.get(session_id)
            if held is None:
                if len(self._early) >= MAX_EARLY_SESSIONS:
                    self._early.popitem(last=False)
                held = self._early[session_id] = collections.deque(maxlen=MAX_EARLY_UPDATES)
            held.append(update)
        for listener in list(self._listeners):
            try:
                listener(session_id, update)
            except Exception:
                log.exception("update listener failed")

    def _room_for(self, size: int) -> bool:
        return self.connection is None or self.connection.room_for(size)

    def _session_roots(self, session_id: Optional[str]) -> List[str]:
        """Where fs/* and terminals may reach for a session: its folder and the
        additional ones it was opened with (ACP.md §3.2, §5)."""
        session = self.sessions.get(session_id) if session_id else None
        if session is None or not session.cwd:
            return []
        return [session.cwd] + session.additional_directories

    def _session_cwd(self, session_id: Optional[str]) -> Optional[str]:
        session = self.sessions.get(session_id) if session_id else None
        if session is not None and session.cwd:
            return session.cwd
        return self.cwd

    async def _on_permission(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        request = _permissions.PermissionRequest.from_params(params)
        if not request.options:  # nothing to choose: no question (and nothing allowed)
            return request.cancelled()
        answered, decision = await self._ask(request.session_id, _permissions.decide(self.permission_policy, request))
        if not answered:
            return request.cancelled()  # cancelled (or the turn ended) before an answer
        return request.outcome(decision)

    async def _ask(self, session_id: Optional[str], question: Awaitable[Any]) -> Tuple[bool, Any]:
        """Put a question to the host (a person, maybe), withdrawn when the session's
        turn is cancelled or ends first (ACP.md §5): `(True, answer)`, or `(False,
        None)` when withdrawn. What the question raises, it raises."""
        session = self.sessions.get(session_id) if session_id else None
        loop = asyncio.get_event_loop()
        cancelled = session.cancel_waiter() if session is not None else loop.create_future()
        if cancelled.done():  # the turn was cancelled already: no question asked
            rpc.discard(question)
            return False, None
        decision = asyncio.ensure_future(question)
        try:
            await asyncio.wait({decision, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not decision.done():
                decision.cancel()
                await asyncio.wait({decision})
            if not cancelled.done():
                cancelled.cancel()
        if decision.cancelled() or not cancelled.cancelled():
            return False, None
        return True, decision.result()  # a raising question → error response

    async def _on_elicitation(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        """`elicitation/create` (ACP.md §12): the host's policy answers; an accepted
        form is checked against its schema before it is sent (declined if it does
        not fit); withdrawn (`cancel`) when the turn is cancelled first."""
        request = ElicitationRequest.from_params(params)
        policy = self.elicitation_policy
        assert policy is not None
        answered, response = await self._ask(request.session_id, _call(policy, request))
        if not answered:
            return elicitation.answer("cancel")
        if not (isinstance(response, dict) and response.get("action") in elicitation.ACTIONS):
            log.warning("the elicitation policy answered %r: declining", response)
            return elicitation.answer("decline")
        if response["action"] == "accept" and request.mode == "form":
            try:
                return elicitation.answer("accept", elicitation.check_content(request.fields,
                                                                              response.get("content") or {}))
            except ValueError as exc:
                log.warning("the answer to the agent's form does not fit it (%s): declining", exc)
                return elicitation.answer("decline")
        if response["action"] == "accept" and request.elicitation_id is not None:
            self._open_elicitations[request.elicitation_id] = request
        return elicitation.answer(response["action"])

    def _on_elicitation_complete(self, params: Any, _context: Any = None) -> None:
        """`elicitation/complete`: the out-of-band step of an accepted URL elicitation
        is over; an id not open (unknown, or completed already) is ignored."""
        p = jsonrpc.require_params(params, ("elicitationId",), {"elicitationId": str})
        request = self._open_elicitations.pop(p["elicitationId"], None)
        completed = getattr(self.elicitation_policy, "completed", None)
        if request is not None and completed is not None:
            completed(request)
