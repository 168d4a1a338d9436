"""A CLI-like client of a `/ide` server, driven by JSON lines, for the Emacs tests.

    python3 fake_cli.py LOCK_FILE

Connects as Copilot CLI does (the library's own `IdeClient`: handshake, GET stream),
prints `{"connected": SESSION}`, then reads one command per line on stdin and prints
one JSON line per result:

    {"tool": NAME, "args": {...}}   -> {"tool": NAME, "result": JSON of the tool's text}
                                       (open_diff waits for the editor's answer; other
                                       commands go on meanwhile)
    {"quit": true}                  -> DELETE the session, exit

Every push on the stream is printed as `{"push": METHOD, "params": {...}}`. The ERT
tests (copilot-ide-tests.el) start it as a subprocess of the Emacs under test.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ide_protocol.client import IdeClient, Push  # noqa: E402


def say(message: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


async def main(lock_path: str) -> None:
    loop = asyncio.get_event_loop()
    lines: "asyncio.Queue[str]" = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, "")

    threading.Thread(target=read, daemon=True).start()
    client = IdeClient.from_lock_file(lock_path, on_push=lambda push: say(
        {"push": push.method, "params": push.params}) if isinstance(push, Push) else None)
    await client.connect()
    say({"connected": client.session_id})
    tasks = set()

    async def tool(name: str, args: Dict[str, Any]) -> None:
        try:
            say({"tool": name, "result": await client.call_tool_json(name, args, timeout=None)})
        except Exception as exc:
            say({"tool": name, "error": str(exc)})

    while True:
        line = await lines.get()
        if not line:
            break
        command = json.loads(line)
        if command.get("quit"):
            break
        task = asyncio.ensure_future(tool(command["tool"], command.get("args") or {}))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
    try:
        await client.close()
    except Exception:  # the server is gone already
        pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
