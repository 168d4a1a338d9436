"""The client side against a hostile server: every wait bounded by a deadline, every
body and event bounded in memory, junk answers reported, never a traceback.

Each program runs in a child process against `hostile_peer.HostileIde` over a real Unix
socket; memory is the child's own peak RSS, measured by the child."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
import threading
from typing import Any, Dict

import pytest

from hostile_peer import SESSION, HostileIde, answer, chunk, event, result_of, run_program, run_script, sse_head
from ide_protocol.client import HttpStatusError, IdeClient, IdeTimeout
from ide_protocol.client.connection import MAX_MESSAGE_BYTES, READ_SIZE, open_socket

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets only")

#: What a client may hold at most while a server floods it (Python itself takes ~25 MB).
RSS_CAP_MB = 110


@pytest.fixture
def hostile(tmp_path: Any) -> Any:
    made = []

    def make(**handlers: Any) -> HostileIde:
        ide = HostileIde(str(tmp_path), {k.replace("__", "/"): v for k, v in handlers.items()})
        made.append(ide)
        return ide
    yield make
    for ide in made:
        ide.close()


def client(ide: HostileIde, *args: str, **kw: Any) -> Any:
    return run_program(["client", "--lock", ide.lock_path] + list(args), **kw)


def assert_clean_failure(ran: Any) -> None:
    assert ran.code not in (0, None), ran
    assert "Traceback" not in ran.err, ran


# ------------------------------------------------------------------ deadlines


def _drip_head(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
    for _ in range(600):  # one byte of a header every 0.15 s: the head never ends
        sock.sendall(b"a")
        threading.Event().wait(0.15)


def _drip_body(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(sse_head())
    for _ in range(600):
        sock.sendall(chunk(b":"))  # one comment byte at a time: never an event
        threading.Event().wait(0.1)


def _notify_forever(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(sse_head())
    for _ in range(600):
        sock.sendall(event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}))
        threading.Event().wait(0.2)


@pytest.mark.parametrize("drip", [_drip_head, _drip_body, _notify_forever], ids=["head", "body", "notifications"])
def test_timeout_bounds_the_whole_request_whatever_the_server_drips(hostile: Any, drip: Any) -> None:
    """`--timeout 1` ends the call: before, each byte or notification restarted the wait."""
    ide = hostile(tools__call=drip)
    ran = client(ide, "--timeout", "1", "call", "get_selection", limit=60)
    assert_clean_failure(ran)
    assert "within 1.0 s" in ran.err, ran


# --------------------------------------------------------------------- memory


def _flood_comments(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(sse_head())
    piece = chunk(b": " + b"x" * (1024 * 1024 - 3) + b"\n")
    try:
        for _ in range(300):  # 300 MB of SSE comments, then the connection ends
            sock.sendall(piece)
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def test_a_flood_of_sse_comments_is_not_kept(hostile: Any) -> None:
    """The whole flood is read (it ends with the connection, not with the client's
    deadline, which only turns a hang into a failure)."""
    ide = hostile(tools__call=_flood_comments)
    ran = client(ide, "--timeout", "60", "call", "get_selection", limit=90)
    assert_clean_failure(ran)
    assert ran.peak_mb is not None and ran.peak_mb < RSS_CAP_MB, ran


def _oversized_json(sock: socket.socket, request: Dict[str, Any]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nmcp-session-id: s\r\nTransfer-Encoding: chunked\r\n\r\n"
    sock.sendall(head)
    piece = chunk(b" " * (1024 * 1024))
    try:
        for _ in range(300):  # a 300 MB JSON body (whitespace): past any sane answer
            sock.sendall(piece)
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass


def test_an_oversized_body_is_refused_not_collected(hostile: Any) -> None:
    ide = hostile(tools__call=_oversized_json)
    ran = client(ide, "--timeout", "30", "call", "get_selection", limit=90)
    assert_clean_failure(ran)
    assert "larger than" in ran.err, ran
    # At most the body limit, and its copy when joined: far below the 300 MB sent.
    assert ran.peak_mb is not None and ran.peak_mb < RSS_CAP_MB + 2 * MAX_MESSAGE_BYTES / 2 ** 20, ran


def _tiny_chunks(status: str, size: int) -> Any:
    """An `application/json` answer of `size` bytes (blanks, then the JSON) sent in
    chunks of 2 bytes: 7 bytes on the wire for every 2 of the body."""
    head = (b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nmcp-session-id: %s\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" % (status.encode(), SESSION.encode()))
    blanks = chunk(b"  ") * ((size - 256) // 2)  # made here, before the client measures

    def handler(sock: socket.socket, request: Dict[str, Any]) -> None:
        message = json.dumps(result_of(request, {"content": [{"type": "text", "text": "null"}]})).encode()
        sock.sendall(head)
        sock.sendall(blanks)
        sock.sendall(chunk(b" " * (256 - len(message)) + message) + b"0\r\n\r\n")
    return handler


# (A refusal's body is read by the same `read_body`: one case, the slow part being the
# 131 072 chunks parsed under tracemalloc.)
@pytest.mark.parametrize("status", ["200 OK"])
def test_a_body_in_tiny_chunks_costs_memory_in_proportion_to_its_size(hostile: Any, status: str) -> None:
    """`read_body` (a 200 JSON answer, and the body of a refusal) counted a body's
    bytes against its limit but kept one bytes object per chunk: a body in 2-byte
    chunks cost some twenty times its size (4 MiB: 114 MiB more RSS). The client's
    own allocations while it reads a 256 KiB body are measured (tracemalloc), over a
    real socket; what the server thread sends was made before."""
    import tracemalloc
    size = 256 * 1024
    ide = hostile(tools__call=_tiny_chunks(status, size))

    async def main() -> int:
        client = IdeClient.from_lock_file(ide.lock_path, timeout=60)
        async with client:
            tracemalloc.start()
            try:
                try:
                    result = await client.call_tool("get_selection", {})
                    assert result == {"content": [{"type": "text", "text": "null"}]}
                except HttpStatusError as exc:
                    assert exc.status == 500 and len(exc.body) == size
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    peak = asyncio.run(main())
    # The body, its copy, its JSON text, and the parser's events for one read (a Data
    # event and its bytes for every 7 bytes read); before: 16 MiB, and growing with the body.
    assert peak < 16 * READ_SIZE + 4 * size, peak


def _big_selections(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(sse_head())
    text = "y" * (2 * 1024 * 1024)
    try:
        for n in range(60):
            sock.sendall(event({"jsonrpc": "2.0", "method": "selection_changed",
                                "params": {"text": text, "filePath": "/x", "fileUrl": "file:///x", "n": n}}))
    except OSError:
        pass


def test_watch_keeps_no_pushed_bytes(hostile: Any) -> None:
    """60 pushes of a 2 MB selection: before, the stream's body grew by all 120 MB."""
    ide = hostile(GET=_big_selections)
    ran = client(ide, "watch", "--count", "60", quiet_out=True, limit=90)
    assert ran.code == 0, ran
    assert ran.peak_mb is not None and ran.peak_mb < RSS_CAP_MB, ran


