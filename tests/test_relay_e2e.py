"""The relay end to end: our IdeServer on the IDE's side, the two relay halves joined by
`--via` (a real child process speaking over its stdin/stdout) with a `--map`, and our
IdeClient on the CLI's side finding the relay's lock and seeing its own paths."""
from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import re
import os
import shlex
import signal
import stat
import subprocess
import sys
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import pytest

from platforms import unix_sockets

from ide_protocol.client import IdeClient
from ide_protocol.common.tools import Diagnostic, Selection
from ide_protocol.server.ide_server import IdeServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from build_pyz import build as build_pyz  # noqa: E402

#: The relay's CLI half listens on a Unix socket (its IDE half reaches an IDE on one).
pytestmark = unix_sockets
LIMIT = 60  # a guard against hangs only


def relay_command(tmp: Any, *extra: str, ide_program: str = "-m ide_protocol") -> List[str]:
    ide_side = "%s %s relay ide-side --stdio --folder %s --lock-dir %s%s" % (
        sys.executable, ide_program, tmp / "project", tmp / "ide", " --wait" if "--wait" in extra else "")
    return [sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", ide_side,
            "--map", "%s=%s" % (tmp / "project", tmp / "cliview"), "--lock-dir", str(tmp / "cli-ide")] + list(extra)


