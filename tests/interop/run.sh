#!/usr/bin/env bash
# The interop suite: the REAL GitHub Copilot CLI, fully offline, against this project.
#
#   bash tests/interop/run.sh [pytest args...]      (what `make interop` runs)
#
# 1. Installs the pinned CLI (npm package @github/copilot, platform binary as an optional
#    dependency) into .interop/ when it is missing. Where the npm registry cannot be
#    reached it prints "SKIPPED: npm registry unreachable: <reason>" and exits 0: it never
#    claims the suite passed.
# 2. Unpacks the CLI once into a private HOME (.interop/home, ~240 MB).
# 3. Runs `python -m pytest tests/interop -m interop` with INTEROP_COPILOT_BIN set.
#    Logs of failed tests (CLI debug log, fake model log, screens, serve/acp output)
#    stay in interop-logs/ ; a passing run leaves that folder empty and removes it.
#
# Environment: INTEROP_COPILOT_VERSION (default 1.0.102), PYTHON (default python3),
# INTEROP_KEEP_LOGS=1 keeps the logs of passing tests too, INTEROP_TIMEOUT (seconds,
# default 900) bounds the whole pytest run.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
PIN=${INTEROP_COPILOT_VERSION:-1.0.102}
PREFIX=$ROOT/.interop
LOGS=$ROOT/interop-logs
PYTHON=${PYTHON:-python3}

say() { printf 'interop: %s\n' "$*"; }
skip() { printf 'SKIPPED: %s\n' "$*"; exit 0; }

installed_version() {
  "$PYTHON" - "$PREFIX/node_modules/@github/copilot/package.json" <<'EOF' 2>/dev/null
import json, sys
print(json.load(open(sys.argv[1]))["version"])
EOF
}

find_binary() {
  local b
  for b in "$PREFIX"/node_modules/@github/copilot-*/copilot; do
    [ -x "$b" ] && { echo "$b"; return 0; }
  done
  return 1
}

# --- 1. the CLI ---------------------------------------------------------------------------------
BIN=$(find_binary)
if [ -z "$BIN" ] || [ "$(installed_version)" != "$PIN" ]; then
  command -v npm >/dev/null 2>&1 || skip "npm registry unreachable: npm is not installed"
  say "installing @github/copilot@$PIN into .interop/"
  mkdir -p "$PREFIX"
  out=$(timeout 120 npm view "@github/copilot@$PIN" version 2>&1)
  if [ $? -ne 0 ] || [ -z "$out" ]; then
    reason=$(printf '%s\n' "$out" | grep -v '^\s*$' | grep -iE 'err|fail|timed|refused|not found|E[A-Z]+' | head -n 2 | tr '\n' ' ')
    skip "npm registry unreachable: ${reason:-$(printf '%s' "$out" | tail -n 1)}"
  fi
  if ! timeout 600 npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
      "@github/copilot@$PIN" > "$PREFIX/npm-install.log" 2>&1; then
    cat "$PREFIX/npm-install.log"
    if grep -qiE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$PREFIX/npm-install.log"; then
      skip "npm registry unreachable: $(grep -m1 -iE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$PREFIX/npm-install.log")"
    fi
    say "npm install failed (see above)"; exit 1
  fi
  BIN=$(find_binary)
  [ -n "$BIN" ] || skip "no @github/copilot platform binary for $(uname -sm) in the npm package"
fi

# --- 2. tools: tmux, pytest ------------------------------------------------------------------------
if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing tmux"
    (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 \
      || skip "Debian package registry unreachable: cannot install tmux"
  else
    say "tmux is required (install the tmux package)"; exit 1
  fi
fi
export INTEROP_TMUX=$(command -v tmux)

PY=""
for cand in "$ROOT/.venv/bin/python" "$PYTHON"; do
  if [ -x "$cand" ] || command -v "$cand" >/dev/null 2>&1; then
    "$cand" -c "import pytest" 2>/dev/null && { PY=$cand; break; }
  fi
done
if [ -z "$PY" ]; then
  say "installing pytest into .venv"
  [ -x "$ROOT/.venv/bin/python" ] || "$PYTHON" -m venv "$ROOT/.venv" || exit 1
  "$ROOT/.venv/bin/python" -m pip install --quiet pytest \
    || skip "PyPI unreachable: cannot install pytest"
  PY=$ROOT/.venv/bin/python
fi

# --- 3. first start: the binary unpacks itself into $HOME/.cache --------------------------------------
export INTEROP_HOME=$PREFIX/home
mkdir -p "$INTEROP_HOME"
t0=$(date +%s%N)
version=$(HOME=$INTEROP_HOME COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false timeout 300 "$BIN" --version 2>&1 | head -n 1)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
case "$version" in
  *"$PIN"*) say "$version (first start ${ms} ms; binary $BIN)";;
  *) say "the CLI does not start: $version"; exit 1;;
esac

# --- 4. the suite ------------------------------------------------------------------------------------
rm -rf "$LOGS"
mkdir -p "$LOGS"
export INTEROP_COPILOT_BIN=$BIN
export INTEROP_LOG_DIR=$LOGS
timeout --kill-after=30 "${INTEROP_TIMEOUT:-900}" \
  "$PY" -m pytest -p no:cacheprovider -m interop -ra tests/interop "$@"
status=$?
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
  say "the suite ran out of time (${INTEROP_TIMEOUT:-900} s)"
fi
if [ $status -eq 5 ]; then
  say "no interop test ran"; status=1
fi
if [ -z "$(ls -A "$LOGS" 2>/dev/null)" ]; then
  rmdir "$LOGS" 2>/dev/null
else
  say "logs kept in $LOGS/ (one folder per failed test)"
fi
if [ $status -eq 0 ]; then
  say "passed with Copilot CLI $PIN"
else
  say "FAILED with Copilot CLI $PIN (exit status $status)"
fi
exit $status
