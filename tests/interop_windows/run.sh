#!/usr/bin/env bash
# The real Windows Copilot CLI (copilot.exe, npm @github/copilot-win32-x64) under Wine 10
# against this project's programs under the Windows CPython: `make interop-windows`
# (docs/WINDOWS.md).
#
#   bash tests/interop_windows/run.sh [pytest args...]
#
# As root: installs debootstrap when missing (apt), then in a private mount namespace
# makes what is missing under .wine-cli/ (tools/windows/cli_setup.sh) and runs
# `pytest tests/interop_windows`, the CLI and our programs inside the root through
# chroot, the fake model and pytest on the host (the same network). Not root, no
# debootstrap, no registry: "SKIPPED: <reason>" and exit 0 (it never claims a pass).
# Logs of failed tests stay in interop-logs/windows/. Prints each step's time.
#
# Environment: PY (a Python with pytest 8, default .venv/bin/python, else python3),
# INTEROP_KEEP_LOGS=1, INTEROP_TIMEOUT (seconds, default 900) bounds the pytest run.
set -u
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.."
ROOT=$PWD
skip() { printf 'SKIPPED: interop-windows: %s\n' "$*"; exit 0; }
export CLI_T0=${CLI_T0:-$(date +%s)}
step() { echo "interop-windows: [$(( $(date +%s) - CLI_T0 )) s] $*"; }

if [ -z "${CLI_MOUNT_NS:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot and bind mounts in a private mount namespace)"
  command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux) for a private mount namespace"
  if ! command -v debootstrap >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || skip "no debootstrap and no apt-get to install it"
    step "apt-get install debootstrap"
    { apt-get -o DPkg::Lock::Timeout=900 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends debootstrap; } \
      </dev/null >/dev/null 2>&1 || skip "cannot install debootstrap (apt-get failed)"
  fi
  unshare --mount --propagation private true 2>/dev/null || skip "unshare --mount is not allowed here"
  CLI_MOUNT_NS=1 exec unshare --mount --propagation private bash "$SELF" "$@"
fi

# --- inside the private mount namespace -----------------------------------------------------
bash tools/windows/cli_setup.sh
status=$?
[ $status = 3 ] && skip "see the reason above"
[ $status = 0 ] || exit $status
. tools/windows/cli_root.sh
mount_root   # (cli_setup.sh mounted them in its own process: mounts are per namespace, still here)

PY=${PY:-}
for cand in "$PY" "$ROOT/.venv/bin/python" python3; do
  [ -n "$cand" ] || continue
  "$cand" -c "import pytest, sys; sys.exit(pytest.__version__.split('.')[0] != '8')" 2>/dev/null && { PY=$cand; break; }
  PY=
done
[ -n "$PY" ] || { echo "interop-windows: no Python with pytest 8 (make test-deps)"; exit 1; }
export INTEROP_TMUX=$(command -v tmux) || { echo "interop-windows: tmux is required"; exit 1; }

LOGS=$ROOT/interop-logs/windows
rm -rf "$LOGS"
export CLI_ROOT CLI_EXE CLI_PYTHON CLI_SRC CLI_WIN_VERSION
step "pytest tests/interop_windows (copilot.exe $CLI_WIN_VERSION)"
timeout --kill-after=30 "${INTEROP_TIMEOUT:-900}" "$PY" -m pytest -p no:cacheprovider -m interop -ra tests/interop_windows "$@"
status=$?
[ $status = 5 ] && { echo "interop-windows: no test ran"; status=1; }
# Whatever Wine left running in the root (its wineserver) ends with the run.
in_root wineserver -k </dev/null >/dev/null 2>&1 || true
# The tests' logs are written inside the root (C:\interop-logs, where the CLI writes its
# own); those of failed tests (all with INTEROP_KEEP_LOGS=1) come out to interop-logs/windows/.
KEPT=$CLI_ROOT$CLI_DRIVE_C/interop-logs
if [ -n "$(ls -A "$KEPT" 2>/dev/null)" ]; then
  mkdir -p "$LOGS" && cp -r "$KEPT"/. "$LOGS"/ && rm -rf "$KEPT"
  echo "interop-windows: logs kept in interop-logs/windows/ (one folder per test)"
fi
step "$([ $status = 0 ] && echo passed || echo "FAILED (exit status $status)") with Copilot CLI $CLI_WIN_VERSION for Windows"
exit $status