def start_relay(tmp: Any, *extra: str, ide_program: str = "-m ide_protocol") -> "subprocess.Popen[str]":
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen(relay_command(tmp, *extra, ide_program=ide_program), env=env, cwd=str(tmp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


async def wait_for(predicate: Any, what: str, seconds: float = 30.0) -> Any:
    loop = asyncio.get_event_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def relay_locks(tmp: Any) -> List[str]:
    return glob.glob(str(tmp / "cli-ide" / "*.lock"))


async def relay_lock(tmp: Any, relay: "subprocess.Popen[str]", seconds: float = 30.0) -> Any:
    """The relay's lock once written (the relay still running), as JSON."""
    locks = await wait_for(lambda: relay_locks(tmp) or relay.poll() is not None, "the relay's lock", seconds)
    assert relay.poll() is None, relay.stderr.read() if relay.stderr else ""
    with open(locks[0]) as f:
        return json.load(f)


async def stop_relay(relay: "subprocess.Popen[str]", lock: Optional[Any] = None) -> None:
    """SIGTERM; the relay must end with status 0, its `lock`'s socket folder gone."""
    if relay.poll() is None:
        relay.send_signal(signal.SIGTERM)
    code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
    assert code == 0, relay.stderr.read() if relay.stderr else ""
    assert lock is None or not os.path.exists(os.path.dirname(lock["socketPath"]))


@contextlib.asynccontextmanager
async def relayed_ide(tmp: Any, *extra: str) -> AsyncIterator[Tuple[IdeServer, Any]]:
    """An IdeServer serving `tmp/project` and a relay in front of it (`extra`: the CLI
    half's options); yields the server and the relay's lock. At the end the relay must
    stop cleanly (`stop_relay`) and leave no lock."""
    async with IdeServer([str(tmp / "project")], lock_dir=str(tmp / "ide"), ide_name="Test IDE") as server:
        relay = start_relay(tmp, *extra)
        lock: Any = None
        try:
            lock = await relay_lock(tmp, relay)
            yield server, lock
        finally:
            await stop_relay(relay, lock)
        assert relay_locks(tmp) == []


def setup(tmp: Any) -> None:
    (tmp / "project").mkdir()
    (tmp / "project" / "a.py").write_text("print('hi')\n")
    (tmp / "cliview").mkdir()


@pytest.mark.parametrize("ide_half", ["module", "pyz"])
def test_client_through_the_relay_sees_its_own_paths_and_the_ide_its_own(tmp_path: Any, ide_half: str) -> None:
    """The IDE's half runs as `python3 -m ide_protocol`, or from the one-file zipapp
    (`make pyz`) in a directory with nothing else, as on a bare server."""
    setup(tmp_path)
    ide_program = "-m ide_protocol"
    if ide_half == "pyz":
        bare = tmp_path / "bare"
        bare.mkdir()
        ide_program = "-I " + build_pyz(str(bare / "copilot-ide.pyz"))
    ide_path = str(tmp_path / "project" / "a.py")
    cli_path = str(tmp_path / "cliview" / "a.py")
    diffs: List[Any] = []

    async def on_diff(diff: Any) -> Optional[bool]:
        if diff.tab_name != "accept me":
            return None  # left to a person (check's diffs are closed by close_diff)
        diffs.append(diff)
        return True

    async def scenario() -> None:
        async with IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE",
                             on_diff=on_diff) as server:
            relay = start_relay(tmp_path, ide_program=ide_program)
            try:
                locks = await wait_for(lambda: relay_locks(tmp_path) or relay.poll() is not None, "the relay's lock")
                assert relay.poll() is None, relay.stderr.read() if relay.stderr else ""
                with open(locks[0]) as f:
                    lock = json.load(f)
                assert stat.S_IMODE(os.stat(locks[0]).st_mode) == 0o600
                assert lock["pid"] == relay.pid and lock["isTrusted"] is False
                assert lock["workspaceFolders"][0] == str(tmp_path / "cliview")
                assert lock["ideName"] == "Test IDE (relayed)"
                assert lock["headers"]["Authorization"] != server.headers["Authorization"]
                sock_dir = os.path.dirname(lock["socketPath"])
                assert stat.S_IMODE(os.stat(sock_dir).st_mode) == 0o700

                # the relay's own nonce is checked before anything crosses the link
                reader, writer = await asyncio.open_unix_connection(lock["socketPath"])
                writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: " + server.headers["Authorization"].encode()
                             + b"\r\nContent-Length: 2\r\n\r\n{}")
                assert (await reader.read(100)).startswith(b"HTTP/1.1 401 ")
                writer.close()

                client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=20)
                async with client:
                    server.set_selection(Selection(ide_path, "print", (0, 0), (0, 5)))
                    selection = await client.get_selection()
                    assert selection["filePath"] == cli_path
                    assert selection["fileUrl"] == "file://" + cli_path
                    push = await client.wait_push("selection_changed", timeout=20)
                    assert push.params["filePath"] == cli_path

                    server.set_diagnostics(ide_path, [Diagnostic("bad", "Warning", (0, 0), (0, 1))])
                    diags = await client.get_diagnostics("file://" + cli_path)
                    assert [d["filePath"] for d in diags] == [cli_path]

                    answer = await client.open_diff(cli_path, "new\n", "accept me")
                    assert answer["result"] == "SAVED"
                    assert answer["message"].endswith(cli_path)
                    assert [d.original_file_path for d in diffs] == [ide_path]  # the IDE shows its own path

                if ide_half == "module":
                    # `check` on the CLI's side through the relay passes as it does directly
                    env = dict(os.environ, PYTHONPATH=ROOT)
                    checked = await asyncio.get_event_loop().run_in_executor(None, lambda: subprocess.run(
                        [sys.executable, "-m", "ide_protocol", "check", "--lock-dir", str(tmp_path / "cli-ide")],
                        cwd=str(tmp_path / "cliview"), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, timeout=120))
                    assert checked.returncode == 0 and " 0 failed" in checked.stdout, checked.stdout
            finally:
                if relay.poll() is None:
                    relay.send_signal(signal.SIGTERM)
                loop = asyncio.get_event_loop()
                code = await loop.run_in_executor(None, relay.wait, 30)
                err = relay.stderr.read() if relay.stderr else ""
            assert code == 0, err
            assert relay_locks(tmp_path) == []
            assert not os.path.exists(lock["socketPath"]) and not os.path.exists(sock_dir)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_the_relay_logs_the_lock_files_text_escaped(tmp_path: Any) -> None:
    """The relay logs what it relays: the IDE's name and folders, from its lock file,
    printed raw (an escape sequence drove the terminal, a newline printed a line of the
    lock's making)."""
    setup(tmp_path)

    async def scenario() -> str:
        server = IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"),
                           ide_name="Test IDE \x1b]0;pwned\x07\nFAKE: all good")
        await server.start()
        relay = start_relay(tmp_path)
        try:
            lock = await relay_lock(tmp_path, relay)
            await stop_relay(relay, lock)
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait()
            await server.stop()
        return relay.stderr.read() if relay.stderr else ""

    err = asyncio.run(asyncio.wait_for(scenario(), LIMIT))
    assert "Test IDE \\x1b]0;pwned\\a\\nFAKE: all good" in err, err
    assert "\x1b" not in err and not any(line.startswith("FAKE") for line in err.splitlines()), err