def _numbered_selections(count: int, size: int) -> Any:
    def handler(sock: socket.socket, request: Dict[str, Any]) -> None:
        sock.sendall(sse_head())
        text = "y" * size
        try:
            for n in range(count):
                sock.sendall(event({"jsonrpc": "2.0", "method": "selection_changed",
                                    "params": {"text": text, "filePath": "/x", "fileUrl": "file:///x", "n": n}}))
        except OSError:
            pass
        # The peer keeps the stream open after this, until the session is deleted.
    return handler


_SUBSCRIBER_THAT_NEVER_READS = r"""
import asyncio, json, sys
from ide_protocol.client import IdeClient

async def main():
    last = asyncio.Event()
    def on_push(push):
        if push.params.get("n") == int(sys.argv[2]) - 1:
            last.set()
    client = IdeClient.from_lock_file(sys.argv[1], timeout=30, on_push=on_push)
    queue = client.subscribe()  # before the stream opens; never read until every push came
    async with client:
        await asyncio.wait_for(last.wait(), 60)
        kept = []
        while not queue.empty():
            kept.append(queue.get_nowait().params["n"])
        print(json.dumps({"kept": kept, "dropped": queue.dropped}))

asyncio.run(main())
"""


def test_a_subscriber_that_never_reads_keeps_only_the_newest_pushes(hostile: Any) -> None:
    """120 pushes of a 2 MB selection to a `subscribe()` queue nobody reads: before,
    the queue held all 240 MB; now the oldest go (counted), the newest stay."""
    ide = hostile(GET=_numbered_selections(120, 2 * 1024 * 1024))
    ran = run_script(_SUBSCRIBER_THAT_NEVER_READS, ide.lock_path, "120", limit=120)
    assert ran.code == 0, ran
    report = json.loads(ran.out)
    assert report["kept"] and report["kept"][-1] == 119, report
    assert report["kept"] == list(range(120 - len(report["kept"]), 120)), report
    assert report["dropped"] == 120 - len(report["kept"]), report
    assert ran.peak_mb is not None and ran.peak_mb < RSS_CAP_MB + 2 * 16, ran


