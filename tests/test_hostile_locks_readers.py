"""Every reader of a lock folder, a lock file or a peer's bytes is bounded and total:
nested JSON, FIFOs, devices, huge files and folders of junk locks give a clear verdict
and never a traceback, a hang or a stalled loop. Programs run in child processes on
real files and sockets; memory is the child's own peak RSS."""
from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any, List

import pytest

from hostile_peer import REPO, HostileIde, chunk, nested, run_program, sse_head
from ide_wire import cli_for, make_server, run, until
from ide_protocol.client.session import _json_error
from ide_protocol.common import lock_rules, lockfile, tools
from ide_protocol.programs import trace
from ide_protocol.programs.terminal import output as serve_output
from ide_protocol.wire import json_text, jsonrpc

unix_only = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or not hasattr(os, "mkfifo"), reason="POSIX only")


def no_traceback(ran: Any) -> None:
    assert "Traceback" not in ran.err and "RecursionError" not in ran.err, ran


# -------------------------------------------------------------- one JSON reader


@pytest.mark.parametrize("text", [nested(100000), b'{"a":' * 5000 + b"1" + b"}" * 5000, b"[" * 201 + b"]" * 201,
                                  b"NaN", b"1e999", b"\xef\xbb\xbf{}", b"\xff", b'{"id":' + b"9" * 4301 + b"}"],
                         ids=["nested-arrays", "nested-objects", "depth-201", "NaN", "overflow", "BOM", "not-utf8",
                              "long-integer"])
def test_untrusted_json_is_a_value_or_a_json_text_error(text: bytes) -> None:
    with pytest.raises(json_text.JsonTextError):
        json_text.loads(text)
    with pytest.raises(jsonrpc.JsonRpcError):
        jsonrpc.loads(text)


def test_a_long_integer_is_refused_by_its_length_whatever_limit_the_host_set() -> None:
    # Turning a digit string into an int takes time that grows with its square (16 MiB
    # of digits took minutes on CPython 3.8-3.10). 3.11+ refuses more than 4300 digits by
    # itself, unless its host lifted that limit, as a host may: here it is lifted.
    lift = getattr(sys, "set_int_max_str_digits", None)
    before = getattr(sys, "get_int_max_str_digits", lambda: None)()
    if lift is not None:
        lift(0)
    try:
        with pytest.raises(json_text.JsonTextError, match="an integer of 100000 digits"):
            json_text.loads(b"[" + b"7" * 100000 + b"]")
        digits = b"9" * json_text.MAX_INT_DIGITS
        assert json_text.loads(digits) == int(digits)
    finally:
        if lift is not None:
            lift(before)


def test_nesting_up_to_the_limit_is_read() -> None:
    depth = json_text.MAX_DEPTH
    assert json_text.loads(b"[" * depth + b"]" * depth) is not None


def test_tool_texts_and_error_bodies_of_any_depth() -> None:
    deep = "[" * 100000 + "]" * 100000
    assert tools.parse_text_result({"content": [{"type": "text", "text": deep}]}) == deep
    assert _json_error(deep.encode()) is None


def test_lock_rules_schema_is_the_error_code() -> None:
    assert lock_rules.LockFileError("x").code == lock_rules.SCHEMA == "schema"
    assert [p.code for p in lock_rules.schema_problems({})] == [lock_rules.SCHEMA] * len(lock_rules.SCHEMA_FIELDS)


# ------------------------------------------------------------------ lock files


@unix_only
def test_a_nested_lock_is_skipped_as_invalid_by_every_program(tmp_path: Any) -> None:
    home = str(tmp_path / "home")
    folder = str(tmp_path / "ws")
    os.makedirs(os.path.join(home, "ide"))
    os.makedirs(folder)
    bad = os.path.join(home, "ide", "nested.lock")
    with open(bad, "wb") as f:
        f.write(nested())
    raw, problems = lock_rules.read_lock(bad, attempts=1)
    assert raw is None and problems[0].code == lock_rules.INVALID_JSON
    ran = run_program(["doctor", folder, "--json", "--no-handshake"], home=home, limit=60)
    no_traceback(ran)
    report = json.loads(ran.out)
    assert [f["code"] for f in report["locks"][0]["findings"]] == ["invalid-json"], report
    for args in (["client", "--folder", folder, "list"], ["check", folder], ["trace", folder]):
        ran = run_program(args, home=home, limit=60)
        no_traceback(ran)
        assert ran.code != 0 and "nested.lock" in ran.err, (args, ran)
    ran = run_program(["serve", folder], home=home, limit=60, stdin=b"quit\n")
    no_traceback(ran)
    assert ran.code == 0, ran


