#!/usr/bin/env bash
# The interop suite: the REAL GitHub Copilot CLI, fully offline, against this project.
#
#   bash tests/interop/run.sh [pytest args...]          (what `make interop` runs)
#   CLI_VERSION=1.0.60 bash tests/interop/run.sh        (`make interop CLI_VERSION=1.0.60`)
#   bash tests/interop/run.sh --install-only            (install and unpack, run nothing)
#
# 1. Installs @github/copilot@VERSION (the npm package, its platform binary an optional
#    dependency) into .interop/VERSION/ when it is missing: every version in its own
#    folder, so versions never overwrite each other. VERSION is $CLI_VERSION, else
#    $INTEROP_COPILOT_VERSION, else the first line of tests/interop/cli-versions.txt
#    (the newest version: the pin); `latest` asks npm for the newest published one.
#    Where the npm registry cannot be reached it prints "SKIPPED: npm registry
#    unreachable: <reason>" and exits 0: it never claims the suite passed.
# 2. Unpacks the CLI once into a private HOME (.interop/VERSION/home, ~240 MB).
# 3. Runs `python -m pytest tests/interop -m interop` with INTEROP_COPILOT_BIN and
#    INTEROP_COPILOT_VERSION set. Logs of failed tests (CLI debug log, fake model log,
#    screens, serve/acp output) stay in interop-logs/VERSION/ ; a passing run leaves
#    no such folder.
#
# Environment: CLI_VERSION, PYTHON (default python3), INTEROP_KEEP_LOGS=1 keeps the logs
# of passing tests too, INTEROP_TIMEOUT (seconds, default 900) bounds the pytest run.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
VERSIONS_FILE=$ROOT/tests/interop/cli-versions.txt

say() { printf 'interop: %s\n' "$*"; }
skip() { printf 'SKIPPED: %s\n' "$*"; exit 0; }

install_only=0
if [ "${1:-}" = "--install-only" ]; then install_only=1; shift; fi

# The versions file: one version per line, first word of the line; '#' starts a comment.
listed_versions() { sed -e 's/#.*//' "$VERSIONS_FILE" | awk 'NF { print $1 }'; }

VERSION=${CLI_VERSION:-${INTEROP_COPILOT_VERSION:-}}
[ -n "$VERSION" ] || VERSION=$(listed_versions | head -n 1)
npm_unreachable() {
  local out=$1 reason
  reason=$(printf '%s\n' "$out" | grep -v '^\s*$' | grep -iE 'err|fail|timed|refused|not found|E[A-Z]+' | head -n 2 | tr '\n' ' ')
  skip "npm registry unreachable: ${reason:-$(printf '%s' "$out" | tail -n 1)}"
}
if [ "$VERSION" = latest ]; then
  command -v npm >/dev/null 2>&1 || skip "npm registry unreachable: npm is not installed"
  out=$(timeout 120 npm view @github/copilot version 2>&1) || npm_unreachable "$out"
  VERSION=$(printf '%s\n' "$out" | tail -n 1)
fi
# A version names a folder: digits, dots and a pre-release tag only.
if ! printf '%s' "$VERSION" | grep -qE '^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$'; then
  say "not a published version number: '$VERSION' (see: npm view @github/copilot versions)"
  exit 2
fi
PREFIX=$ROOT/.interop/$VERSION
LOGS=$ROOT/interop-logs/$VERSION

installed_version() {
  "$PYTHON" - "$PREFIX/node_modules/@github/copilot/package.json" <<'PYEOF' 2>/dev/null
import json, sys
print(json.load(open(sys.argv[1]))["version"])
PYEOF
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
if [ -z "$BIN" ] || [ "$(installed_version)" != "$VERSION" ]; then
  command -v npm >/dev/null 2>&1 || skip "npm registry unreachable: npm is not installed"
  say "installing @github/copilot@$VERSION into .interop/$VERSION/"
  mkdir -p "$PREFIX"
  out=$(timeout 120 npm view "@github/copilot@$VERSION" version 2>&1)
  if [ $? -ne 0 ]; then
    npm_unreachable "$out"
  elif [ -z "$out" ]; then
    say "@github/copilot has no published version $VERSION (see: npm view @github/copilot versions)"
    rmdir "$PREFIX" 2>/dev/null; exit 2
  fi
  if ! timeout 600 npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
      "@github/copilot@$VERSION" > "$PREFIX/npm-install.log" 2>&1; then
    cat "$PREFIX/npm-install.log"
    if grep -qiE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$PREFIX/npm-install.log"; then
      skip "npm registry unreachable: $(grep -m1 -iE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$PREFIX/npm-install.log")"
    fi
    say "npm install failed (see above)"; exit 1
  fi
  BIN=$(find_binary)
  if [ -z "$BIN" ]; then
    say "@github/copilot@$VERSION has no native binary for $(uname -sm) (versions before"
    say "0.0.354 are a Node.js script needing node >= 22; this suite runs the binary)"
    exit 1
  fi
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
    # the major version pinned in tests/requirements.txt, as `make test` checks it
    "$cand" -c "import pytest, sys; sys.exit(pytest.__version__.split('.')[0] != '8')" \
      2>/dev/null && { PY=$cand; break; }
  fi
done
if [ -z "$PY" ] && [ $install_only = 0 ]; then
  say "installing pytest into .venv"
  [ -x "$ROOT/.venv/bin/python" ] || "$PYTHON" -m venv "$ROOT/.venv" || exit 1
  "$ROOT/.venv/bin/python" -m pip install --quiet -r "$ROOT/tests/requirements.txt" \
    || skip "PyPI unreachable: cannot install pytest"
  PY=$ROOT/.venv/bin/python
fi

# --- 3. first start: the binary unpacks itself into $HOME/.cache --------------------------------------
export INTEROP_HOME=$PREFIX/home
mkdir -p "$INTEROP_HOME"
t0=$(date +%s%N)
out=$(HOME=$INTEROP_HOME COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false timeout 300 "$BIN" --version 2>&1)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
# Its first start may print other lines first ("Package extraction took 5535ms", 1.0.88).
version=$(printf '%s\n' "$out" | grep -F -m1 "$VERSION")
if [ -n "$version" ]; then
  say "$version (first start ${ms} ms; binary $BIN)"
else
  say "the CLI does not start: $(printf '%s' "$out" | head -n 5)"; exit 1
fi
[ $install_only = 1 ] && exit 0

# --- 4. the suite ------------------------------------------------------------------------------------
rm -rf "$LOGS"
mkdir -p "$LOGS"
export INTEROP_COPILOT_BIN=$BIN
export INTEROP_COPILOT_VERSION=$VERSION
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
  rmdir "$LOGS" "$ROOT/interop-logs" 2>/dev/null
else
  say "logs kept in interop-logs/$VERSION/ (one folder per failed test)"
fi
if [ $status -eq 0 ]; then
  say "passed with Copilot CLI $VERSION"
else
  say "FAILED with Copilot CLI $VERSION (exit status $status)"
fi
exit $status
