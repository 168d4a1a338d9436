#!/usr/bin/env bash
# `make bench-venv`: a development virtual environment for tools/bench's comparison
# with the official MCP Python SDK (`mcp`, served by `uvicorn`), at pinned versions so
# that runs on different days compare the same baseline. Never a requirement of the
# library itself, which stays standard-library only. (`make bench-venv` also runs
# `make bench-node`, the Node.js baselines, tools/bench_node/install.sh.)
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${BENCH_VENV:-.bench-venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "mcp==${BENCH_MCP_VERSION:-2.3.0}" "uvicorn==${BENCH_UVICORN_VERSION:-0.54.0}"
"$VENV/bin/python" -c "import mcp, uvicorn, importlib.metadata as m; print('bench venv ready: mcp', m.version('mcp'), 'uvicorn', uvicorn.__version__)"