# ---------------------------------------------------------------- junk answers


def _initialize_with(result: Any) -> Any:
    def handler(sock: socket.socket, request: Dict[str, Any]) -> None:
        answer(sock, result_of(request, result))
    return handler


@pytest.mark.parametrize("result", ["a string", [1, 2], 7, None])
def test_initialize_with_a_result_that_is_not_an_object(hostile: Any, result: Any) -> None:
    ide = hostile(initialize=_initialize_with(result))
    ran = client(ide, "--timeout", "10", "list", limit=60)
    assert_clean_failure(ran)
    assert "not an object" in ran.err or "without a result" in ran.err, ran


#: Checks that wait out this peer's silence whatever initialize answers (it reads a whole
#: body before it answers and never ends a session), each for several times --timeout:
#: they say nothing about initialize, and test_check.py runs them against servers that
#: break exactly their rule.
WAIT_FOR_SILENCE = ("errors.refused_before_body", "errors.close_after_401", "errors.close_after_403",
                    "errors.open_after_404", "errors.close_after_404_with_body", "errors.body_limit",
                    "errors.second_stream", "errors.stream_accept", "session.ends_when_client_vanishes")


def test_check_and_doctor_say_initialize_is_broken(hostile: Any) -> None:
    ide = hostile(initialize=_initialize_with([1, 2]))
    ran = run_program(["doctor", ide.folder, "--json", "--timeout", "5"], home=ide.home, limit=60)
    assert "Traceback" not in ran.err, ran
    report = json.loads(ran.out)
    assert report["would_connect"] is False, report
    codes = [f["code"] for lock in report["locks"] for f in lock["findings"]]
    assert "handshake-failed" in codes, report
    listed = run_program(["check", "--list"], limit=60)
    names = [line.split()[0] for line in listed.out.splitlines() if line.strip()]
    assert "initialize.result" in names and set(WAIT_FOR_SILENCE) <= set(names), listed
    only = [arg for name in names if name not in WAIT_FOR_SILENCE for arg in ("--only", name)]
    ran = run_program(["check", "--lock", ide.lock_path, "--timeout", "5"] + only, limit=300)
    assert "Traceback" not in ran.err, ran
    failed = [line.split()[1] for line in ran.out.splitlines() if line.startswith("FAIL ")]
    assert "initialize.result" in failed, ran


def _near_the_limit(sock: socket.socket, request: Dict[str, Any]) -> None:
    """One SSE answer of 62 MiB (a tool result's text), just under the client's limit."""
    sock.sendall(sse_head() + chunk(b'event: message\ndata: {"jsonrpc":"2.0","id":%d,"result":{"content":'
                                    b'[{"type":"text","text":"' % request.get("id", 0)))
    piece = chunk(b"x" * (1024 * 1024))
    try:
        for _ in range(62):
            sock.sendall(piece)
        sock.sendall(chunk(b'"}]}}\n\n') + b"0\r\n\r\n")
    except OSError:
        pass


