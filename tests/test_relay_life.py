"""The relay under a dying link: a far half that stalls (SIGSTOP: a suspended laptop, a
partitioned network) is noticed by the link's pings and the relay ends, its lock first;
a short stall loses nothing; whatever ends the relay (a bad frame, the link's end, a
signal), what `--via` started ends with it, process group and all, with one line and no
traceback; the far half ends when its input ends, even with its own peers stuck; a relay
killed with SIGKILL leaves a lock that the next relay removes; connections are capped.

Each link test runs over a plain pipe (`--via` starts the other half directly) and over
a real SSH connection to OpenSSH's sshd on 127.0.0.1 (tests/test_relay_ssh.py's; skipped,
with the reason, where sshd cannot be had)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Any, AsyncIterator, Iterator, List, Optional, Tuple

import pytest

from platforms import posix_signals, unix_sockets

from ide_protocol.client import IdeClient
from ide_protocol.common.tools import Selection
from ide_protocol.server.ide_server import IdeServer
from ide_protocol.wire.jsonrpc import JsonRpcError
from test_relay_e2e import (FAKE_IDE_HALF, LIMIT, ROOT, ide_half_pids, live_pids, relay_lock, relay_locks, setup,
                            wait_for)
from test_relay_ssh import Sshd, why_no_sshd

pytestmark = [unix_sockets, posix_signals,
              pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds processes through /proc (Linux)")]

#: --link-timeout for the tests where the link must die: short, yet many times what a
#: ping's answer takes on a loaded machine.
SHORT_LINK_TIMEOUT = 3


class Transport:
    """How `--via` reaches the other half: `wrap(argv)` is the shell command that runs
    `argv` over it (with the checkout on PYTHONPATH), `client_pids()` the processes of
    the transport itself on this side (ssh) that must end with the relay."""

    def __init__(self, kind: str, sshd: Optional[Sshd] = None) -> None:
        self.kind = kind
        self.sshd = sshd

    def wrap(self, argv: List[str]) -> str:
        command = "PYTHONPATH=%s %s" % (shlex.quote(ROOT), " ".join(shlex.quote(a) for a in argv))
        if self.sshd is None:
            return command
        # ssh hands the remote command to the login shell as one string: quoted once here
        return " ".join(shlex.quote(a) for a in self.sshd.ssh() + [command])

    def client_pids(self) -> List[int]:
        # (By this test's own key file: the suite runs other tests' ssh clients meanwhile.)
        return live_pids(str(self.sshd.folder / "user_key")) if self.sshd is not None else []


@pytest.fixture(params=["pipe", "ssh"])
def transport(request: Any, tmp_path: Any) -> Iterator[Transport]:
    if request.param == "pipe":
        yield Transport("pipe")
        return
    reason = why_no_sshd()
    if reason:
        pytest.skip(reason)
    server = Sshd(tmp_path / "ssh")
    try:
        yield Transport("ssh", server)
    finally:
        server.close()


def start_relay(tmp: Any, transport: Transport, *extra: str) -> "subprocess.Popen[str]":
    """The CLI's half, starting the IDE's half (for tmp/project) over `transport`."""
    ide_side = [sys.executable, "-m", "ide_protocol", "relay", "ide-side", "--stdio", "--folder",
                str(tmp / "project"), "--lock-dir", str(tmp / "ide")]
    argv = [sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", transport.wrap(ide_side),
            "--map", "%s=%s" % (tmp / "project", tmp / "cliview"), "--lock-dir", str(tmp / "cli-ide")] + list(extra)
    return subprocess.Popen(argv, env=dict(os.environ, PYTHONPATH=ROOT), cwd=str(tmp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


async def ended(relay: "subprocess.Popen[str]") -> Tuple[int, List[str]]:
    """The relay's exit status and the CLI half's lines on stderr (the IDE's half, over a
    pipe, writes there too), once it ended by itself. Neither half wrote a traceback."""
    code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, LIMIT)
    lines = (relay.stderr.read() if relay.stderr else "").splitlines()
    assert not any("Traceback" in line or "Error:" in line.split(": ", 1)[0] or "never retrieved" in line
                   or line.startswith("Exception ignored") for line in lines), lines
    return code, [line for line in lines if " cli-side: " in line]


def stop_processes(pids: List[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Relayed:
    """An IdeServer whose diffs wait for a person who never comes (`shown`), and a relay
    in front of it over a transport, its lock written: `relay`, the far half's pids
    (`far`) and those of the transport's own processes (`via_pids`: ssh)."""

    def __init__(self, server: IdeServer, relay: "subprocess.Popen[str]", shown: List[Any]) -> None:
        self.server = server
        self.relay = relay
        self.shown = shown
        self.far: List[int] = []
        self.via_pids: List[int] = []

    async def waiting_diff(self, tmp: Any) -> Tuple[IdeClient, "asyncio.Future[Any]"]:
        """A client whose `open_diff` waits at the IDE: the client, and the call."""
        client = IdeClient.discover(str(tmp / "cliview"), str(tmp / "cli-ide"), timeout=60)
        await client.connect()
        call = asyncio.ensure_future(client.open_diff(str(tmp / "cliview" / "a.py"), "x\n", "T"))
        await wait_for(lambda: self.shown, "the diff at the IDE")
        return client, call


