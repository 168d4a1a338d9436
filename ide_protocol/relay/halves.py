"""The two halves of `relay` on asyncio: the CLI's (private socket and lock) and the IDE's.

Life of the CLI's half (`run_cli_side`): it starts the link (`--via CMD` or `--stdio`),
listens at once on a private socket (0700 directory, 0600 socket: `server.sockets`), and
writes its lock only when the IDE's half has announced a reachable IDE: atomic, 0600,
its own pid, a fresh nonce from `secrets` (never the IDE's), the folders mapped to this
side, the IDE's name marked as relayed, `isTrusted` false unless `--trusted` (trust is
never forwarded). When the IDE goes or the link ends, the lock is removed first (the one
disconnect the CLI notices, PROTOCOL.md §1), then the socket; then it exits, or with
`--wait` keeps the socket and waits for the IDE to come back.

The IDE's half (`run_ide_side`) picks the IDE's lock by the CLI's own rules
(`common.lock_rules`: the folder matched lexically, the socket accepting a probe; not
the pid, which may be invisible from here), announces it without its headers, and for
each stream opened by the CLI's half connects to the IDE with the IDE's nonce. It
watches the lock and its socket, and announces a change (an IDE restarted with a new
lock is followed) or the end.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, cast

from ..client.connection import open_socket
from ..common import lock_rules, lockfile
from ..common.lockfile import LockInfo
from ..common.terminal_text import safe_text
from ..server.acceptor import Acceptor, stream_protocols
from ..server.sockets import bind_unix, remove_socket_dir
from ..server.limits import REQUEST_TIMEOUT
from ..wire import http11
from .http_relay import serve_cli_connection, serve_ide_connection
from .link import LINK_TIMEOUT, MAX_STREAMS, Link, Stream
from .pathmap import PathMap
from .rewrite import Rewriter
from .via import ViaChild, open_via


def _shown(text: object) -> str:
    """Lock-file text for the log (a terminal, often): escaped, on one line."""
    return safe_text(text, multiline=False)


RELAYED_SUFFIX = " (relayed)"
WATCH_SECONDS = 1.0
Log = Callable[[str], None]


# ------------------------------------------------------------------ the byte stream


async def open_stdio() -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, None]:
    """This process's stdin and stdout are the link (stdout carries nothing else)."""
    loop = asyncio.get_event_loop()
    if sys.platform == "win32":  # inherited handles are not overlapped: threads (stdio_threads)
        from .stdio_threads import threaded_stdio

        reader, threaded = threaded_stdio(loop)
        return reader, cast(asyncio.StreamWriter, threaded), None
    reader = asyncio.StreamReader(limit=2 ** 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer, None


async def open_link(via: Optional[str]) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, Optional[ViaChild]]:
    return await (open_via(via) if via else open_stdio())


async def closed(writer: asyncio.StreamWriter, patience: float = 2.0) -> None:
    """Close the link's writing end; what is still queued gets `patience` seconds to go
    out, then it is dropped (the other half may have stopped reading)."""
    writer.close()
    transport = getattr(writer, "transport", None)  # (none on the Windows threaded writer)
    loop = asyncio.get_event_loop()
    deadline = loop.time() + patience
    try:
        await asyncio.wait_for(writer.wait_closed(), patience)
        return
    except NotImplementedError:  # a pipe writer of Python 3.8's has no close waiter: watch its buffer
        while transport is not None and transport.get_write_buffer_size() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if transport is None or not transport.get_write_buffer_size():
            return
    except (asyncio.TimeoutError, ConnectionError, OSError):
        pass
    if transport is not None:
        transport.abort()


async def end_link(writer: asyncio.StreamWriter, child: Optional[ViaChild]) -> None:
    """The link's end on this side: its writing end closed (the other half sees its
    input end), then what `--via` started ended with its whole process group."""
    await closed(writer)
    if child is not None:
        await child.end()


