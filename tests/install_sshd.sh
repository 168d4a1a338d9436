#!/usr/bin/env bash
# Installs OpenSSH's server for the relay's SSH test (tests/test_relay_ssh.py) when it is
# missing: Debian's openssh-server (its client too). Run by `make sshd-deps` and by the
# test itself. Nothing is started: the test runs its own sshd, with its own keys and
# configuration, on 127.0.0.1 for as long as it runs.
# Exit status 0: sshd, ssh and ssh-keygen are there; 3: they cannot be installed here
# (the reason on stdout).
set -u
sshd_path() { command -v sshd 2>/dev/null || { [ -x /usr/sbin/sshd ] && echo /usr/sbin/sshd; }; }
have_all() { [ -n "$(sshd_path)" ] && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; }
have_all && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "OpenSSH's sshd, ssh and ssh-keygen are needed; not root with apt-get, so not installed"
  exit 3
fi
echo "installing openssh-server openssh-client"
log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
if ! (apt-get -o DPkg::Lock::Timeout=900 update -qq \
      && apt-get -o DPkg::Lock::Timeout=900 install -y -qq openssh-server openssh-client) >"$log" 2>&1; then
  echo "apt-get could not install openssh-server: $(tail -n 1 "$log")"
  rm -f "$log"
  exit 3
fi
rm -f "$log"
have_all && exit 0
echo "openssh-server installed, but sshd, ssh or ssh-keygen is still missing"
exit 3
