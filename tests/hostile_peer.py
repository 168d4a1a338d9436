"""A hostile /ide server on a real Unix socket, and the programs run against it.

`HostileIde` answers the CLI's handshake as a real server does (server/discover with an
error, initialize with a session, 202 for notifications, a GET stream that ends when the
session is deleted, DELETE), and lets
a test replace the answer to any method with a function that writes whatever bytes it
likes on the socket: a drip, a flood, junk JSON. Each connection runs in its own
thread with plain blocking sockets, so the server keeps going whatever the client does.

`run_program` runs `python -m ide_protocol ...` in a child process that reports its own
peak RSS (and has its address space capped, so a regression fails instead of eating
the machine's memory).
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from ide_protocol.wire import http11

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SESSION = "hostile-session"

Handler = Callable[[socket.socket, Dict[str, Any]], None]


def sse_head(extra: str = "") -> bytes:
    return ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "mcp-session-id: %s\r\n%sTransfer-Encoding: chunked\r\n\r\n" % (SESSION, extra)).encode("ascii")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(message: Any) -> bytes:
    return chunk(b"event: message\ndata: " + json.dumps(message).encode("utf-8") + b"\n\n")


def answer(sock: socket.socket, message: Any) -> None:
    """One whole SSE answer, as a conformant server sends it."""
    sock.sendall(sse_head() + event(message) + b"0\r\n\r\n")


def result_of(request: Dict[str, Any], result: Any) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}


def _discover(sock: socket.socket, request: Dict[str, Any]) -> None:
    answer(sock, {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "no"}})


def _initialize(sock: socket.socket, request: Dict[str, Any]) -> None:
    answer(sock, result_of(request, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                     "serverInfo": {"name": "hostile", "version": "1"}}))


def _tools(sock: socket.socket, request: Dict[str, Any]) -> None:
    answer(sock, result_of(request, {"tools": [{"name": "get_selection", "description": "d",
                                                "inputSchema": {"type": "object", "properties": {}}}]}))


def _selection(sock: socket.socket, request: Dict[str, Any]) -> None:
    answer(sock, result_of(request, {"content": [{"type": "text", "text": "null"}]}))


class HostileIde:
    """The server; `handlers[method]` overrides an answer ("GET" is the stream)."""

    def __init__(self, directory: str, handlers: Optional[Dict[str, Handler]] = None) -> None:
        self.directory = directory
        self.socket_dir = tempfile.mkdtemp(prefix="hostile-", dir="/tmp")
        self.socket_path = os.path.join(self.socket_dir, "s.sock")
        self.handlers: Dict[str, Handler] = {"server/discover": _discover, "initialize": _initialize,
                                             "tools/list": _tools, "tools/call": _selection}
        self.handlers.update(handlers or {})
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket_path)
        self.listener.listen(64)
        self.closed = threading.Event()
        # DELETEs so far: a GET stream ends at the first one after it opened.
        self.deletes = 0
        self.deleted = threading.Condition()
        self.conns: List[socket.socket] = []
        self.folder = os.path.join(directory, "ws")
        os.makedirs(self.folder, exist_ok=True)
        self.home = os.path.join(directory, "home")
        self.lock_dir = os.path.join(self.home, "ide")
        os.makedirs(self.lock_dir, exist_ok=True)
        self.lock_path = os.path.join(self.lock_dir, "hostile.lock")
        with open(self.lock_path, "w", encoding="utf-8") as f:
            json.dump({"socketPath": self.socket_path, "scheme": "unix", "headers": {"Authorization": "Nonce x"},
                       "pid": os.getpid(), "ideName": "Hostile", "timestamp": int(time.time() * 1000),
                       "workspaceFolders": [os.path.realpath(self.folder)], "isTrusted": True}, f)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        parser = http11.RequestParser(max_body=None)
        head: Optional[http11.Request] = None
        body = bytearray()
        try:
            while not self.closed.is_set():
                data = conn.recv(65536)
                events = parser.feed(data) if data else parser.feed_eof()
                for ev in events:
                    if isinstance(ev, http11.Request):
                        head, body = ev, bytearray()
                    elif isinstance(ev, http11.Data):
                        body += ev.data
                    elif isinstance(ev, http11.EndOfMessage) and head is not None:
                        self._answer(conn, head, bytes(body))
                    elif isinstance(ev, (http11.ParseError, http11.ConnectionClosed)):
                        return
                if not data:
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, head: http11.Request, body: bytes) -> None:
        if head.method == "GET":
            # The stream stays open until the session is deleted, then ends as a real
            # server ends it (PROTOCOL.md §2): a client's close waits for that end.
            with self.deleted:
                seen = self.deletes
            handler = self.handlers.get("GET")
            if handler is None:
                conn.sendall(sse_head())
            else:
                handler(conn, {})
            with self.deleted:
                self.deleted.wait_for(lambda: self.deletes != seen or self.closed.is_set())
            if not self.closed.is_set():
                conn.sendall(b"0\r\n\r\n")
            return
        if head.method == "DELETE":
            with self.deleted:
                self.deletes += 1
                self.deleted.notify_all()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            request = json.loads(body.decode("utf-8"))
        except ValueError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        method = request.get("method", "")
        handler = self.handlers.get(method)
        if handler is not None:
            handler(conn, request)
        elif "id" not in request:
            conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        else:
            answer(conn, {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}})

    def close(self) -> None:
        self.closed.set()
        with self.deleted:
            self.deleted.notify_all()
        self.listener.close()
        for conn in list(self.conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        try:
            os.unlink(self.socket_path)
            os.rmdir(self.socket_dir)
        except OSError:
            pass


#: The child's address space cap: a reader that keeps every byte dies of MemoryError
#: here instead of taking the machine's memory.
ADDRESS_SPACE = 1536 * 1024 * 1024

_CHILD = r"""
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, (%d, %d))
code = 0
try:
    if sys.argv[1] == "--script":  # the library driven by a script: argv[2]
        sys.argv = sys.argv[2:]
        exec(compile(sys.argv[0], "<script>", "exec"), {"__name__": "__main__"})
    else:  # a program: python -m ide_protocol ARGS
        sys.argv = ["ide_protocol"] + sys.argv[1:]
        runpy.run_module("ide_protocol", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
finally:
    # This process's own peak: VmHWM starts afresh at exec (ru_maxrss keeps the peak of
    # the process that forked us, here pytest's).
    try:
        peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1])
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write("\nPEAK_RSS_KB %%d\n" %% peak)
    sys.stderr.flush()
