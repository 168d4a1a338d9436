"""Helpers of the interop suite: the real Copilot CLI (TUI in tmux, or ACP over stdio),
our ``python3 -m ide_protocol serve`` and ``python3 -m acp`` as subprocesses.

Everything here is standard library only and Python 3.8 compatible (the unit suite
imports conftest.py under every CPython 3.8-3.13, even though it skips these tests).
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VERSIONS_FILE = os.path.join(HERE, "cli-versions.txt")
BIN_ENV = "INTEROP_COPILOT_BIN"      # path of the CLI's native binary (run.sh sets it)
VERSION_ENV = "INTEROP_COPILOT_VERSION"  # the version of that binary (run.sh sets it)
HOME_ENV = "INTEROP_HOME"            # where the CLI unpacks itself (~240 MB, its .cache)
LOG_ENV = "INTEROP_LOG_DIR"          # where each test's logs go (kept for failed tests)
MODEL = "gpt-4.1"


def listed_versions():
    """The CLI versions of ``cli-versions.txt``, newest (the pin) first."""
    out = []
    with open(VERSIONS_FILE, encoding="utf-8") as fh:
        for line in fh:
            words = line.split("#", 1)[0].split()
            if words:
                out.append(words[0])
    return out


def version_tuple(text):
    """``"1.0.60"`` -> ``(1, 0, 60)`` (a pre-release tag is ignored)."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("-", 1)[0])[:3])


# The version under test: the one run.sh installed, else the pin. Tests compare what the
# CLI reports (its ACP agentInfo, serve's "Copilot CLI X" line) with it.
PINNED_VERSION = os.environ.get(VERSION_ENV) or listed_versions()[0]
CLI_VERSION = PINNED_VERSION

# How older CLIs differ, as found by running them (docs/PROTOCOL.md, "CLI versions"):
#
# * IDE_SINCE: the first version with /ide (the lock file scan, the IDE MCP client).
# * Before COPILOT_HOME_LOCKS_SINCE the CLI reads IDE lock files from $HOME/.copilot/ide
#   only, whatever COPILOT_HOME says. Each test's HOME has a `.copilot` that is its
#   COPILOT_HOME (user_home), so both kinds find the test's own lock files.
# * Before OFFLINE_PROVIDER_SINCE there is no offline provider (COPILOT_OFFLINE with
#   COPILOT_PROVIDER_BASE_URL): the CLI wants a login and sends no message to the fake
#   model, so a test skips (with that reason) where it would ask the model for a turn
#   (the conftest's fake_model); everything before that point has run and passed.
# * Before ACP_OFFLINE_SINCE the ACP agent (`copilot --acp`) refuses session/new in
#   offline mode ("Authentication required", -32000) although the TUI runs offline:
#   tests that drive the agent skip there, with the reason (the conftest's acp_cli and
#   tcp_agent users, RawAcp). 1.0.75 refuses, 1.0.78 works (1.0.76/77: no Linux binary
#   on this registry).
# * Before REAL_CLIENT_VERSION_SINCE the CLI's MCP clientInfo says version "1.0.0".
# * Before TRUST_PROMPT_FIRST_SINCE the folder-trust dialog can come a few seconds
#   after the input box is shown (seen on 0.0.409; 1.0.60 and newer show it first; the
#   versions between are given the wait too): CopilotTui.start waits LATE_TRUST_WAIT.
# * Before SELECTION_INDICATOR_SINCE the TUI shows no `@file:line` indicator for the
#   pushed selection (0.0.410's changelog adds it); its log shows the push arrived.
# * A deleted lock is logged as "IDE disconnected unexpectedly: NAME (source: lock file
#   deleted)" by 0.0.409 and 1.0.60, as "Disconnected from IDE MCP server" by 1.0.88 and
#   1.0.102 (IDE_DISCONNECTED_LOG takes both). Before DISCONNECT_NOTICE_SINCE the TUI
#   shows no "IDE connection lost" (0.0.409; 1.0.60 shows it; the versions between are
#   not asked for it).
IDE_SINCE = "0.0.409"
SELECTION_INDICATOR_SINCE = "0.0.410"
DISCONNECT_NOTICE_SINCE = "1.0.60"
IDE_DISCONNECTED_LOG = (r"(Disconnected from IDE MCP server|IDE disconnected unexpectedly: "
                        r".*\(source: lock file deleted\))")