#: A stand-in for the IDE's half: the link's greeting, one LOCK frame (argv[1], JSON), then
#: it reads until the link ends.
FAKE_IDE_HALF = ("import os, sys; from ide_protocol.relay import frames; out = sys.stdout.buffer; "
                 "out.write(frames.MAGIC + frames.encode_lock(__import__('json').loads(sys.argv[1]))); out.flush(); "
                 "[None for _ in iter(lambda: os.read(0, 65536), b'')]")


def cli_half_facing(tmp: Any, lock: Any) -> "subprocess.Popen[str]":
    via = "%s -c %s %s" % (sys.executable, shlex.quote(FAKE_IDE_HALF), shlex.quote(json.dumps(lock)))
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", via,
                             "--lock-dir", str(tmp / "cli-ide")], env=env, cwd=str(tmp),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_lock_announcement_that_is_not_one_ends_the_relay_clearly(tmp_path: Any) -> None:
    """`workspaceFolders` not a list of strings, from the other half: a traceback
    (iterating an int) before; now a one-line reason, status 1, nothing left."""
    relay = cli_half_facing(tmp_path, {"ideName": "x", "workspaceFolders": 5})
    try:
        code = relay.wait(LIMIT)
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait()
    err = relay.stderr.read() if relay.stderr else ""
    assert code == 1 and "Traceback" not in err, err
    assert "workspaceFolders that are not a list of strings" in err and relay_locks(tmp_path) == []


def test_sighup_ends_the_relay_and_removes_its_lock(tmp_path: Any) -> None:
    """The terminal (or SSH session) that ran the CLI's half closes: SIGHUP left the
    relay's lock and socket behind, and the CLI took them for a live IDE."""
    relay = cli_half_facing(tmp_path, {"ideName": "x", "workspaceFolders": [str(tmp_path)]})

    async def scenario() -> None:
        lock = await relay_lock(tmp_path, relay)
        relay.send_signal(signal.SIGHUP)
        code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
        assert code == 0, relay.stderr.read() if relay.stderr else ""
        assert relay_locks(tmp_path) == [] and not os.path.exists(os.path.dirname(lock["socketPath"]))

    try:
        asyncio.run(asyncio.wait_for(scenario(), LIMIT))
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait()


