"""A "remote machine" made of Linux namespaces, for the relay's interop tests.

`CliNamespace` starts a holder process in a new mount and pid namespace (``unshare
--mount --pid --fork --mount-proc``), where a fresh tmpfs covers ``/tmp``: whatever
the IDE keeps under ``/tmp`` (its socket, its lock folder, the test's workspace) is
invisible there, and pids outside are invisible too (``/proc`` is the namespace's own).
Before covering ``/tmp`` the holder opens each folder it is asked to carry and mounts it
again, from that open descriptor, under the new tmpfs: the workspace at another path
(as a dev container mounts a project at ``/workspaces/p``), and the few folders the
CLI needs at their own paths (its COPILOT_HOME, logs, the checkout when it lives under
``/tmp``).

Programs are started inside with ``nsenter -t HOLDER -m -p`` (the holder is visible
from outside, and its namespaces are the ones to enter; from inside, no outer pid is).
When the holder (pid 1 inside) ends, the kernel ends every process left inside.

Standard library only, Python 3.8 compatible.
"""

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

# Runs inside the new namespaces as their pid 1: argv is OUTER INNER pairs.
HOLDER = r"""
import os, select, subprocess, sys
pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
fds = [(os.open(outer, os.O_RDONLY | os.O_DIRECTORY), inner) for outer, inner in pairs]
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "cli-tmp", "/tmp"], check=True)
for fd, inner in fds:
    os.makedirs(inner, exist_ok=True)
    subprocess.run(["mount", "--no-canonicalize", "--bind", "/proc/self/fd/%d" % fd, inner], check=True, pass_fds=(fd,))
    os.close(fd)
print("ready", flush=True)
while True:  # pid 1: reap orphans until stdin ends
    if select.select([sys.stdin], [], [], 0.5)[0] and not os.read(sys.stdin.fileno(), 512):
        break
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


def unavailable_reason():
    """Why the namespaces cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "Linux namespaces only (this is %s)" % sys.platform
    if os.geteuid() != 0:
        return "new mount and pid namespaces need root (uid %d)" % os.geteuid()
    if os.path.realpath(tempfile.gettempdir()) != "/tmp":
        return ("the temporary folder is %s, not /tmp: the namespace hides /tmp only, where the IDE's socket "
                "would be" % tempfile.gettempdir())
    for tool in ("unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return "%s is not installed (util-linux)" % tool
    try:
        done = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
                               "sh", "-c", "mount -t tmpfs probe /tmp"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "unshare failed: %s" % exc
    if done.returncode != 0:
        return "unshare is not allowed here: %s" % done.stdout.decode("utf-8", "replace").strip()[:200]
    return None


def under_tmp(path):
    return os.path.realpath(path).startswith("/tmp/")


class CliNamespace(object):
    """The holder of the namespaces; `enter(...)` is the command prefix that runs a
    program inside (in `cwd`, a path as seen inside)."""

    def __init__(self, carry):
        """``carry``: [(outer folder, inner path)]; folders outside /tmp need no carrying
        and are seen at their own path."""
        args = []
        for outer, inner in carry:
            args += [os.path.realpath(outer), inner]
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
             sys.executable, "-I", "-c", HOLDER] + args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            rest = b""
            if self.proc.poll() is None:
                self.proc.kill()
            rest = self.proc.communicate(timeout=10)[0]
            raise AssertionError("the namespace holder did not start: %r" % (line + rest))
        self.pid = self._holder_pid()

    def _holder_pid(self):
        """The holder's pid as seen from here: unshare's only child."""
        deadline = time.monotonic() + 10
        path = "/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)
        while time.monotonic() < deadline:
            with open(path) as fh:
                children = fh.read().split()
            if children:
                return int(children[0])
            time.sleep(0.05)
        raise AssertionError("unshare started no holder")

    def enter(self, cwd="/"):
        # (nsenter's own --wd opens the folder before it enters the mount namespace)
        return ["nsenter", "-t", str(self.pid), "-m", "-p", "--", "sh", "-c", 'cd "$0" && exec "$@"', cwd]

    def exists(self, path):
        """Whether `path` exists as seen inside."""
        done = subprocess.run(self.enter() + ["sh", "-c", 'if [ -e "$0" ]; then echo yes; else echo no; fi', path],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        answer = done.stdout.decode("utf-8", "replace").strip()
        if answer not in ("yes", "no"):
            raise AssertionError("cannot look inside the namespace: %s" % answer)
        return answer == "yes"

    def pids(self):
        """Processes (outer pids) inside the namespace, the holder excepted."""
        mine = os.readlink("/proc/%d/ns/pid" % self.pid)
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == self.pid:
                continue
            try:
                if os.readlink("/proc/%s/ns/pid" % name) == mine:
                    found.append(int(name))
            except OSError:
                continue
        return found

    def close(self, timeout=15.0):
        """End the holder (and so everything still inside); returns what was still
        running inside before that (it should be nothing)."""
        left = []
        if self.proc.poll() is None:
            left = self.pids()
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self.proc.stdout.close()
        return left
