#!/usr/bin/env bash
# Runs the test suite under each CPython listed in PYTHON_VERSIONS (default 3.8-3.13),
# each in its own virtual environment .venv-X.Y with pytest installed there, its test
# files in a few pytest processes at once (tools/run_tests.py; TEST_JOBS=1 for one).
# A version that cannot be found is reported and counts as a failure, so CI cannot
# pass by silently testing fewer interpreters.
set -u
cd "$(dirname "$0")/.."
versions=${PYTHON_VERSIONS:-"3.8 3.9 3.10 3.11 3.12 3.13"}
status=0
summary=""
find_python() {
  local v=$1 p
  if command -v pyenv >/dev/null 2>&1; then
    for full in $(pyenv versions --bare 2>/dev/null); do
      case "$full" in
        "$v"|"$v".*) p="$(pyenv root)/versions/$full/bin/python$v"
             [ -x "$p" ] && { echo "$p"; return 0; } ;;
      esac
    done
  fi
  command -v "python$v" 2>/dev/null
}
for v in $versions; do
  py=$(find_python "$v")
  if [ -z "$py" ]; then
    echo "=== CPython $v: not found"
    summary="$summary\n  $v: NOT FOUND"
    status=1
    continue
  fi
  venv=".venv-$v"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" || { status=1; summary="$summary\n  $v: venv failed"; continue; }
  # pytest of the major version pinned in tests/requirements.txt (as `make test`).
  "$venv/bin/python" -c "import pytest, sys; sys.exit(pytest.__version__.split('.')[0] != '8')" 2>/dev/null \
    || "$venv/bin/python" -m pip install --quiet -r tests/requirements.txt
  echo "=== CPython $v ($("$venv/bin/python" -V 2>&1))"
  if "$venv/bin/python" tools/run_tests.py -p no:cacheprovider "$@"; then
    summary="$summary\n  $v: passed"
  else
    summary="$summary\n  $v: FAILED"
    status=1
  fi
done
printf "=== summary:%b\n" "$summary"
exit $status