@contextlib.asynccontextmanager
async def relayed(tmp: Any, transport: Transport, *extra: str, json_response: bool = False
                  ) -> AsyncIterator[Relayed]:
    setup(tmp)
    shown: List[Any] = []

    async def on_diff(diff: Any) -> Optional[bool]:
        shown.append(diff)
        return None   # left to a person

    async with IdeServer([str(tmp / "project")], lock_dir=str(tmp / "ide"), ide_name="Test IDE", on_diff=on_diff,
                         json_response=json_response) as server:
        it = Relayed(server, start_relay(tmp, transport, *extra), shown)
        try:
            await relay_lock(tmp, it.relay, LIMIT)
            it.far = ide_half_pids(tmp)
            assert len(it.far) == 1, it.far
            it.via_pids = transport.client_pids()
            yield it
        finally:
            stop_processes(it.far, signal.SIGCONT)
            if it.relay.poll() is None:
                it.relay.kill()
                it.relay.wait()


async def refused(call: "asyncio.Future[Any]") -> JsonRpcError:
    """The JSON-RPC error `call` came back with (the relay's own answer)."""
    outcome = (await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), LIMIT))[0]
    assert isinstance(outcome, JsonRpcError) and outcome.code == -32000, outcome
    return outcome


async def far_half_gone(tmp: Any, it: Relayed, transport: Transport) -> None:
    """`--via`'s processes ended with the relay; the far half too: in `--via`'s process
    group over a pipe, ended with it; under sshd, resumed, it finds its input ended."""
    assert not [pid for pid in it.via_pids if pid in transport.client_pids()]
    if transport.kind == "ssh":
        stop_processes(it.far, signal.SIGCONT)
    await wait_for(lambda: not ide_half_pids(tmp), "the IDE's half to end", 30)


def test_a_stalled_far_half_is_declared_dead_the_lock_first_and_everything_it_started_ends(
        tmp_path: Any, transport: Transport) -> None:
    """SIGSTOP on the IDE's half: nothing ends, the pipe stays open. Before, the relay
    waited for ever with its lock in place, and the CLI's open_diff with it; now the
    pings go unanswered, the lock goes first, the waiting diff is answered saying the
    link died, the relay says why in one line and exits 1, and `--via`'s processes
    (ssh) are gone."""
    async def scenario() -> None:
        async with relayed(tmp_path, transport, "--link-timeout", str(SHORT_LINK_TIMEOUT)) as it:
            client, call = await it.waiting_diff(tmp_path)
            stop_processes(it.far, signal.SIGSTOP)
            error = await refused(call)
            assert relay_locks(tmp_path) == []   # gone before the call came back
            died = ("the link died: nothing from the other half for %d s (it stalled, or the connection was lost)"
                    % SHORT_LINK_TIMEOUT)
            assert error.message == "relay: " + died
            await client.close()
            code, lines = await ended(it.relay)
            assert code == 1 and lines[-1].endswith(died), lines
            await far_half_gone(tmp_path, it, transport)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 3))


def test_a_far_half_stalled_with_a_megabyte_unsent_is_declared_dead_in_one_line(tmp_path: Any) -> None:
    """As above, with more sent meanwhile than the pipe to `--via` holds (a diff of 1 MB
    proposed during the stall). Before, the relay's last line was followed by asyncio's
    "Exception in callback ... InvalidStateError" on every CPython (its 2 s wait for the
    link to close, given up on, had cancelled asyncio's own future), and on 3.8-3.10 the
    broken pipe the unsent rest meets could be printed as "Future exception was never
    retrieved"."""
    pipe = Transport("pipe")

    async def scenario() -> None:
        async with relayed(tmp_path, pipe, "--link-timeout", str(SHORT_LINK_TIMEOUT)) as it:
            client, call = await it.waiting_diff(tmp_path)
            stop_processes(it.far, signal.SIGSTOP)
            big = asyncio.ensure_future(client.open_diff(str(tmp_path / "cliview" / "b.py"), "y" * (1 << 20), "B"))
            await refused(call)
            await asyncio.wait_for(asyncio.gather(big, return_exceptions=True), LIMIT)
            await client.close()
            code, lines = await ended(it.relay)
            assert code == 1 and "the link died" in lines[-1], lines
            await far_half_gone(tmp_path, it, pipe)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 3))


