"""What a client knows about one session, rebuilt from the agent's updates (ACP.md §4),
and the prompt turn (`Turn`) that streams those updates to the caller.

Nothing here does I/O: `Client` feeds every `session/update` to `Session.apply`, and a
session sends its requests through the small `SessionHost` interface below (which
`Client` implements), so this module never imports the client. `Turn` only waits on
queues and futures. That keeps the merge rules (tool calls, plans, commands, modes,
config options, title, usage) testable alone, with any host.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, AsyncIterator, Deque, Dict, Generator, List, Optional, Protocol, Sequence, Set, Tuple, Union


from .errors import SessionBusy
from .options import check_blocks

log = logging.getLogger(__name__)

Update = Dict[str, Any]
PromptInput = Union[str, Dict[str, Any], List[Any]]

KNOWN_UPDATES = frozenset({
    "agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call",
    "tool_call_update", "plan", "available_commands_update", "current_mode_update",
    "config_option_update", "session_info_update", "usage_update",
})
FINAL_TOOL_STATUSES = frozenset({"completed", "failed", "cancelled"})
# Our own status for a tool call left open by a cancelled turn: ACP.md §4 says the agent
# sends no final update then, so the client closes it. Never sent on the wire.
LOCAL_CANCELLED = "cancelled"

_END = object()  # the queue marker after the last update of a turn


class SessionHost(Protocol):
    """All a `Session` needs from whoever owns the connection (`Client` is one).

    `request` waits for the answer (`timeout` in seconds or None for no limit; left
    out, the host's own default); `notify` sends a notification; `close_session` sends `session/close` and
    forgets the session; `prompt_timeout` bounds a `session/prompt` (None: a turn may
    run as long as the agent works).
    """

    prompt_timeout: Optional[float]

    async def request(self, method: str, params: Any = None, timeout: Any = ...) -> Any: ...

    async def notify(self, method: str, params: Any = None) -> None: ...

    async def close_session(self, session_id: str) -> Any: ...


def text_of(update: Update) -> str:
    """The text of a chunk update ('' for images, resources and other kinds)."""
    content = update.get("content")
    if isinstance(content, dict) and content.get("type") == "text":
        text = content.get("text")
        return text if isinstance(text, str) else ""
    return ""


def prompt_blocks(prompt: PromptInput) -> List[Any]:
    """A prompt as ACP content blocks: text becomes one text block; slash commands are
    plain text too (ACP.md §3.6)."""
    if isinstance(prompt, str):
        return [{"type": "text", "text": prompt}]
    if isinstance(prompt, dict):
        return [prompt]
    return list(prompt)


class Transcript:
    """Message chunks merged into messages (ACP.md §4). A chunk naming a `messageId`
    joins the message of that id, wherever it came before (chunks of two messages may
    interleave); a chunk without one joins the last message when it has the same role.
    Each entry is `{"role", "text"}`, with its `messageId` when it has one. The pieces
    are joined when the entries are read: adding each chunk to the text so far copied
    all of it, every chunk, and a long message streamed in small chunks took
    quadratic time."""

    def __init__(self) -> None:
        self._entries: List[Dict[str, str]] = []
        self._pieces: Dict[int, List[str]] = {}  # entry index: pieces not joined yet
        self._by_id: Dict[str, int] = {}  # messageId: entry index
        self._cut = False  # the next chunk without an id starts a new message

    def add(self, role: str, text: str, message_id: Optional[str] = None) -> Tuple[int, bool]:
        """Merge one chunk; returns the index of its entry and whether it is new."""
        index: Optional[int]
        if message_id is not None:
            index = self._by_id.get(message_id)
        else:
            index = len(self._entries) - 1 if self._entries and not self._cut else None
        self._cut = False
        if index is not None and self._entries[index]["role"] == role:
            self._pieces.setdefault(index, []).append(text)
            return index, False
        entry = {"role": role, "text": text}
        if message_id is not None:
            entry["messageId"] = message_id
            self._by_id[message_id] = len(self._entries)
        self._entries.append(entry)
        return len(self._entries) - 1, True

    def cut(self) -> None:
        """Something else came between (a tool call, shown in between): the next chunk
        without a `messageId` starts a new message even if its role is the same."""
        self._cut = True

    @property
    def entries(self) -> List[Dict[str, str]]:
        for index, pieces in self._pieces.items():
            entry = self._entries[index]
            entry["text"] = "".join([entry["text"]] + pieces)
        self._pieces.clear()
        return self._entries


def chunk_of(update: Update) -> Optional[Tuple[str, str, Optional[str]]]:
    """A message chunk update as (role, text, messageId): role `user`, `agent` or
    `thought`; None for other updates."""
    kind = update.get("sessionUpdate")
    role = CHUNK_ROLES.get(kind) if isinstance(kind, str) else None
    if role is None:
        return None
    message_id = update.get("messageId")
    return role, text_of(update), message_id if isinstance(message_id, str) else None


CHUNK_ROLES = {"agent_message_chunk": "agent", "user_message_chunk": "user", "agent_thought_chunk": "thought"}


class PromptResult:
    """How a turn ended. `error` is the `Error:` text of ACP.md §6 (the stop reason is
    still `end_turn` then), so check `ok`, not the stop reason."""

    __slots__ = ("stop_reason", "usage", "text", "error", "raw")

    def __init__(self, stop_reason: Optional[str], usage: Optional[Dict[str, Any]], text: str,
                 error: Optional[str], raw: Any) -> None:
        self.stop_reason = stop_reason
        self.usage = usage
        self.text = text
        self.error = error
        self.raw = raw

    @property
    def ok(self) -> bool:
        return self.error is None and self.stop_reason != "cancelled"

    def __repr__(self) -> str:
        return "PromptResult(stop_reason=%r, error=%r)" % (self.stop_reason, self.error)


class Turn:
    """One `session/prompt`: iterate it for the updates as they arrive, await it for the
    `PromptResult`. Awaiting without iterating simply skips the updates (they are still
    applied to the session and kept in `updates`).

    Updates are delivered in order and all of them before the end, by construction: the
    read loop applies each notification synchronously before it reads the next message,
    so a response is matched only after the updates sent before it (ACP.md §3.3).
    """

    def __init__(self, session: "Session", blocks: List[Any]) -> None:
        self.session = session
        self.blocks = blocks
        self.updates: List[Update] = []
        self.tool_call_ids: List[str] = []
        self.stop_reason: Optional[str] = None
        self.usage: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None
        self.started = False  # the request was sent (it may wait in the queue before)
        self.cancel_requested = False
        self._text: List[str] = []
        self._error_parts: Optional[List[str]] = None
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._result: "asyncio.Future[PromptResult]" = asyncio.get_event_loop().create_future()
        self._task: Optional["asyncio.Task[None]"] = None

    # ---------------------------------------------------------------- feeding

    def _feed(self, update: Update) -> None:
        self.updates.append(update)
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            text = text_of(update)
            # ACP.md §6: provider failures arrive as message text starting "Error:".
            if self._error_parts is None and text.lstrip().startswith("Error:"):
                self._error_parts = []
            if self._error_parts is not None:
                self._error_parts.append(text)
            else:
                self._text.append(text)
        elif kind in ("tool_call", "tool_call_update"):
            call_id = update.get("toolCallId")
            if isinstance(call_id, str) and call_id not in self.tool_call_ids:
                self.tool_call_ids.append(call_id)
        self._queue.put_nowait(update)

    def _finish(self, result: Any = None, exc: Optional[BaseException] = None) -> None:
        if self._result.done():
            return
        if exc is not None:
            self._result.set_exception(exc)
            self._result.exception()  # retrieved: the iterator or awaiter re-raises it
        else:
            if isinstance(result, dict):
                reason = result.get("stopReason")
                self.stop_reason = reason if isinstance(reason, str) else None
                usage = result.get("usage")
                self.usage = usage if isinstance(usage, dict) else None
            if self._error_parts is not None:
                self.error = "".join(self._error_parts).strip()
            self._result.set_result(PromptResult(self.stop_reason, self.usage, self.text,
                                                 self.error, result))
        self._queue.put_nowait(_END)

    # ---------------------------------------------------------------- consuming

    @property
    def text(self) -> str:
        """The agent's message text of this turn, without an `Error:` part."""
        return "".join(self._text)

    @property
    def done(self) -> bool:
        return self._result.done()

    def __aiter__(self) -> AsyncIterator[Update]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Update]:
        while True:
            item = await self._queue.get()
            if item is _END:
                self._queue.put_nowait(_END)  # a second iteration ends at once
                break
            yield item
        error = self._result.exception()
        if error is not None:
            raise error

    async def result(self) -> PromptResult:
        return await asyncio.shield(self._result)

    def __await__(self) -> Generator[Any, None, PromptResult]:
        return self.result().__await__()

    async def give_up(self) -> None:
        """Stop waiting for this turn's answer (the host is leaving): its request is given
        up, which the agent is told of (`$/cancel_request`, ACP.md §2), and the turn
        ends `cancelled`. `cancel` is the polite way, which waits for the agent."""
        task = self._task
        if self.done or task is None:
            return
        self.cancel_requested = True
        task.cancel()
        await asyncio.wait({task})  # (its request's notice is on its way once it ended)

    async def cancel(self) -> None:
        """Cancel this turn: `session/cancel` if it is running, or drop it from the queue."""
        if self.done:
            return
        self.cancel_requested = True
        if not self.started:
            if self._task is not None:
                self._task.cancel()
            self.stop_reason = "cancelled"
            self._finish({"stopReason": "cancelled"})
            return
        await self.session.cancel()