def test_the_relay_lock_goes_first_when_the_ide_goes_and_none_without_ide(tmp_path: Any) -> None:
    setup(tmp_path)

    async def scenario() -> None:
        server = IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE")
        await server.start()
        relay = start_relay(tmp_path)
        try:
            await wait_for(lambda: relay_locks(tmp_path) or relay.poll() is not None, "the relay's lock")
            await server.stop()
            code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
            assert code == 0 and relay_locks(tmp_path) == []
            assert "the IDE went away" in (relay.stderr.read() if relay.stderr else "")
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait()
        # no IDE at all: no lock, a non-zero exit, the reason said
        relay = start_relay(tmp_path)
        code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
        err = relay.stderr.read() if relay.stderr else ""
        assert code == 1 and "no IDE" in err and relay_locks(tmp_path) == []

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_the_ides_folder_change_reaches_the_relays_lock_rewritten_in_place(tmp_path: Any) -> None:
    # PROTOCOL.md §1, "Changing folders": the IDE rewrites its lock in place, and a CLI
    # connected through the relay's lock must be told the same way: the relay's lock
    # rewritten in place (the same file: a deleted or replaced lock disconnects the CLI),
    # with the new folders mapped to the CLI's view.
    setup(tmp_path)
    (tmp_path / "project" / "sub").mkdir()
    (tmp_path / "cliview" / "sub").mkdir()

    async def scenario() -> None:
        async with relayed_ide(tmp_path) as (server, lock):
            (path,) = relay_locks(tmp_path)
            inode = os.stat(path).st_ino
            assert lock["workspaceFolders"] == [str(tmp_path / "cliview")]
            server.set_workspace_folders([str(tmp_path / "project"), str(tmp_path / "project" / "sub")])

            def rewritten() -> Any:
                try:
                    with open(path) as f:
                        now = json.load(f)
                except (OSError, ValueError):
                    return None  # (read in the middle of the rewrite: read again)
                return now if len(now["workspaceFolders"]) == 2 else None
            now = await wait_for(rewritten, "the relay's lock listing the new folders")
            assert now["workspaceFolders"] == [str(tmp_path / "cliview"), str(tmp_path / "cliview" / "sub")]
            assert relay_locks(tmp_path) == [path] and os.stat(path).st_ino == inode
            assert (now["socketPath"], now["headers"]) == (lock["socketPath"], lock["headers"])

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_with_wait_an_ide_restarted_with_a_new_nonce_is_followed(tmp_path: Any) -> None:
    setup(tmp_path)
    ide_path = str(tmp_path / "project" / "a.py")
    cli_path = str(tmp_path / "cliview" / "a.py")

    def serve() -> IdeServer:
        return IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE")

    async def selection_through_the_relay(server: IdeServer) -> Any:
        server.set_selection(Selection(ide_path, "print", (0, 0), (0, 5)))
        client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=20)
        async with client:
            return await client.get_selection()

    async def scenario() -> None:
        relay = None
        try:
            async with serve() as first:
                relay = start_relay(tmp_path, "--wait")
                old = await wait_for(lambda: relay_locks(tmp_path) or relay.poll() is not None, "the relay's lock")
                assert (await selection_through_the_relay(first))["filePath"] == cli_path
            # the IDE went: the relay's lock goes, the relay waits
            await wait_for(lambda: not relay_locks(tmp_path), "the relay's lock to go")
            assert relay.poll() is None
            async with serve() as second:
                new = await wait_for(lambda: relay_locks(tmp_path), "the relay's new lock")
                assert new != old
                assert (await selection_through_the_relay(second))["filePath"] == cli_path
        finally:
            if relay is not None:
                if relay.poll() is None:
                    relay.send_signal(signal.SIGINT)
                code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
                assert code == 0, relay.stderr.read() if relay.stderr else ""
        assert relay_locks(tmp_path) == []

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def live_pids(*markers: str) -> List[int]:
    """Processes (not zombies) with each of `markers` among their arguments (/proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if all(marker.encode() in args for marker in markers) and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def ide_half_pids(tmp: Any) -> List[int]:
    """The IDE's half started for this test (found by its command line in /proc)."""
    return live_pids("ide-side", str(tmp / "project"))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the IDE's half through /proc (Linux)")
