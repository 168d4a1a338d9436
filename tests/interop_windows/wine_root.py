"""The Debian 13 root in which the Windows Copilot CLI and the Windows CPython run
under Wine 10 (tools/windows/cli_root.sh made it; tests/interop_windows/run.sh set the
environment and bound /proc, /sys and /dev into it in a private mount namespace).

A Windows path ``C:\\x`` is ``<root>/root/.wine/drive_c/x`` on the host, and
``/root/.wine/drive_c/x`` inside the root (`WineRoot.host`, `WineRoot.unix`). Every
program is started through ``chroot`` with an explicit, minimal environment: nothing
of the host's reaches Wine. Standard library only, Python 3.8 compatible.
"""

import json
import ntpath
import os
import re
import shutil
import subprocess

import copilot_harness as H

ROOT_ENV = "CLI_ROOT"          # run.sh: the root's host path
EXE_ENV = "CLI_EXE"            # copilot.exe inside the root
PYTHON_ENV = "CLI_PYTHON"      # the Windows CPython's python.exe inside the root
SRC_ENV = "CLI_SRC"            # where the checkout's packages are copied inside the root
VERSION_ENV = "CLI_WIN_VERSION"

PREFIX = "/root/.wine"
DRIVE_C = PREFIX + "/drive_c"
#: What every Wine program gets (tools/windows/cli_root.sh's CLI_WINE_ENV).
WINE_ENV = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "WINEPREFIX": PREFIX,
    "WINEDEBUG": "-all", "WINEDLLOVERRIDES": "mscoree,mshtml=", "XDG_RUNTIME_DIR": "/run/user/0",
    "LANG": "C.UTF-8",
}


def missing_reason():
    """Why the suite cannot run here (None when run.sh prepared the root)."""
    root = os.environ.get(ROOT_ENV)
    if not root:
        return ("%s is not set: run `make interop-windows` (tests/interop_windows/run.sh "
                "makes the Wine 10 root and runs this suite in it)" % ROOT_ENV)
    exe = os.environ.get(EXE_ENV, "")
    if not os.path.isfile(root + exe):
        return "no copilot.exe at %s in the root %s" % (exe, root)
    if not os.path.ismount(os.path.join(root, "proc")):
        return "the root's /proc is not mounted (run the suite through tests/interop_windows/run.sh)"
    return None


