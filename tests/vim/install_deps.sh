#!/usr/bin/env bash
# Installs what the Vim plugin's tests need when it is missing: Debian's vim-nox (Vim 9
# with +python3) and tmux. Run by `make vim-deps` and by tests/vim/conftest.py.
# Exit status 0: both are there; 3: they cannot be installed here (the reason on stdout).
set -u
has_vim() { command -v vim >/dev/null 2>&1 && vim --version 2>/dev/null | grep -q '+python3'; }
has_tmux() { command -v tmux >/dev/null 2>&1; }
has_vim && has_tmux && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "vim with +python3 (Debian: vim-nox) and tmux are needed; not root with apt-get, so not installed"
  exit 3
fi
want=""
has_vim || want="$want vim-nox"
has_tmux || want="$want tmux"
echo "installing$want"
export DEBIAN_FRONTEND=noninteractive
if ! (apt-get update -qq && apt-get install -y -qq $want) >/tmp/copilot-ide-vim-deps.log 2>&1; then
  echo "apt-get could not install$want: $(tail -n 1 /tmp/copilot-ide-vim-deps.log)"
  exit 3
fi
has_vim && has_tmux && exit 0
echo "installed$want, but vim still has no +python3 (update-alternatives --config vim?)"
exit 3
