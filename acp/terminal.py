"""`terminal/*` (ACP.md §5): commands the agent asks the client to run, as real
subprocesses with captured output.

`terminal/create` starts the command and answers at once with a `terminalId`;
`terminal/output` returns what was captured (stdout and stderr interleaved, trimmed from
the front to `outputByteLimit` bytes on a character boundary, and never to more than the
client's own limit) and the exit status once known; `terminal/wait_for_exit` waits;
`terminal/kill` stops the command but keeps the terminal readable; `terminal/release` kills if needed and forgets it. A command without
`args` is a shell command line; with `args` it is executed directly.

Nothing runs without consent (ACP.md §5): before a command starts, its `cwd` must lie
inside the session's folder (unless the host allows any folder), and the host's policy
must allow it, once or for the rest of the session. A refusal is a JSON-RPC error and
no process is started.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import signal
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Union

from ._core import jsonrpc
from .endpoints import join_command
from .process_tree import ProcessTree, spawn_options
from .fs import is_within, not_here  # the one containment rule, shared with fs/*
from .os_strings import check_os_string

log = logging.getLogger(__name__)

# The most output one terminal keeps (ACP.md §5): when the agent gives no
# outputByteLimit, and as the ceiling of one it gives, so memory stays bounded.
DEFAULT_OUTPUT_LIMIT = 32 * 1024 * 1024
READ_CHUNK = 65536

CwdFor = Callable[[Optional[str]], Optional[str]]
RootsFor = Callable[[Optional[str]], List[str]]
REFUSED = -32000  # an implementation-defined JSON-RPC code: the user did not allow it

# What a terminal policy answers: run this one command, run every command of this
# session from now on, or (None) refuse.
ALLOW_ONCE = "once"
ALLOW_SESSION = "session"
TerminalDecision = Optional[str]


class TerminalRequest:
    """A `terminal/create` waiting for consent: what would run, where."""

    __slots__ = ("session_id", "command", "args", "cwd", "env")

    def __init__(self, session_id: Optional[str], command: str, args: List[str], cwd: Optional[str],
                 env: Dict[str, str]) -> None:
        self.session_id = session_id
        self.command = command
        self.args = args
        self.cwd = cwd
        self.env = env  # only the variables the agent sets

    @property
    def command_line(self) -> str:
        """As a shell would read it: a shell line as given, or the argv quoted."""
        if not self.args:
            return self.command
        return join_command([self.command] + self.args)


TerminalPolicy = Callable[[TerminalRequest], Union[TerminalDecision, Awaitable[TerminalDecision]]]


def refuse_terminals(request: TerminalRequest) -> TerminalDecision:
    """The library's default: a host that wants terminals says so."""
    return None


def allow_terminals(request: TerminalRequest) -> TerminalDecision:
    return ALLOW_ONCE


def _trim(buf: bytearray, limit: int) -> bool:
    """Keep the last `limit` bytes, starting on a UTF-8 character boundary."""
    if len(buf) <= limit:
        return False
    cut = len(buf) - limit
    while cut < len(buf) and (buf[cut] & 0xC0) == 0x80:  # a continuation byte
        cut += 1
    del buf[:cut]
    return True


class Terminal:
    """One running (or finished) command and its captured output."""

    def __init__(self, terminal_id: str, session_id: Optional[str], process: asyncio.subprocess.Process,
                 limit: int) -> None:
        self.terminal_id = terminal_id
        self.session_id = session_id
        self.process = process
        self.tree = ProcessTree(process)  # the command and what it starts, ended as one
        self.limit = limit
        self.output = bytearray()
        self.truncated = False
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            data = await stream.read(READ_CHUNK)
            if not data:
                return
            self.output += data
            if _trim(self.output, self.limit):
                self.truncated = True

    def exit_status(self) -> Optional[Dict[str, Any]]:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return {"exitCode": None, "signal": name}
        return {"exitCode": code, "signal": None}

    async def wait(self) -> Dict[str, Any]:
        await self.process.wait()
        # Output still in the pipe belongs to the result; a background child holding
        # the pipe open must not make us wait forever, hence the bound.
        await asyncio.wait({self._reader}, timeout=2.0)
        status = self.exit_status()
        assert status is not None
        return status

    def kill(self) -> None:
        if self.process.returncode is None:
            self.tree.kill()

    async def release(self) -> None:
        self.kill()
        await self.process.wait()
        self.tree.end()  # children that outlived the command would be orphans
        await asyncio.wait({self._reader}, timeout=2.0)
        if not self._reader.done():
            self._reader.cancel()


