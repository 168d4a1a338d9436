"""A real Vim (with +python3) in a private tmux server, with the plugin loaded, and a
CLI-like client of its `/ide` server.

`VimSession` types keys and Ex commands into Vim through tmux and reads Vim's state
back with `eval()` (Vim writes `json_encode(EXPR)` to a file). `StreamClient` is the
CLI's side: an MCP session over the lock file's socket, a GET stream whose
notifications are collected, tool calls. Its asyncio loop runs in a thread of its own,
so the test's thread stays free to drive Vim.
"""
from __future__ import annotations

import asyncio
import glob
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
PLUGIN = os.path.join(REPO, "editors", "vim")
for _path in (TESTS, os.path.join(TESTS, "interop")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tmux_driver import EditorInTmux  # noqa: E402
import ide_wire  # noqa: E402

WAIT = 30.0


def vim_binary() -> Optional[str]:
    """A `vim` with +python3, or None."""
    for name in ("vim", "vim.nox"):
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=20).stdout.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError):
            continue
        if "+python3" in out:
            return path
    return None


_checked: Dict[str, Optional[str]] = {}


def missing() -> Optional[str]:
    """Why the tests cannot run (after trying to install what is missing), or None."""
    if "reason" not in _checked:
        reason = None
        if vim_binary() is None or shutil.which("tmux") is None:
            proc = subprocess.run(["bash", os.path.join(HERE, "install_deps.sh")], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=900)
            if proc.returncode != 0 or vim_binary() is None or shutil.which("tmux") is None:
                reason = proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1:] or ["install failed"]
                reason = "no Vim with +python3 and tmux: " + reason[0]
        _checked["reason"] = reason
    return _checked["reason"]


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT, what: str = "condition",
               interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s not met within %.0f s" % (what, timeout))
        time.sleep(interval)


def locks(copilot_home: str) -> List[str]:
    return sorted(glob.glob(os.path.join(copilot_home, "ide", "*.lock")))


