"""The reference in the suite: VS Code Copilot Chat's `/ide` server, rebuilt from its
source on the packages VS Code pins (tests/vscode_replica/replica.js, installed by
`make vscode-replica`; skipped, with the reason, where node and npm cannot be had).

Two things are proved against it, for both places VS Code has put its nonce check (app
wide, and on the /mcp routes only):

* `check` reports no FAIL: VS Code's own server breaks nothing the CLI needs, and every
  rule of VS Code's holds (no DIFF); what it does otherwise than we recommend is ADVICE,
  and exactly the checks listed in `ADVICE_FOR_VSCODE`. The two runs take some forty
  seconds together, so their reports are kept (`.vscode-replica/reports/`) under a key
  made of everything they depend on (the checker and the replica, byte for byte): the
  suite under six CPythons runs them once.
* each behaviour docs/PROTOCOL.md attributes to VS Code is what the replica does (the
  tests below, one or a few requests each; the contract's words in their docstrings).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from ide_protocol.client import ClientConnection, IdeTimeout, ServerGone
from ide_protocol.common import lockfile, tools
from ide_protocol.programs import check
from ide_protocol.programs.check import CheckContext
from ide_protocol.wire import http11, jsonrpc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "tests", "vscode_replica")
INSTALLED = os.path.join(ROOT, os.environ.get("VSCODE_REPLICA", ".vscode-replica"))
VARIANTS = ("app", "routes")

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or sys.platform == "win32",
                                reason="the replica listens on a Unix socket")

#: The checks that report ADVICE against VS Code's server: where it does otherwise than
#: PROTOCOL.md recommends (the contract's errors table has VS Code's answer beside ours).
#: The routes variant also lets a path other than /mcp go unauthenticated (404 before
#: any nonce check).
ADVICE_FOR_VSCODE = {
    "auth.missing", "auth.origin", "http.path", "http.method", "jsonrpc.parse_error", "jsonrpc.batch",
    "delete.session", "errors.order_origin_first", "errors.refused_before_body", "errors.close_after_401",
    "errors.close_after_403", "errors.open_after_405", "errors.body_limit", "errors.parse_error_body",
    "errors.batch_body", "errors.invalid_message", "errors.missing_session_body", "errors.unknown_session_body",
    "errors.second_stream", "errors.stream_accept", "errors.close_after_404_with_body", "errors.malformed_http",
    "framing.length_and_chunked", "framing.optional_headers", "session.unknown", "session.initialize_no_steal",
    "session.reconnect_after_stream_closed", "session.ends_when_client_vanishes", "session.cancel_ends_request",
    "tool.get_diagnostics", "tool.arguments", "diff.session_end", "stream.selection_on_open",
}
ADVICE_ONLY_FOR = {"routes": {"errors.order_nonce_before_path"}}
#: Skipped against any IDE the checker did not start, and without a person.
SKIPPED = {"lock.folder_change", "diff.accept"}


# ------------------------------------------------------------------ the replica


_installed: Dict[str, Optional[str]] = {}


def missing() -> Optional[str]:
    """Why the replica cannot run here (after installing its packages), or None."""
    if "reason" not in _installed:
        try:
            proc = subprocess.run(["bash", os.path.join(HERE, "install.sh")], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=900)
            lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
            _installed["reason"] = None if proc.returncode == 0 else (
                "VS Code replica not installed: " + (lines[-1] if lines else "install.sh failed"))
        except (OSError, subprocess.SubprocessError) as exc:
            _installed["reason"] = "VS Code replica not installed: %s" % exc
    return _installed["reason"]


class Replica:
    """One replica process: its lock, its workspace, and a line of stdin per command
    (the user in the editor: accept a diff, select, report diagnostics, change folders)."""

    def __init__(self, variant: str, base: str) -> None:
        self.variant = variant
        self.state = os.path.join(base, "state")  # $XDG_STATE_HOME: VS Code's lock folder is under it
        self.folder = os.path.realpath(os.path.join(base, "project"))
        os.makedirs(self.folder)
        self.file = os.path.join(self.folder, "a.py")
        with open(self.file, "w") as f:
            f.write("print('hi')\nx = 1\n")
        editor = {"selection": {"filePath": self.file, "start": [0, 0], "end": [0, 5]},
                  "diagnostics": [{"filePath": self.file, "items": [
                      {"message": "undefined name", "severity": 0, "start": [1, 0], "end": [1, 1], "source": "t"}]}]}
        env = dict(os.environ, XDG_STATE_HOME=self.state, NODE_PATH=os.path.join(INSTALLED, "node_modules"))
        self.proc = subprocess.Popen(["node", os.path.join(HERE, "replica.js"), "--variant", variant, "--folder",
                                      self.folder, "--editor", json.dumps(editor)], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            raise AssertionError("the replica did not start: %s" % self.proc.stderr.read().decode())  # type: ignore
        self.info = json.loads(first)
        self.lock_path = self.info["lock"]
        self.lock, self.raw = check.load_lock(self.lock_path)

    def command(self, **command: Any) -> Dict[str, Any]:
        """One command on stdin; returns once the replica has done it (with `found`, for
        a command on a diff: whether it was open)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()
        done = json.loads(self.proc.stdout.readline())
        assert done["done"] == command, done
        return done

    async def press(self, button: str, tab: str) -> None:
        """The user presses a diff's button (accept, reject), once VS Code has opened it
        (an `open_diff` opens its diff a moment after its answer's head has gone)."""
        for _ in range(100):
            if self.command(**{button: tab})["found"]:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("no diff %r opened" % tab)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # (the replica removes its lock and socket, as VS Code does)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _started(variant: str) -> Iterator[Replica]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    base = tempfile.mkdtemp(prefix="vscode-replica-")
    made = Replica(variant, base)
    try:
        yield made
    finally:
        made.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    """The replica as VS Code 31acd00 has it (the nonce check app-wide)."""
    yield from _started("app")