sys.exit(code)
""" % (ADDRESS_SPACE, ADDRESS_SPACE)


class Ran:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code = code
        self.out = out
        m = re.search(r"PEAK_RSS_KB (\d+)", err)
        self.peak_mb = int(m.group(1)) / 1024 if m else None
        self.err = re.sub(r"\nPEAK_RSS_KB \d+\n", "", err)

    def __repr__(self) -> str:
        return "Ran(code=%s, peak=%s MB, out=%r, err=%r)" % (self.code, self.peak_mb, self.out[-500:],
                                                              self.err[-1500:])


def run_program(args: List[str], home: Optional[str] = None, limit: float = 120.0, quiet_out: bool = False,
                cwd: Optional[str] = None, stdin: Optional[bytes] = None) -> Ran:
    """`python -m ide_protocol ARGS` in a child; its exit code, output and peak RSS.
    `limit` only turns a hang into a failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if home is not None:
        env["COPILOT_HOME"] = home
    out = subprocess.DEVNULL if quiet_out else subprocess.PIPE
    proc = subprocess.run([sys.executable, "-c", _CHILD] + args, stdout=out, stderr=subprocess.PIPE,
                          input=stdin, env=env, cwd=cwd or REPO, timeout=limit)
    return Ran(proc.returncode, (proc.stdout or b"").decode("utf-8", "replace"),
               proc.stderr.decode("utf-8", "replace"))


def run_script(code: str, *args: str, limit: float = 120.0) -> Ran:
    """`code` run as a script using the library, in a child like `run_program`'s
    (`sys.argv[1:]` are `args`)."""
    return run_program(["--script", code] + list(args), limit=limit)


def nested(depth: int = 100000) -> bytes:
    return b"[" * depth + b"]" * depth