def test_when_the_link_dies_the_lock_goes_and_the_relay_says_so(tmp_path: Any) -> None:
    setup(tmp_path)

    async def scenario() -> None:
        async with IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE"):
            relay = start_relay(tmp_path)
            try:
                await wait_for(lambda: relay_locks(tmp_path) or relay.poll() is not None, "the relay's lock")
                pids = ide_half_pids(tmp_path)
                assert pids
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                code = await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30)
                err = relay.stderr.read() if relay.stderr else ""
                assert code == 1 and "link" in err, err
                assert relay_locks(tmp_path) == []
            finally:
                if relay.poll() is None:
                    relay.kill()
                    relay.wait()

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_a_32_mb_open_diff_crosses_whole_while_another_connection_keeps_answering(tmp_path: Any) -> None:
    setup(tmp_path)
    big = ("0123456789abcdef" * 64 + "\n") * (32 * 1024 * 1024 // 1025)
    cli_path = str(tmp_path / "cliview" / "a.py")
    seen: List[Any] = []

    async def on_diff(diff: Any) -> Optional[bool]:
        seen.append(diff)
        return False

    async def scenario() -> None:
        async with IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE",
                             on_diff=on_diff):
            relay = start_relay(tmp_path)
            try:
                await wait_for(lambda: relay_locks(tmp_path) or relay.poll() is not None, "the relay's lock")
                diff_client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=60)
                other = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=60)
                async with diff_client, other:
                    sending = asyncio.ensure_future(diff_client.open_diff(cli_path, big, "big"))
                    answers = 0
                    while not sending.done() or answers < 3:
                        await other.get_selection()
                        answers += 1
                    assert (await sending)["result"] == "REJECTED"
                assert answers >= 3
                assert len(seen) == 1 and seen[0].new_file_contents == big
                assert seen[0].original_file_path == str(tmp_path / "project" / "a.py")
            finally:
                relay.send_signal(signal.SIGTERM)
                assert await asyncio.get_event_loop().run_in_executor(None, relay.wait, 30) == 0

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 2))


#: --request-timeout for the deadline tests: short, yet long enough that our own client's
#: requests on a loaded machine never come near it (they share the relay).
SHORT_DEADLINE = 2


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """What arrived before the other side closed. A drip written after the relay
    closed fails (EPIPE), and asyncio then fails the reader too: `reader.read()` would
    lose what it had read so far, so the chunks are kept here."""
    data = b""
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionError:
        return data


def test_a_peer_that_drips_a_request_gets_408_and_other_connections_keep_working(tmp_path: Any) -> None:
    """Deadlines, not per-read timeouts: a byte every 0.1 s keeps every read short, yet
    the request must arrive in whole within --request-timeout of its first byte."""
    setup(tmp_path)

    async def scenario() -> None:
        async with relayed_ide(tmp_path, "--request-timeout", str(SHORT_DEADLINE)) as (server, lock):
            reader, writer = await asyncio.open_unix_connection(lock["socketPath"])
            answer = asyncio.ensure_future(read_until_closed(reader))  # everything until the relay closes
            request = b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + b"X-Drip: " + b"a" * 100000
            sent = 0
            while not answer.done() and sent < len(request):
                writer.write(request[sent:sent + 1])
                sent += 1
                await asyncio.sleep(0.1)
            data = await asyncio.wait_for(answer, 30)
            assert data.startswith(b"HTTP/1.1 408 "), data
            assert sent < len(request)
            writer.close()
            # the relay itself goes on
            client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=20)
            async with client:
                server.set_selection(Selection(str(tmp_path / "project" / "a.py"), "print", (0, 0), (0, 5)))
                assert (await client.get_selection())["filePath"] == str(tmp_path / "cliview" / "a.py")

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


async def _post(socket_path: str, headers: Dict[str, str], message: Any) -> bytes:
    """One JSON-RPC POST on a connection of its own; the whole answer (head and body)."""
    reader, writer = await asyncio.open_unix_connection(socket_path)
    body = json.dumps(message).encode()
    head = "".join("%s: %s\r\n" % item for item in headers.items())
    writer.write(("POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n"
                  "Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n"
                  % (head, len(body))).encode() + body)
    answer = await reader.read()
    writer.close()
    return answer


