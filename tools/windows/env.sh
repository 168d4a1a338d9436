# Sourced by the scripts of tools/windows: where `make test-windows` keeps Wine's prefix
# and the Windows CPython (ignored folders of the checkout), and how to call them.
WIN_ROOT=$(pwd)
export WINEPREFIX="$WIN_ROOT/.wine"
# No debug channels, no Mono/Gecko installer prompts.
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml="
WIN_PYTHON_DIR="$WIN_ROOT/.win-python"
WIN_PYTHON="$WIN_PYTHON_DIR/python/python.exe"

# A Unix path as the Windows CPython sees it (Wine maps / to drive Z:).
winpath() {
  printf 'Z:%s' "$1" | tr / '\\'
}

# Every Wine call: stdin from /dev/null and output through a pipe. Wine 8 cannot give a
# Windows program a regular file as stdout/stderr (CPython's start-up fails on it), and
# a terminal's stdin would be read by the console. The program's exit status is kept.
wine_run() {
  wine "$@" </dev/null 2>&1 | cat
  return "${PIPESTATUS[0]}"
}
