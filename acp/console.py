"""Lines from stdin without blocking the event loop: chat prompts and permission answers.

How: `loop.add_reader` on the stdin file descriptor, then `os.read` of what is ready,
split on `\\n` only. That works for a terminal and for a pipe (`echo 1 | python -m acp
...`), and a pending read can be cancelled (a cancelled turn stops waiting for its
permission answer; nothing is left blocked in a thread at exit). Where `add_reader`
cannot watch the descriptor — a regular file redirected with `<` (epoll refuses files,
and they never block anyway) — we read it directly; on an event loop without
`add_reader` (Windows' proactor) one executor call per line is the fallback.

On a terminal where the `readline` module exists, `ReadlineConsole` reads instead (line
editing, history, Tab completion of slash commands): `input()` in one daemon thread, as
readline has no asynchronous interface in Python. Either way, one console serves both
the chat and the permission questions, so their lines never interleave.
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import IO, Any, Callable, List, Optional


class _LoopLock:
    """An `asyncio.Lock` for an object that outlives event loops (the one console of
    stdin serves every `asyncio.run` of a program): made in the running loop, and made
    again in a later one (a lock is bound to the loop it first waited in)."""

    def __init__(self) -> None:
        self._lock: Optional[asyncio.Lock] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        await self._lock.acquire()

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._lock is not None
        self._lock.release()


class OneQuestionAtATime(_LoopLock):
    """A question and its answer as one exchange, for every asker of one console.

    Two questions may come at once (the agent asks for two permissions in parallel, or
    for a permission while a terminal waits for consent). Each asker prints its question
    and then waits for a line: without this, both questions are on the screen before the
    first line is read, and that line answers the first question while the one right
    above the cursor is the second. So an asker holds this while it shows its question
    and reads the answer; the next question is shown only then.
    """


class Console:
    """Async line reader over one file descriptor (shared by every reader of stdin)."""

    _stdin: Optional["Console"] = None

    def __init__(self, fd: int, encoding: str = "utf-8") -> None:
        self.fd = fd
        self.encoding = encoding
        self._buf = b""
        self._eof = False
        self._reading = _LoopLock()  # one reader of the descriptor at a time
        self.questions = OneQuestionAtATime()  # for every asker reading this console

    @classmethod
    def for_stdin(cls, stream: Optional[IO[str]] = None) -> "Console":
        """The one console of this process's stdin (two readers would split its bytes)."""
        if cls._stdin is None:
            stream = stream or sys.stdin
            cls._stdin = cls(stream.fileno(), getattr(stream, "encoding", None) or "utf-8")
        return cls._stdin

    def isatty(self) -> bool:
        try:
            return os.isatty(self.fd)
        except OSError:
            return False

    async def readline(self, prompt: str = "") -> Optional[str]:
        """The next line without its terminator, or None at end of input. `prompt` is
        written to stderr first (only when reading a terminal)."""
        if prompt and self.isatty():
            write_stderr(prompt)
        async with self._reading:
            while b"\n" not in self._buf and not self._eof:
                data = await self._read_some()
                if data:
                    self._buf += data
                else:
                    self._eof = True
            if b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
            elif self._buf:
                line, self._buf = self._buf, b""
            else:
                return None
            return line.rstrip(b"\r").decode(self.encoding, "replace")

    async def _read_some(self) -> bytes:
        loop = asyncio.get_event_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def on_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self.fd, on_ready)
        except NotImplementedError:  # no add_reader on this loop
            return await loop.run_in_executor(None, os.read, self.fd, 65536)
        except (PermissionError, ValueError, OSError):  # a regular file: reads never block
            return os.read(self.fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)
        try:
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return await self._read_some()


def complete_command(before: str, text: str, names: List[str]) -> List[str]:
    """Tab completion of the chat: the slash commands (`names`, with their `/`) that
    start with `text`, the word being typed, when it is the line's first word (`before`
    is what precedes it)."""
    if before.strip() or not text.startswith("/"):
        return []
    return sorted(name for name in set(names) if name.startswith(text))


class ReadlineConsole:
    """Lines typed on a terminal through `readline`, with Tab completing the names
    `commands()` returns. `readline(prompt)` is awaitable; the one reading thread is
    reused when a wait is cancelled (its line then goes to the next reader)."""

    def __init__(self, commands: Callable[[], List[str]]) -> None:
        import readline  # absent on Windows and some builds: the caller falls back

        self._rl: Any = readline
        self._commands = commands
        self._matches: List[str] = []
        self._pending: "Optional[asyncio.Future[Optional[str]]]" = None
        self.questions = OneQuestionAtATime()  # for every asker reading this console
        readline.set_completer(self._complete)
        readline.set_completer_delims(" \t\n")
        if "libedit" in (readline.__doc__ or ""):  # macOS: the BSD library's syntax
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")

    @classmethod
    def for_terminal(cls, commands: Callable[[], List[str]]) -> Optional["ReadlineConsole"]:
        """A readline console when stdin and stdout are terminals and readline exists."""
        try:
            if not (os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())):
                return None
            return cls(commands)
        except (ImportError, OSError, ValueError, AttributeError):
            return None

    def isatty(self) -> bool:
        return True

    def _complete(self, text: str, state: int) -> Optional[str]:
        if state == 0:
            try:
                before = self._rl.get_line_buffer()[:self._rl.get_begidx()]
                self._matches = complete_command(before, text, self._commands())
            except Exception:  # a completer must never raise into readline
                self._matches = []
        return self._matches[state] if state < len(self._matches) else None

    async def readline(self, prompt: str = "") -> Optional[str]:
        if self._pending is None or self._pending.done():
            loop = asyncio.get_event_loop()
            future: "asyncio.Future[Optional[str]]" = loop.create_future()

            def deliver(line: Optional[str]) -> None:
                if not future.done():
                    future.set_result(line)

            def read() -> None:
                try:
                    line: Optional[str] = input(prompt)
                except (EOFError, KeyboardInterrupt, OSError, ValueError):
                    line = None
                try:
                    loop.call_soon_threadsafe(deliver, line)
                except RuntimeError:  # the loop is gone: nobody waits any more
                    pass

            self._pending = future
            threading.Thread(target=read, name="acp-readline", daemon=True).start()
        pending = self._pending
        line = await asyncio.shield(pending)
        if self._pending is pending:
            self._pending = None
        return line


def write_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