def test_a_cli_that_stops_reading_its_stream_is_cut_off_and_others_keep_working(tmp_path: Any) -> None:
    """A GET stream whose reader stops taking pushes: the relay cuts that connection when
    what it wrote is not taken within --request-timeout (the IDE sees the stream go),
    instead of holding it forever; the relay serves other connections all along."""
    setup(tmp_path)
    ide_path = str(tmp_path / "project" / "a.py")

    async def scenario() -> None:
        async with relayed_ide(tmp_path, "--request-timeout", str(SHORT_DEADLINE)) as (server, lock):
            headers = dict(lock["headers"])
            init = await _post(lock["socketPath"], headers, {
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "stalled reader", "version": "1"}}})
            session = re.search(rb"(?im)^mcp-session-id: *(\S+)", init)
            assert session, init
            headers["Mcp-Session-Id"] = session.group(1).decode()
            await _post(lock["socketPath"], headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            reader, writer = await asyncio.open_unix_connection(lock["socketPath"])
            writer.write(("GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n%s\r\n"
                          % "".join("%s: %s\r\n" % item for item in headers.items())).encode())
            await wait_for(lambda: server.stats()["streams"] == 1, "the GET stream at the IDE")
            # pushes far larger than every buffer on the way, and nobody reading them
            for n in range(8):
                server.set_selection(Selection(ide_path, str(n) * (1 << 20), (0, 0), (0, 1)))
                server.flush_pushes()
                await asyncio.sleep(0.05)
            await wait_for(lambda: server.stats()["streams"] == 0, "the relay to cut the stalled stream")
            # what was buffered, then the end: the stream did not go on
            data = await asyncio.wait_for(reader.read(-1), 30)
            assert data.startswith(b"HTTP/1.1 200 ") and len(data) < 8 << 20
            writer.close()
            client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=20)
            async with client:
                assert (await client.get_selection())["filePath"] == str(tmp_path / "cliview" / "a.py")

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_the_push_stream_is_not_cut_after_the_body_limit(tmp_path: Any) -> None:
    """A GET stream is endless: the relay read the IDE's answers with the body limit of
    one request (64 MiB), so a long session's stream was cut there, silently, and the CLI
    got no more pushes. 66 MiB of pushes cross, then one more arrives."""
    setup(tmp_path)
    ide_path = str(tmp_path / "project" / "a.py")

    async def scenario() -> None:
        async with relayed_ide(tmp_path) as (server, lock):
            client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=30)
            async with client:
                queue = client.subscribe()
                for n in range(34):  # 2 MiB each
                    server.set_selection(Selection(ide_path, chr(65 + n % 26) * (2 << 20), (0, 0), (0, 1)))
                    server.flush_pushes()
                    push = await asyncio.wait_for(queue.get(), 30)
                    assert push is not IdeClient.END and push.params["text"][0] == chr(65 + n % 26)
                server.set_selection(Selection(ide_path, "the last", (0, 0), (0, 1)))
                server.flush_pushes()
                push = await asyncio.wait_for(queue.get(), 30)
                assert push is not IdeClient.END and push.params["text"] == "the last", push
                assert not client.stream_ended

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))


def test_a_message_with_a_lone_surrogate_and_a_mapped_path_crosses(tmp_path: Any) -> None:
    """JSON may carry a lone surrogate as an escape (`\\ud83d`); with a path to rewrite in
    the same message, re-encoding it as UTF-8 failed and the relay closed the connection
    without an answer."""
    setup(tmp_path)

    async def scenario() -> Any:
        async with relayed_ide(tmp_path) as (server, lock):
            client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=30)
            async with client:
                return await client.call_tool("get_diagnostics", {
                    "uri": "file://" + str(tmp_path / "cliview" / "a.py"), "note": "half \ud83d"})

    result = asyncio.run(asyncio.wait_for(scenario(), LIMIT))
    assert isinstance(result, dict) and "content" in result, result


def test_a_megabyte_push_on_the_stream_while_the_client_posts(tmp_path: Any) -> None:
    """Every stream's task writes to the one link: their waits for the pipe must take
    turns (before Python 3.10 two tasks in a StreamWriter's drain() at once fail an
    assertion, which ended the POST connections here under 3.8)."""
    setup(tmp_path)
    ide_path = str(tmp_path / "project" / "a.py")

    async def scenario() -> None:
        async with relayed_ide(tmp_path) as (server, lock):
            server.set_selection(Selection(ide_path, "x" * (1 << 20), (0, 0), (0, 1)))
            client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=30)
            async with client:  # the GET stream carries the megabyte while the client POSTs
                for _ in range(3):
                    selection = await client.get_selection()
                    assert len(selection["text"]) == 1 << 20
                    assert selection["filePath"] == str(tmp_path / "cliview" / "a.py")

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))
