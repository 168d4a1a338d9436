#!/usr/bin/env bash
# `make vscode-replica`: the packages VS Code Copilot Chat's /ide server runs on, at the
# versions its package-lock pins (@modelcontextprotocol/sdk 1.26.0, express 5.2.1, zod
# 3.25.76, and their own dependencies as VS Code has them: see package.json's overrides),
# installed with `npm ci` from tests/vscode_replica/package-lock.json into the ignored
# folder .vscode-replica/ (VSCODE_REPLICA overrides it). Run by the make target and by
# tests/test_vscode_replica.py; a second run finds them and does nothing.
# Development only: the library itself stays standard-library Python.
# Exit status 0: installed (one line names the versions); 3: they cannot be installed
# here, the reason on the last line of stdout (the tests then report themselves skipped).
set -u
cd "$(dirname "$0")/../.."
DEST=${VSCODE_REPLICA:-.vscode-replica}
HERE=tests/vscode_replica
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are needed (Debian: apt-get install nodejs npm); nothing installed"
  exit 3
fi
report() {
  NODE_PATH="$DEST/node_modules" node -e '
    const fs = require("fs"), path = require("path");
    const v = (p) => JSON.parse(fs.readFileSync(path.join(process.env.NODE_PATH, p, "package.json"))).version;
    const got = {express: v("express"), "@modelcontextprotocol/sdk": v("@modelcontextprotocol/sdk"), zod: v("zod")};
    const want = {express: "5.2.1", "@modelcontextprotocol/sdk": "1.26.0", zod: "3.25.76"};
    if (JSON.stringify(got) !== JSON.stringify(want)) process.exit(1);
    console.log("vscode replica ready: node " + process.versions.node + ", express " + got.express +
                ", @modelcontextprotocol/sdk " + got["@modelcontextprotocol/sdk"] + ", zod " + got.zod);' 2>/dev/null
}
# Installed already, from this very lock file: nothing to do.
if cmp -s "$HERE/package-lock.json" "$DEST/package-lock.json" && report; then
  exit 0
fi
mkdir -p "$DEST"
cp "$HERE/package.json" "$HERE/package-lock.json" "$DEST/"
if ! (cd "$DEST" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) >"$DEST/npm-ci.log" 2>&1; then
  rm -f "$DEST/package-lock.json"  # (so that the next run tries again)
  echo "npm ci failed (npm registry unreachable?): $(grep -v '^\s*$' "$DEST/npm-ci.log" | tail -n 1)"
  exit 3
fi
report || { echo "npm ci ran, but the installed versions are not the pinned ones (see $DEST/npm-ci.log)"; exit 3; }
