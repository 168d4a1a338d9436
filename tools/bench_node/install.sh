#!/usr/bin/env bash
# `make bench-node`: the Node.js packages of tools/bench's "VS Code stack" peer
# (Express 5 + the official MCP TypeScript SDK + zod), installed with npm into the ignored
# folder .bench-node/ at the versions pinned in tools/bench_node/package.json and its lock
# file. Development only: the library itself stays standard-library Python.
set -eu
cd "$(dirname "$0")/../.."
DEST=${BENCH_NODE:-.bench-node}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  # Not an error: tools/bench then reports the Node.js peers as skipped.
  echo "bench-node: node and npm are needed (e.g. apt-get install nodejs npm); nothing installed" >&2
  exit 0
fi
mkdir -p "$DEST"
cp tools/bench_node/package.json "$DEST/package.json"
if [ -f tools/bench_node/package-lock.json ]; then
  cp tools/bench_node/package-lock.json "$DEST/package-lock.json"
  (cd "$DEST" && npm ci --no-audit --no-fund --loglevel=error)
else
  (cd "$DEST" && npm install --no-audit --no-fund --loglevel=error)
fi
NODE_PATH="$DEST/node_modules" node -e '
  const fs = require("fs"), path = require("path");
  const v = (p) => JSON.parse(fs.readFileSync(path.join(process.env.NODE_PATH, p, "package.json"))).version;
  console.log("bench node ready: node " + process.versions.node + ", express " + v("express") +
              ", @modelcontextprotocol/sdk " + v("@modelcontextprotocol/sdk") + ", zod " + v("zod"));'
