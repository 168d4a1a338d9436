#!/usr/bin/env bash
# What `make interop-windows` needs, made when missing, all of it under .wine-cli/
# (tools/windows/cli_root.sh): a Debian 13 root (debootstrap, minbase) with Debian's
# wine and wine64 (10.0), a Wine prefix, the pinned copilot.exe (npm
# @github/copilot-win32-x64, its integrity checked) and the hash-pinned Windows CPython
# (tools/windows/cpython.sh) with the Wine shim (sitecustomize.py). Then the CLI's first
# start (`copilot.exe --version`, under script(1): it needs a pseudo-terminal).
#
# Run by tests/interop_windows/run.sh inside its private mount namespace, from the
# checkout's root. Prints "[N s] step" lines (the run's timings); exits 3, with the
# reason on stderr, when something cannot be installed.
set -euo pipefail
. tools/windows/cli_root.sh
. tools/windows/cpython.sh
T0=${CLI_T0:-$(date +%s)}
step() { echo "interop-windows: [$(( $(date +%s) - T0 )) s] $*"; }
cannot() { echo "interop-windows: cannot install $1" >&2; exit 3; }
mkdir -p "$CLI_DL"

# --- downloads that do not need the root, in the background while debootstrap works
fetch_cli() {
  local tgz="$CLI_DL/github-copilot-win32-x64-$CLI_WIN_VERSION.tgz" got
  if [ ! -f "$tgz" ]; then
    (cd "$CLI_DL" && timeout 600 npm pack --silent "@github/copilot-win32-x64@$CLI_WIN_VERSION" >/dev/null) \
      || { echo "npm pack @github/copilot-win32-x64@$CLI_WIN_VERSION failed" >&2; return 1; }
  fi
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$CLI_WIN_INTEGRITY" ]; then
    echo "$tgz has integrity $got, not the pinned $CLI_WIN_INTEGRITY" >&2
    rm -f "$tgz"; return 1
  fi
}
need_cli=0; need_python=0
[ -f "$CLI_ROOT$CLI_EXE" ] || need_cli=1
[ -f "$CLI_ROOT$CLI_PYTHON" ] || need_python=1
if [ $need_cli = 1 ]; then
  command -v npm >/dev/null 2>&1 || cannot "copilot.exe: npm is not installed"
  fetch_cli >"$CLI_DL/npm.log" 2>&1 &
  cli_job=$!
fi
if [ $need_python = 1 ]; then
  fetch_cpython "$CLI_DL" "$CLI_DL/python" >"$CLI_DL/python.log" 2>&1 &
  python_job=$!
fi

# --- the Debian 13 root
if [ ! -x "$CLI_ROOT/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null 2>&1 || cannot "the Debian 13 root: no debootstrap"
  step "debootstrap trixie (minbase) into .wine-cli/root"
  rm -rf "$CLI_ROOT.tmp"
  debootstrap --variant=minbase trixie "$CLI_ROOT.tmp" http://deb.debian.org/debian \
    >"$CLI_CACHE/debootstrap.log" 2>&1 || { tail -5 "$CLI_CACHE/debootstrap.log" >&2; cannot "the Debian 13 root (debootstrap failed)"; }
  rm -rf "$CLI_ROOT"; mv "$CLI_ROOT.tmp" "$CLI_ROOT"
fi
mount_root
cp /etc/resolv.conf "$CLI_ROOT/etc/resolv.conf"
if ! in_root dpkg -s wine wine64 >/dev/null 2>&1 </dev/null; then
  step "apt-get install wine wine64 (Debian 13's Wine)"
  in_root sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wine wine64' \
    >"$CLI_CACHE/apt.log" 2>&1 </dev/null || { tail -5 "$CLI_CACHE/apt.log" >&2; cannot "Wine in the root (apt-get failed)"; }
fi
WINE_VERSION=$(in_root wine --version 2>/dev/null </dev/null || true)
case "$WINE_VERSION" in
  wine-[1-9][0-9].*|wine-9.*) ;;
  *) cannot "Wine 9 or newer in the root (found: ${WINE_VERSION:-none})" ;;
esac

# --- the prefix, without a crash debugger (a Windows program that aborts just ends)
if [ ! -f "$CLI_ROOT$CLI_PREFIX/system.reg" ]; then
  step "wineboot -i ($WINE_VERSION, prefix /root/.wine)"
  in_root sh -c 'timeout 300 wineboot -i; wineserver -w' </dev/null >"$CLI_CACHE/wineboot.log" 2>&1 || true
  [ -f "$CLI_ROOT$CLI_PREFIX/system.reg" ] || cannot "a Wine prefix (wineboot -i made none; see .wine-cli/wineboot.log)"
  in_root sh -c "wine reg add 'HKLM\\Software\\Microsoft\\Windows NT\\CurrentVersion\\AeDebug' /v Debugger /d '' /f; wineserver -w" \
    </dev/null >>"$CLI_CACHE/wineboot.log" 2>&1 || cannot "a Wine prefix without a crash debugger (reg add failed)"
fi

# --- copilot.exe and the CPython, from the downloads
if [ $need_cli = 1 ]; then
  wait "$cli_job" || { cat "$CLI_DL/npm.log" >&2; cannot "copilot.exe $CLI_WIN_VERSION"; }
  step "copilot.exe $CLI_WIN_VERSION into the root"
  dir=$CLI_ROOT$(dirname "$CLI_EXE")
  rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
  tar -xzf "$CLI_DL/github-copilot-win32-x64-$CLI_WIN_VERSION.tgz" -C "$dir.tmp" --strip-components=1
  mv "$dir.tmp" "$dir"
fi
if [ $need_python = 1 ]; then
  wait "$python_job" || { cat "$CLI_DL/python.log" >&2; cannot "the Windows CPython"; }
  rm -rf "$CLI_ROOT$(dirname "$CLI_PYTHON")"
  mv "$CLI_DL/python" "$CLI_ROOT$(dirname "$CLI_PYTHON")"
fi
# Wine lacks PssCaptureSnapshot (os.getppid): the shim, as for make test-windows.
cp tools/windows/sitecustomize.py "$CLI_ROOT$(dirname "$CLI_PYTHON")/Lib/site-packages/sitecustomize.py"

# --- the CLI's first start: it runs (only with a pseudo-terminal: pipes give EBADF)
out=$(in_root script -qec "wine $CLI_EXE --version" /dev/null </dev/null 2>&1 | tr -d '\r' | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' || true)
if ! printf '%s\n' "$out" | grep -q "$CLI_WIN_VERSION"; then
  echo "$out" | tail -5 >&2
  cannot "a copilot.exe that starts under $WINE_VERSION"
fi
step "$(printf '%s\n' "$out" | grep -m1 "$CLI_WIN_VERSION") runs under $WINE_VERSION"
