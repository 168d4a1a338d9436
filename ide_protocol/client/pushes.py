"""The pushes of one session: reading the GET stream and handing each push out.

An IDE writes its notifications on the session's GET stream, one SSE event each
(PROTOCOL.md §5). `PushFeed` owns the one task that reads that stream (`follow`), and
gives every notification it reads to each subscriber queue and to the `on_push`
callback. When the stream ends, every subscriber gets the marker `END`; when it fails,
the error is kept (`error`) and raised to whoever waits.

Tasks: the follower, and the task of each coroutine an `on_push` callback returns, are
owned here; `close()` cancels and awaits them all.
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Set

from .connection import ClientConnection, ClientResponse
from .errors import ClientError, IdeTimeout, ServerGone

__all__ = ["Push", "PushFeed", "PushCallback", "END", "PUSH_METHODS"]

#: The notifications an IDE pushes on the GET stream (PROTOCOL.md §5).
PUSH_METHODS = ("selection_changed", "diagnostics_changed", "add_file_reference", "add_selection")

#: Put in every subscriber queue when the stream has ended (or failed).
END = object()


class Push:
    """A notification the server pushed on the GET stream (PROTOCOL.md §5)."""

    __slots__ = ("method", "params", "raw")

    def __init__(self, method: str, params: Any, raw: Dict[str, Any]) -> None:
        self.method = method
        self.params = params
        self.raw = raw

    def __repr__(self) -> str:
        return "Push(%r, %r)" % (self.method, self.params)


PushCallback = Callable[[Push], Any]


class PushFeed:
    """Who receives the pushes, and the task that reads them from the GET stream."""

    def __init__(self, on_push: Optional[PushCallback] = None) -> None:
        self.on_push = on_push
        #: The error that ended the stream (`ServerGone`, ...), None while it is fine.
        self.error: Optional[BaseException] = None
        #: The server ended the stream normally (the last chunk).
        self.ended = False
        self._subscribers: List["asyncio.Queue[Any]"] = []
        self._follower: Optional["asyncio.Task[None]"] = None
        self._callbacks: Set["asyncio.Task[Any]"] = set()

    def reset(self) -> None:
        """Before a new session's stream (a reconnect)."""
        self.error = None
        self.ended = False

    @property
    def following(self) -> bool:
        return self._follower is not None and not self._follower.done()

    def follow(self, response: ClientResponse, release: Callable[[ClientConnection], None]) -> None:
        """Read the stream `response` to its end in a task of this feed; its connection
        goes back to `release` when the stream ended normally, else it is closed."""
        self._follower = asyncio.ensure_future(self._follow(response, release))

    async def _follow(self, response: ClientResponse, release: Callable[[ClientConnection], None]) -> None:
        try:
            while True:
                message = await response.next_message(None)  # idle streams are normal (§2)
                if message is None:
                    break
                if isinstance(message, dict) and "method" in message and "id" not in message:
                    self.deliver(message)
            self.ended = True
            release(response.conn)
        except asyncio.CancelledError:
            response.conn.close()
            raise
        except BaseException as exc:
            self.error = exc if isinstance(exc, ClientError) else ServerGone("the GET stream failed: %s" % exc)
            response.conn.close()
        finally:
            for queue in list(self._subscribers):
                queue.put_nowait(END)

    def deliver(self, message: Dict[str, Any]) -> None:
        """Hand one notification out (from the stream, or met in a POST's answer)."""
        push = Push(message.get("method", ""), message.get("params"), message)
        for queue in list(self._subscribers):
            queue.put_nowait(push)
        if self.on_push is not None:
            result = self.on_push(push)
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                self._callbacks.add(task)
                task.add_done_callback(self._callbacks.discard)

    def subscribe(self) -> "asyncio.Queue[Any]":
        """A queue receiving every later push, then `END`."""
        queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: "asyncio.Queue[Any]") -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    async def pushes(self, timeout: Optional[float]) -> AsyncIterator[Push]:
        """Pushes from now on, until the stream ends (then the iteration stops) or fails
        (its error is raised); `timeout` bounds the wait for each push."""
        queue = self.subscribe()
        try:
            if not self.following:
                self.raise_error()
                return
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout)
                except asyncio.TimeoutError:
                    raise IdeTimeout("no push within %s s" % timeout) from None
                if item is END:
                    self.raise_error()
                    return
                yield item
        finally:
            self.unsubscribe(queue)

    async def wait_push(self, method: Optional[str], timeout: Optional[float],
                        queue: Optional["asyncio.Queue[Any]"] = None) -> Push:
        """The next push (of `method`, when given), from `queue` or a new subscription."""
        own = queue is None
        q = self.subscribe() if queue is None else queue
        try:
            while True:
                try:
                    item = await asyncio.wait_for(q.get(), timeout)
                except asyncio.TimeoutError:
                    raise IdeTimeout("no %s push within %s s" % (method or "", timeout)) from None
                if item is END:
                    self.raise_error()
                    raise ServerGone("the GET stream ended before a %s push" % (method or "push"))
                if method is None or item.method == method:
                    return item
        finally:
            if own:
                self.unsubscribe(q)

    async def wait_end(self, timeout: Optional[float]) -> bool:
        """Wait until the stream ends, at most `timeout` seconds; whether it did."""
        if self._follower is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self._follower), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop reading the stream and cancel the callbacks still running; awaited."""
        tasks = [t for t in [self._follower] + list(self._callbacks) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
