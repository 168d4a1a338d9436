"""The pushes of one session: reading the GET stream and handing each push out.

An IDE writes its notifications on the session's GET stream, one SSE event each
(PROTOCOL.md §5). `PushFeed` owns the one task that reads that stream (`follow`), and
gives every notification it reads to each subscriber queue and to the `on_push`
callback. When the stream ends, every subscriber gets the marker `END`; when it fails,
the error is kept (`error`) and raised to whoever waits.

Every subscriber queue is bounded (`PushQueue`): the server decides how fast pushes
come, the subscriber how fast they are read, and a subscriber that stops reading must
not make the client hold the server's every byte.

Tasks: the follower, and the task of each coroutine an `on_push` callback returns, are
owned here; `close()` cancels and awaits them all.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Any, AsyncIterator, Callable, Deque, Dict, List, Optional, Set

from .connection import ClientConnection, ClientResponse
from .errors import ClientError, IdeTimeout, ServerGone

__all__ = ["Push", "PushFeed", "PushQueue", "PushCallback", "END", "PUSH_METHODS"]

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


class PushQueue(asyncio.Queue):  # (asyncio.Queue[Push] is not subscriptable at run time on 3.8)
    """A subscriber's pushes, at most `max_items` of them and `max_bytes` of their
    messages' text: a push that would go past either bound makes room by dropping the
    oldest waiting pushes, counted in `dropped`. The newest are kept because an IDE's
    pushes mostly replace each other (the selection, a file's diagnostics); the newest
    push is always kept, whatever its size (one message is bounded by the connection's
    `max_message`). The end marker `END` is never dropped."""

    def __init__(self, max_items: int = 1024, max_bytes: int = 16 * 2 ** 20) -> None:
        super().__init__()
        self.max_items = max_items
        self.max_bytes = max_bytes
        #: Pushes dropped so far to stay within the bounds.
        self.dropped = 0
        self._sizes: Deque[int] = collections.deque()  # beside the queue's items, in order
        self._bytes = 0

    def offer(self, push: Push, size: int) -> None:
        """Queue `push` (its message `size` bytes), dropping the oldest as needed."""
        while self._sizes and (len(self._sizes) >= self.max_items or self._bytes + size > self.max_bytes):
            self.get_nowait()
            self.dropped += 1
        self.put_nowait(push)
        self._sizes[-1] = size
        self._bytes += size

    # The queue's storage hooks (asyncio.Queue's documented way to change its order):
    # each item has its size beside it; `END` and what `put_nowait` adds cost nothing.
    def _put(self, item: Any) -> None:
        super()._put(item)
        self._sizes.append(0)

    def _get(self) -> Any:
        self._bytes -= self._sizes.popleft()
        return super()._get()


class PushFeed:
    """Who receives the pushes, and the task that reads them from the GET stream."""

    def __init__(self, on_push: Optional[PushCallback] = None) -> None:
        self.on_push = on_push
        #: The error that ended the stream (`ServerGone`, ...), None while it is fine.
        self.error: Optional[BaseException] = None
        #: The server ended the stream normally (the last chunk).
        self.ended = False
        self._subscribers: List[PushQueue] = []
        self._follower: Optional["asyncio.Task[None]"] = None
        self._dropped: Set["asyncio.Task[None]"] = set()  # followers of streams `reset` dropped
        self._callbacks: Set["asyncio.Task[Any]"] = set()

    def reset(self) -> None:
        """Before a new session's stream (a reconnect): the old stream, if it is still
        read, is dropped (its connection closed), and its end is no news to the new
        stream's subscribers: only the stream followed now ends the feed."""
        self.error = None
        self.ended = False
        self._drop_follower()

    def _drop_follower(self) -> None:
        """Stop reading the stream followed until now, if any (its connection closed)."""
        old, self._follower = self._follower, None
        if old is not None and not old.done():
            old.cancel()
            self._dropped.add(old)  # awaited by `close()` if it has not ended by then
            old.add_done_callback(self._dropped.discard)

    @property
    def following(self) -> bool:
        return self._follower is not None and not self._follower.done()

    def follow(self, response: ClientResponse, release: Callable[[ClientConnection], None]) -> None:
        """Read the stream `response` to its end in a task of this feed; its connection
        goes back to `release` when the stream ended normally, else it is closed. A
        stream followed until now is dropped: one feed reads one stream."""
        self._drop_follower()
        self._follower = asyncio.ensure_future(self._follow(response, release))

    async def _follow(self, response: ClientResponse, release: Callable[[ClientConnection], None]) -> None:
        ended, error = False, None
        try:
            while True:
                message = await response.next_message(None)  # idle streams are normal (§2)
                if message is None:
                    break
                if isinstance(message, dict) and "method" in message and "id" not in message:
                    self.deliver(message, response.last_message_size)
            ended = True
            release(response.conn)
        except asyncio.CancelledError:
            response.conn.close()
            raise
        except BaseException as exc:
            error = exc if isinstance(exc, ClientError) else ServerGone("the GET stream failed: %s" % exc)
            response.conn.close()
        finally:
            if asyncio.current_task() is self._follower:  # (not a stream `reset` dropped)
                self.ended, self.error = ended, error
                for queue in list(self._subscribers):
                    queue.put_nowait(END)

    def deliver(self, message: Dict[str, Any], size: int) -> None:
        """Hand one notification out (from the stream, or met in a POST's answer);
        `size` is its text's length in bytes."""
        push = Push(message.get("method", ""), message.get("params"), message)
        for queue in list(self._subscribers):
            queue.offer(push, size)
        if self.on_push is not None:
            result = self.on_push(push)
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                self._callbacks.add(task)
                task.add_done_callback(self._callbacks.discard)

    def subscribe(self) -> PushQueue:
        """A queue receiving every later push, then `END`."""
        queue = PushQueue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: PushQueue) -> None:
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
                        queue: Optional[PushQueue] = None) -> Push:
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
        tasks = [t for t in [self._follower, *self._dropped, *self._callbacks] if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