TRUST_PROMPT_FIRST_SINCE = "1.0.60"
LATE_TRUST_WAIT = 8.0
COPILOT_HOME_LOCKS_SINCE = "1.0.0"
OFFLINE_PROVIDER_SINCE = "1.0.11"
REAL_CLIENT_VERSION_SINCE = "1.0.30"
ACP_OFFLINE_SINCE = "1.0.78"


def at_least(since, version=None):
    """True when the CLI under test (or ``version``) is ``since`` or newer."""
    return version_tuple(version or CLI_VERSION) >= version_tuple(since)


def has_offline_provider(version=None):
    return at_least(OFFLINE_PROVIDER_SINCE, version)


def no_model_reason(version=None):
    return ("Copilot CLI %s has no offline provider (COPILOT_OFFLINE and "
            "COPILOT_PROVIDER_BASE_URL came in %s): without a login it sends no message "
            "to a model, so the rest of this test cannot run; what came before passed"
            % (version or CLI_VERSION, OFFLINE_PROVIDER_SINCE))


def no_offline_acp_reason(version=None):
    """Why a test that drives the ACP agent cannot run on this CLI, or None."""
    version = version or CLI_VERSION
    if at_least(ACP_OFFLINE_SINCE, version):
        return None
    return ("Copilot CLI %s's ACP agent refuses session/new offline (\"Authentication "
            "required\"; offline ACP sessions came in %s)" % (version, ACP_OFFLINE_SINCE))


# The CLI's start-up scans probe the socket of a lock older than 2 s once, with a 250 ms
# connect timeout (docs/PROTOCOL.md §1; every version run, 1.0.102 included, for the
# auto-connect scan; 1.0.102's trust check retries for 1 s). Connecting to a listening
# Unix socket completes in the kernel, before any accept, so a live server cannot make
# that connect slow: the timeout fires when the CLI's own event loop is busy starting
# (in Node, due timers run before I/O callbacks). On a loaded machine the CLI then logs
# PROBE_SKIPPED for a live IDE and starts as if there were none (PROTOCOL.md §8), which
# a user answers by starting it again. CopilotTui does that, at most START_ATTEMPTS
# times in all, and only on proof that the race is what happened: the CLI's own log
# names the socket and the socket accepts a connection when the harness tries it.
# Every restart is reported as a ProbeRaceRestart warning (pytest's summary shows it).
# 0.0.409 lists a lock without probing its socket; 1.0.60 and newer probe (the versions
# between are not run, so they are counted with 0.0.409).
SOCKET_PROBE_SINCE = "1.0.60"
PROBE_SKIPPED = re.compile(r"Skipping IDE lock file with unreachable socket \((.+?)\): (\S+)")
START_ATTEMPTS = 3


class ProbeRaceRestart(UserWarning):
    """The CLI skipped a live IDE's socket at start-up (its 250 ms probe timed out) and
    the harness started it again."""