def test_a_short_stall_loses_nothing(tmp_path: Any, transport: Transport) -> None:
    """The far half stopped for 3 s with the default --link-timeout, a diff waiting and
    a request sent meanwhile: when it resumes, the request is answered, the diff's
    answer arrives, the relay goes on."""
    async def scenario() -> None:
        async with relayed(tmp_path, transport) as it:
            client, call = await it.waiting_diff(tmp_path)
            it.server.set_selection(Selection(str(tmp_path / "project" / "a.py"), "print", (0, 0), (0, 5)))
            stop_processes(it.far, signal.SIGSTOP)
            asked = asyncio.ensure_future(client.get_selection())
            await asyncio.sleep(3)
            assert not asked.done() and it.relay.poll() is None and relay_locks(tmp_path)
            stop_processes(it.far, signal.SIGCONT)
            selection = await asyncio.wait_for(asked, 30)
            assert selection["filePath"] == str(tmp_path / "cliview" / "a.py")
            it.shown[0].accept()
            assert (await asyncio.wait_for(call, 30))["result"] == "SAVED"
            await client.close()
            assert it.relay.poll() is None and relay_locks(tmp_path)
            it.relay.send_signal(signal.SIGTERM)
            code, lines = await ended(it.relay)
            assert code == 0 and lines[-1].endswith("stopped by SIGTERM"), lines

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 3))


def test_sigterm_with_the_far_half_stalled_ends_at_once_and_leaves_nothing(tmp_path: Any,
                                                                          transport: Transport) -> None:
    """Before: 11-16 s, then a traceback ("Event loop is closed"), and ssh and the far
    half left running. Now: the lock goes, a waiting diff is answered saying why, one
    line, status 0, --via's group ended."""
    async def scenario() -> None:
        async with relayed(tmp_path, transport) as it:
            client, call = await it.waiting_diff(tmp_path)
            stop_processes(it.far, signal.SIGSTOP)
            it.relay.send_signal(signal.SIGTERM)
            assert (await refused(call)).message == "relay: stopped by SIGTERM"
            await client.close()
            code, lines = await ended(it.relay)
            assert code == 0 and lines[-1].endswith("stopped by SIGTERM"), lines
            assert relay_locks(tmp_path) == []
            await far_half_gone(tmp_path, it, transport)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))


def test_a_diff_answered_in_json_and_the_push_stream_when_the_relay_stops(tmp_path: Any) -> None:
    """An IDE that answers in plain JSON (no SSE head sent before the answer): the
    waiting diff is answered with a JSON-RPC error saying why, and the CLI's push
    stream ends (its chunked body closed), rather than the connections just dropping."""
    async def scenario() -> None:
        async with relayed(tmp_path, Transport("pipe"), json_response=True) as it:
            client, call = await it.waiting_diff(tmp_path)
            it.relay.send_signal(signal.SIGTERM)
            assert (await refused(call)).message == "relay: stopped by SIGTERM"
            await client.wait_stream_end(timeout=30)
            await client.close()
            code, lines = await ended(it.relay)
            assert code == 0 and lines[-1].endswith("stopped by SIGTERM"), lines

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


# ---------------------------------------------------------------------- every way out


#: A far half that misbehaves (argv: MARKER HOW): it starts a child of its own, greets,
#: announces a lock, then `bad-frame` sends a frame of an unknown type, `end-of-output`
#: closes its stdout; it ignores SIGTERM and the end of its input (only SIGKILL ends it).
STUBBORN_HALF = """
import os, signal, subprocess, sys, time
from ide_protocol.relay import frames
marker, how = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", marker],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
out = sys.stdout.buffer
out.write(frames.MAGIC + frames.encode_lock({"ideName": "stubborn", "workspaceFolders": [os.getcwd()]}))
out.flush()
if how == "bad-frame":
    time.sleep(0.5)
    out.write(bytes([99]) + bytes(8))
    out.flush()
elif how == "end-of-output":
    time.sleep(0.5)
    out.close()
    os.close(1)
time.sleep(3600)
"""