class Session:
    """State of one session, merged from updates; the methods call through the client.

    One prompt at a time (ACP.md §3.4: a second prompt cancels the first on Copilot):
    `prompt()` **queues** — a turn waits until the previous one has ended; with
    `queue=False` it raises `SessionBusy` instead.
    """

    def __init__(self, client: SessionHost, session_id: str, cwd: Optional[str] = None,
                 additional_directories: Sequence[str] = ()) -> None:
        self.client = client
        self.session_id = session_id
        self.cwd = cwd
        self.additional_directories = list(additional_directories)  # more roots (ACP.md §3.2)
        self.tool_calls: "collections.OrderedDict[str, Dict[str, Any]]" = collections.OrderedDict()
        self.plan: List[Dict[str, Any]] = []
        self.commands: List[Dict[str, Any]] = []
        self.modes: Dict[str, Any] = {}
        self.current_mode_id: Optional[str] = None
        self.config_options: List[Dict[str, Any]] = []
        self.title: Optional[str] = None
        self.updated_at: Optional[str] = None
        self.context: Dict[str, Any] = {}  # last usage_update: {used, size, ...}
        self.usage: Optional[Dict[str, Any]] = None  # cumulative usage of the last prompt answer
        self._transcript = Transcript()  # the messages, their chunks merged
        self.unknown_updates: Deque[Update] = collections.deque(maxlen=100)
        self.closed = False
        self.current_turn: Optional[Turn] = None
        self._turns: List[Turn] = []  # queued and running
        self._lock = asyncio.Lock()  # FIFO: queued turns run in the order asked
        self._cancel_waiters: Set["asyncio.Future[None]"] = set()
        self._commands_seen = asyncio.Event()  # an available_commands_update arrived

    def __repr__(self) -> str:
        return "Session(%r, title=%r)" % (self.session_id, self.title)

    @property
    def history(self) -> List[Dict[str, str]]:
        """The messages so far, the chunks of each merged (by `messageId` when the agent
        sends one, `Transcript`): `{"role", "text"}` with role `user`, `agent` or
        `thought` (a loaded session's replayed history too, ACP.md §3.5)."""
        return self._transcript.entries

    # ------------------------------------------------------------------ setup

    def apply_response(self, result: Any) -> None:
        """Take modes and config options from a `session/new` or `session/load` answer."""
        if not isinstance(result, dict):
            return
        modes = result.get("modes")
        if isinstance(modes, dict):
            self.modes = modes
            current = modes.get("currentModeId")
            if isinstance(current, str):
                self.current_mode_id = current
        options = result.get("configOptions")
        if isinstance(options, list):
            self.config_options = options

    # ------------------------------------------------------------------ updates

    def apply(self, update: Update) -> None:
        """Merge one update into the state and pass it to the running turn."""
        kind = update.get("sessionUpdate")
        chunk = chunk_of(update)
        if chunk is not None:
            self._transcript.add(*chunk)
        elif kind == "tool_call":
            self._merge_tool_call(update, replace=True)
        elif kind == "tool_call_update":
            self._merge_tool_call(update, replace=False)
        elif kind == "plan":
            entries = update.get("entries")
            self.plan = entries if isinstance(entries, list) else []
        elif kind == "available_commands_update":
            commands = update.get("availableCommands")  # a full replacement (ACP.md §3.6)
            self.commands = commands if isinstance(commands, list) else []
            self._commands_seen.set()
        elif kind == "current_mode_update":
            mode = update.get("currentModeId")
            if isinstance(mode, str):
                self.current_mode_id = mode
                self.modes["currentModeId"] = mode
        elif kind == "config_option_update":
            options = update.get("configOptions")
            if isinstance(options, list):
                self.config_options = options
        elif kind == "session_info_update":
            if "title" in update:
                self.title = update.get("title")
            if isinstance(update.get("updatedAt"), str):
                self.updated_at = update["updatedAt"]
        elif kind == "usage_update":
            self.context = {k: v for k, v in update.items() if k != "sessionUpdate"}
        else:
            # ACP.md §4: unknown kinds are tolerated, logged and passed on.
            log.info("session %s: update of unknown kind %r", self.session_id, kind)
            self.unknown_updates.append(update)
        turn = self.current_turn
        if turn is not None and not turn.done:
            turn._feed(update)

    def _merge_tool_call(self, update: Update, replace: bool) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            log.info("session %s: tool call update without toolCallId", self.session_id)
            return
        fields = {k: v for k, v in update.items() if k != "sessionUpdate"}
        call = self.tool_calls.get(call_id)
        if call is None or replace:
            # A replayed `tool_call` (session/load) starts the call afresh.
            self.tool_calls[call_id] = fields
        else:
            # ACP.md §4: an update carries only the changed fields; present ones replace.
            call.update(fields)

    def close_open_tool_calls(self, call_ids: List[str]) -> List[Update]:
        """After a cancelled turn: the agent leaves running tool calls open (ACP.md §4);
        mark them cancelled and return the synthetic updates for the caller to show."""
        closed = []
        for call_id in call_ids:
            call = self.tool_calls.get(call_id)
            if call is not None and call.get("status") not in FINAL_TOOL_STATUSES:
                call["status"] = LOCAL_CANCELLED
                closed.append({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                               "status": LOCAL_CANCELLED, "_local": True})
        return closed

    async def wait_commands(self, timeout: float) -> List[Dict[str, Any]]:
        """The advertised commands, waiting up to `timeout` seconds for the agent's
        first list when none has come yet (agents may send it just after
        `session/new` answers, ACP.md §3.6)."""
        if not self._commands_seen.is_set():
            try:
                await asyncio.wait_for(self._commands_seen.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        return self.commands

    @property
    def busy(self) -> bool:
        """A turn is running or waiting in the queue."""
        return any(not turn.done for turn in self._turns)

    # ------------------------------------------------------------------ actions

    def prompt(self, prompt: PromptInput, *, queue: bool = True) -> Turn:
        """Start a turn (call inside the running loop). Returns at once: iterate or
        await the `Turn`. Content the agent does not take (an image without
        `promptCapabilities.image`, ...) is an `OptionError`, raised here."""
        if not queue and self.busy:
            raise SessionBusy("session %s is running a turn" % self.session_id)
        blocks = prompt_blocks(prompt)
        capabilities = getattr(self.client, "prompt_capabilities", None)
        if capabilities is not None:  # (a host that says what the agent takes)
            check_blocks(blocks, capabilities)
        turn = Turn(self, blocks)
        self._turns = [t for t in self._turns if not t.done] + [turn]
        turn._task = asyncio.ensure_future(self._run(turn))
        return turn

    async def _run(self, turn: Turn) -> None:
        try:
            async with self._lock:
                if turn.done:  # cancelled while queued
                    return
                self.current_turn = turn
                turn.started = True
                try:
                    result = await self.client.request(
                        "session/prompt", {"sessionId": self.session_id, "prompt": turn.blocks},
                        timeout=self.client.prompt_timeout)
                finally:
                    self._release_cancel_waiters()
                # Every update the agent sent before this answer is in the turn's queue
                # already: the read loop applies a notification (Session.apply, which
                # is synchronous) before it reads the next message, so the answer was
                # matched only after them, and the end marker goes in behind them.
                if isinstance(result, dict) and isinstance(result.get("usage"), dict):
                    self.usage = result["usage"]
                if isinstance(result, dict) and result.get("stopReason") == "cancelled":
                    for update in self.close_open_tool_calls(turn.tool_call_ids):
                        turn._feed(update)
                turn._finish(result)
        except asyncio.CancelledError:
            turn._finish({"stopReason": "cancelled"})
            raise
        except Exception as exc:  # the agent answered an error, died, or timed out
            turn._finish(exc=exc)
        finally:
            if self.current_turn is turn:
                self.current_turn = None

    def cancel_waiter(self) -> "asyncio.Future[None]":
        """A future resolved when this session's turn is cancelled (or ends): permission
        prompts wait on it so that a cancel answers them all `cancelled` (ACP.md §5)."""
        future: asyncio.Future[None] = asyncio.get_event_loop().create_future()
        turn = self.current_turn
        if turn is not None and turn.cancel_requested:
            future.set_result(None)
        else:
            self._cancel_waiters.add(future)
            future.add_done_callback(self._cancel_waiters.discard)
        return future

    def _release_cancel_waiters(self) -> None:
        for future in list(self._cancel_waiters):
            if not future.done():
                future.set_result(None)
        self._cancel_waiters.clear()

    async def cancel(self) -> None:
        """`session/cancel` (a notification; the prompt then answers `cancelled`), and
        every pending permission request of this session is answered `cancelled`."""
        turn = self.current_turn
        if turn is not None:
            turn.cancel_requested = True
        self._release_cancel_waiters()
        await self.client.notify("session/cancel", {"sessionId": self.session_id})

    async def set_mode(self, mode_id: str) -> Any:
        result = await self.client.request("session/set_mode",
                                           {"sessionId": self.session_id, "modeId": mode_id})
        self.current_mode_id = mode_id
        self.modes["currentModeId"] = mode_id
        return result

    async def set_config_option(self, config_id: str, value: Any) -> Any:
        """`session/set_config_option`: a `select` option takes one of its values (a
        string); a `boolean` one a bool, sent with `type: "boolean"` as ACP asks."""
        params: Dict[str, Any] = {"sessionId": self.session_id, "configId": config_id, "value": value}
        if isinstance(value, bool):
            params["type"] = "boolean"
        result = await self.client.request("session/set_config_option", params)
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            self.config_options = result["configOptions"]
        return result

    async def close(self) -> None:
        await self.client.close_session(self.session_id)

    def config_value(self, config_id: str) -> Any:
        """The current value of one config option (`mode`, `allow_all`, ...)."""
        for option in self.config_options:
            if isinstance(option, dict) and option.get("id") == config_id:
                return option.get("currentValue")
        return None