def socket_accepts(path, timeout=1.0):
    """True when the Unix socket at ``path`` accepts a connection within ``timeout``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


# What the CLI under test puts in its MCP clientInfo (serve prints "Copilot CLI X").
MCP_CLIENT_VERSION = CLI_VERSION if at_least(REAL_CLIENT_VERSION_SINCE) else "1.0.0"


def propose_edit(fake_model, tui, path, new_str, after="Edit done."):
    """Ask the CLI to fix `path` (a workspace's hello.py holding `return x`): its model
    proposes `new_str` in its place, which the CLI shows the IDE with `open_diff`, then
    says `after` once the edit is answered."""
    from fake_model import Turn  # (beside this module in tests/interop)
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": new_str}),
                      Turn.say(after))
    tui.prompt("Fix hello.py")


def wait_until(predicate, timeout=30.0, interval=0.1, message="condition"):
    """Poll ``predicate()`` until it returns a true value (returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s not met within %.0f s" % (message, timeout))
        time.sleep(interval)


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


# --- processes ---------------------------------------------------------------------------

def pids_with_env(needle):
    """The running processes (zombies aside) whose environment holds ``needle``
    (``NAME=value``): what a test left running with its COPILOT_HOME."""
    found = []
    me = os.getpid()
    if not os.path.isdir("/proc"):
        return found
    needle_b = needle.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as fh:
                env = fh.read().split(b"\0")
            with open("/proc/%s/stat" % entry) as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if needle_b in env:
            found.append(int(entry))
    return found


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
    except OSError:
        return "?"


# --- pytest glue shared by the Linux and the Windows suites ---------------------------------

def record_report(item, rep):
    """The suites' ``pytest_runtest_makereport``: keep each phase's report on the item;
    after the teardown of a test that passed, remove its log folder (``logdir``) unless
    INTEROP_KEEP_LOGS=1."""
    setattr(item, "interop_rep_" + rep.when, rep)
    path = getattr(item, "interop_logdir", None)
    if rep.when == "teardown" and path and os.environ.get("INTEROP_KEEP_LOGS") != "1":
        if not test_failed(item, ("setup", "call", "teardown")):
            shutil.rmtree(path, ignore_errors=True)


def test_failed(node, phases=("setup", "call")):
    return any(getattr(getattr(node, "interop_rep_" + w, None), "failed", False) for w in phases)


def new_log_folder(node, root):
    """An empty log folder for the test ``node`` under ``root``, removed after it if it
    passed (`record_report`)."""
    name = re.sub(r"[^\w.-]+", "_", node.nodeid.split("::", 1)[-1])[:120]
    path = os.path.join(root, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    node.interop_logdir = path
    return path


def remove_leftovers(home_value, ide_dir, shown=None, spare=()):
    """After a test: kill every process still running with ``COPILOT_HOME=home_value``
    (but those whose command line starts with one of ``spare``) and remove the lock
    files left in ``ide_dir``; returns what was found, for the test's failure
    (``shown``: how to name ``ide_dir`` there)."""
    problems = []
    for pid in pids_with_env("COPILOT_HOME=" + home_value):
        if spare and cmdline(pid).startswith(tuple(spare)):
            continue
        problems.append("process %d still running: %s" % (pid, cmdline(pid)))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for name in (os.listdir(ide_dir) if os.path.isdir(ide_dir) else []):
        if name.endswith(".lock"):
            problems.append("lock file left behind: %s" % os.path.join(shown or ide_dir, name))
            os.unlink(os.path.join(ide_dir, name))
    return problems


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tcp_listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def signal_group(proc, grace):
    """SIGTERM, then SIGKILL, to the process group of ``proc`` (a Popen started in a new
    session), each given ``grace`` seconds, until ``proc`` has exited."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass


# --- locating the CLI -------------------------------------------------------------------

def default_prefix():
    """Where run.sh installs the version under test: ``.interop/VERSION``."""
    return os.path.join(REPO, ".interop", CLI_VERSION)


def find_installed_binary(prefix=None):
    """The native binary of an npm install in ``prefix`` (``@github/copilot-<platform>``)."""
    prefix = prefix or default_prefix()
    for path in sorted(glob.glob(os.path.join(prefix, "node_modules", "@github",
                                              "copilot-*", "copilot"))):
        if os.access(path, os.X_OK):
            return path
    return None


def cli_binary():
    """``(path, None)`` or ``(None, reason to skip)``."""
    path = os.environ.get(BIN_ENV)
    if not path:
        return None, ("%s is not set: run `make interop` (tests/interop/run.sh installs "
                      "@github/copilot@%s into .interop/%s/ and runs this suite)"
                      % (BIN_ENV, PINNED_VERSION, PINNED_VERSION))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, "%s=%s is not an executable file" % (BIN_ENV, path)
    return path, None


def cli_home():
    home = os.environ.get(HOME_ENV) or os.path.join(default_prefix(), "home")
    os.makedirs(home, exist_ok=True)
    return home


def module_available(name):
    """True when ``python3 -m name`` can run from the repository (its ``__main__``)."""
    return os.path.isfile(os.path.join(REPO, name, "__main__.py"))


def user_home(copilot_home):
    """A HOME of the test's own beside ``copilot_home``: its ``.copilot`` is
    ``copilot_home`` (older CLIs read ``$HOME/.copilot/ide`` whatever COPILOT_HOME says)
    and its ``.cache`` the shared one where the CLI unpacked itself."""
    home = os.path.join(os.path.dirname(copilot_home),
                        os.path.basename(copilot_home) + "-user-home")
    os.makedirs(home, exist_ok=True)
    for name, target in ((".copilot", copilot_home),
                         (".cache", os.path.join(cli_home(), ".cache"))):
        link = os.path.join(home, name)
        if not os.path.lexists(link):
            os.makedirs(target, exist_ok=True)
            os.symlink(target, link)
    return home


def copilot_env(copilot_home, model_url, extra=None):
    """A minimal, explicit environment for the CLI: offline, our fake model, a private
    ``COPILOT_HOME`` (so its IDE lock folder is ``$COPILOT_HOME/ide``) inside a private
    HOME (``user_home``)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": user_home(copilot_home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
        "COPILOT_HOME": copilot_home,
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": model_url,
        "COPILOT_MODEL": MODEL,
        "COPILOT_AUTO_UPDATE": "false",
    }
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    env.update(extra or {})
    return env


def python_env(base, copilot_home):
    """Environment for our own programs (serve, acp): the CLI's plus the repo on
    PYTHONPATH, unbuffered output, no colours."""
    env = dict(base)
    env["COPILOT_HOME"] = copilot_home
    env["PYTHONPATH"] = REPO + (os.pathsep + os.environ["PYTHONPATH"]
                                if os.environ.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_COLOR"] = "1"
    env.pop("TERM", None)
    return env


# --- a subprocess whose output is collected as it comes -------------------------------------

class Proc(object):
    """A child process with stdin piped and stdout/stderr collected (and copied to a log
    file) by reader threads. ``wait_output(regex)`` waits for a line."""

    def __init__(self, argv, cwd, env, log_path, stdin=True, new_session=True):
        self.argv = list(argv)
        self.log_path = log_path
        self._lines = []              # (stream, text)
        self._cond = threading.Condition()
        self._log = open(log_path, "a", encoding="utf-8")
        self._log.write("$ %s\n" % " ".join(self.argv))
        self._log.flush()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv, cwd=cwd, env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=new_session)
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, "out"),
                                          daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, "err"),
                                          daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def pid(self):
        return self.proc.pid

    def _pump(self, stream, name):
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self._lines.append((name, text))
                try:
                    self._log.write("%7.3f %s| %s\n" % (time.monotonic() - self.t0, name, text))
                    self._log.flush()
                except ValueError:
                    pass
                self._cond.notify_all()
        stream.close()

    def lines(self, stream=None):
        with self._cond:
            return [t for s, t in self._lines if stream is None or s == stream]

    def output(self, stream=None):
        return "\n".join(self.lines(stream))

    def wait_output(self, pattern, timeout=30.0, stream=None, start=0):
        """Wait for a line matching ``pattern`` (regex); returns the match object.
        ``start``: ignore lines before this index (see ``mark()``)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                lines = [t for s, t in self._lines[start:] if stream is None or s == stream]
                for line in lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and self._drained()):
                    raise AssertionError(
                        "no output line matching %r from %s within %.0f s (exit status %s); "
                        "output so far:\n%s" % (pattern, self.argv[:4], timeout,
                                                self.proc.poll(), "\n".join(lines[-60:])))
                self._cond.wait(min(left, 0.2))

    def mark(self):
        with self._cond:
            return len(self._lines)

    def _drained(self):
        return not any(t.is_alive() for t in self._threads)

    def send(self, line):
        self._log.write("%7.3f in | %s\n" % (time.monotonic() - self.t0, line))
        self._log.flush()
        self.proc.stdin.write((line + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except (OSError, ValueError, AttributeError):
            pass

    def wait(self, timeout=30.0):
        status = self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return status

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, grace=5.0):
        """Close stdin, wait, SIGTERM (the whole process group), wait, SIGKILL; reap."""
        if self.proc.poll() is None:
            self.close_stdin()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        signal_group(self.proc, grace)
        # Anything left in its process group (e.g. a copilot agent it started).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for t in self._threads:
            t.join(5)
        try:
            self._log.write("exit status %s after %.1f s\n"
                            % (self.proc.returncode, time.monotonic() - self.t0))
            self._log.close()
        except ValueError:
            pass
        return self.proc.returncode


# --- our IDE side: python3 -m ide_protocol serve ------------------------------------------------

class Serve(Proc):
    """``python3 -m ide_protocol serve FOLDER`` driven through its stdin."""

    def __init__(self, folder, copilot_home, env, log_path, args=()):
        self.folder = folder
        self.lock_dir = os.path.join(copilot_home, "ide")
        self.lock_path = self.lock = None
        argv = [sys.executable, "-m", "ide_protocol", "serve"] + list(args) + [folder]
        Proc.__init__(self, argv, cwd=REPO, env=python_env(env, copilot_home),
                      log_path=log_path)

    def locks(self):
        return sorted(glob.glob(os.path.join(self.lock_dir, "*.lock")))

    def wait_lock(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in self.locks():
                try:
                    with open(path, encoding="utf-8") as fh:
                        data = json.load(fh)
                except (OSError, ValueError):
                    continue
                if data.get("pid") == self.pid:
                    self.lock_path, self.lock = path, data
                    return path, data
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("serve wrote no lock file in %s within %.0f s (exit status %s)\n%s"
                             % (self.lock_dir, timeout, self.proc.poll(), self.output()))

    def quit(self, timeout=10.0):
        self.send("quit")
        return self.wait(timeout)

    def leftovers(self):
        """After it stopped: its lock file or socket (directory), if still there."""
        out = []
        if self.lock_path and os.path.exists(self.lock_path):
            out.append("lock file " + self.lock_path)
        sock = (self.lock or {}).get("socketPath")
        if sock and os.path.exists(sock):
            out.append("socket " + sock)
        if sock and os.path.isdir(os.path.dirname(sock)):
            out.append("socket directory " + os.path.dirname(sock))
        return out


# --- the real CLI's TUI in tmux -------------------------------------------------------------

class CopilotTui(object):
    """The interactive Copilot CLI in a private tmux server, with its debug log."""

    # The input box's hint line: "/ commands · ? help" (1.0.x), "/ for commands, or ?
    # for shortcuts" (0.0.4xx).
    READY = r"(/ commands|\? help|/help show help|/ for commands|\? for shortcuts)"
    TRUST = r"Confirm folder trust"
    PERMISSION = r"Do you want to (edit|create)"

    def __init__(self, tmux, binary, workspace, env, log_dir, args=()):
        self.tmux = tmux
        self.binary = binary
        self.workspace = workspace
        self.env = env
        self.log_dir = log_dir
        self.cli_log_dir = os.path.join(log_dir, "cli")
        os.makedirs(self.cli_log_dir, exist_ok=True)
        self.args = list(args)
        # A command prefix the CLI runs under (``nsenter ... --``: the CLI in other namespaces).
        self.launcher = []
        self.t0 = None
        self.restarts = []       # why each restart was made (see PROBE_SKIPPED)
        self._trust = True
        self._prompted = False

    def start(self, trust=True, timeout=60.0):
        """Start the TUI and wait until it takes input. The folder-trust dialog (shown on
        each start in an untrusted folder) is answered ``1. Yes`` (Enter) when ``trust``.
        Returns ``"ready"``, or ``"trust"`` when the dialog is up and ``trust`` is false.

        A trust dialog a live IDE's lock should have prevented is checked for the
        start-up probe race (PROBE_SKIPPED) and the CLI started again on proof of it."""
        self._trust = trust
        seen = self._launch(trust, timeout)
        self._prompted = seen == "trust"     # the test answers (or not) the dialog itself
        return seen

    def _launch(self, trust, timeout):
        """Start the CLI until no trust dialog is owed to the probe race."""
        while True:
            seen = self._start_once(trust, timeout)
            why = self._probe_race(wait=2.0) if seen == "trust" else None
            if why is None:
                return seen
            self._stop_for_restart(why)

    def command(self):
        """``(argv, cwd, env)`` for tmux: the CLI with its debug log in ``cli_log_dir``,
        its exit status written to ``status_file``. (The Windows suite runs it in Wine.)"""
        argv = [self.binary, "--log-level", "all", "--log-dir", self.cli_log_dir] + self.args
        # A shell wrapper records the exit status: tmux's own pane_dead_status is not
        # reliable here (a CLI that exits a few seconds after its start stays an unreaped
        # zombie of the tmux server, its status unknown).
        self.status_file = os.path.join(self.cli_log_dir, "exit-status")
        wrapper = ['/bin/sh', '-c', '"$@"; echo $? > "$0"', self.status_file] + argv
        return self.launcher + wrapper, self.workspace, self.env

    def _start_once(self, trust, timeout):
        argv, cwd, env = self.command()
        self.t0 = time.monotonic()
        self.tmux.start(argv, cwd=cwd, env=env)
        deadline = time.monotonic() + timeout

        def state(screen):
            if re.search(self.TRUST, screen):
                return "trust"
            if re.search(self.READY, screen) and re.search(r"^\s*❯", screen, re.M):
                return "ready"
            return None

        seen = self.tmux.wait_for(state, timeout=timeout)
        if seen == "ready" and not at_least(TRUST_PROMPT_FIRST_SINCE):
            seen = self._late_trust_prompt(state)
        if seen == "trust":
            if not trust:
                return "trust"
            self.tmux.send_keys("Enter")
            left = max(1.0, deadline - time.monotonic())
            self.tmux.wait_for(lambda s: state(s) == "ready", timeout=left)
        return "ready"

    def _late_trust_prompt(self, state):
        """An older CLI's trust dialog, shown after its input box: "trust" if it comes
        within LATE_TRUST_WAIT seconds, else "ready"."""
        deadline = time.monotonic() + LATE_TRUST_WAIT
        while time.monotonic() < deadline:
            if state(self.tmux.screen()) == "trust":
                return "trust"
            time.sleep(0.2)
        return "ready"

    # screen
    def screen(self):
        return self.tmux.screen()

    def wait_screen(self, pattern, timeout=30.0):
        return self.tmux.wait_for(pattern, timeout=timeout)

    def prompt(self, text):
        self.tmux.submit(text)

    def pick_ide(self, ide_name, folder, timeout=30.0):
        """Connect through `/ide` ("Manage IDE Connection"): the picker lists
        ``NAME: FOLDER`` first; Enter connects (the screen says so)."""
        self.prompt("/ide")
        self.tmux.wait_for(r"Select an IDE workspace to connect to", timeout=timeout)
        self.tmux.wait_for(r"1\. %s: %s\b" % (re.escape(ide_name), re.escape(folder)), timeout=timeout)
        self.tmux.send_keys("Enter")
        self.tmux.wait_for(r"Connected to %s: %s" % (re.escape(ide_name), re.escape(folder)), timeout=timeout)

    def answer_permission(self, choice=1, timeout=30.0):
        """Answer the edit/create permission dialog in the terminal: 1 = Yes,
        2 = Yes and don't ask again, 3 = No (Escape)."""
        self.tmux.wait_for(self.PERMISSION, timeout=timeout)
        time.sleep(0.3)   # let the dialog take keys
        if choice == 3:
            self.tmux.send_keys("Escape")
            return
        for _ in range(choice - 1):
            self.tmux.send_keys("Down")
            time.sleep(0.1)
        self.tmux.send_keys("Enter")

    def exit_status(self):
        """``None`` while the CLI runs, else its exit status."""
        try:
            text = read(self.status_file).strip()
        except OSError:
            return None
        return int(text) if text.lstrip("-").isdigit() else None

    # /exit typed while the CLI still finishes a turn is queued ("Queued (1) /exit") and
    # runs after it; on a loaded machine that took more than 20 s once.
    EXIT_TIMEOUT = 60.0

    def wait_exit(self, timeout=EXIT_TIMEOUT):
        wait_until(lambda: self.exit_status() is not None, timeout, message="CLI exit")
        return self.exit_status()

    def exit(self, timeout=EXIT_TIMEOUT):
        """``/exit``; returns the CLI's exit status."""
        if self.exit_status() is None:
            self.tmux.submit("/exit")
        return self.wait_exit(timeout)

    IDE_EVENT = re.compile(r"(Connecting to|Connected to|Disconnecting from|Disconnected from) "
                           r"IDE MCP server")

    def wait_ide_connected(self, timeout=30.0, settle=2.5):
        """Wait until the CLI is connected to an IDE and has stayed so for ``settle``
        seconds: at start-up it connects, then (after folder trust is settled) DELETEs its
        MCP session and connects again, once or twice, up to ~2 s apart."""
        deadline = time.monotonic() + timeout
        last = None
        since = time.monotonic()
        while True:
            events = self.IDE_EVENT.findall(self.log_text())
            if events != last:
                last, since = events, time.monotonic()
            elif events and events[-1] == "Connected to" and \
                    time.monotonic() - since >= settle:
                return len([e for e in events if e == "Connected to"])
            elif not events and time.monotonic() - since >= settle:
                # Nothing is connecting: was a live IDE skipped by the probe race? The
                # CLI's other scan may still connect, hence the wait of ``settle``.
                begun = time.monotonic()
                if self._restart_if_probe_raced():
                    deadline += time.monotonic() - begun
                    last, since = None, time.monotonic()
                    continue
            if time.monotonic() > deadline:
                raise AssertionError("CLI not (stably) connected to an IDE within %.0f s; "
                                     "IDE events: %s%s" % (timeout, events, self._skips_text()))
            time.sleep(0.2)

    def wait_scans_over(self, quiet=3.0, timeout=30.0):
        """Wait until the CLI has logged no new scan of the IDE lock folder for ``quiet``
        seconds: its start-up scans are over (1.0.102 scans again once the trust dialog
        is answered, and restarts its watcher of the lock folder then)."""
        deadline = time.monotonic() + timeout
        count, since = None, time.monotonic()
        while True:
            now = self.log_text().count("Scanning for IDE lock files")
            if now != count:
                count, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            if time.monotonic() > deadline:
                raise AssertionError("the CLI kept scanning for IDE locks for %.0f s" % timeout)
            time.sleep(0.2)

    # the start-up probe race (PROBE_SKIPPED)
    @property
    def attempt(self):
        """Which start of the CLI this is: 1, then one more per restart."""
        return len(self.restarts) + 1

    def probe_skips(self):
        """``[(socket path, lock file name)]`` the CLI's log says it skipped as unreachable."""
        return PROBE_SKIPPED.findall(self.log_text())

    def _skips_text(self):
        skips = self.probe_skips()
        if not skips:
            return ""
        return "; the CLI skipped as unreachable: %s (restarts so far: %d)" % (
            ", ".join("%s (%s)" % (name, sock) for sock, name in skips), len(self.restarts))

    def _probe_race(self, wait=0.0):
        """Why to start the CLI again, or None: its log shows PROBE_SKIPPED for a socket
        that accepts a connection now, and attempts are left. ``wait``: how long to give
        the log line to reach the file (the CLI writes its log asynchronously)."""
        if self.attempt >= START_ATTEMPTS:
            return None
        deadline = time.monotonic() + wait
        while True:
            live = [(sock, name) for sock, name in self.probe_skips() if socket_accepts(sock)]
            if live:
                return ("attempt %d: Copilot CLI %s skipped the live IDE socket %s of %s at "
                        "start-up (its 250 ms probe timed out; the socket accepts now); "
                        "started it again" % (self.attempt, CLI_VERSION, live[0][0], live[0][1]))
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)

    def _stop_for_restart(self, why):
        """Report ``why``, stop this CLI and give the next one a fresh log folder (the
        evidence and IDE events read so far are the old CLI's)."""
        warnings.warn(ProbeRaceRestart(why), stacklevel=4)
        with open(os.path.join(self.log_dir, "restarts.txt"), "a", encoding="utf-8") as fh:
            fh.write(why + "\n")
        self.tmux.save_screen("attempt-%d" % self.attempt)
        self.tmux.close()
        self.restarts.append(why)
        self.cli_log_dir = os.path.join(self.log_dir, "cli-attempt-%d" % self.attempt)
        os.makedirs(self.cli_log_dir, exist_ok=True)

    def _restart_if_probe_raced(self):
        """Start the CLI again, as the test started it, if the probe race skipped a live
        IDE (``_probe_race``); True when it did. A trust dialog the test answered the
        first time is answered again."""
        why = self._probe_race()
        if why is None:
            return False
        self._stop_for_restart(why)
        self._launch(self._trust or self._prompted, 60.0)
        return True

    # debug log
    def log_text(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.cli_log_dir, "*.log"))):
            with open(path, encoding="utf-8", errors="replace") as fh:
                out.append(fh.read())
        return "\n".join(out)

    def wait_log(self, pattern, timeout=30.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log_text())
            if m:
                return m
            if time.monotonic() > deadline:
                lines = self.log_text().splitlines()
                raise AssertionError("CLI log shows no %r within %.0f s; IDE lines:\n%s" % (
                    pattern, timeout, "\n".join(l for l in lines if "IDE" in l)[-4000:]))
            time.sleep(0.2)