@unix_only
@pytest.mark.parametrize("program", [["client", "call", "get_selection"], ["check"], ["trace"]])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_lock_option_reads_only_a_bounded_regular_file(tmp_path: Any, program: List[str], kind: str) -> None:
    """`--lock FILE`: a FIFO hung client, check and trace; /dev/zero behind a symlink or
    a 2 GB file was read whole."""
    path = str(tmp_path / "x.lock")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "wb") as f:
            f.truncate(2 * 1024 ** 3)  # sparse: no disk used
    ran = run_program(program[:1] + ["--lock", path] + program[1:], limit=60)
    no_traceback(ran)
    assert ran.code != 0, ran
    assert ("not a regular file" in ran.err) if kind != "huge" else ("larger than" in ran.err), ran
    assert ran.peak_mb is not None and ran.peak_mb < 100, ran


def junk_folder(tmp_path: Any, count: int) -> Any:
    home = tmp_path / "home"
    (home / "ide").mkdir(parents=True)
    for n in range(count):
        (home / "ide" / ("junk-%03d.lock" % n)).write_bytes(b"{not json")
    folder = tmp_path / "ws"
    folder.mkdir()
    return str(home), str(folder)


def test_retries_are_shared_across_a_scan(tmp_path: Any) -> None:
    """A lock caught half written is read again (three times, 100 ms apart); a folder of
    100 junk files costs those two pauses once, not 200 times."""
    home, _ = junk_folder(tmp_path, 100)
    paths = [os.path.join(home, "ide", n) for n in sorted(os.listdir(os.path.join(home, "ide")))]
    slept: List[float] = []
    results = lock_rules.read_locks(paths, sleep=slept.append)
    assert slept == [lock_rules.READ_RETRY_SECONDS] * 2
    assert all(raw is None and problems[0].code == lock_rules.INVALID_JSON for raw, problems in results)


@unix_only
def test_scans_of_a_folder_of_junk_locks_do_not_stall(tmp_path: Any) -> None:
    """300 junk locks took 60 s per scan (the CLI gives up on a call after 60): client
    list, doctor and check end well before that. The limit only catches a stall."""
    home, folder = junk_folder(tmp_path, 300)
    for args in (["client", "--folder", folder, "list"], ["doctor", folder, "--no-handshake"], ["check", folder]):
        ran = run_program(args, home=home, limit=40)
        no_traceback(ran)
        assert "junk-299.lock" in ran.err + ran.out, (args, ran)


@unix_only
def test_serve_answers_while_it_scans_a_folder_of_junk_locks(tmp_path: Any) -> None:
    """`serve` read every lock for its 'already served' warning on its event loop: a
    call made right after its lock appeared waited 60 s for 300 junk files."""
    home, folder = junk_folder(tmp_path, 300)
    env = dict(os.environ, COPILOT_HOME=home, PYTHONPATH=REPO)
    proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", folder], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        lock = re.search(r", lock (.+)$", first.strip())
        assert lock, first
        ran = run_program(["client", "--lock", lock.group(1), "--timeout", "30", "call", "get_selection"], limit=60)
        assert ran.code == 0, ran
    finally:
        proc.communicate(b"quit\n", timeout=60)


@unix_only
def test_doctor_handshakes_run_together_under_one_deadline(tmp_path: Any) -> None:
    """Five servers that drip their answer: doctor --timeout 2 took 40 s one after
    another; together, each whole request bounded, it takes about one timeout."""
    def drip(sock: socket.socket, request: Any) -> None:
        sock.sendall(sse_head())
        for _ in range(300):
            sock.sendall(chunk(b":"))
            time.sleep(0.3)

    ides = []
    try:
        for n in range(5):
            (tmp_path / str(n)).mkdir()
            ide = HostileIde(str(tmp_path / str(n)), {"server/discover": drip})
            ides.append(ide)
            if n:
                os.rename(ide.lock_path, os.path.join(ides[0].lock_dir, "h%d.lock" % n))
        ran = run_program(["doctor", ides[0].folder, "--json", "--timeout", "2"], home=ides[0].home, limit=25)
        no_traceback(ran)
        report = json.loads(ran.out)
        assert len(report["locks"]) == 5
        assert all("handshake-failed" in [f["code"] for f in lock["findings"]] for lock in report["locks"]), report
    finally:
        for ide in ides:
            ide.close()


