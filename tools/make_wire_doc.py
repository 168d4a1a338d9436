#!/usr/bin/env python3
"""Generate docs/WIRE.md: one complete `/ide` session, byte for byte, annotated.

The bytes are not written by hand. This script starts our own `IdeServer`, puts the
tracer (`ide_protocol.programs.trace.Tracer`) in front of it, drives one session with
`IdeClient` exactly as Copilot CLI would (discovery, handshake, stream, tools, pushes,
a diff accepted, teardown), and renders what the tracer recorded. So the document
cannot drift from the code: `tests/test_wire_doc.py` regenerates it and fails when
docs/WIRE.md differs (`make wire-doc` rewrites it).

Volatile values are replaced by stable placeholders so that regeneration is
deterministic: the temporary directory becomes `/home/user`, socket paths
`/tmp/mcp-XXXXXX/mcp.sock`, the nonce `<nonce>`, the lock's pid and timestamp fixed
values. Chunk sizes and `Content-Length` are recomputed after the substitution, so
every example stays valid HTTP.

    python3 tools/make_wire_doc.py              # writes docs/WIRE.md
    python3 tools/make_wire_doc.py --out FILE   # writes FILE
    python3 tools/make_wire_doc.py --check      # exit 1 when docs/WIRE.md is stale
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from ide_protocol.wire import http11, sse  # noqa: E402
from ide_protocol.common import lockfile  # noqa: E402
from ide_protocol.client import IdeClient  # noqa: E402
from ide_protocol.server.ide_server import IdeServer  # noqa: E402
from ide_protocol.common.tools import Diagnostic, Selection  # noqa: E402
from ide_protocol.programs.trace import Record, Tracer, escape_block  # noqa: E402

DEFAULT_OUT = os.path.join(ROOT, "docs", "WIRE.md")
CLIENT_SESSION = "dd2a8913-a676-4133-b217-36b97d0ac572"
CLIENT_PID, CLIENT_PPID = 32748, 32746
IDE_INFO = {"version": "0.1.0", "appName": "Python IDE", "appRoot": "/usr/lib/python3", "language": "en",
            "machineId": "6f0c8a52-0d0e-4c4b-9a43-3f3f4f7e8a11", "uriScheme": "file", "shell": "/bin/bash"}


# --------------------------------------------------------------------- pieces


class Piece:
    """One unit of the wire as a reader wants it: a whole request, a response head, one
    SSE event (= one chunk), the last chunk, or a whole Content-Length response."""

    def __init__(self, conn: int, direction: str, kind: str, index: int, head: Any = None, body: bytes = b"",
                 chunked: bool = False) -> None:
        self.conn = conn
        self.direction = direction
        self.kind = kind        # request | head | event | end | whole
        self.index = index      # the record in which it completed
        self.head = head
        self.body = body
        self.chunked = chunked


def split_pieces(records: List[Record]) -> List[Piece]:
    """Parse each direction of each connection and cut it into pieces (see Piece)."""
    pieces: List[Piece] = []
    state: Dict[Tuple[int, str], Dict[str, Any]] = {}
    for index, record in enumerate(records):
        key = (record.conn, record.direction)
        st = state.get(key)
        if st is None:
            parser = http11.RequestParser(max_body=None) if record.direction == "C>S" else http11.ResponseParser()
            st = state[key] = {"parser": parser, "head": None, "body": bytearray(), "sse": None, "chunked": False}
        for event in st["parser"].feed(record.data):
            if isinstance(event, http11.Request):
                st.update(head=event, body=bytearray(), chunked="chunked" in event.headers.tokens("transfer-encoding"))
                state_s = state.setdefault((record.conn, "S>C"), {
                    "parser": http11.ResponseParser(), "head": None, "body": bytearray(), "sse": None, "chunked": False})
                state_s["parser"].expect(event.method)
            elif isinstance(event, http11.Response):
                chunked = "chunked" in event.headers.tokens("transfer-encoding")
                st.update(head=event, body=bytearray(), chunked=chunked, sse=None)
                if chunked:
                    pieces.append(Piece(record.conn, "S>C", "head", index, event, chunked=True))
                    if "text/event-stream" in (event.headers.get("content-type") or ""):
                        st["sse"] = sse.SSEDecoder()
            elif isinstance(event, http11.Data):
                if st["sse"] is not None:
                    for ev in st["sse"].feed(event.data):
                        data = b"event: %s\ndata: %s\n\n" % (ev.event.encode(), ev.data.encode("utf-8"))
                        pieces.append(Piece(record.conn, "S>C", "event", index, body=data, chunked=True))
                elif record.direction == "S>C" and st["chunked"]:
                    pieces.append(Piece(record.conn, "S>C", "event", index, body=event.data, chunked=True))
                else:
                    st["body"] += event.data
            elif isinstance(event, http11.EndOfMessage):
                if record.direction == "C>S":
                    pieces.append(Piece(record.conn, "C>S", "request", index, st["head"], bytes(st["body"]),
                                        st["chunked"]))
                elif st["chunked"]:
                    pieces.append(Piece(record.conn, "S>C", "end", index, chunked=True))
                else:
                    pieces.append(Piece(record.conn, "S>C", "whole", index, st["head"], bytes(st["body"])))
    return pieces


# ------------------------------------------------------------------ rendering


class Scrub:
    """Replace volatile values by stable placeholders (longest first)."""

    def __init__(self) -> None:
        self.pairs: List[Tuple[str, str]] = []

    def add(self, real: Optional[str], placeholder: str) -> None:
        if real:
            self.pairs.append((real, placeholder))
            self.pairs.sort(key=lambda p: -len(p[0]))

    def __call__(self, text: str) -> str:
        for real, placeholder in self.pairs:
            text = text.replace(real, placeholder)
        return text


def render(piece: Piece, scrub: Scrub) -> bytes:
    """The bytes of a piece after scrubbing, with sizes recomputed."""
    def head_bytes(start: str, headers: http11.Headers, body: bytes) -> bytes:
        lines = [start]
        for name, value in headers:
            if name.lower() == "content-length":
                value = str(len(body))
            lines.append("%s: %s" % (name, scrub(value)))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")

    if piece.kind == "request":
        h = piece.head
        body = scrub(piece.body.decode("utf-8")).encode("utf-8")
        out = head_bytes("%s %s HTTP/%s" % (h.method, h.target, h.http_version), h.headers, body)
        if piece.chunked:
            return out + (http11.encode_chunk(body) + http11.LAST_CHUNK if body else http11.LAST_CHUNK)
        return out + body
    if piece.kind in ("head", "whole"):
        h = piece.head
        body = scrub(piece.body.decode("utf-8")).encode("utf-8")
        return head_bytes("HTTP/%s %d %s" % (h.http_version, h.status, h.reason), h.headers, body) + body
    if piece.kind == "event":
        return http11.encode_chunk(scrub(piece.body.decode("utf-8")).encode("utf-8"))
    return http11.LAST_CHUNK


def block(piece: Piece, scrub: Scrub) -> str:
    data = render(piece, scrub)
    what = {"request": "", "head": " (response head)", "event": " (one chunk = one SSE event)",
            "end": " (last chunk: the body ends)", "whole": ""}[piece.kind]
    return "--- #%d %s %d bytes%s\n%s" % (piece.conn, piece.direction, len(data), what, escape_block(data))


class Step:
    def __init__(self, title: str, text: str, start: int, end: int) -> None:
        self.title = title
        self.text = text
        self.start = start
        self.end = end


def order(pieces: List[Piece]) -> List[Piece]:
    """Deterministic order inside a step: connections in the order of their first
    request in the step (stream-only connections last), each in wire order."""
    first: Dict[int, int] = {}
    for p in pieces:
        if p.direction == "C>S" and p.conn not in first:
            first[p.conn] = p.index
    return sorted(pieces, key=lambda p: (first.get(p.conn, 10 ** 9), p.conn, p.index))


# ------------------------------------------------------------------- scenario


async def record_session(base: str) -> Tuple[List[Record], List[Step], Dict[str, Any], Scrub, int]:
    project = os.path.join(base, "project")
    os.makedirs(project)
    hello = os.path.join(project, "hello.txt")
    with open(hello, "w") as f:
        f.write("Hello\nworld\n")
    real_dir = os.path.join(base, ".copilot", "ide")
    trace_home = os.path.join(base, "trace-home")
    steps: List[Step] = []
    diffs: List[Any] = []
    server = IdeServer([project], ide_name="Python IDE", lock_dir=real_dir, ide_info=IDE_INFO,
                       on_diff=lambda diff: diffs.append(diff), debounce=0.01)
    await server.start()
    scrub = Scrub()
    try:
        server.set_selection(Selection(hello, "Hello", (0, 0), (0, 5)))
        server.flush_pushes()
        target, _ = lockfile.find_lock_for_folder(project, real_dir)
        assert target is not None and server.lock_path
        with open(server.lock_path) as f:
            lock_json = json.load(f)
        tracer = Tracer(target, os.path.join(trace_home, "ide"))
        await tracer.start()
        scrub.add(server.nonce, "<nonce>")
        scrub.add(server.socket_path, "/tmp/mcp-Ab12Cd/mcp.sock")
        scrub.add(tracer.socket_path, "/tmp/mcp-Tr4c3d/mcp.sock")
        scrub.add(os.path.realpath(base), "/home/user")
        scrub.add(base, "/home/user")
        try:
            client = IdeClient.discover(project, os.path.join(trace_home, "ide"), timeout=10,
                                        session_id=CLIENT_SESSION, pid=CLIENT_PID, parent_pid=CLIENT_PPID)
            queue = client.subscribe()
            mark = [len(tracer.records)]

            def step(title: str, text: str) -> None:
                steps.append(Step(title, text, mark[0], len(tracer.records)))
                mark[0] = len(tracer.records)

            await client.connect(follow_stream=False, list_tools=False)
            step("handshake", "")
            await client.open_stream()
            await client.wait_push("selection_changed", queue=queue)
            step("stream", "")
            await client.list_tools()
            step("tools/list", "")
            await client.update_session_name("Say hello to the world")
            step("update_session_name", "")
            await client.get_selection()
            step("get_selection", "")
            server.set_diagnostics(hello, [Diagnostic("Unknown word: 'wrld'", "Warning", (1, 0), (1, 5),
                                                      source="spell")])
            server.flush_pushes()
            await client.wait_push("diagnostics_changed", queue=queue)
            step("diagnostics_changed", "")
            await client.get_diagnostics()
            step("get_diagnostics", "")
            server.set_selection(Selection(hello, "world", (1, 0), (1, 5)))
            server.flush_pushes()
            await client.wait_push("selection_changed", queue=queue)
            step("selection_changed", "")
            server.add_file_reference(hello)
            await client.wait_push("add_file_reference", queue=queue)
            server.add_selection(hello, (1, 0), (1, 5), "world")
            await client.wait_push("add_selection", queue=queue)
            step("add_*", "")
            tab = "[Copilot CLI] - hello.txt (6fd0d0)"
            pending = asyncio.ensure_future(client.open_diff(hello, "Hello\nwide world\n", tab))
            while not diffs:
                await asyncio.sleep(0.005)
            while not any(r.direction == "S>C" and r.data.startswith(b"HTTP/")
                          for r in list(tracer.records)[mark[0]:]):
                await asyncio.sleep(0.005)  # the head is on its way: record it in this step
            step("open_diff head", "")
            diffs[0].accept()
            await pending
            step("open_diff answer", "")
            await client.close_diff(tab)
            step("close_diff", "")
            await client.delete()
            await client.wait_stream_end()
            step("delete", "")
            await client.close()
            records = list(tracer.records)
        finally:
            await tracer.stop()
    finally:
        await server.stop()
    return records, steps, lock_json, scrub, server.app.requests_served


TEXT: Dict[str, Tuple[str, str]] = {
    "handshake": ("3. The handshake: `server/discover`, `initialize`, `notifications/initialized`", """\