@pytest.fixture(scope="module", params=VARIANTS)
def either_replica(request: Any) -> Iterator[Replica]:
    """Both places of the nonce check, for what the place changes: the refusals of a
    request's head."""
    yield from _started(request.param)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


async def _with_ctx(replica: Replica, body: Any) -> Any:
    ctx = CheckContext(replica.lock, replica.raw, timeout=10)
    try:
        return await body(ctx)
    finally:
        await ctx.cleanup()


def with_ctx(replica: Replica, body: Any) -> Any:
    """`body(ctx)`: requests to the replica through the checker's own context."""
    return run(_with_ctx(replica, body))


# ------------------------------------------------------------------ check against it


def _report_key() -> str:
    """Everything the report depends on: the checker (and the library under it), the
    replica and its packages' lock, node's version."""
    digest = hashlib.sha256()
    for folder in (os.path.join(ROOT, "ide_protocol"), HERE):
        for path, dirs, files in sorted(os.walk(folder)):
            dirs.sort()
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in sorted(files):
                if name.endswith((".py", ".js", ".json", ".sh")):
                    digest.update(os.path.relpath(os.path.join(path, name), ROOT).encode())
                    with open(os.path.join(path, name), "rb") as f:
                        digest.update(f.read())
    digest.update(subprocess.run(["node", "--version"], stdout=subprocess.PIPE).stdout)
    return digest.hexdigest()[:20]