def finish(stop: "asyncio.Future[str]", reason: str) -> None:
    """Resolve `stop` with `reason` unless something else already did."""
    if not stop.done():
        stop.set_result(reason)


def stop_on_signals(stop: "asyncio.Future[str]") -> List[int]:
    """SIGINT, SIGTERM and SIGHUP (the terminal or SSH session that ran it closed)
    resolve `stop`, so that the lock and the socket go (the program's loop only; Unix)."""
    loop = asyncio.get_event_loop()
    installed: List[int] = []
    for sig in (getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)):
        try:
            loop.add_signal_handler(sig, finish, stop, "stopped by %s" % signal.Signals(sig).name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return installed


# ------------------------------------------------------------------ the CLI's half


class RelayLock:
    """The relay's own lock in the CLI's lock folder: written at the first announcement,
    rewritten in place for each later one (PROTOCOL.md §1, "Changing folders": a CLI
    connected through a lock takes its deletion, or a file renamed over it, for the IDE
    leaving), removed first at every end."""

    def __init__(self, directory: str, socket_path: str, paths: PathMap, trusted: bool, log: Log) -> None:
        self.directory = directory
        self.socket_path = socket_path
        self.paths = paths
        self.trusted = trusted
        self.log = log
        self.nonce = secrets.token_hex(32)
        self.path: Optional[str] = None

    @property
    def authorization(self) -> str:
        return "Nonce " + self.nonce

    def announce(self, lock: Dict[str, Any]) -> None:
        """Write the lock for the IDE the other half announced (ValueError: an
        announcement that is not one)."""
        given = lock.get("workspaceFolders")
        if not isinstance(given, list) or not all(isinstance(f, str) for f in given):
            raise ValueError("the other half announced workspaceFolders that are not a list of strings")
        folders = [self.paths.path_to_cli(f) or f for f in given]
        name = str(lock.get("ideName") or "IDE")
        info = LockInfo.new(self.socket_path, {"Authorization": self.authorization}, folders,
                            name + RELAYED_SUFFIX, is_trusted=self.trusted)
        if self.path:
            self.path = lockfile.rewrite_lock(info, self.path)
        else:
            self.path = lockfile.write_lock(info, self.directory)
        self.log("lock %s for %s (%s)" % (self.path, _shown(", ".join(info.workspace_folders)), _shown(info.ide_name)))

    def remove(self) -> None:
        if self.path:
            lockfile.remove_lock(self.path)
            self.log("lock %s removed" % self.path)
            self.path = None


async def remove_stale_locks(directory: str, log: Log) -> None:
    """The locks of relays (and servers) of ours that died without removing them (`kill
    -9`, a crash), by the rules `serve` uses (`common.lock_cleanup`: our marker, the pid
    gone and the socket refusing); off the loop, since it probes sockets."""
    loop = asyncio.get_event_loop()
    try:
        removed = await loop.run_in_executor(None, lockfile.remove_stale_locks, directory)
    except OSError as exc:
        log("could not clean stale locks in %s: %s" % (directory, _shown(exc)))
        return
    for path in removed:
        log("removed the stale lock %s (its process is gone)" % _shown(path))


def refuse_connection(writer: asyncio.StreamWriter, limit: int) -> None:
    """At the cap of connections: 503, as the IDE server answers at its own."""
    body = b"Service Unavailable: the relay has %d connections open (its limit)\n" % limit
    writer.write(http11.write_response(503, [("Content-Type", "text/plain")], body, keep_alive=False))
    writer.close()


async def run_cli_side(via: Optional[str], paths: PathMap, lock_dir: Optional[str], trusted: bool, wait: bool,
                       log: Log, request_timeout: float = REQUEST_TIMEOUT,
                       link_timeout: Optional[float] = LINK_TIMEOUT,
                       max_connections: Optional[int] = MAX_STREAMS) -> int:
    """The CLI's half until it ends; its exit status (0: stopped, or the IDE went; 1: no
    IDE, or the link failed). Whatever the end, the lock goes first, then the socket,
    then what `--via` started."""
    loop = asyncio.get_event_loop()
    directory = lock_dir or lockfile.lock_dir()
    await remove_stale_locks(directory, log)
    reader, writer, child = await open_link(via)
    sock, sock_dir, sock_path = bind_unix()
    relay_lock = RelayLock(directory, sock_path, paths, trusted, log)
    rewriter = Rewriter(paths, lambda p: log("%r is outside every --map; passed unchanged" % p))
    stop: "asyncio.Future[str]" = loop.create_future()
    outcome = {"code": 0}
    connections: Set[asyncio.StreamWriter] = set()

    def on_lock(lock: Optional[dict]) -> None:
        if lock is not None:
            try:
                relay_lock.announce(lock)
            except (OSError, ValueError) as exc:
                outcome["code"] = 1
                finish(stop, "cannot write the relay's lock: %s" % _shown(exc))
            return
        had = relay_lock.path is not None
        relay_lock.remove()
        if not had and not wait:
            outcome["code"] = 1
            finish(stop, "no IDE to reach on the other side (see the other half's message)")
        elif not wait:
            finish(stop, "the IDE went away")
        else:
            log("the IDE went away; waiting for it to come back (--wait)")

    link = Link(reader, writer, on_lock=on_lock, on_end=lambda reason: relay_lock.remove(),
                timeout=link_timeout)

    async def on_connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if link.ended:
            w.close()
            return
        if max_connections and len(connections) >= max_connections:
            refuse_connection(w, max_connections)
            return
        connections.add(w)   # released when the connection ends, whoever ends it
        try:
            await serve_cli_connection(r, w, link.open_stream(), rewriter, relay_lock.nonce, request_timeout)
        finally:
            connections.discard(w)
            w.close()

    # (Accepted by an Acceptor, not asyncio.Server: a relay stopped while the CLI connects
    # must not leave a half-accepted connection behind; see server/acceptor.py.)
    acceptor = Acceptor(sock, stream_protocols(lambda r, w: link.spawn(on_connection(r, w))))
    signals: List[int] = []
    try:
        acceptor.start()
        signals = stop_on_signals(stop)
        runner = asyncio.ensure_future(link.run())
        await asyncio.wait([runner, stop], return_when=asyncio.FIRST_COMPLETED)
        if stop.done():
            link.close(stop.result())
        reason = await runner   # (the lock went first: `on_end`)
        if not stop.done():
            outcome["code"] = 1
        log(reason)
    finally:
        relay_lock.remove()
        for sig in signals:
            loop.remove_signal_handler(sig)
        await acceptor.close()   # (closes the socket)
        remove_socket_dir(sock_dir)
        await end_link(writer, child)
    return outcome["code"]


# ------------------------------------------------------------------ the IDE's half


def pick_ide_lock(folder: Optional[str], lock_file: Optional[str], directory: Optional[str]) -> Optional[LockInfo]:
    """The IDE's lock: the given file, or the one the CLI would take for `folder`
    (lexical folder match, socket accepting; the pid is not judged). Relays' own locks
    are left out, so that a relay never relays to itself."""
    if lock_file:
        try:
            candidates = [LockInfo.from_json(lock_rules.read_lock(lock_file)[0], path=lock_file)]
        except (ValueError, TypeError):
            return None
    else:
        candidates = [info for _path, info in lockfile.read_locks(directory)
                      if isinstance(info, LockInfo) and not info.ide_name.endswith(RELAYED_SUFFIX)]
    cwd = os.path.realpath(folder or os.curdir)
    usable = [info for info in candidates
              if lock_rules.probe_lock_socket(info.socket_path, info.timestamp, cwd) is None]
    if lock_file:
        return usable[0] if usable else None
    return lock_rules.auto_connect_choice(usable, cwd)[0]


def _read_again(current: LockInfo) -> Optional[LockInfo]:
    """The IDE's lock read again, when it is still the same IDE's (its socket and nonce):
    a lock rewritten in place with new folders. None when it cannot be read now (in the
    middle of a rewrite: the next tick reads it again) or is another IDE's."""
    if not current.path:
        return None
    content, problems = lock_rules.read_lock(current.path)
    if content is None or problems:
        return None
    try:
        info = LockInfo.from_json(content, path=current.path)
    except (ValueError, TypeError):
        return None
    if (info.socket_path, info.headers) != (current.socket_path, current.headers):
        return None
    return info


def announcement(info: LockInfo) -> Dict[str, Any]:
    """What crosses the link about the IDE's lock: no headers (the nonce stays here),
    no trust (never forwarded)."""
    return {"ideName": info.ide_name, "workspaceFolders": list(info.workspace_folders)}


async def _accepts(path: str) -> bool:
    try:
        _r, w = await open_socket(path, 2.0)
    except (OSError, asyncio.TimeoutError, ValueError):
        return False
    w.close()
    return True


async def run_ide_side(via: Optional[str], folder: Optional[str], lock_file: Optional[str],
                       lock_dir: Optional[str], wait: bool, log: Log,
                       link_timeout: Optional[float] = LINK_TIMEOUT,
                       max_connections: Optional[int] = MAX_STREAMS) -> int:
    """The IDE's half until it ends; its exit status (0: stopped, the IDE went, or the
    CLI's half ended the link; 1: no IDE, or the link failed). It ends when its input
    ends, whatever its own peers are doing."""
    loop = asyncio.get_event_loop()
    current = await loop.run_in_executor(None, pick_ide_lock, folder, lock_file, lock_dir)
    reader, writer, child = await open_link(via)

    async def on_open(stream: Stream) -> None:
        if current is None:
            stream.close()
            return
        await serve_ide_connection(stream, current.socket_path, current.headers)

    link = Link(reader, writer, on_open=on_open, timeout=link_timeout, max_streams=max_connections)
    stop: "asyncio.Future[str]" = loop.create_future()
    signals = stop_on_signals(stop)
    code = 0

    async def watch() -> None:
        nonlocal current
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if current is not None and current.path and os.path.exists(current.path) \
                    and await _accepts(current.socket_path):
                # The same IDE: its lock may have been rewritten in place (its folders
                # changed, PROTOCOL.md §1): what it announces now goes across.
                again = await loop.run_in_executor(None, _read_again, current)
                if again is not None and announcement(again) != announcement(current):
                    log("the IDE now serves %s" % _shown(", ".join(again.workspace_folders)))
                    current = again
                    link.announce(announcement(again))
                continue
            found = await loop.run_in_executor(None, pick_ide_lock, folder, lock_file, lock_dir)
            if found is not None and found != current:
                log("now relaying %s (%s)" % (_shown(found.ide_name), _shown(found.path)))
                current = found
                link.announce(announcement(found))
            elif found is None and current is not None:
                current = None
                link.announce(None)
                if not wait:
                    finish(stop, "the IDE went away")
                    return

    try:
        if current is None:
            code = 1
            log("no IDE for %s here (%s)" % (_shown(lock_file or os.path.realpath(folder or os.curdir)),
                                             _shown(lock_dir or lockfile.lock_dir())))
            link.announce(None)
            if not wait:
                return code
        else:
            log("relaying %s (%s)" % (_shown(current.ide_name), _shown(current.path)))
            link.announce(announcement(current))
        runner = asyncio.ensure_future(link.run())
        watcher = asyncio.ensure_future(watch())
        await asyncio.wait([runner, stop], return_when=asyncio.FIRST_COMPLETED)
        watcher.cancel()
        if stop.done():
            link.close(stop.result())
        reason = await runner
        await asyncio.gather(watcher, return_exceptions=True)
        if not stop.done() and not link.ended_by_peer:
            code = 1
        log(reason)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await end_link(writer, child)
    return code
