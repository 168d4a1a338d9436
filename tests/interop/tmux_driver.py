"""Drive an interactive terminal program (the Copilot CLI TUI) inside a private tmux server.

Each ``Tmux`` uses its own server socket (``tmux -L <name>``) and an empty config
(``-f /dev/null``), so it never touches a user's tmux and ``close()`` can kill exactly
the server it started. The pane is kept after the program exits
(``remain-on-exit on``) so the last screen and the exit status can be read.
"""

import os
import re
import signal
import subprocess
import sys
import time
import uuid

__all__ = ["EditorInTmux", "Tmux", "TmuxError", "become_subreaper", "strip_ansi"]

TMUX = os.environ.get("INTEROP_TMUX", "/usr/bin/tmux")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class TmuxError(RuntimeError):
    pass


class Tmux(object):
    def __init__(self, width=160, height=50, log_dir=None, name=None):
        self.socket_name = name or "interop-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
        self.width = width
        self.height = height
        self.log_dir = log_dir
        self.target = "main:0.0"
        self.pane_pid = None
        self.server_pid = None
        self._started = False
        self._shots = 0

    # --- low level ----------------------------------------------------------------
    def tmux(self, *args, check=True, env=None):
        cmd = [TMUX, "-L", self.socket_name, "-f", "/dev/null"] + list(args)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, timeout=20)
        if check and proc.returncode != 0:
            raise TmuxError("%s -> %d: %s" % (" ".join(args[:2]), proc.returncode,
                                              proc.stderr.decode("utf-8", "replace").strip()))
        return proc.stdout.decode("utf-8", "replace")

    # --- life cycle ---------------------------------------------------------------
    def start(self, argv, cwd, env):
        """Start ``argv`` in a new detached session. ``env`` becomes the environment of the
        tmux server and so of the program (plus tmux's own TMUX/TMUX_PANE/TERM)."""
        env = dict(env)
        env.setdefault("TERM", "xterm-256color")
        env.pop("TMUX", None)
        self.tmux("new-session", "-d", "-s", "main", "-x", str(self.width), "-y",
                  str(self.height), "-c", cwd, "--", *argv, env=env)
        self._started = True
        # Keep the pane (and its last screen) after the program exits.
        self.tmux("set-option", "-t", "main", "remain-on-exit", "on", check=False)
        self.tmux("set-option", "-g", "history-limit", "5000", check=False)
        out = self.tmux("display-message", "-p", "-t", self.target,
                        "#{pane_pid} #{pid}").split()
        self.pane_pid = int(out[0]) if out and out[0].isdigit() else None
        self.server_pid = int(out[1]) if len(out) > 1 and out[1].isdigit() else None
        return self

    def close(self):
        """Kill the tmux server and make sure the program it ran is gone."""
        if not self._started:
            return
        self._started = False
        pids = self._descendants(self.pane_pid) if self.pane_pid else []
        try:
            self.tmux("kill-server", check=False)
        except (subprocess.TimeoutExpired, OSError):
            pass
        # kill-server sends SIGHUP to the pane; wait for everything it started.
        deadline = time.monotonic() + 5
        alive = [p for p in pids if _alive(p)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in alive if _alive(p)]
        for p in alive:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        # The tmux server daemonizes; when this process is a child subreaper
        # (become_subreaper()), the server and its orphans are our children: reap them.
        for p in [self.server_pid] + pids:
            _reap(p)
        # The socket file of the private server.
        sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"),
                            "tmux-%d" % os.getuid(), self.socket_name)
        try:
            os.unlink(sock)
        except OSError:
            pass

    @staticmethod
    def _descendants(pid):
        out = [pid]
        try:
            kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)],
                                  stdout=subprocess.PIPE, timeout=5).stdout.split()
        except (OSError, subprocess.SubprocessError):
            return out
        for k in kids:
            out.extend(Tmux._descendants(int(k)))
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- keys ----------------------------------------------------------------------
    def send_keys(self, *keys):
        """tmux key names: ``"Enter"``, ``"Escape"``, ``"C-c"``, ``"Up"``, ``"Tab"``..."""
        self.tmux("send-keys", "-t", self.target, *keys)

    def type(self, text):
        """Type literal text (no Enter)."""
        self.tmux("send-keys", "-t", self.target, "-l", text)

    def submit(self, text, settle=0.3):
        """Type ``text``, then press Enter (after a short pause: a TUI that sees the text
        and the Enter in one read may take the Enter as a pasted newline)."""
        self.type(text)
        time.sleep(settle)
        self.send_keys("Enter")

    # --- screen --------------------------------------------------------------------
    def screen(self, history=False):
        args = ["capture-pane", "-p", "-t", self.target]
        if history:
            args += ["-S", "-"]
        return self.tmux(*args, check=False)

    def wait_for(self, pattern, timeout=30.0, interval=0.2, history=False):
        """Wait until the screen matches ``pattern`` (a regex or a callable taking the
        screen text). Returns the match (or the callable's value). Raises TimeoutError
        with the last screen on failure."""
        deadline = time.monotonic() + timeout
        if callable(pattern):
            test = pattern
        else:
            rx = re.compile(pattern, re.M)
            test = rx.search
        text = ""
        while True:
            text = self.screen(history=history)
            got = test(text)
            if got:
                return got
            if time.monotonic() >= deadline:
                self.save_screen("timeout")
                raise TimeoutError("screen did not show %r within %.0f s; last screen:\n%s"
                                   % (getattr(pattern, "pattern", pattern), timeout, text))
            time.sleep(interval)

    def save_screen(self, label=""):
        if not self.log_dir:
            return None
        self._shots += 1
        path = os.path.join(self.log_dir, "screen-%02d%s.txt" % (
            self._shots, "-" + re.sub(r"[^\w.-]+", "_", label) if label else ""))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.screen(history=True))
        return path

    # --- state ---------------------------------------------------------------------
    def dead(self):
        """``None`` while the program runs, else its exit status (int; ``-N`` when it
        was killed by signal N)."""
        out = self.tmux("display-message", "-p", "-t", self.target,
                        "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}",
                        check=False).strip().split(":")
        if not out or out[0] != "1":
            return None
        if len(out) > 1 and out[1].isdigit():
            return int(out[1])
        if len(out) > 2 and out[2].isdigit():
            return -int(out[2])
        return -255

    def wait_exit(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.dead()
            if status is not None:
                return status
            time.sleep(0.2)
        raise TimeoutError("program still running after %.0f s" % timeout)


class EditorInTmux(object):
    """A terminal editor under test (Vim, Emacs) in a tmux of its own, used as a person
    uses it: keys pressed, the screen read. It runs in ``workspace`` with a minimal
    environment whose home is the test's ``copilot_home`` (its lock folder under it),
    never the machine's: UTF-8, a 256-colour terminal, no bytecode written. The editor's
    own session class (tests/vim/vim_harness.py, tests/emacs/emacs_harness.py) adds how
    it is started and asked for its state."""

    def __init__(self, workspace, copilot_home, log_dir, width, height):
        self.workspace = workspace
        self.copilot_home = copilot_home
        self.log_dir = log_dir
        self.tmux = Tmux(width=width, height=height, log_dir=log_dir)

    def launch(self, argv, **env):
        """Start ``argv`` in the workspace; ``env`` adds to (or replaces in) the minimal
        environment."""
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.copilot_home,
                "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color",
                "COPILOT_HOME": self.copilot_home, "PYTHONDONTWRITEBYTECODE": "1"}
        base.update(env)
        self.tmux.start(argv, cwd=self.workspace, env=base)

    @property
    def pid(self):
        return self.tmux.pane_pid

    def keys(self, *keys):
        self.tmux.send_keys(*keys)

    def type(self, text):
        self.tmux.type(text)

    def screen(self):
        return self.tmux.screen()

    def wait_screen(self, pattern, timeout=30.0):
        return self.tmux.wait_for(pattern, timeout=timeout)

    def exited(self):
        """Whether tmux shows the pane dead: the editor closed its terminal."""
        return self.tmux.dead() is not None

    def close(self):
        self.tmux.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0): read its state.
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _reap(pid, timeout=3.0):
    if not pid:
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not our child (or already reaped)
        except OSError:
            return
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def become_subreaper():
    """Linux: adopt orphaned descendants (the daemonized tmux server, the programs it
    ran), so that they can be reaped instead of lingering as zombies of PID 1."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def strip_ansi(text):
    return _ANSI.sub("", text)