# ---------------------------------------------------------- smaller readers


def test_cancelled_with_a_list_request_id_is_ignored_quietly(tmp_path: Any, caplog: Any) -> None:
    async def main() -> None:
        async with make_server(tmp_path) as server:
            cli = cli_for(server)
            await cli.handshake(probes=0)
            for odd in ([1], {"a": 1}):
                reply = await cli.notify("notifications/cancelled", {"requestId": odd, "reason": "x"})
                assert reply.status == 202
            assert isinstance(await cli.call_tool("get_selection"), dict)  # the session still works
            cli.close()
    with caplog.at_level(logging.DEBUG, logger="ide_protocol"):
        run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.skipif(sys.platform == "win32", reason="select() of an os.pipe(): Windows selects sockets only")
def test_serve_cuts_a_line_longer_than_the_output_buffer() -> None:
    read_end, write_end = os.pipe()
    writer = serve_output.BoundedWriter(write_end, limit=1000)
    try:
        assert writer.write(("é" * 5000 + "\n").encode("utf-8"))
        writer.close()
        data = b""
        while select.select([read_end], [], [], 5)[0]:
            piece = os.read(read_end, 65536)
            if not piece:
                break
            data += piece
            if data.endswith(b"\n"):
                break
    finally:
        os.close(read_end)
        os.close(write_end)
    text = data.decode("utf-8")  # cut at a character boundary
    assert "was cut" in text and "nobody was reading" not in text, text
    assert len(data) <= 1000


@unix_only
def test_trace_bounds_its_records_and_says_why_a_connection_closed(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(trace, "KEEP_RECORD_BYTES", 64 * 1024)
    ide = HostileIde(str(tmp_path))
    out = io.StringIO()

    async def main() -> None:
        target = lockfile.LockInfo.from_json(json.load(open(ide.lock_path)), ide.lock_path)
        async with trace.Tracer(target, str(tmp_path / "trace-home" / "ide"), out=out) as tracer:
            assert tracer.socket_path is not None
            reader, writer = await asyncio.open_unix_connection(tracer.socket_path)
            for _ in range(64):
                writer.write(b"\x00not http\r\n" * 1024)
                await writer.drain()
            writer.close()
            await until(lambda: "closed:" in out.getvalue(), what="closed line")
            assert tracer.kept_bytes <= 64 * 1024 + trace.READ_SIZE
            assert tracer.dropped_records > 0 and tracer.dropped_bytes > 0
    try:
        run(main())
    finally:
        ide.close()
    # (the server hung up on the junk: the line says so, and the display gave up once)
    assert re.search(r"--- closed: the (CLI|server) \w+", out.getvalue()), out.getvalue()[-2000:]


@unix_only
def test_more_than_a_hundred_simultaneous_connects_wait_in_the_backlog(tmp_path: Any) -> None:
    """asyncio's default backlog (100) made the 101st connect of a burst fail."""
    somaxconn = int(open("/proc/sys/net/core/somaxconn").read()) if os.path.exists(
        "/proc/sys/net/core/somaxconn") else 128
    if somaxconn < 200:
        pytest.skip("the kernel caps listen backlogs at %d (net.core.somaxconn)" % somaxconn)
    folder = tmp_path / "ws"
    folder.mkdir()
    env = dict(os.environ, COPILOT_HOME=str(tmp_path / "home"), PYTHONPATH=REPO)
    proc = subprocess.Popen([sys.executable, "-m", "ide_protocol", "serve", str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    socks = []
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        path = re.search(r" on (.+), lock ", first).group(1)  # type: ignore[union-attr]
        os.kill(proc.pid, signal.SIGSTOP)  # accepts nothing while the burst arrives
        refused = 0
        for _ in range(150):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(path)
            except BlockingIOError:
                refused += 1
            socks.append(sock)
        os.kill(proc.pid, signal.SIGCONT)
        assert refused == 0
    finally:
        for sock in socks:
            sock.close()
        os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(b"quit\n", timeout=60)