Every request carries, in this order: the CLI's own session id, its pid and its parent's
pid, the lock's `headers` verbatim (the nonce), `accept`, `content-type`,
`mcp-session-id` once there is one, `Host: localhost`, `Connection: keep-alive`, and for
a POST `Transfer-Encoding: chunked` (PROTOCOL.md §2). A chunked body is
`<hex size>\\r\\n<bytes>\\r\\n` and ends with the last chunk `0\\r\\n\\r\\n`.

First the CLI tries the draft stateless protocol with `server/discover` (id 0, no
session). The server answers with an error — here `200` and `-32601` in one SSE event —
and the CLI falls back to `initialize` at once (PROTOCOL.md §3). A `401` here would abort
the connection; a success would switch to a protocol this server does not speak.

`initialize` (id 1) creates the session: its id comes back in the `mcp-session-id`
header (our server, like VS Code, reuses the CLI's `X-Copilot-Session-Id`). The answer
is a chunked `text/event-stream` body holding exactly one event,
`event: message\\ndata: <json>\\n\\n`, then the last chunk.

`notifications/initialized` has no id, so it is a notification: the answer is `202
Accepted` with an empty body. The CLI opens its GET stream only after a 202 here.
All three went over one connection: keep-alive."""),
    "stream": ("4. The GET stream", """\
`GET /mcp` on the same connection opens the server-to-client stream: `200`,
`text/event-stream`, `Cache-Control: no-cache, no-transform`, chunked, and it stays
open for the whole session (PROTOCOL.md §2). When a stream opens, the server sends the
current selection at once (§5): the CLI forgets its cached selection when it
reconnects. Each push is one chunk holding one event, with no `id:` line."""),
    "tools/list": ("5. `tools/list`", """\
The stream holds its connection, so the next request opens another one (the CLI
pools connections). The six tools come back with VS Code's names and descriptions;
every tool carries `"execution": {"taskSupport": "forbidden"}`, and tools with
parameters add `"additionalProperties": false` and the draft-07 `$schema` (§4). The
CLI fetches this list once per session."""),
    "update_session_name": ("6. `update_session_name`", """\
Tool calls are `tools/call` with `name` and `arguments`; the CLI adds a `_meta`
progress token. Every result is `{"content":[{"type":"text","text":"<JSON>"}]}`. The
CLI names the session after the user's first prompt."""),
    "get_selection": ("7. `get_selection`", """\
The text of the result is JSON pretty-printed with a 2-space indent, as VS Code does;
inside the JSON-RPC message it is a JSON string, hence the `\\n` and `\\"` escapes.
Positions are 0-based lines and UTF-16 characters; `current: true` means an editor is
active (§4)."""),
    "diagnostics_changed": ("8. A push: `diagnostics_changed`", """\
The IDE found a problem. Pushes are JSON-RPC notifications written on the GET stream
(connection #2), debounced by the server (~200 ms) with the union of the files that
changed (§5). CLI 1.0.102 receives this one and ignores it; other clients use it."""),
    "get_diagnostics": ("9. `get_diagnostics`", """\
Files without diagnostics are left out; severities are the capitalised names the CLI
counts (`Error`, `Warning`, `Information`, `Hint`, §4)."""),
    "selection_changed": ("10. A push: `selection_changed`", """\
The user selected `world`. The CLI shows `@hello.txt:2` above its input and attaches a
non-empty selection to the next prompt (§5)."""),
    "add_*": ("11. Pushes: `add_file_reference` and `add_selection`", """\
Explicit user actions ("send this file / these lines to Copilot"), sent at once, not
debounced. Both keys `selection` and `selectedText` are always present, `null` when
there is none (§5)."""),
    "open_diff head": ("12. `open_diff`: the edit is proposed…", """\
The CLI is about to edit `hello.txt` and shows its permission prompt; it also asks the
IDE to show the diff. The request carries the whole new file. The server answers the
head at once, then the connection stays busy until the user decides: no timeout on
either side (§4)."""),
    "open_diff answer": ("13. …and accepted", """\
The user clicked *Accept* in the IDE. The answer must have `success`, `result`,
`trigger` and `message`, or the CLI ignores it. On `SAVED` the **CLI** writes the file:
the IDE never does (§4)."""),
    "close_diff": ("14. `close_diff` of a tab that is already closed", """\
The CLI closes the tab when its prompt is answered; the diff is already resolved, so
the answer says `already_closed: true`. Harmless, and it happens (§7)."""),
    "delete": ("15. Teardown: DELETE", """\
`DELETE /mcp` ends the session: `200` with an empty body, and the server ends the GET
stream with the last chunk on connection #2. Both connections stay open for further
requests (keep-alive, §2): a server that stops reading after ending a stream makes the
CLI wait 60 s. A second DELETE would get `404`."""),
}

