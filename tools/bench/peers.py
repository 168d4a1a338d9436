"""The servers the throughput group compares: this project's server and the three peers
of the side-by-side yardstick, each in a process of its own on a Unix socket.

* `ours`: `IdeServer` (serve.py), from this checkout or `--ours-root`;
* `before`: the same, from the checkout `--before-root` names (an older commit, say, in
  a `git worktree`): measured only when asked for, so that "the speed back" is a ratio
  taken in one run, like the others;
* `node`: a bare `node:http` handler (tools/bench_node/bare_http.js): the runtime and
  HTTP stack VS Code uses, with no framework;
* `vscode`: a replica of VS Code's `/ide` server (tools/bench_node/vscode_stack.js):
  Express 5, the MCP TypeScript SDK, one transport and one server per session, the six
  tools with zod schemas (`make bench-node`);
* `sdk`: the official MCP Python SDK under uvicorn (serve.py run by `.bench-venv/`'s
  Python, `make bench-venv`).

Every one answers the same selection and checks the same nonce.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Optional, Tuple

from .common import NODE_DIR, NODE_MODULES, SDK_PYTHON, SELECTION
from .serve import ServerProc

PEERS = ("ours", "before", "node", "vscode", "sdk")
LABELS = {"ours": "ours (IdeServer)", "before": "ours from --before-root", "node": "bare node:http",
          "vscode": "VS Code stack (Express 5 + MCP TS SDK)", "sdk": "MCP Python SDK (uvicorn)"}


def node() -> Optional[str]:
    return shutil.which("node")


def start(name: str, use_sdk: bool = True, use_node: bool = True,
          before_root: Optional[str] = None) -> Tuple[Optional[ServerProc], str]:
    """The peer's process, or None and why it is skipped."""
    if name == "ours":
        return ServerProc("ours"), ""
    if name == "before":
        if not before_root:
            return None, "not asked for (--before-root DIR)"
        return ServerProc("ours", env=dict(os.environ, BENCH_OURS_ROOT=before_root)), ""
    if name == "sdk":
        if not use_sdk:
            return None, "skipped (--no-sdk)"
        if not os.path.exists(SDK_PYTHON):
            return None, "not installed (make bench-venv)"
        return ServerProc("sdk", python=SDK_PYTHON), ""
    if not use_node:
        return None, "skipped (--no-node)"
    runtime = node()
    if not runtime:
        return None, "node not found"
    env = dict(os.environ, BENCH_SELECTION=json.dumps(SELECTION))
    if name == "node":
        return ServerProc("node", argv=[runtime, os.path.join(NODE_DIR, "bare_http.js")], env=env), ""
    if not os.path.isdir(os.path.join(NODE_MODULES, "@modelcontextprotocol", "sdk")):
        return None, "not installed (make bench-node)"
    env.update(NODE_PATH=NODE_MODULES)
    return ServerProc("vscode", argv=[runtime, os.path.join(NODE_DIR, "vscode_stack.js")], env=env), ""