class WineRoot(object):
    def __init__(self):
        self.path = os.environ[ROOT_ENV]
        self.exe = os.environ[EXE_ENV]
        self.python = os.environ[PYTHON_ENV]
        self.src = os.environ[SRC_ENV]
        self.version = os.environ.get(VERSION_ENV) or H.CLI_VERSION

    # paths
    def unix(self, win):
        """``C:\\x\\y`` -> ``/root/.wine/drive_c/x/y`` (inside the root)."""
        drive, rest = ntpath.splitdrive(win)
        assert drive.upper() == "C:", win
        return DRIVE_C + rest.replace("\\", "/")

    def host(self, win):
        """``C:\\x\\y`` -> the host's path of that file."""
        return self.path + self.unix(win)

    def win(self, host):
        """A host path under the root's drive C: -> ``C:\\...``."""
        base = self.path + DRIVE_C
        assert host == base or host.startswith(base + "/"), host
        return "C:" + (host[len(base):] or "/").replace("/", "\\")

    def drive_z(self, win):
        """The same folder through Wine's drive Z: (the root's ``/``)."""
        return "Z:" + self.unix(win).replace("/", "\\")

    def copy_sources(self):
        """The checkout's ide_protocol and acp into the root (read there as Z:\\opt\\src)."""
        target = self.path + self.src
        shutil.rmtree(target, ignore_errors=True)
        for package in ("ide_protocol", "acp"):
            shutil.copytree(os.path.join(H.REPO, package), os.path.join(target, package),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    # commands
    def argv(self, program, cwd_win, env=None):
        """The host command that runs ``program`` (a list: Wine, its program, arguments)
        inside the root, in the Windows folder ``cwd_win``, with WINE_ENV and ``env``."""
        merged = dict(WINE_ENV)
        merged.update(env or {})
        return (["chroot", self.path, "/usr/bin/env", "-i"]
                + ["%s=%s" % kv for kv in sorted(merged.items())]
                + ["/bin/sh", "-c", 'cd "$0" && exec "$@"', self.unix(cwd_win)] + list(program))

    def python_argv(self, args, cwd_win, env=None):
        """The Windows CPython with the checkout's packages, unbuffered, no colours."""
        merged = {"PYTHONPATH": "Z:" + self.src.replace("/", "\\"), "PYTHONUNBUFFERED": "1",
                  "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
        merged.update(env or {})
        return self.argv(["wine", self.python] + list(args), cwd_win, merged)

    def run_python(self, args, cwd_win, env=None, timeout=120):
        """Run the Windows CPython to its end: ``(exit status, stdout, stderr)``. Wine gets
        stdin from /dev/null."""
        done = subprocess.run(self.python_argv(args, cwd_win, env), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return (done.returncode,) + tuple(stream.decode("utf-8", "replace").replace("\r\n", "\n")
                                          for stream in (done.stdout, done.stderr))

    def start_wineserver(self):
        """A persistent wineserver and Wine's services, started with WINE_ENV only, so that
        no test's environment lives on in them (the leak check reads environments)."""
        for program in (["wineserver", "-p"], ["wine", "cmd", "/c", "ver"]):
            subprocess.run(self.argv(program, "C:\\"), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)

    def stop_wineserver(self):
        subprocess.run(self.argv(["wineserver", "-k"], "C:\\"), stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


class FileProc(object):
    """A Wine program whose output goes to a file, not a pipe: a Node.js program (the
    CLI) given a Unix pipe as stderr by a process outside Wine dies at start (`open
    EBADF`), a regular file it takes. Stopped with its process group."""

    def __init__(self, argv, log_path):
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return H.read(self.log_path)

    def stop(self, grace=10.0):
        H.signal_group(self.proc, grace)
        return self.proc.returncode


class WinServe(H.Serve):
    """``python.exe -m ide_protocol serve FOLDER`` under Wine, driven through its stdin
    (a pipe: the Windows CPython reads it as the Linux one does)."""

    SERVING = re.compile(r"^serving (.+) on (\S+), lock (.+\.lock)$")

    def __init__(self, root, folder_win, copilot_home_win, log_path, args=()):
        self.root = root
        self.folder = folder_win
        self.lock_dir = root.host(ntpath.join(copilot_home_win, "ide"))
        self.lock_path = self.lock = None
        argv = root.python_argv(["-m", "ide_protocol", "serve"] + list(args) + [folder_win], folder_win,
                                {"COPILOT_HOME": copilot_home_win})
        H.Proc.__init__(self, argv, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                        log_path=log_path)

    def wait_lock(self, timeout=60.0):
        """The lock serve names on its first line (its pid is a Windows pid, not ours)."""
        m = self.wait_output(self.SERVING.pattern, timeout=timeout)
        self.pipe = m.group(2)
        path = self.root.host(m.group(3))
        with open(path, encoding="utf-8") as fh:
            self.lock_path, self.lock = path, json.load(fh)
        return self.lock_path, self.lock

    def leftovers(self):
        return ["lock file " + self.lock_path] if self.lock_path and os.path.exists(self.lock_path) else []


class WinTui(H.CopilotTui):
    """The Windows CLI's TUI under Wine in a host tmux (it needs a pseudo-terminal: with
    pipes Node cannot open its standard streams under Wine, `open EBADF`). Its screen is
    drawn with leftovers of the start-up banner; the harness reads the parts it needs
    (the trust dialog, the input line) and everything else from the CLI's debug log."""

    def __init__(self, root, tmux, workspace_win, env, log_dir, args=()):
        H.CopilotTui.__init__(self, tmux, root.exe, workspace_win, env, log_dir, args)
        self.root = root

    def command(self):
        self.status_file = os.path.join(self.cli_log_dir, "exit-status")
        program = ["/bin/sh", "-c", '"$@"; echo $? > "$0"', self.root.unix(self.root.win(self.status_file)),
                   "wine", self.binary, "--log-level", "all", "--log-dir",
                   self.root.win(self.cli_log_dir)] + self.args
        argv = self.root.argv(program, self.workspace, self.env)
        return argv, "/", {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color"}