INTRO = """\
# The `/ide` wire, one session byte by byte

<!-- Generated by tools/make_wire_doc.py (`make wire-doc`); do not edit by hand.
     tests/test_wire_doc.py fails when this file is stale. -->

This is one complete session between a client that behaves like GitHub Copilot CLI
1.0.102 (`ide_protocol.IdeClient`) and an IDE-side server (our `IdeServer`),
recorded by the wire tracer (`python3 -m ide_protocol trace`) sitting between them. The
bytes are real: the generator runs the session and prints what crossed the socket.
Volatile values are replaced by placeholders (the temporary directory is `/home/user`,
the nonce `<nonce>`, socket paths `/tmp/mcp-XXXXXX/mcp.sock`); chunk sizes and
`Content-Length` are recomputed after the substitution. The contract is
[PROTOCOL.md](PROTOCOL.md); a bare section number (§N) refers to it.

Notation, as in the real CLI's session in
`tests/captures/copilot-cli-1.0.102-ide-session.log`: `#N` is the connection number (in
the order the tracer accepted them), `C>S` client to server, `S>C` server to client;
`\\r` and `\\n` are shown literally and each `\\n` also ends a line of the listing. A
`\\n` in the middle of a line is JSON's own escape inside a string.
"""


def document(records: List[Record], steps: List[Step], lock_json: Dict[str, Any], scrub: Scrub) -> str:
    pieces = split_pieces(records)
    lock = dict(lock_json)
    lock["pid"] = 12345
    lock["timestamp"] = 1764480000000
    lock_text = scrub(json.dumps(lock, indent=2))
    out = [INTRO]
    out.append("""\
## 1. Discovery: the lock file

The IDE writes `~/.copilot/ide/<uuid4>.lock` (or `$COPILOT_HOME/ide/…`), mode 0600, after
its socket listens (PROTOCOL.md §1). Ours, as written:

```json
%s
```

`_writer` is this library's ownership marker (so that stale-lock cleanup never touches
another IDE's locks); the CLI ignores unknown keys. The CLI reads every `*.lock`, keeps
the valid ones whose pid is alive and whose socket accepts a connection, and
auto-connects to the first that lists its physical cwd exactly.

To record this session the tracer wrote its own lock in a private directory (the
recorded client ran with that directory as its `COPILOT_HOME`): the same folders and
the same `headers`, its own socket `/tmp/mcp-Tr4c3d/mcp.sock`, so that every request
passes through unchanged.

## 2. The probe

Before connecting, the client opens a connection and closes it without sending a byte,
to see that the socket is alive. That was connection #1: nothing to show. Servers must
tolerate it (the real CLI makes one or two).
""" % lock_text)
    for st in steps:
        title, text = TEXT[st.title]
        out.append("## %s\n\n%s\n" % (title, text))
        mine = order([p for p in pieces if st.start <= p.index < st.end])
        out.append("```text\n" + "\n".join(block(p, scrub) for p in mine).rstrip("\n") + "\n```\n")
    out.append("""\
## What the real CLI does differently

Nothing on this wire, as far as its capture shows
(`tests/captures/copilot-cli-1.0.102-ide-session.log`), with three habits worth knowing:
while it settles folder trust it sends DELETE and repeats the whole handshake
(`server/discover`, `initialize`… again), up to three handshakes in a row (PROTOCOL.md
§3); it sends `notifications/cancelled` when an ordinary request has waited 60 s; and it
makes one or two empty probe connections before every connect (PROTOCOL.md §7). Run the
tracer against your own IDE to see it live:

    python3 -m ide_protocol trace ~/project --out session.log
    cd ~/project && COPILOT_HOME=<the directory it prints> copilot
""")
    return "\n".join(out)


def generate() -> str:
    base = tempfile.mkdtemp(prefix="wire-doc-")
    try:
        records, steps, lock_json, scrub, _ = asyncio.run(asyncio.wait_for(record_session(base), 60))
        return document(records, steps, lock_json, scrub)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="where to write (default docs/WIRE.md)")
    p.add_argument("--check", action="store_true", help="exit 1 when the file differs from a fresh generation")
    args = p.parse_args(argv)
    text = generate()
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = ""
        if current != text:
            print("%s is stale: run `make wire-doc`" % args.out, file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
