"""A stand-in for the relay's CLI half, for testing the IDE's half alone (on Windows too,
where the real CLI half cannot run: it listens on a Unix socket).

Started by `relay ide-side --via`, it speaks the link on its stdin/stdout: it waits for
the IDE's lock news, opens one stream, sends an `initialize` request without any nonce
(the IDE's half adds the IDE's), and reports on stderr, one line each, the lock news and
the status line and `serverInfo` name of the answer; then it ends the link.

`relay_cli_half.py COMMAND...` does the same with a child it starts itself (the IDE's
half with `--stdio`), over the child's stdin and stdout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from typing import Any

from ide_protocol.relay import frames

REQUEST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "relay test", "version": "1"}}}).encode()


def main() -> int:
    if len(sys.argv) > 1:
        child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        try:
            return speak(child.stdout.fileno(), child.stdin)
        finally:
            child.stdin.close()
            child.wait(60)
    return speak(sys.stdin.fileno(), sys.stdout.buffer)


def speak(link_in: int, out: Any) -> int:
    out.write(frames.MAGIC)
    out.flush()
    parser = frames.LinkParser()
    answer = b""
    opened = False
    while True:
        data = os.read(link_in, 65536)
        events = parser.feed(data) if data else parser.feed_eof()
        for event in events:
            if isinstance(event, frames.LockNews):
                print("lock %s" % json.dumps(event.lock, sort_keys=True), file=sys.stderr, flush=True)
                if event.lock is not None and not opened:
                    opened = True
                    out.write(frames.encode_open(1) + frames.encode_data(1, (
                        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        "Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n"
                        % len(REQUEST)).encode() + REQUEST))
                    out.flush()
            elif isinstance(event, frames.StreamData):
                answer += event.data
                out.write(frames.encode_credit(event.stream, len(event.data)))
                out.flush()
                if b"serverInfo" in answer and b"\n\n" in answer[answer.index(b"serverInfo"):]:
                    status = answer.split(b"\r\n", 1)[0].decode("ascii", "replace")
                    name = json.loads(answer[answer.index(b"data: ") + 6:].split(b"\n", 1)[0])["result"][
                        "serverInfo"]["name"]
                    print("answer %s from %s" % (status, name), file=sys.stderr, flush=True)
                    out.write(frames.encode_close(1))
                    out.flush()
                    return 0
            elif isinstance(event, frames.LinkError):
                print("link error %s" % event.message, file=sys.stderr, flush=True)
                return 1
        if not data:
            print("link ended", file=sys.stderr, flush=True)
            return 1


if __name__ == "__main__":
    sys.exit(main())
