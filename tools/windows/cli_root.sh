# Sourced by tools/windows/cli_setup.sh and tests/interop_windows/run.sh: the Debian 13
# root in which the real Windows Copilot CLI runs under Wine 10 (`make interop-windows`,
# docs/WINDOWS.md), all of it in the checkout's ignored folder .wine-cli/.
#
# Debian 12's Wine 8 cannot start copilot.exe (V8 needs MEM_RESERVE_PLACEHOLDER, Wine
# 9+); Debian 13's wine is 10.0. So a minimal Debian 13 root made by debootstrap holds
# Wine, its prefix (/root/.wine: drive C: is /root/.wine/drive_c), copilot.exe and the
# Windows CPython; everything runs there through chroot. The kernel's /proc, /sys and
# /dev are bound into it only inside a private mount namespace (`unshare --mount`, made
# by run.sh): the mounts vanish with the last process of the run, and removing
# .wine-cli/ can never reach the host's /dev through a forgotten bind mount.
CLI_CACHE=$(pwd)/.wine-cli
CLI_ROOT=$CLI_CACHE/root
CLI_DL=$CLI_CACHE/download
CLI_VERSIONS_FILE=tests/interop/cli-versions-windows.txt
# Inside the root.
CLI_PREFIX=/root/.wine
CLI_DRIVE_C=$CLI_PREFIX/drive_c
CLI_PYTHON=/opt/python/python.exe
CLI_SRC=/opt/src                      # the checkout's ide_protocol and acp (Z:\opt\src)

# The pinned version and integrity (first non-comment line of the versions file).
CLI_WIN_VERSION=$(sed -e 's/#.*//' "$CLI_VERSIONS_FILE" | awk 'NF { print $1; exit }')
CLI_WIN_INTEGRITY=$(sed -e 's/#.*//' "$CLI_VERSIONS_FILE" | awk 'NF { print $2; exit }')
CLI_EXE=/opt/copilot-$CLI_WIN_VERSION/copilot.exe

# What every Wine program in the root gets: no debug channels, no Mono/Gecko prompts.
CLI_WINE_ENV="PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root WINEPREFIX=$CLI_PREFIX WINEDEBUG=-all \
WINEDLLOVERRIDES=mscoree,mshtml= XDG_RUNTIME_DIR=/run/user/0 LANG=C.UTF-8"

# in_root COMMAND...: COMMAND in the root with a clean environment (CLI_WINE_ENV).
in_root() {
  # shellcheck disable=SC2086
  chroot "$CLI_ROOT" /usr/bin/env -i $CLI_WINE_ENV "$@"
}

# mount_root: the kernel's file systems bound into the root. Only inside a private mount
# namespace (run.sh re-executes itself under unshare first).
mount_root() {
  [ "${CLI_MOUNT_NS:-}" = 1 ] || { echo "mount_root outside the private mount namespace" >&2; return 1; }
  local m
  for m in proc sys dev dev/pts; do
    mountpoint -q "$CLI_ROOT/$m" || mount --bind "/$m" "$CLI_ROOT/$m"
  done
  mkdir -p -m 700 "$CLI_ROOT/run/user/0"
}
