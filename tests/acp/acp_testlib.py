"""Shared helpers of the acp tests (a plain module: no conftest name clashes)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKE = os.path.join(HERE, "fake_agent.py")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from acp import Client  # noqa: E402


def agent_cmd() -> List[str]:
    return [sys.executable, FAKE]


def run(coro: Any, timeout: float = 30.0) -> Any:
    """Run a test coroutine; the timeout only stops a hang, it asserts nothing."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def workspace(tmp_path: Any) -> str:
    root = tmp_path / "work"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    return str(root)


def fake_env(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def make_client(log: Optional[str] = None, env: Optional[Dict[str, str]] = None, **kwargs: Any) -> Client:
    environment = fake_env(**(env or {}))
    if log:
        environment["FAKE_ACP_LOG"] = log
    return Client(agent_cmd(), env=environment, **kwargs)


def read_log(path: str) -> List[Tuple[str, Any]]:
    """The fake agent's log: (direction, decoded message or raw bytes)."""
    out: List[Tuple[str, Any]] = []
    with open(path, "rb") as handle:
        for line in handle:
            direction, _, data = line.rstrip(b"\n").partition(b" ")
            try:
                out.append((direction.decode(), json.loads(data.decode("utf-8"))))
            except ValueError:
                out.append((direction.decode(), data))
    return out


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once `pid` has disappeared; a killed process needs a moment to die, so this
    waits (the timeout only bounds a failure, it asserts nothing about speed)."""
    import time

    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