class Terminals:
    """The terminal handlers and the table of live terminals (one per `terminalId`)."""

    def __init__(self, cwd_for: CwdFor, default_limit: int = DEFAULT_OUTPUT_LIMIT, *,
                 policy: TerminalPolicy = refuse_terminals, roots_for: Optional[RootsFor] = None) -> None:
        """`policy` decides whether a command runs; `roots_for(session_id)` lists the
        folders its `cwd` must lie in (None: anywhere). `default_limit` is the most
        output a terminal keeps: the agent's `outputByteLimit` may lower it, not raise it."""
        self.cwd_for = cwd_for
        self.default_limit = default_limit
        self.policy = policy
        self.roots_for = roots_for
        self._terminals: Dict[str, Terminal] = {}
        self._ids = itertools.count(1)
        self._allowed_sessions: Set[Optional[str]] = set()  # "allow for the session" answers

    def __len__(self) -> int:
        return len(self._terminals)

    def methods(self) -> Dict[str, Callable[..., Any]]:
        return {"terminal/create": self.create, "terminal/output": self.output,
                "terminal/wait_for_exit": self.wait_for_exit, "terminal/kill": self.kill,
                "terminal/release": self.release}

    def _get(self, params: Any) -> Terminal:
        p = jsonrpc.require_params(params, ("terminalId",), {"terminalId": str})
        terminal = self._terminals.get(p["terminalId"])
        if terminal is None or (p.get("sessionId") is not None and p.get("sessionId") != terminal.session_id):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Unknown terminal: %s" % p["terminalId"])
        return terminal

    async def create(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        p = jsonrpc.require_params(params, ("command",),
                                   {"command": str, "args": list, "env": list, "cwd": str,
                                    "outputByteLimit": int})
        session_id = p.get("sessionId")
        cwd = p.get("cwd") or self.cwd_for(session_id if isinstance(session_id, str) else None)
        if cwd is not None and not (os.path.isabs(cwd) and os.path.isdir(cwd)):
            if not p.get("cwd"):  # the session's folder, on the agent's machine (ACP.md §8)
                raise not_here("the session's folder", cwd)
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: cwd is not an absolute folder: %s" % cwd)
        limit = p.get("outputByteLimit")
        if limit is None:
            limit = self.default_limit
        if limit < 0:
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: outputByteLimit must be >= 0")
        limit = min(limit, self.default_limit)  # the agent's wish within ours (ACP.md §5)
        env = dict(os.environ)
        for index, item in enumerate(p.get("env") or []):
            if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                    and isinstance(item.get("value"), str)):
                raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: env entries are {name, value}")
            check_os_string(item["name"], "env[%d].name" % index)
            check_os_string(item["value"], "env[%d].value" % index)
            if not item["name"] or "=" in item["name"]:  # (subprocess would raise ValueError)
                raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: env[%d].name must be a "
                                           "non-empty name without '='" % index)
            env[item["name"]] = item["value"]
        args = p.get("args") or []
        if not all(isinstance(a, str) for a in args):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Invalid params: args must be strings")
        check_os_string(p["command"], "command")
        for index, arg in enumerate(args):
            check_os_string(arg, "args[%d]" % index)
        sid = session_id if isinstance(session_id, str) else None
        self._check_cwd(sid, cwd)
        await self._consent(TerminalRequest(sid, p["command"], list(args), cwd,
                                            {item["name"]: item["value"] for item in p.get("env") or []}))
        common: Dict[str, Any] = dict(stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                      stderr=asyncio.subprocess.STDOUT, cwd=cwd, env=env)
        common.update(spawn_options())  # the root of a tree: kill reaches its children
        try:
            if args:
                process = await asyncio.create_subprocess_exec(p["command"], *args, **common)
            else:
                process = await asyncio.create_subprocess_shell(p["command"], **common)
        except OSError as exc:
            raise jsonrpc.JsonRpcError(jsonrpc.INTERNAL_ERROR, "Could not run %s: %s"
                                       % (p["command"], exc.strerror or exc)) from None
        terminal_id = "term-%d" % next(self._ids)
        self._terminals[terminal_id] = Terminal(
            terminal_id, session_id if isinstance(session_id, str) else None, process, limit)
        return {"terminalId": terminal_id}

    def _check_cwd(self, session_id: Optional[str], cwd: Optional[str]) -> None:
        if self.roots_for is None:
            return
        roots = [r for r in self.roots_for(session_id) if r]
        if cwd is None or not any(is_within(cwd, root) for root in roots):
            raise jsonrpc.JsonRpcError(jsonrpc.INVALID_PARAMS, "Refused: cwd %s is outside the session's folder"
                                       % cwd, {"cwd": cwd})

    async def _consent(self, request: TerminalRequest) -> None:
        """Ask the policy (unless this session was allowed already); refuse with an error."""
        if request.session_id in self._allowed_sessions:
            return
        decision = self.policy(request)
        if inspect.isawaitable(decision):
            decision = await decision
        if decision == ALLOW_SESSION:
            self._allowed_sessions.add(request.session_id)
        elif decision != ALLOW_ONCE:
            raise jsonrpc.JsonRpcError(REFUSED, "Refused: the user did not allow running this command",
                                       {"command": request.command_line})

    async def output(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        terminal = self._get(params)
        if terminal.process.returncode is not None:
            await asyncio.wait({terminal._reader}, timeout=2.0)
        result: Dict[str, Any] = {"output": terminal.output.decode("utf-8", "replace"),
                                  "truncated": terminal.truncated}
        status = terminal.exit_status()
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        return await self._get(params).wait()

    async def kill(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        terminal = self._get(params)
        terminal.kill()
        await terminal.process.wait()
        return {}

    async def release(self, params: Any, _context: Any = None) -> Dict[str, Any]:
        terminal = self._get(params)
        del self._terminals[terminal.terminal_id]
        await terminal.release()
        return {}

    async def release_all(self, session_id: Optional[str] = None) -> None:
        """Kill and reap every terminal (of one session, or all): nothing outlives us."""
        if session_id is not None:  # the session is over: so is its "allow for the session"
            self._allowed_sessions.discard(session_id)
        for terminal_id, terminal in list(self._terminals.items()):
            if session_id is None or terminal.session_id == session_id:
                del self._terminals[terminal_id]
                try:
                    await terminal.release()
                except Exception:  # keep releasing the others
                    log.exception("releasing %s failed", terminal_id)

    def ids(self) -> List[str]:
        return list(self._terminals)