def read_lock(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def lock_folders(path: str) -> Any:
    """The folders a lock lists, or None while it is being rewritten in place (a folder
    change, PROTOCOL.md §1: read meanwhile it is no JSON yet, and a reader tries again)
    or once it is gone (listed, then removed before it was read)."""
    try:
        return read_lock(path)["workspaceFolders"]
    except (ValueError, FileNotFoundError):
        return None


class VimSession(EditorInTmux):
    """One Vim in tmux. `start()` runs the issue's command line:
    `vim -N -u NONE -i NONE -c 'set rtp^=PLUGIN' -c 'runtime plugin/copilot_ide.vim' FILE`
    (plus `-n`: no swap files, and a short key-code timeout so Escape is Escape)."""

    def __init__(self, workspace: str, copilot_home: str, log_dir: str, env: Optional[Dict[str, str]] = None) -> None:
        super().__init__(workspace, copilot_home, log_dir, width=140, height=40)
        self.env = dict(env or {})
        self.out = os.path.join(log_dir, "vim-eval.json")
        self._evals = 0

    def argv(self, files: List[str], plugin: str = PLUGIN, before: List[str] = (), after: List[str] = (),
             vim: Optional[str] = None, rc: str = "NONE") -> List[str]:
        argv = [vim or vim_binary() or "vim", "-N", "-u", rc, "-i", "NONE", "-n",
                "--cmd", "set ttimeout ttimeoutlen=20 shortmess+=I"]
        for cmd in before:
            argv += ["--cmd", cmd]
        if plugin:
            argv += ["-c", "set rtp^=" + plugin, "-c", "runtime plugin/copilot_ide.vim"]
        for cmd in after:
            argv += ["-c", cmd]
        return argv + list(files)

    def start(self, files: List[str] = ("hello.txt",), **kw: Any) -> "VimSession":
        # A temporary folder of Vim's own (and its Python's), never the machine's /tmp:
        # whatever Vim deletes there at exit stays among the test's files.
        tmp = os.path.join(self.log_dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        self.launch(self.argv(list(files), **kw), **dict({"TMPDIR": tmp}, **self.env))
        return self

    def ex(self, command: str) -> None:
        """An Ex command typed as a user types it (from Normal mode)."""
        self.tmux.send_keys("Escape")
        self.tmux.type(":" + command)
        self.tmux.send_keys("Enter")

    def eval(self, expr: str, timeout: float = WAIT) -> Any:
        """Vim's value of `expr` (Vim writes it as JSON; the test reads it)."""
        self._evals += 1
        marker = self.out + ".%d" % self._evals
        self.ex("call writefile([json_encode(%s)], '%s')" % (expr, marker))
        wait_until(lambda: os.path.exists(marker) and os.path.getsize(marker) > 0, timeout, "Vim evaluating " + expr)
        with open(marker, encoding="utf-8") as f:
            return json.loads(f.read())

    def wait_lock(self, timeout: float = WAIT) -> str:
        return wait_until(lambda: (locks(self.copilot_home) or [None])[-1], timeout, "a lock file")

    def wait_started(self, timeout: float = WAIT) -> str:
        """The lock file, once the plugin's start has ended on Vim's side too (its
        autocommands are set: the timer's ticks no longer enter Python when idle, and
        the server's thread has nothing left to do)."""
        lock = self.wait_lock(timeout)
        wait_until(lambda: self.eval("exists('#copilot_ide#CursorMoved')") == 1, timeout, "the plugin started")
        return lock

    # (`exited()`: the pane is dead; Vim may still be a zombie then, see `gone`.)

    def gone(self) -> bool:
        """Whether Vim's pid is gone, reaped by its parent (the tmux server).

        A zombie counts as alive for the stale-lock rules (PROTOCOL.md §1: `kill(pid,
        0)` succeeds on it), so a test of what happens after Vim died must wait for
        this, not only for `exited`. tmux 3.3a sometimes marks the pane dead (its pty
        closed) and then misses the SIGCHLD, leaving the zombie for good; a SIGCHLD
        sent to the tmux server makes it reap its children."""
        pid = self.pid
        if not pid:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if self.tmux.server_pid:
            try:
                os.kill(self.tmux.server_pid, signal.SIGCHLD)
            except OSError:
                pass
        return False

    def quit(self, command: str = "qa", timeout: float = WAIT) -> None:
        self.ex(command)
        wait_until(self.exited, timeout, "Vim exiting after :" + command)


class StreamClient:
    """The CLI's side of one session: handshake, a GET stream, tool calls, from a loop
    in its own thread. Notifications land in `notifications` (a queue)."""

    def __init__(self, lock_path: str) -> None:
        lock = read_lock(lock_path)
        self.lock = lock
        nonce = lock["headers"]["Authorization"].split(" ", 1)[1]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stream-client", daemon=True)
        self.thread.start()
        self.notifications: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.cli = ide_wire.Cli(lock["socketPath"], nonce)
        self.run(self.cli.handshake())
        self._stream = asyncio.run_coroutine_threadsafe(self._read_stream(), self.loop)

    def run(self, coro: Any, timeout: float = WAIT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, coro: Any) -> Any:
        """Run `coro` on the client's loop; returns a concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def _read_stream(self) -> None:
        response, conn = await self.cli.open_stream()
        assert response.status == 200, response
        while True:
            message = await conn.next_notification()
            if message is None:
                return
            self.notifications.put(message)

    def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.run(self.cli.call_tool(name, arguments or {}))

    def tool_json(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Any:
        return ide_wire.tool_json(self.call_tool(name, arguments))

    def open_diff(self, path: str, contents: str, tab: str) -> Any:
        """open_diff in flight (it waits for the user): a concurrent future of its JSON."""
        async def call() -> Any:
            return ide_wire.tool_json(await self.cli.call_tool(
                "open_diff", {"original_file_path": path, "new_file_contents": contents, "tab_name": tab}))
        return self.start(call())

    def wait_selection(self, predicate: Callable[[Dict[str, Any]], bool], timeout: float = WAIT) -> Dict[str, Any]:
        """The first `selection_changed` whose params satisfy `predicate` (others seen
        on the way are dropped)."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no matching selection_changed within %.0f s; seen: %s" % (timeout, seen[-5:]))
            try:
                message = self.notifications.get(timeout=left)
            except queue.Empty:
                continue
            if message.get("method") != "selection_changed":
                continue
            params = message["params"]
            seen.append(params)
            if predicate(params):
                return params

    def close(self) -> None:
        async def shutdown() -> None:
            self.cli.abort()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        try:
            self.run(shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(WAIT)
            self.loop.close()
