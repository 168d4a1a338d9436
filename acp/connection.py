"""The byte stream to one agent and the NDJSON on it, nothing ACP-specific.

`AgentConnection` owns three things: the transport (a child process on stdio, a TCP
socket to an agent that listens, or a pair of streams given by the caller), the read
loop that turns the agent's bytes into JSON values for the shared `rpc.Peer` (which
does id matching and dispatch, ACP.md §2), and the shutdown sequence of ACP.md §7. It
never interprets methods: that is `client.py`'s job. Both transports carry the same
NDJSON (ACP.md §1); they differ only in who owns the agent's life: a child we spawned
is shut down with us, an agent we connected to keeps running when we hang up.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
from typing import Any, Callable, Collection, Deque, Dict, List, Mapping, Optional, Sequence, Union

from ._core import close_stream, jsonrpc, ndjson, rpc, safe_text, start_child
from .endpoints import DEFAULT_AGENT, Address, Argv, join_command, keep_alive, parse_address, split_command
from .process_tree import ProcessTree, spawn_options
from .errors import (AgentConnectError, AgentExited, AgentNotAcp, AgentStartError, LineTooLong,
                     RequestTimeout)

log = logging.getLogger(__name__)
agent_log = logging.getLogger("acp.agent")  # the agent's own stderr lines

DEFAULT_REQUEST_TIMEOUT = 60.0
READ_CHUNK = 256 * 1024
STDERR_LINE_MAX = 8192  # a stderr line longer than this is kept cut (it is only shown)
DEFAULT_CONNECT_TIMEOUT = 10.0
# An agent whose output starts with lines that are not JSON-RPC is probably not an ACP
# agent at all (a wrong --agent): after the first such line it has this long to send a
# real message, or this many more bad lines, before the connection gives up on it.
NOT_ACP_GRACE = 2.0
NOT_ACP_MAX_LINES = 100
# Once the agent process is gone, how long its output may still take to drain (a
# grandchild can hold the pipe open for ever).
EXIT_DRAIN = 0.5
#: The longest a failed write waits for the agent's end to be known (what `_finish`
#: waits: its exit, 2 s, and its last stderr lines, EXIT_DRAIN).
EXIT_WAIT = 2.0 + EXIT_DRAIN + 0.5
#: The most bytes written to the agent and not yet taken by the system (ACP.md §1): an
#: agent that stops reading its answers must not make them pile up in memory. Past it,
#: a new request gets a small error answer at once, and an answer that would pass it
#: is replaced by that small error (unless nothing waits before it: one answer alone
#: always goes, its size bounded by what fs/* serve).
MAX_UNSENT = 32 * 1024 * 1024
#: Past twice `max_unsent`, not even the small errors are written: an agent that keeps
#: sending requests (or lines that are not JSON) while it reads nothing gets no answer
#: at all, and what waits for it stays bounded whatever it sends.
HARD_UNSENT_FACTOR = 2
#: How long the notices of requests given up on (`$/cancel_request`) may take to be
#: written when the connection closes.
CANCEL_NOTICE_GRACE = 0.5


class _UseDefault:
    """The type of `USE_DEFAULT`: "the connection's request timeout", as opposed to a
    number of seconds or None (no limit)."""

    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT = _UseDefault()
Timeout = Union[float, None, _UseDefault]


class AgentConnection:
    """JSON-RPC over NDJSON with one agent.

    Make one with `await AgentConnection.spawn(argv)` or `AgentConnection.from_streams(
    reader, writer)` (inside a running loop). `peer` is the shared `rpc.Peer`: add
    handlers to `peer.dispatcher` before the agent can send requests.
    """

    def __init__(self, dispatcher: Optional[rpc.Dispatcher] = None, *, context: Any = None,
                 request_timeout: Optional[float] = DEFAULT_REQUEST_TIMEOUT,
                 max_line: int = ndjson.DEFAULT_MAX_LINE, stderr_lines: int = 50,
                 on_stderr: Optional[Callable[[str], None]] = None,
                 requests_only: Collection[str] = (), max_unsent: int = MAX_UNSENT,
                 cancel_method: Optional[str] = None) -> None:
        # The peer gets every timeout already resolved (see `request`). Answers are
        # posted, never waited for: the read loop must not stall on an agent that
        # writes while it does not read (ACP.md §1).
        self.peer = rpc.Peer(self._send, dispatcher, context=context, requests_only=requests_only,
                             post=self._post, backlogged=self._backlogged, cancel_method=cancel_method)
        self.max_unsent = max_unsent
        self.request_timeout = request_timeout
        self.max_line = max_line
        self.on_stderr = on_stderr
        self.stderr_tail: Deque[str] = collections.deque(maxlen=stderr_lines)
        self.bad_lines = 0  # lines from the agent that were not JSON or too long
        self.messages = 0  # JSON-RPC messages received
        self.first_bad_line: Optional[bytes] = None  # the first non-JSON-RPC line, kept to quote
        self.process: Optional[asyncio.subprocess.Process] = None
        self.argv: List[str] = []
        self.address: Optional[Address] = None  # the agent's (host, port) over TCP
        self._read_error: Optional[BaseException] = None
        self._not_acp_timer: Optional[asyncio.TimerHandle] = None
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Any = None
        self._tree: Optional[ProcessTree] = None  # the agent and what it starts (our child only)
        self._drain_lock = asyncio.Lock()
        self._tasks: List["asyncio.Task[None]"] = []
        self._stderr_task: Optional["asyncio.Task[None]"] = None
        self._watch_task: Optional["asyncio.Task[None]"] = None
        self._transport: Optional[asyncio.SubprocessTransport] = None
        self._exited: Optional[asyncio.Event] = None
        self._closing = False
        self._exc: Optional[AgentExited] = None
        self._done = asyncio.Event()
        self._close_callbacks: List[Callable[[AgentExited], None]] = []

    # ------------------------------------------------------------------ creation

    @classmethod
    async def spawn(cls, command: Argv = DEFAULT_AGENT, *, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, new_process_group: bool = True,
                    **kwargs: Any) -> "AgentConnection":
        """Start the agent with pipes on stdin, stdout and stderr.

        `new_process_group` makes the agent the root of a process tree of its own
        (`process_tree`: on POSIX its own session, so that a Ctrl-C on the terminal
        reaches only us, we cancel the turn and the agent keeps running; on Windows a
        job object), so that shutdown ends everything the agent started.
        """
        conn = cls(**kwargs)
        argv = split_command(command)
        conn.argv = argv
        extra = spawn_options(new_process_group)
        try:
            child = await start_child(argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                      stderr=asyncio.subprocess.PIPE, cwd=cwd,
                                      env=dict(env) if env is not None else None, **extra)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise AgentStartError("could not start the agent `%s`: %s"
                                  % (join_command(argv), reason)) from exc
        proc = child.process
        conn.process = proc
        conn._transport = child.transport
        conn._exited = child.exited
        conn._tree = ProcessTree(proc, new_process_group)
        assert proc.stdout is not None and proc.stderr is not None
        conn._start(proc.stdout, proc.stdin)
        conn._watch_task = asyncio.ensure_future(conn._watch_exit())
        conn._stderr_task = asyncio.ensure_future(conn._stderr_loop(proc.stderr))
        return conn

    @classmethod
    async def connect(cls, address: Union[str, int, Sequence[Any]], *,
                      connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                      **kwargs: Any) -> "AgentConnection":
        """Connect to an agent listening on TCP (`copilot --acp --port P`, ACP.md §8).

        The socket carries the same NDJSON as stdio (ACP.md §1). The agent is not
        ours: closing the connection closes the socket and leaves the agent running
        (it outlives its clients, ACP.md §8).
        Raises `AgentConnectError` (refused, unknown host, no answer in time).
        """
        host, port = parse_address(address)
        where = "%s:%d" % (host, port) if ":" not in host else "[%s]:%d" % (host, port)
        try:
            # The reader's own limit is irrelevant: the read loop reads chunks, not lines.
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                    connect_timeout)
        except asyncio.TimeoutError:
            raise AgentConnectError("could not connect to the agent at %s: no answer within %g s"
                                    % (where, connect_timeout or 0)) from None
        except (OSError, UnicodeError) as exc:
            # asyncio words a refusal "Connect call failed (...)"; the errno says it plainly.
            # Not on Windows: there the system's words are in strerror, and the errno of
            # a Windows error (ERROR_CONNECTION_REFUSED) may be a stand-in (EINVAL).
            errno_, strerror = getattr(exc, "errno", None), getattr(exc, "strerror", None)
            if getattr(exc, "winerror", None) and strerror:
                reason = strerror
            else:
                reason = os.strerror(errno_) if isinstance(errno_, int) and errno_ > 0 else str(exc)
            raise AgentConnectError("could not connect to the agent at %s: %s" % (where, reason)) from exc
        keep_alive(writer.get_extra_info("socket"))
        conn = cls(**kwargs)
        conn.address = (host, port)
        conn._start(reader, writer)
        return conn

    @property
    def where(self) -> str:
        """How errors name the agent: its address over TCP, else "the agent"."""
        if self.address is None:
            return "the agent"
        host, port = self.address
        return "the agent at %s:%d" % (host if ":" not in host else "[%s]" % host, port)

    @classmethod
    def from_streams(cls, reader: asyncio.StreamReader, writer: Any, **kwargs: Any) -> "AgentConnection":
        """Talk over streams the caller opened (a socket, a pipe pair). `writer` needs
        `write`, `drain` and `close`; closing the connection closes it."""
        conn = cls(**kwargs)
        conn._start(reader, writer)
        return conn

    def _start(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self._reader = reader
        self._writer = writer
        self._tasks.append(asyncio.ensure_future(self._read_loop()))

    # ------------------------------------------------------------------ properties

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> Optional[int]:
        return self.process.returncode if self.process is not None else None

    @property
    def closed(self) -> Optional[AgentExited]:
        """Why the connection is over, or None while it is up."""
        return self._exc

    def add_close_callback(self, callback: Callable[[AgentExited], None]) -> None:
        """Called once, with the reason, when the agent's output ends."""
        if self._exc is not None:
            callback(self._exc)
        else:
            self._close_callbacks.append(callback)

    async def wait_closed(self) -> None:
        await self._done.wait()

    # ------------------------------------------------------------------ sending

    async def request(self, method: str, params: Any = None,
                      timeout: Timeout = USE_DEFAULT) -> Any:
        """One request; `timeout` in seconds, None waits forever, `USE_DEFAULT` (the
        default) means the connection's `request_timeout`, resolved here and only here.

        Raises `jsonrpc.JsonRpcError` for an error answer, `RequestTimeout`, or
        `AgentExited` when the agent goes away first.
        """
        self._raise_if_closed()
        seconds = self.request_timeout if isinstance(timeout, _UseDefault) else timeout
        try:
            return await self.peer.request(method, params, timeout=seconds)
        except asyncio.TimeoutError:
            raise RequestTimeout(method, seconds or 0.0) from None
        except jsonrpc.TransportClosed:
            self._raise_if_closed()  # the connection's own reason, not the peer's copy
            raise

    async def notify(self, method: str, params: Any = None) -> None:
        self._raise_if_closed()
        await self.peer.notify(method, params)

    def _raise_if_closed(self) -> None:
        """Every operation on a connection that is over fails with the one reason why."""
        if self._exc is not None:
            raise self._exc

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests and debugging: a malformed line, a batch)."""
        await self._write(data)

    async def _send(self, msg: Dict[str, Any]) -> None:
        await self._write(ndjson.encode(msg))

    @property
    def unsent(self) -> int:
        """Bytes written to the agent that the system has not taken yet (what waits in
        the transport's buffer); 0 when the writer cannot tell (streams of the caller's
        without a transport)."""
        transport = getattr(self._writer, "transport", None)
        size = getattr(transport, "get_write_buffer_size", None)
        try:
            return int(size()) if size is not None else 0
        except (AttributeError, RuntimeError, OSError):
            return 0

    def _backlogged(self) -> bool:
        return self.unsent >= self.max_unsent

    def room_for(self, size: int) -> bool:
        """Whether an answer of `size` bytes may be written now (ACP.md §1): nothing
        waits unsent, or it fits under `max_unsent` with what waits."""
        unsent = self.unsent
        return not unsent or unsent + size <= self.max_unsent

    def _post(self, msg: Dict[str, Any], force: bool = False) -> bool:
        """Write an answer without waiting for the agent to read it (`rpc.Peer`'s
        `post`). False, nothing written, when it does not fit the room left under
        `max_unsent` (an answer alone always fits); `force` writes it anyway (the
        small error that replaces a refused answer), unless twice that waits."""
        self._raise_if_closed()
        if self._writer is None or self._closing:
            raise AgentExited("the agent connection is closing")
        if self.unsent >= HARD_UNSENT_FACTOR * self.max_unsent or not force and self._backlogged():
            return False  # (not even encoded)
        data = ndjson.encode(msg)
        if not force and not self.room_for(len(data)):
            return False
        try:
            self._writer.write(data)
        except (ConnectionError, OSError, RuntimeError) as exc:
            self._raise_if_closed()
            raise AgentExited("could not write to the agent: %s" % exc) from exc
        return True

    async def _write(self, data: bytes) -> None:
        self._raise_if_closed()
        if self._writer is None or self._closing:
            raise AgentExited("the agent connection is closing")
        try:
            self._writer.write(data)
            # Python < 3.10 asserts when two tasks drain one stream at the same time.
            async with self._drain_lock:
                await self._writer.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:
            if self.process is not None:
                # The agent stopped reading: it is going. Its exit (the status and its
                # last stderr lines, learnt when its output ends: `_finish`) says why,
                # where the broken pipe says nothing (ACP.md §9).
                try:
                    await asyncio.wait_for(self._done.wait(), EXIT_WAIT)
                except asyncio.TimeoutError:
                    pass
            self._raise_if_closed()
            raise AgentExited("could not write to the agent: %s" % exc) from exc

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        assert self._reader is not None
        splitter = ndjson.LineSplitter(self.max_line)
        try:
            while True:
                data = await self._reader.read(READ_CHUNK)
                if not data:
                    break
                for line in splitter.feed(data):
                    await self._handle_line(line)
            for line in splitter.flush():
                await self._handle_line(line)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reset socket, a broken pipe, or a bug: end cleanly
            self._read_error = exc
            log.warning("reading from the agent failed: %r", exc)
        await self._finish()

    async def _handle_line(self, line: ndjson.Line) -> None:
        if self._exc is not None:
            return  # given up on this agent: its output is no longer read as protocol
        if isinstance(line, ndjson.LineTooLong):
            # The line is lost, and with it maybe the answer a turn waits for: the
            # connection cannot go on reliably, so it ends, saying which limit.
            self.bad_lines += 1
            self._fail(LineTooLong(
                "%s sent a line of %d bytes, over the limit of %d bytes (max_line); "
                "the connection was closed" % (self.where, line.size, self.max_line),
                line.size, self.max_line))
            self._hang_up()
            return
        try:
            obj = jsonrpc.loads(line)
        except jsonrpc.JsonRpcError as exc:
            # Not JSON (or not UTF-8): JSON-RPC 2.0 §5 answers a parse error with id null,
            # so an agent that sent a broken request is not left waiting for ever.
            self.bad_lines += 1
            log.warning("a line from the agent is not JSON: %.120r", line)
            self._not_json_rpc(line)
            if self._exc is None:  # (not once given up on as no ACP agent at all)
                await self.peer.receive_error(exc)
            return
        if isinstance(obj, dict) and obj.get("jsonrpc") == "2.0":
            self.messages += 1
        else:
            self._not_json_rpc(line)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("A>C %s", safe_text(line[:1200].decode("utf-8", "replace")[:300], multiline=False))
        try:
            await self.peer.receive(obj)
        except Exception:  # Peer.receive does not raise for bad input; this is a bug guard
            log.exception("failed to handle a message from the agent")

    def _not_json_rpc(self, line: bytes) -> None:
        """A line that is not JSON-RPC. Before any real message, it means the program
        may not be an ACP agent at all: quote its first such line and give up on it
        after `NOT_ACP_GRACE` seconds or `NOT_ACP_MAX_LINES` lines (ACP.md §1: stdout
        carries only protocol), instead of letting `initialize` wait its full timeout."""
        if self.messages or self._exc is not None:
            return
        if self.first_bad_line is None:
            self.first_bad_line = bytes(line)
            self._not_acp_timer = asyncio.get_event_loop().call_later(NOT_ACP_GRACE, self._give_up_not_acp)
        elif self.bad_lines >= NOT_ACP_MAX_LINES:
            self._give_up_not_acp()

    def _give_up_not_acp(self) -> None:
        if self._not_acp_timer is not None:
            self._not_acp_timer.cancel()
        if self.messages or self._exc is not None or self.first_bad_line is None:
            return
        quoted = self.first_bad_line[:200].decode("utf-8", "replace")
        exc = AgentNotAcp("%s does not speak ACP: its output starts with %r, not JSON-RPC"
                          % (self.where, quoted), self.first_bad_line)
        log.warning("%s", exc)
        self._fail(exc)

    async def _stderr_loop(self, stream: asyncio.StreamReader) -> None:
        # Own splitting: StreamReader.readline() fails on lines over 64 KiB.
        buf = b""
        while True:
            data = await stream.read(65536)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                self._stderr_line(raw)
            if len(buf) > STDERR_LINE_MAX:
                self._stderr_line(buf)
                buf = b""
        if buf:
            self._stderr_line(buf)

    def _stderr_line(self, raw: bytes) -> None:
        text = raw[:STDERR_LINE_MAX].decode("utf-8", "replace").rstrip("\r")
        self.stderr_tail.append(text)
        # Logging writes where the host points it, a terminal often (`--verbose`): the
        # agent's line is escaped there, and there only (callers get it as it came).
        agent_log.info("%s", safe_text(text, multiline=False))
        if self.on_stderr is not None:
            try:
                self.on_stderr(text)
            except Exception:
                log.exception("on_stderr callback failed")

    async def _finish(self) -> None:
        """stdout ended: learn why (exit status, last stderr lines), then fail waiters."""
        if self._not_acp_timer is not None:
            self._not_acp_timer.cancel()
        if self._done.is_set():
            return
        if self._exc is None:
            if self.process is not None:
                await self._wait_process(2.0)
                if self._stderr_task is not None:
                    await asyncio.wait({self._stderr_task}, timeout=EXIT_DRAIN)
            exc = AgentExited.describe(self.returncode, list(self.stderr_tail), expected=self._closing,
                                       where=self.where, socket=self.address is not None,
                                       error=self._read_error)
            if not self._closing:
                log.warning("%s", exc)
            self._fail(exc)
        self._done.set()

    def _fail(self, exc: AgentExited) -> None:
        """The connection is over for `exc`: every waiter fails with it, once."""
        if self._exc is not None:
            return
        self._exc = exc
        self.peer.close(exc)
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(exc)
            except Exception:
                log.exception("close callback failed")

    def _hang_up(self) -> None:
        """Stop talking to an agent we gave up on: close our end (a child then sees EOF
        and is shut down by `close`, as usual)."""
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, RuntimeError):
                pass

    # ------------------------------------------------------------------ shutdown

    async def _wait_process(self, timeout: Optional[float]) -> bool:
        """Wait until the agent has exited (and was reaped); False after `timeout`."""
        assert self._exited is not None
        if self._exited.is_set():
            return True
        try:
            await asyncio.wait_for(self._exited.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def _watch_exit(self) -> None:
        """Once the agent exits: end what it left of its process tree (they would be
        orphans, and may hold our pipes open), then stop waiting for stdout."""
        await self._wait_process(None)
        if self._tree is not None:
            self._tree.end()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=EXIT_DRAIN)
            if still and self._transport is not None:
                self._transport.close()  # our pipe ends close: the read loop sees EOF

    async def close(self, grace: float = 3.0, term_grace: float = 2.0) -> Optional[int]:
        """ACP.md §7: close stdin, wait `grace`; SIGTERM, wait `term_grace`; SIGKILL; reap.

        An idle agent leaves within milliseconds of EOF, a busy one in about two
        seconds. Over TCP only the socket is closed: the agent is not ours and keeps
        serving other clients. Requests still waiting fail with `AgentExited`. Returns
        the exit status (None over TCP). Safe to call more than once and after the
        agent died on its own.
        """
        if self._closing:
            await self._done.wait()
            return self.returncode
        if self._exc is None:  # what we gave up on is said before we hang up (ACP.md §2)
            await self.peer.settle(CANCEL_NOTICE_GRACE)
        self._closing = True
        proc = self.process
        if proc is None:
            # Over a socket: closed, and the outcome asyncio keeps for it taken (a reset's
            # error, reported by the read loop), so that nothing is left to print.
            if self._writer is not None:
                await close_stream(self._writer)
        else:
            if self._writer is not None:
                try:
                    self._writer.close()
                except (OSError, RuntimeError):
                    pass
            tree = self._tree
            assert tree is not None
            if not await self._wait_process(grace):
                log.info("the agent did not exit after stdin EOF; sending SIGTERM")
                tree.send(signal.SIGTERM)
                if not await self._wait_process(term_grace):
                    log.warning("the agent ignored SIGTERM; sending SIGKILL")
                    tree.kill()
                    await self._wait_process(None)
            if self._watch_task is not None:
                await self._watch_task
        # stdout reaches EOF once the process is gone; give the loop a moment to drain.
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=2.0)
            for task in still:
                task.cancel()
        if self._stderr_task is not None and not self._stderr_task.done():
            await asyncio.wait({self._stderr_task}, timeout=1.0)
            self._stderr_task.cancel()
        if not self._done.is_set():
            await self._finish()
        await self.peer.wait_handlers()
        if self._transport is not None:
            self._transport.close()
        return self.returncode