# --- the real CLI as an ACP agent --------------------------------------------------------------

def acp_agent_argv(binary, log_dir):
    return [binary, "--acp", "--stdio", "--log-level", "all", "--log-dir", log_dir]


class RawAcp(Proc):
    """A minimal ACP client used only to check the harness itself (fake model + CLI),
    independent of the project's ``acp`` package."""

    def __init__(self, binary, workspace, env, log_dir):
        reason = no_offline_acp_reason()
        if reason:
            import pytest  # only tests build a RawAcp
            pytest.skip(reason)
        cli_logs = os.path.join(log_dir, "cli")
        os.makedirs(cli_logs, exist_ok=True)
        Proc.__init__(self, acp_agent_argv(binary, cli_logs), cwd=workspace, env=env,
                      log_path=os.path.join(log_dir, "acp-raw.log"))
        self._next = 0
        self._read = 0

    def request(self, method, params, timeout=60.0):
        self._next += 1
        rid = self._next
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                              "params": params}))
        deadline = time.monotonic() + timeout
        updates = []
        while True:
            out = self.lines("out")
            for line in out[self._read:]:
                self._read += 1
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("method") == "session/update":
                    updates.append(msg["params"]["update"])
                elif msg.get("id") == rid and "method" not in msg:
                    if "error" in msg:
                        raise AssertionError("%s failed: %s" % (method, msg["error"]))
                    return msg["result"], updates
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("no answer to %s (exit status %s)\n%s"
                                     % (method, self.proc.poll(), self.output("err")))
            time.sleep(0.05)
