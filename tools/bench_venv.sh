#!/usr/bin/env bash
# `make bench-venv`: a development virtual environment for tools/bench.py's comparison
# with the official MCP Python SDK (`mcp`, served by `uvicorn`). Never a requirement of
# the library itself, which stays standard-library only.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${BENCH_VENV:-.bench-venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet mcp uvicorn
"$VENV/bin/python" -c "import mcp, uvicorn, importlib.metadata as m; print('bench venv ready: mcp', m.version('mcp'), 'uvicorn', uvicorn.__version__)"