def _endless_events(sock: socket.socket, request: Dict[str, Any]) -> None:
    sock.sendall(sse_head())
    piece = chunk(b"data: " + b"x" * (1024 * 1024 - 7) + b"\n")
    try:
        for _ in range(400):  # an event that never ends: 400 MB of data lines
            sock.sendall(piece)
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@pytest.mark.parametrize("handler", [_near_the_limit, _endless_events], ids=["62MiB", "endless"])
def test_check_holds_its_memory_whatever_the_answers(hostile: Any, handler: Any) -> None:
    """The checker reads each answer as it comes, up to its own limit (ANSWER_LIMIT):
    its peak stays near it. (It decoded each answer several times over: a 62 MiB
    answer took it to 336 MB, an endless one to 418 MB.)"""
    from ide_protocol.programs.check import ANSWER_LIMIT
    ide = hostile(tools__call=handler, ping=handler)
    ran = run_program(["check", "--lock", ide.lock_path, "--timeout", "30", "--only", "tool.get_selection",
                       "--only", "jsonrpc.ping"], limit=120)
    assert "Traceback" not in ran.err, ran
    assert ran.out.count("larger than %d bytes" % ANSWER_LIMIT) == 2, ran
    assert ran.peak_mb is not None and ran.peak_mb < RSS_CAP_MB, ran


def test_check_ends_by_its_deadline_against_a_silent_server(hostile: Any) -> None:
    """A server that takes every request and never answers: each check waits its time,
    and the run stops at its deadline, the checks left over reported SKIP (the waits
    added up: some 70 checks of up to four answers' time each)."""
    ide = hostile()
    ide._answer = lambda conn, head, body: ide.closed.wait(300)  # type: ignore[method-assign]
    ran = run_program(["check", "--lock", ide.lock_path, "--timeout", "2", "--deadline", "6"], limit=120)
    assert "Traceback" not in ran.err, ran
    assert ran.code == 1, ran  # (the socket answers nothing: the CLI cannot use it)
    lines = [line for line in ran.out.splitlines() if line[:1].isupper() and "PROTOCOL.md" in line]
    skipped = [line for line in lines if line.startswith("SKIP") and "--deadline" in line]
    assert len(skipped) > len(lines) // 2, ran.out
    assert "FAIL   lock.socket" in ran.out, ran.out


def _tools_with(listed: Any) -> Any:
    def handler(sock: socket.socket, request: Dict[str, Any]) -> None:
        answer(sock, result_of(request, {"tools": listed}))
    return handler


@pytest.mark.parametrize("listed", ["abc", [1, "x", None], [{"name": "t", "inputSchema": [1]}]])
def test_tools_of_any_shape_are_listed_or_skipped(hostile: Any, listed: Any) -> None:
    ide = hostile(tools__list=_tools_with(listed))
    ran = client(ide, "--timeout", "10", "list", limit=60)
    assert "Traceback" not in ran.err, ran
    assert ran.code == 0, ran


def _deep_text(sock: socket.socket, request: Dict[str, Any]) -> None:
    answer(sock, result_of(request, {"content": [{"type": "text", "text": "[" * 50000 + "]" * 50000}]}))


def _deep_answer(sock: socket.socket, request: Dict[str, Any]) -> None:
    body = b'{"jsonrpc":"2.0","id":%d,"result":' % request["id"] + b"[" * 50000 + b"]" * 50000 + b"}"
    sock.sendall(sse_head() + chunk(b"event: message\ndata: " + body + b"\n\n") + b"0\r\n\r\n")


@pytest.mark.parametrize("handler", [_deep_text, _deep_answer], ids=["tool-text", "answer"])
def test_deeply_nested_json_from_the_server(hostile: Any, handler: Any) -> None:
    ide = hostile(tools__call=handler)
    ran = client(ide, "--timeout", "10", "call", "get_selection", limit=60)
    assert "Traceback" not in ran.err and "RecursionError" not in ran.err, ran


# ------------------------------------------------------------------ backlog


def test_a_full_backlog_is_waited_for_then_named(tmp_path: Any) -> None:
    """A Unix socket whose server accepts nothing: connect fails at once with EAGAIN,
    which asyncio turned into '[Errno 22] Invalid argument'."""
    directory = tempfile.mkdtemp(dir="/tmp")
    path = os.path.join(directory, "s")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    try:
        async def main() -> str:
            held = []
            for _ in range(4):
                try:
                    held.append(await open_socket(path, 1.0))
                except IdeTimeout as exc:
                    return str(exc)
            return "all connected"
        message = asyncio.run(main())
        assert "backlog" in message, message
    finally:
        server.close()
        os.unlink(path)
        os.rmdir(directory)
