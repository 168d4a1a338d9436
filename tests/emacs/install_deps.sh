#!/usr/bin/env bash
# Installs what the Emacs package's tests need when it is missing: Debian's emacs-nox
# (Emacs 28 on bookworm), elpa-flycheck (the flycheck test) and tmux (the interop test
# runs Emacs in it). Run by
# `make emacs-deps` and by tests/emacs/test_emacs_package.py.
# Exit status 0: both are there; 3: they cannot be installed here (the reason on stdout).
set -u
has_emacs() { command -v emacs >/dev/null 2>&1; }
has_tmux() { command -v tmux >/dev/null 2>&1; }
has_flycheck() { ls -d /usr/share/emacs/site-lisp/elpa/flycheck-* >/dev/null 2>&1; }
has_emacs && has_tmux && has_flycheck && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  has_emacs && has_tmux && exit 0   # flycheck's test reports itself skipped without it
  echo "emacs (Debian: emacs-nox) and tmux are needed; not root with apt-get, so not installed"
  exit 3
fi
want=""
has_emacs || want="$want emacs-nox"
has_tmux || want="$want tmux"
has_flycheck || want="$want elpa-flycheck"
echo "installing$want"
export DEBIAN_FRONTEND=noninteractive
if ! (apt-get -o DPkg::Lock::Timeout=900 update -qq \
      && apt-get -o DPkg::Lock::Timeout=900 install -y -qq $want) >/tmp/copilot-ide-emacs-deps.log 2>&1; then
  echo "apt-get could not install$want: $(tail -n 1 /tmp/copilot-ide-emacs-deps.log)"
  exit 3
fi
has_emacs && has_tmux && exit 0
echo "installed$want, but emacs or tmux is still missing"
exit 3