def _checked(variant: str) -> Dict[str, Any]:
    """`check --json` against a fresh replica of `variant` (no deadline: every check
    runs), or the report kept from an earlier run of the same code."""
    reports = os.path.join(INSTALLED, "reports")
    kept = os.path.join(reports, "%s-%s.json" % (_report_key(), variant))
    if os.path.exists(kept):
        with open(kept) as f:
            return json.load(f)
    base = tempfile.mkdtemp(prefix="vscode-replica-check-")
    made = Replica(variant, base)
    try:
        env = dict(os.environ, PYTHONPATH=ROOT)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ide_protocol", "check", "--lock", made.lock_path, "--json",
                               "--deadline", "0"], cwd=made.folder, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=600)
        report = json.loads(proc.stdout)
        report["rc"] = proc.returncode
        report["seconds"] = round(time.monotonic() - started, 1)  # (kept for a reader; not asserted)
    finally:
        made.stop()
        shutil.rmtree(base, ignore_errors=True)
    os.makedirs(reports, exist_ok=True)
    for old in os.listdir(reports):  # (reports of other code: no longer of use)
        if not old.startswith(_report_key()):
            try:
                os.unlink(os.path.join(reports, old))
            except FileNotFoundError:  # (the other variant's thread removed it first)
                pass
    with open(kept + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(kept + ".tmp", kept)
    return report


_reports: Dict[str, Dict[str, Any]] = {}


def checked(variant: str) -> Dict[str, Any]:
    """The reports of both variants, made at once (two checkers side by side) when not kept."""
    if not _reports:
        reason = missing()
        if reason:
            pytest.skip(reason)
        def make(v: str) -> None:
            try:
                _reports[v] = _checked(v)
            except BaseException:  # (said by the test that reads it)
                _reports[v] = {"error": traceback.format_exc()}
        threads = [threading.Thread(target=make, args=(v,)) for v in VARIANTS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    report = _reports[variant]
    assert "error" not in report, report.get("error")
    return report


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_reports_no_fail_against_vscode(variant: str) -> None:
    """No FAIL (exit 0), no DIFF: VS Code breaks nothing the CLI needs, and holds every
    rule of its own. The rest is advice, where VS Code does otherwise than we recommend,
    or a skip of what no client can drive."""
    report = checked(variant)
    statuses = {r["name"]: r["status"] for r in report["results"]}
    lines = "\n".join("%s %s %s" % (r["status"], r["name"], r["message"]) for r in report["results"]
                      if r["status"] != "PASS")
    assert report["rc"] == 0, lines
    assert report["summary"]["FAIL"] == 0 and report["summary"]["DIFF"] == 0, lines
    advice = ADVICE_FOR_VSCODE | ADVICE_ONLY_FOR.get(variant, set())
    assert {n for n, s in statuses.items() if s == "ADVICE"} == advice, lines
    assert {n for n, s in statuses.items() if s == "SKIP"} == SKIPPED, lines
    assert set(statuses) == {c.name for c in check.CHECKS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_strict_fails_vscode_on_our_advice_only(variant: str) -> None:
    """What --strict would fail is exactly the advice: each with its rule, ours."""
    report = checked(variant)
    advice = [r for r in report["results"] if r["status"] == "ADVICE"]
    assert advice and all(r["rule"] == "advice" for r in advice)


# ------------------------------------------------------------------ VS Code's behaviour (PROTOCOL.md)


def test_packages_are_the_ones_vscode_pins(replica: Replica) -> None:
    versions = replica.info["versions"]
    assert (versions["@modelcontextprotocol/sdk"], versions["express"], versions["zod"]) == ("1.26.0", "5.2.1",
                                                                                           "3.25.76")


def test_lock_is_written_as_vscode_writes_it(replica: Replica) -> None:
    """§1: `$XDG_STATE_HOME/.copilot/ide/<uuid>.lock`, mode 0600 in a 0700 folder;
    `isTrusted` false; the socket in a private `mcp-` folder; a folder change rewrites
    the same file in place (lockFile.ts)."""
    folder = os.path.dirname(replica.lock_path)
    assert folder == os.path.join(replica.state, ".copilot", "ide")
    uuid.UUID(os.path.basename(replica.lock_path)[:-len(".lock")])  # <uuid>.lock
    assert replica.raw["scheme"] == "unix" and replica.raw["ideName"] == "Visual Studio Code"
    uuid.UUID(replica.raw["headers"]["Authorization"][len("Nonce "):])  # the nonce: a UUID
    assert os.stat(replica.lock_path).st_mode & 0o777 == 0o600
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert os.stat(os.path.dirname(replica.lock.socket_path)).st_mode & 0o777 == 0o700
    assert os.path.basename(os.path.dirname(replica.lock.socket_path)).startswith("mcp-")
    assert replica.raw["isTrusted"] is False and replica.raw["workspaceFolders"] == [replica.folder]
    assert replica.raw["headers"]["Authorization"].startswith("Nonce ")
    inode = os.stat(replica.lock_path).st_ino
    other = os.path.join(replica.folder, "sub")
    replica.command(folders=[replica.folder, other])
    try:
        assert os.listdir(folder) == [os.path.basename(replica.lock_path)]
        assert os.stat(replica.lock_path).st_ino == inode  # the same file, rewritten
        with open(replica.lock_path) as f:
            assert json.load(f)["workspaceFolders"] == [replica.folder, other]
    finally:
        replica.command(folders=[replica.folder])


async def _raw(ctx: CheckContext, data: bytes) -> Tuple[check.Reply, ClientConnection]:
    conn = await ctx.connect()
    await conn.send(data)
    response = await conn.read_response("POST", ctx.timeout)
    return await check.read_reply(response, "raw", ctx.timeout), conn


def test_stale_locks_of_anyone_go_at_start_and_its_own_at_stop(tmp_path: Any) -> None:
    """§1 Removal: at start VS Code deletes every lock of a dead pid it finds, whoever
    wrote it (lockFile.ts); when it stops, its lock and its socket's folder go."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    folder = os.path.join(str(tmp_path), "state", ".copilot", "ide")
    os.makedirs(folder)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = {"socketPath": "/nonexistent", "scheme": "unix", "headers": {}, "pid": dead.pid, "ideName": "Other",
             "timestamp": 0, "workspaceFolders": [], "_writer": "someone else"}
    for name, pid in (("stale.lock", dead.pid), ("live.lock", os.getpid())):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(dict(stale, pid=pid), f)
    made = Replica("app", str(tmp_path))
    try:
        assert sorted(os.listdir(folder)) == sorted(["live.lock", os.path.basename(made.lock_path)])
    finally:
        made.stop()
    assert os.listdir(folder) == ["live.lock"]
    assert not os.path.exists(os.path.dirname(made.lock.socket_path))


def test_refusals_of_the_head(either_replica: Replica) -> None:
    """§2 errors table, VS Code's column: no nonce → 401 `text/html` "Unauthorized", the
    connection kept; an Origin is not refused; a Host other than `localhost` is (403,
    the SDK's DNS-rebinding protection); PUT → Express's 404 `Cannot PUT /mcp`; another
    path → 404 (with the nonce checked first only where the check is app-wide)."""
    async def body(ctx: CheckContext) -> None:
        conn = await ctx.connect()
        reply = await ctx.send("POST", jsonrpc.request(1, "ping", {}), headers=ctx.headers("POST", auth=False),
                               conn=conn)
        assert (reply.status, reply.content_type, reply.body) == (401, "text/html", b"Unauthorized")
        assert not conn.closed and reply.response.conn.keep_alive
        again = await ctx.send("POST", jsonrpc.request(1, "ping", {}), headers=ctx.headers("POST", auth=False),
                               conn=conn)
        assert again.status == 401  # (the same connection: kept alive)
        origin = await ctx.send("POST", jsonrpc.request(1, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            headers=ctx.headers("POST", extra=[("Origin", "http://evil.example")]))
        assert origin.status == 200 and origin.answer(1) is not None
        host = [(k, v) for k, v in ctx.headers("GET", origin.headers.get("mcp-session-id")) if k != "Host"]
        refused = await ctx.send("GET", None, headers=host + [("Host", "evil.example")])
        assert refused.status == 403 and refused.message()["error"]["code"] == -32000
        put = await ctx.send("PUT", b"{}", headers=ctx.headers("POST"))
        assert (put.status, put.content_type) == (404, "text/html") and b"Cannot PUT /mcp" in put.body
        other = await ctx.send("GET", None, target="/not-mcp", headers=ctx.headers("GET", auth=False))
        assert other.status == (401 if either_replica.variant == "app" else 404)
        for target in ("/not-mcp", "/"):
            path = await ctx.send("POST", jsonrpc.request(1, "ping", {}), target=target)
            assert (path.status, path.content_type) == (404, "text/html")
            assert b"Cannot POST " + target.encode() in path.body and path.response.conn.keep_alive
    with_ctx(either_replica, body)


def test_bodies_are_read_before_they_are_judged(either_replica: Replica) -> None:
    """§2: `express.json({limit: '10mb'})` comes before the nonce check: a body is read
    whole before a refusal, so a POST announcing more than it sends gets no answer;
    unparsable JSON gets body-parser's HTML 400; over 10 MiB, 413 once read."""
    async def body(ctx: CheckContext) -> None:
        conn = await ctx.connect()
        await conn.send(http11.write_request("POST", "/mcp", ctx.headers("POST", auth=False)[:-1]
                                             + [("Content-Length", "100"), ("Host", "localhost")], None))
        with pytest.raises(IdeTimeout):
            await conn.read_response("POST", 1.0)
        bad = await ctx.send("POST", b"{not json", session="x")
        assert (bad.status, bad.content_type) == (400, "text/html")
        sid = await ctx.new_session()
        rid = ctx.next_id()
        from ide_protocol.programs.check.http import padded_ping
        big = await ctx.send("POST", padded_ping(rid, 10 * 1024 * 1024 + 1), session=sid)
        assert big.status == 413
        fits = await ctx.send("POST", padded_ping(rid, 10 * 1024 * 1024), session=sid)
        assert fits.status == 200 and fits.answer(rid) is not None
    with_ctx(either_replica, body)


def test_malformed_http_is_nodes_400(replica: Replica) -> None:
    """§2: malformed HTTP, or Content-Length with chunked: Node's own 400, no body,
    `Connection: close`."""
    async def body(ctx: CheckContext) -> None:
        for data in (b"NOT AN HTTP REQUEST AT ALL\r\n\r\n",
                     b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
                     b"\r\n\r\n0\r\n\r\n"):
            reply, conn = await _raw(ctx, data)
            assert (reply.status, reply.body, reply.headers.get("connection")) == (400, b"", "close")
    with_ctx(replica, body)


def test_session_refusals(replica: Replica) -> None:
    """§3 and the errors table: server/discover (no session yet) → 400 -32000 "No valid
    session ID provided" (the CLI then sends initialize); no session header at all →
    400 -32000; an unknown session id → 400 -32000, id null; GET or DELETE of an
    unknown session → 400 `text/html` "Invalid or missing session ID"."""
    async def body(ctx: CheckContext) -> None:
        discover, rid = await ctx.rpc("server/discover", {"_meta": {}})
        error = discover.message()
        assert discover.status == 400 and error["error"]["code"] == -32000 and error["id"] is None
        assert "No valid session ID provided" in error["error"]["message"]
        headers = [(k, v) for k, v in ctx.headers("POST") if k != "X-Copilot-Session-Id"]
        none = await ctx.send("POST", jsonrpc.request(1, "tools/list", {}), headers=headers)
        assert none.status == 400 and none.message()["error"]["code"] == -32000
        unknown, _ = await ctx.rpc("tools/list", {}, session="no-such-" + uuid.uuid4().hex)
        assert unknown.status == 400 and unknown.message() == {
            "jsonrpc": "2.0", "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
            "id": None}
        for method in ("GET", "DELETE"):
            gone = await ctx.send(method, None, session="no-such-" + uuid.uuid4().hex)
            assert (gone.status, gone.content_type, gone.body) == (400, "text/html", b"Invalid or missing session ID")
    with_ctx(replica, body)


def test_initialize_as_vscode_answers_it(replica: Replica) -> None:
    """§3: the session id is the CLI's `X-Copilot-Session-Id`; the result names
    `vscode-copilot-cli` 0.0.1 with `tools.listChanged`; the requested version is
    echoed; `notifications/initialized` → 202; a finished answer may come with
    `Content-Length` instead of chunked (hono's node-server)."""
    async def body(ctx: CheckContext) -> None:
        ctx.client_session_id = str(uuid.uuid4())
        reply, rid = await ctx.initialize("2025-06-18")
        assert reply.headers.get("mcp-session-id") == ctx.client_session_id
        result = reply.answer(rid)["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["capabilities"]["tools"] == {"listChanged": True}
        assert result["serverInfo"] == {"name": "vscode-copilot-cli", "title": "VS Code Copilot CLI",
                                        "version": "0.0.1"}
        note, _ = await ctx.rpc("notifications/initialized", session=ctx.client_session_id, notification=True)
        assert note.status == 202 and note.body == b""
        assert note.headers.get("content-type") == "text/plain; charset=UTF-8"
        ping, rid = await ctx.rpc("ping", {}, session=ctx.client_session_id)
        assert ping.answer(rid)["result"] == {} and ping.content_type == "text/event-stream"
        assert ping.headers.get("content-length") is not None and ping.headers.get("transfer-encoding") is None
        assert ping.headers.get("cache-control") == "no-cache" and len(ping.events) == 1
        assert ping.events[0].event == "message" and ping.events[0].id is None
    with_ctx(replica, body)


def test_a_registered_session_id_is_never_taken_over(replica: Replica) -> None:
    """§3 and the errors table: a second `initialize` with the id of a registered
    session → 409 -32000, id null, "Conflict: A connection for this session already
    exists" (the message CLI 1.0.102 recognises), whatever its stream's state, until a
    DELETE; sessions whose connections all closed are never ended."""
    async def body(ctx: CheckContext) -> None:
        sid = await ctx.new_session()
        conn, _ = await ctx.open_stream(sid)
        conn.close()
        await asyncio.sleep(1.5)  # (our serve ends such a session within 1 s)
        for conns in ctx._conns:
            conns.close()
        fresh = await ctx.connect()
        again, _ = await ctx.rpc("ping", {}, session=sid, conn=fresh)
        assert again.status == 200  # still alive
        ctx.client_session_id = sid
        refused, rid = await ctx.initialize()
        assert refused.status == 409 and refused.message() == {"jsonrpc": "2.0", "error": {
            "code": -32000, "message": "Conflict: A connection for this session already exists"}, "id": None}
        deleted = await ctx.delete(sid)
        assert deleted.status == 200 and deleted.body == b""
        second = await ctx.delete(sid)
        assert (second.status, second.content_type) == (400, "text/html")
        taken, rid = await ctx.initialize()
        assert taken.status == 200 and taken.headers.get("mcp-session-id") == sid
    with_ctx(replica, body)


def test_streams_and_messages_as_the_sdk_answers(replica: Replica) -> None:
    """§2 errors table, VS Code's column: a second GET stream → 409 -32000; a GET whose
    Accept lacks `text/event-stream` → 406 -32000; a POST without Accept and
    Content-Type → 406; a batch is processed (200); a message with neither method nor
    result → 400 -32700; the GET stream's head: `no-cache, no-transform`, chunked;
    no `selection_changed` when a stream opens."""
    async def body(ctx: CheckContext) -> None:
        sid = await ctx.new_session()
        conn, stream = await ctx.open_stream(sid)
        assert stream.headers.get("cache-control") == "no-cache, no-transform"
        assert stream.headers.get("transfer-encoding") == "chunked"
        second = await ctx.send("GET", None, session=sid)
        assert second.status == 409 and second.message()["error"]["code"] == -32000
        with pytest.raises(IdeTimeout):
            await stream.next_event(1.0)  # (a current selection exists: VS Code sends it only on a change)
        headers = [(k, v) for k, v in ctx.headers("GET", sid) if k.lower() != "accept"]
        no_sse = await ctx.send("GET", None, headers=headers[:-1] + [("Accept", "application/json")] + headers[-1:])
        assert no_sse.status == 406 and no_sse.message()["error"]["code"] == -32000
        bare = [(k, v) for k, v in ctx.headers("POST", sid) if k.lower() not in ("accept", "content-type")]
        plain = await ctx.send("POST", jsonrpc.request(5, "ping", {}), headers=bare)
        assert plain.status == 406
        untyped = [(k, v) for k, v in ctx.headers("POST", sid) if k.lower() != "content-type"]
        plain = await ctx.send("POST", jsonrpc.request(5, "ping", {}), headers=untyped)
        assert plain.status == 415
        batch = await ctx.send("POST", [jsonrpc.request(6, "ping", {})], session=sid)
        assert batch.status == 200 and batch.answer(6) is not None
        invalid = await ctx.send("POST", {"jsonrpc": "2.0", "id": 7}, session=sid)
        assert invalid.status == 400 and invalid.message() == {
            "jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error: Invalid JSON-RPC message"}, "id": None}
    with_ctx(replica, body)


def test_tools_as_vscode_lists_and_answers_them(replica: Replica) -> None:
    """§4: the six tools with VS Code's descriptions, `additionalProperties: false` and
    `$schema` on the schemas with parameters, `execution.taskSupport` "forbidden";
    results pretty-printed with 2 spaces; extra arguments ignored (zod strips them),
    missing or mistyped ones and an unknown tool an `isError` result; lower-case
    severities, files without diagnostics left out."""
    async def body(ctx: CheckContext) -> None:
        _, answer = await ctx.call("tools/list", {})
        listed = {t["name"]: t for t in answer["result"]["tools"]}
        assert set(listed) == set(tools.TOOL_NAMES)
        for reference in tools.TOOLS:
            tool = listed[reference["name"]]
            assert tool["description"] == reference["description"]
            assert tool["execution"] == {"taskSupport": "forbidden"}
            if reference["inputSchema"]["properties"]:
                assert tool["inputSchema"]["additionalProperties"] is False
                assert tool["inputSchema"]["$schema"] == "http://json-schema.org/draft-07/schema#"
        reply, value = await ctx.tool("get_selection", {"extra": 1})
        assert value["current"] is True and value["filePath"] == replica.file and value["text"] == "print"
        text = reply.message()["result"]["content"][0]["text"]
        assert text == json.dumps(value, indent=2)
        for name, arguments in (("close_diff", {"tab_name": 5}), ("open_diff", {"tab_name": "t"}),
                                ("no_such_tool", {})):
            _, answer = await ctx.call("tools/call", {"name": name, "arguments": arguments})
            assert answer["result"]["isError"] is True, answer
        assert answer["result"]["content"][0]["text"] == "MCP error -32602: Tool no_such_tool not found"
        replica.command(select=None)  # no active editor: the last selection, cached
        try:
            _, cached = await ctx.tool("get_selection")
            assert cached["current"] is False and cached["filePath"] == replica.file
        finally:
            replica.command(select={"filePath": replica.file, "start": [0, 0], "end": [0, 5]})
        _, answer = await ctx.call("tools/call", {"name": "update_session_name", "arguments": {"name": "n",
                                                                                                "more": 1}})
        assert "isError" not in answer["result"]
        _, diagnostics = await ctx.tool("get_diagnostics")
        assert [d["severity"] for f in diagnostics for d in f["diagnostics"]] == ["error"]
        _, none = await ctx.tool("get_diagnostics", {"uri": "file://" + os.path.join(replica.folder, "b.py")})
        assert none == []
    with_ctx(replica, body)


def test_diffs_as_vscode_keeps_them(replica: Replica) -> None:
    """§4: `open_diff` blocks until a decision; two diffs with one tab name both wait,
    and `close_diff` closes the older (REJECTED/closed_via_tool); the user's accept
    answers SAVED/accepted_via_button and writes nothing; a cancelled request is never
    answered nor ended; a DELETE ends the stream of a waiting `open_diff` with no
    answer (the SDK closes the transport before the rejection is written)."""
    async def body(ctx: CheckContext) -> None:
        sid = await ctx.new_session()
        path = os.path.join(replica.folder, "new.txt")
        args = {"original_file_path": path, "new_file_contents": "n\n", "tab_name": "[t] one"}
        first = await ctx.start_tool("open_diff", args, sid)
        await first.started()
        second = await ctx.start_tool("open_diff", args, sid)
        await second.started()
        await asyncio.sleep(0.3)
        assert not first.task.done() and not second.task.done()
        _, closed = await ctx.tool("close_diff", {"tab_name": "[t] one"}, session=sid)
        assert closed == {"success": True, "already_closed": False, "tab_name": "[t] one",
                          "message": 'Diff "[t] one" closed successfully'}
        _, answer = await first.result(10)
        assert (answer["result"], answer["trigger"]) == ("REJECTED", "closed_via_tool")
        assert not second.task.done()
        await replica.press("accept", "[t] one")
        _, answer = await second.result(10)
        assert answer == {"success": True, "result": "SAVED", "trigger": "accepted_via_button", "tab_name": "[t] one",
                          "message": "User accepted changes for %s" % path}
        assert not os.path.exists(path)
        rejected = await ctx.start_tool("open_diff", dict(args, tab_name="[t] four"), sid)
        await rejected.started()
        await replica.press("reject", "[t] four")
        _, answer = await rejected.result(10)
        assert (answer["result"], answer["trigger"]) == ("REJECTED", "rejected_via_button")
        assert answer["message"] == "User rejected changes for %s" % path
        cancelled = await ctx.start_tool("open_diff", dict(args, tab_name="[t] two"), sid)
        await cancelled.started()
        note, _ = await ctx.rpc("notifications/cancelled", {"requestId": cancelled.rid}, session=sid,
                                notification=True)
        assert note.status == 202
        done, _ = await asyncio.wait({cancelled.task}, timeout=1.5)
        assert not done  # (the stream stays open: nothing ends it)
        waiting = await ctx.start_tool("open_diff", dict(args, tab_name="[t] three"), sid)
        await waiting.started()
        deleted = await ctx.delete(sid)
        assert deleted.status == 200
        with pytest.raises(check.Fail, match="no JSON-RPC answer"):
            await waiting.result(10)
        for pending in (cancelled, waiting, first, second, rejected):
            await pending.cancel()
    with_ctx(replica, body)


def test_pushes_as_vscode_sends_them(replica: Replica) -> None:
    """§5: `selection_changed` 200 ms after the user's last selection (trailing), to
    every session's stream, no `id:` line; `add_file_reference` at once, to the session
    picked; `diagnostics_changed` with lower-case severities and only the URIs of the
    last change in the window (VS Code loses the others)."""
    async def body(ctx: CheckContext) -> None:
        sid = await ctx.new_session()
        _, stream = await ctx.open_stream(sid)
        other = os.path.join(replica.folder, "b.py")
        with open(other, "w") as f:
            f.write("y = 2\n")
        replica.command(select={"filePath": replica.file, "start": [1, 0], "end": [1, 1]})
        replica.command(select={"filePath": other, "start": [0, 0], "end": [0, 1]})
        event = await stream.next_event(5)
        pushed = json.loads(event.data)
        assert pushed["method"] == "selection_changed" and pushed["params"]["filePath"] == other
        assert pushed["params"]["text"] == "y" and (event.event, event.id) == ("message", None)
        replica.command(send_context=sid)  # at once, to that session: add_file_reference
        event = await stream.next_event(1)
        assert json.loads(event.data) == {"jsonrpc": "2.0", "method": "add_file_reference", "params": {
            "filePath": other, "fileUrl": "file://" + other,
            "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
            "selectedText": "y"}}
        items = [{"message": "m", "severity": 1, "start": [0, 0], "end": [0, 1]}]
        replica.command(diagnostics=[{"filePath": replica.file, "items": items}], changed=[replica.file])
        replica.command(diagnostics=[{"filePath": replica.file, "items": items}, {"filePath": other, "items": items}],
                        changed=[other])
        event = await stream.next_event(5)
        pushed = json.loads(event.data)
        assert pushed["method"] == "diagnostics_changed"
        assert [u["uri"] for u in pushed["params"]["uris"]] == ["file://" + other]
        assert pushed["params"]["uris"][0]["diagnostics"][0]["severity"] == "warning"
        with pytest.raises(IdeTimeout):
            await stream.next_event(0.6)  # (no second push: the first file's change is lost)
    with_ctx(replica, body)
