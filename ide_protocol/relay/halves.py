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
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from ..client.connection import open_socket
from ..common import lock_rules, lockfile
from ..common.lockfile import LockInfo
from ..common.terminal_text import safe_text
from ..server.sockets import bind_unix, remove_socket_dir
from ..server.limits import REQUEST_TIMEOUT
from .http_relay import serve_cli_connection, serve_ide_connection
from .link import Link, Stream
from .pathmap import PathMap
from .rewrite import Rewriter


def _shown(text: object) -> str:
    """Lock-file text for the log (a terminal, often): escaped, on one line."""
    return safe_text(text, multiline=False)


RELAYED_SUFFIX = " (relayed)"
WATCH_SECONDS = 1.0
Log = Callable[[str], None]


# ------------------------------------------------------------------ the byte stream


async def open_via(command: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
    """Start the other half with `sh -c COMMAND`; its stdout and stdin are the link."""
    proc = await asyncio.create_subprocess_shell(command, stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    return proc.stdout, proc.stdin, proc


async def open_stdio() -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
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


async def closed(writer: asyncio.StreamWriter) -> None:
    """Close the link's writing end and give what is still queued a moment to go out."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 5.0)
    except (asyncio.TimeoutError, ConnectionError, OSError, NotImplementedError):
        pass  # (NotImplementedError: a pipe writer of Python 3.8's has no close waiter)


async def end_child(proc: Any) -> None:
    """Let the other half (started by `open_via`) end on its stdin's end; then insist."""
    if proc is None or proc.returncode is not None:
        return
    try:
        await asyncio.wait_for(proc.wait(), 5.0)
    except asyncio.TimeoutError:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


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
            loop.add_signal_handler(sig, finish, stop, "stopped by signal %d" % sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return installed


# ------------------------------------------------------------------ the CLI's half


class RelayLock:
    """The relay's own lock in the CLI's lock folder: written anew for each announcement
    (a changed lock makes the CLI reconnect anyway), removed first at every end."""

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
        old = self.path
        self.path = lockfile.write_lock(info, self.directory)
        if old:
            lockfile.remove_lock(old)
        self.log("lock %s for %s (%s)" % (self.path, _shown(", ".join(info.workspace_folders)), _shown(info.ide_name)))

    def remove(self) -> None:
        if self.path:
            lockfile.remove_lock(self.path)
            self.log("lock %s removed" % self.path)
            self.path = None


async def run_cli_side(via: Optional[str], paths: PathMap, lock_dir: Optional[str], trusted: bool, wait: bool,
                       log: Log, request_timeout: float = REQUEST_TIMEOUT) -> int:
    reader, writer, proc = await (open_via(via) if via else open_stdio())
    sock, sock_dir, sock_path = bind_unix()
    relay_lock = RelayLock(lock_dir or lockfile.lock_dir(), sock_path, paths, trusted, log)
    rewriter = Rewriter(paths, lambda p: log("%r is outside every --map; passed unchanged" % p))
    stop: "asyncio.Future[str]" = asyncio.get_event_loop().create_future()
    outcome = {"code": 0}
    link: Link

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

    async def on_connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if link.ended:
            w.close()
            return
        await serve_cli_connection(r, w, link.open_stream(), rewriter, relay_lock.nonce, request_timeout)

    link = Link(reader, writer, on_lock=on_lock)
    server = None
    signals: List[int] = []
    try:
        server = await asyncio.start_unix_server(lambda r, w: link.spawn(on_connection(r, w)), sock=sock)
        signals = stop_on_signals(stop)
        runner = asyncio.ensure_future(link.run())
        done, _ = await asyncio.wait([runner, stop], return_when=asyncio.FIRST_COMPLETED)
        relay_lock.remove()  # first: the one disconnect the CLI notices
        if stop.done():
            log(stop.result())
        else:
            outcome["code"] = 1
            log(runner.result())
        writer.close()
        if not runner.done():
            try:
                await asyncio.wait_for(runner, 5.0)
            except asyncio.TimeoutError:
                pass
    finally:
        relay_lock.remove()
        for sig in signals:
            asyncio.get_event_loop().remove_signal_handler(sig)
        if server is not None:
            server.close()
        else:
            sock.close()
        remove_socket_dir(sock_dir)
        await closed(writer)
        await end_child(proc)
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
                       lock_dir: Optional[str], wait: bool, log: Log) -> int:
    loop = asyncio.get_event_loop()
    current = await loop.run_in_executor(None, pick_ide_lock, folder, lock_file, lock_dir)
    reader, writer, proc = await (open_via(via) if via else open_stdio())

    async def on_open(stream: Stream) -> None:
        if current is None:
            stream.close()
            return
        await serve_ide_connection(stream, current.socket_path, current.headers)

    link = Link(reader, writer, on_open=on_open)
    stop: "asyncio.Future[str]" = loop.create_future()
    signals = stop_on_signals(stop)
    code = 0

    async def watch() -> None:
        nonlocal current
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if current is not None and current.path and os.path.exists(current.path) \
                    and await _accepts(current.socket_path):
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
            log("no IDE for %s here (%s)" % (lock_file or os.path.realpath(folder or os.curdir),
                                                  lock_dir or lockfile.lock_dir()))
            link.announce(None)
            if not wait:
                await link.write(b"")
                await closed(writer)
                await end_child(proc)
                return code
        else:
            log("relaying %s (%s)" % (_shown(current.ide_name), _shown(current.path)))
            link.announce(announcement(current))
        runner = asyncio.ensure_future(link.run())
        watcher = link.spawn(watch())
        done, _ = await asyncio.wait([runner, stop], return_when=asyncio.FIRST_COMPLETED)
        if stop.done():
            log(stop.result())
            await link.write(b"")
            writer.close()
            try:
                await asyncio.wait_for(runner, 5.0)
            except asyncio.TimeoutError:
                runner.cancel()
        else:
            log(runner.result())
        watcher.cancel()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await closed(writer)
        await end_child(proc)
    return code