@pytest.mark.parametrize("how, code, reason", [
    ("bad-frame", 1, "the link broke: unknown frame type 99"),
    ("end-of-output", 1, "the link ended (the other half closed it)"),
    ("SIGTERM", 0, "stopped by SIGTERM"),
    ("SIGHUP", 0, "stopped by SIGHUP"),
    ("SIGINT", 0, "stopped by SIGINT"),
])
def test_every_way_out_ends_vias_whole_process_group(tmp_path: Any, how: str, code: int, reason: str) -> None:
    """`--via`'s shell, the program it ran and that one's child, all ignoring SIGTERM
    and their input's end: all gone when the relay ends, whichever way it ends."""
    marker = "relay-test-%d-%s" % (os.getpid(), how)
    via = "%s -c %s %s %s" % (sys.executable, shlex.quote(STUBBORN_HALF), marker,
                              "bad-frame" if how == "bad-frame" else "end-of-output" if how == "end-of-output"
                              else "stay")
    # (a shell that waits for the half, holding the link's pipe too; or, for the end of
    # its output to reach the relay, none)
    via = "exec " + via if how == "end-of-output" else via + "; true"
    relay = subprocess.Popen([sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", via,
                              "--lock-dir", str(tmp_path / "cli-ide")], env=dict(os.environ, PYTHONPATH=ROOT),
                             cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    async def scenario() -> None:
        try:
            await relay_lock(tmp_path, relay, LIMIT)
            await wait_for(lambda: len(live_pids(marker)) == 2, "the far half and its child")
            if how.startswith("SIG"):
                relay.send_signal(getattr(signal, how))
            status, lines = await ended(relay)
            assert status == code and lines[-1].endswith(reason), lines
            assert relay_locks(tmp_path) == []
            assert live_pids(marker) == []   # (ended before the relay exits: no wait here)
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait()
            stop_processes(live_pids(marker), signal.SIGKILL)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_the_far_half_ends_when_its_input_ends_while_its_peers_are_stuck(tmp_path: Any) -> None:
    """The IDE's half started with --stdio (as ssh starts it), carrying a request to an
    IDE that never reads it, its own output never read: when its input ends it ends,
    status 0, one line."""
    import socket
    import threading

    from ide_protocol.common import lockfile
    from ide_protocol.relay import frames

    folder = tmp_path / "project"
    folder.mkdir()
    sock_dir = tmp_path / "s"
    sock_dir.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_dir / "ide.sock"))
    listener.listen(8)
    held: List[socket.socket] = []

    def accept_until_closed() -> None:
        for _ in range(8):
            try:
                held.append(listener.accept()[0])
            except OSError:
                return   # (the test closed the listener: it is over)
    threading.Thread(target=accept_until_closed, daemon=True).start()
    info = lockfile.LockInfo.new(str(sock_dir / "ide.sock"), {"Authorization": "Nonce n"}, [str(folder)], "Deaf IDE")
    lock = lockfile.write_lock(info, str(tmp_path / "ide"))
    half = subprocess.Popen([sys.executable, "-m", "ide_protocol", "relay", "ide-side", "--stdio", "--lock", lock],
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=str(tmp_path), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert half.stdin is not None
        body = b"x" * (frames.INITIAL_WINDOW - 200)
        request = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (8 << 20)
        half.stdin.write(frames.MAGIC + frames.encode_open(1) + frames.encode_data(1, request + body))
        half.stdin.flush()
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert held, "the IDE's half never connected to the IDE"
        time.sleep(0.5)
        half.stdin.close()   # its input ends; nobody reads its output, nor the IDE its request
        assert half.wait(LIMIT) == 0
        err = half.stderr.read().decode() if half.stderr else ""
        assert "Traceback" not in err and err.rstrip().endswith("the link ended (the other half closed it)"), err
    finally:
        if half.poll() is None:
            half.kill()
            half.wait()
        for conn in held:
            conn.close()
        listener.close()


# ---------------------------------------------------------------------- stale locks, caps


def fake_half_relay(tmp: Any, *extra: str) -> "subprocess.Popen[str]":
    via = "%s -c %s %s" % (sys.executable, shlex.quote(FAKE_IDE_HALF),
                           shlex.quote('{"ideName": "x", "workspaceFolders": ["%s"]}' % tmp))
    return subprocess.Popen([sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", via,
                             "--lock-dir", str(tmp / "cli-ide")] + list(extra), env=dict(os.environ, PYTHONPATH=ROOT),
                            cwd=str(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_relay_killed_with_sigkill_leaves_a_lock_the_next_relay_removes(tmp_path: Any) -> None:
    """kill -9 leaves the relay's lock and socket folder: the CLI took it for a live IDE
    for ever. The next relay on that lock folder removes them (the rules `serve` uses:
    our lock, its pid gone, its socket refusing); a live relay's lock stays."""
    async def scenario() -> None:
        live = fake_half_relay(tmp_path)
        dead = next_one = None
        try:
            live_lock = await relay_lock(tmp_path, live)
            dead = fake_half_relay(tmp_path)
            await wait_for(lambda: len(relay_locks(tmp_path)) == 2 or dead.poll() is not None, "a second lock")
            stale = [p for p in relay_locks(tmp_path) if str(dead.pid) in open(p).read()]
            assert len(stale) == 1
            with open(stale[0]) as f:
                stale_lock = json.load(f)
            dead.kill()
            dead.wait()
            assert len(relay_locks(tmp_path)) == 2    # left behind
            next_one = fake_half_relay(tmp_path)
            await wait_for(lambda: len(relay_locks(tmp_path)) == 2 and not os.path.exists(stale[0])
                           or next_one.poll() is not None, "the stale lock replaced")
            assert next_one.poll() is None
            assert not os.path.exists(os.path.dirname(stale_lock["socketPath"]))   # its socket folder too
            assert os.path.exists(os.path.dirname(live_lock["socketPath"]))        # the live one's kept
            for relay in (live, next_one):
                relay.send_signal(signal.SIGTERM)
            code, lines = await ended(next_one)
            assert code == 0 and any(line.endswith("removed the stale lock %s (its process is gone)" % stale[0])
                                     for line in lines), lines
            assert (await ended(live))[0] == 0
        finally:
            for relay in (live, dead, next_one):
                if relay is not None and relay.poll() is None:
                    relay.kill()
                    relay.wait()
        assert relay_locks(tmp_path) == []

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_connections_past_the_cap_get_503_and_one_gone_makes_room(tmp_path: Any) -> None:
    async def scenario() -> None:
        relay = fake_half_relay(tmp_path, "--max-connections", "2")
        try:
            lock = await relay_lock(tmp_path, relay)
            held = [await asyncio.open_unix_connection(lock["socketPath"]) for _ in range(2)]
            await asyncio.sleep(0.2)
            reader, writer = await asyncio.open_unix_connection(lock["socketPath"])
            answer = await asyncio.wait_for(reader.read(), 30)
            assert answer.startswith(b"HTTP/1.1 503 ") and b"2 connections open" in answer, answer
            writer.close()
            held[0][1].close()   # one goes: room for another
            await asyncio.sleep(0.2)
            reader, writer = await asyncio.open_unix_connection(lock["socketPath"])
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            answer = await asyncio.wait_for(reader.read(), 30)
            assert answer.startswith(b"HTTP/1.1 401 "), answer   # judged by the relay itself: accepted
            writer.close()
            held[1][1].close()
            relay.send_signal(signal.SIGTERM)
            assert (await ended(relay))[0] == 0
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_sigterm_while_the_cli_keeps_connecting_ends_with_one_line(tmp_path: Any) -> None:
    """Stopped while connections keep arriving: asyncio.Server, closed between accepting
    a connection and making its transport, left a half-made transport whose collection
    printed "Exception ignored in: _SelectorTransport.__del__ ... TypeError" after the
    relay's last line (CPython gh-109564; 1 run in 7 of another test under load). The
    relay accepts by itself now (server/acceptor.py): one line, status 0, whatever
    was accepted when it stopped."""
    import socket
    import threading

    async def scenario() -> None:
        relay = fake_half_relay(tmp_path, "--max-connections", "0")
        stopping = threading.Event()
        opened: List[socket.socket] = []

        def connect_until_stopped(path: str) -> None:
            while not stopping.is_set():
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    conn.connect(path)
                except OSError:
                    conn.close()
                    time.sleep(0.001)   # (refused: the relay has gone; until told to stop)
                    continue
                opened.append(conn)
                while len(opened) > 400:
                    opened.pop(0).close()

        threads: List[threading.Thread] = []
        try:
            lock = await relay_lock(tmp_path, relay)
            threads = [threading.Thread(target=connect_until_stopped, args=(lock["socketPath"],)) for _ in range(4)]
            for thread in threads:
                thread.start()
            await wait_for(lambda: len(opened) > 100, "connections accepted")
            relay.send_signal(signal.SIGTERM)
            code, lines = await ended(relay)   # (asserts that no traceback was printed)
            assert code == 0 and lines[-1].endswith("stopped by SIGTERM"), lines
        finally:
            stopping.set()
            for thread in threads:
                thread.join()
            for conn in opened:
                conn.close()
            if relay.poll() is None:
                relay.kill()
                relay.wait()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))
