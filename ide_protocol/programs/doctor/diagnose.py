"""Put the CLI's rules together: which locks it would use, why not, and the verdict.

`diagnose` walks the lock files as the CLI does at start-up (PROTOCOL.md §1, the order
and checks in `common.lock_rules`, the same the client's discovery uses), tries each usable lock's server (`probe`), and answers the one
question a user has: would ``copilot`` started in FOLDER connect to an IDE, and to
which? Every reason for "no" is a `Finding` with a stable code and a fix. The result is
plain data; `cli` turns it into text or JSON.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...common import lock_rules, lockfile
from ...common.lockfile import LockInfo
from ..progname import program_name
from . import rules
from .probe import Handshake, handshake

#: A server/discover (or initialize) slower than this is reported: the CLI waits for it
#: at every start-up.
SLOW_SECONDS = 1.0
#: How long the probe waits for each answer (the CLI itself would wait 60 s).
HANDSHAKE_TIMEOUT = 10.0

#: Folder relations, most telling first: a lock with several folders reports the first.
_RELATION_ORDER = ("symlinked-folder", "case-mismatch", "folder-is-parent", "folder-mismatch")


@dataclass
class Finding:
    """One reason, with a stable ``code``, what is wrong (``message``) and what to do
    (``fix``, one line)."""

    code: str
    message: str
    fix: str

    def to_json(self) -> Dict[str, str]:
        return {"code": self.code, "message": self.message, "fix": self.fix}


@dataclass
class LockReport:
    """One lock file as the CLI sees it. ``usable``: the CLI lists it in ``/ide`` and can
    connect to it (read, pid alive, socket accepts, handshake not refused). ``matches``:
    one of its folders is the CLI's folder (so it is an auto-connect candidate)."""

    path: str
    findings: List[Finding] = field(default_factory=list)
    usable: bool = False
    matches: bool = False
    ide_name: Optional[str] = None
    pid: Any = None
    folders: List[str] = field(default_factory=list)
    is_trusted: bool = False
    handshake: Optional[Handshake] = None

    def add(self, code: str, message: str, fix: str) -> None:
        self.findings.append(Finding(code, message, fix))

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"path": self.path, "usable": self.usable,
                               "findings": [f.to_json() for f in self.findings]}
        if self.ide_name is not None:
            out["ideName"] = self.ide_name
        if self.handshake is not None:
            hs = self.handshake
            out["timings_ms"] = {k: round(v * 1000, 1) for k, v in
                                 (("discover", hs.discover_seconds), ("initialize", hs.initialize_seconds))
                                 if v is not None}
        return out


@dataclass
class Report:
    """The whole answer. ``folder`` is the CLI's physical working folder; ``ide`` the
    name of the IDE it connects to at start-up (``None`` when ``would_connect`` is false)."""

    folder: str
    given: str
    config_dir: str
    lock_dir: str
    auto_connect: bool = True
    locks: List[LockReport] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    picked: Optional[LockReport] = None
    would_connect: bool = False
    handshake_tried: bool = True

    @property
    def ide(self) -> Optional[str]:
        return self.picked.ide_name if self.would_connect and self.picked is not None else None

    def to_json(self) -> Dict[str, Any]:
        return {"folder": self.folder, "would_connect": self.would_connect, "ide": self.ide,
                "locks": [lock.to_json() for lock in self.locks],
                "lock_dir": self.lock_dir, "findings": [f.to_json() for f in self.findings]}


# ------------------------------------------------------------------ lock directory


def _count_locks(directory: str) -> int:
    names = lock_rules.lock_names(directory)
    return len(names) if names else 0


def _same_place(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _check_lock_dir(report: Report, env: Mapping[str, str], home: str, from_flag: bool) -> None:
    """`lock-dir` findings: a COPILOT_HOME that older CLIs ignore or that is relative, a
    missing lock directory, locks written where this CLI does not look."""
    copilot_home = env.get("COPILOT_HOME") or ""
    if copilot_home and not from_flag:
        if not os.path.isabs(copilot_home):
            report.findings.append(Finding(
                "lock-dir", "COPILOT_HOME=%s is not an absolute path: the CLI uses it as written, relative to the "
                "folder it starts in (and does not expand ~), so it reads %s" % (copilot_home, report.lock_dir),
                "set COPILOT_HOME to an absolute path, the same for the IDE and the CLI"))
        older = rules.older_cli_lock_dir(home)
        if not _same_place(older, report.lock_dir):
            count = _count_locks(older)
            report.findings.append(Finding(
                "lock-dir", "COPILOT_HOME is set: CLI 1.0 and later read %s, but older CLIs (0.0.x) read %s and ignore "
                "COPILOT_HOME%s" % (report.lock_dir, older,
                                    " (it holds %d lock file(s))" % count if count else ""),
                "use CLI 1.0 or later (copilot --version), or give the IDE and the CLI the same COPILOT_HOME"))
    xdg = env.get("XDG_STATE_HOME") or ""
    if xdg and os.path.isabs(xdg):
        vscode_dir = os.path.join(xdg, ".copilot", "ide")
        count = _count_locks(vscode_dir)
        if count and not _same_place(vscode_dir, report.lock_dir):
            report.findings.append(Finding(
                "lock-dir", "%d lock file(s) in %s, where VS Code writes when XDG_STATE_HOME is set; the CLI reads "
                "only %s" % (count, vscode_dir, report.lock_dir),
                "start copilot with COPILOT_HOME=%s, or start VS Code without XDG_STATE_HOME"
                % os.path.join(xdg, ".copilot")))
    if not os.path.isdir(report.lock_dir):
        exists = os.path.lexists(report.lock_dir)
        report.findings.append(Finding(
            "lock-dir", "%s %s: no IDE has announced itself to the CLI there"
            % (report.lock_dir, "is not a directory" if exists else "does not exist"),
            "start the IDE with its Copilot CLI integration on, with the same HOME and COPILOT_HOME as the CLI"))
    elif not lock_rules.lock_names(report.lock_dir):
        report.findings.append(Finding(
            "lock-dir", "%s holds no *.lock file: no IDE is announcing itself to the CLI" % report.lock_dir,
            "start the IDE with its Copilot CLI integration on, with the same HOME and COPILOT_HOME as the CLI"))


# ------------------------------------------------------------------------- one lock


_READ_FIX = {
    "invalid-json": "the IDE wrote a broken lock: restart its Copilot integration, and report it to the IDE's "
                    "plugin if it comes back",
    "bom": "the IDE must write the lock as UTF-8 without a byte-order mark",
}


#: A lock whose socket is to be probed: its content, and `lock_rules.pid_running`'s verdict.
_ToProbe = Tuple[LockReport, Dict[str, Any], bool, str]


def _scan(lock: LockReport, read: Tuple[Optional[Dict[str, Any]], List[lock_rules.LockFileError]]
          ) -> Optional[_ToProbe]:
    """Validate (``read``: `lock_rules.read_locks`'s verdict) and the pid: the CLI's
    scan up to its socket probe. Returns what `_judge_socket` needs when the socket is
    to be probed (a running pid, or one that names no process here), else None with
    the findings added."""
    raw, problems = read
    if isinstance(raw, dict):
        name = raw.get("ideName")
        lock.ide_name = name if isinstance(name, str) else None
        lock.pid = raw.get("pid")
    for problem in problems:
        if problem.code == lock_rules.INVALID_JSON:
            fix = _READ_FIX["bom" if "byte-order mark" in problem.reason else "invalid-json"]
            lock.add("invalid-json", "the CLI skips this file: %s" % problem.reason, fix)
        else:
            lock.add("schema", "the CLI skips this lock: %s" % problem.reason,
                     "the IDE's plugin must write %s (PROTOCOL.md §1); until then the CLI ignores this IDE"
                     % ('"%s" as the CLI wants it' % problem.field if problem.field else "a JSON object"))
    if problems:
        return None
    assert raw is not None
    lock.folders = list(raw["workspaceFolders"])
    lock.is_trusted = raw.get("isTrusted") is True
    alive, why = lock_rules.pid_running(raw["pid"])
    if not alive and why != lock_rules.NO_SUCH_PROCESS:
        _pid_not_running(lock, raw, why)
        return None
    return lock, raw, alive, why


def _probe_target(raw: Dict[str, Any], alive: bool) -> Tuple[str, Any]:
    """What `lockfile.probe_lock_sockets` probes for a lock: its socket as the CLI
    probes it (PROTOCOL.md §1), or, for a pid that names no process here, one attempt
    as for an older lock (no timestamp), to tell another PID namespace from a stale
    lock."""
    return raw["socketPath"], raw["timestamp"] if alive else None


def _judge_socket(lock: LockReport, raw: Dict[str, Any], alive: bool, why: str, reason: Optional[str]) -> bool:
    """The end of the CLI's scan, given the probe's verdict (``reason``: None when the
    socket accepts): whether the CLI would list the lock, the findings added if not."""
    if not alive and reason is None:
        # No such process here, yet something answers on its socket: the IDE runs in
        # another PID namespace (a container, WSL, Flatpak, Snap), not a stale lock.
        lock.add("pid-not-visible", "the CLI skips this lock: its pid %s is not visible from here (%s), yet its "
                 "socket %s accepts a connection, so the IDE runs in another PID namespace (a container, WSL, "
                 "Flatpak, Snap), not a stale lock" % (raw["pid"], why, raw["socketPath"]),
                 "run copilot where the IDE runs, or join the two sides with `python3 -m ide_protocol relay` "
                 "(docs/RELAY.md); the IDE's plugin could also write a pid the CLI's namespace can see")
        return False
    if not alive:
        _pid_not_running(lock, raw, why)
        return False
    if reason is not None:
        lock.add("socket-unreachable", "the CLI skips this lock: its socket %s does not accept a connection (%s)"
                 % (raw["socketPath"], reason),
                 "restart the IDE or its Copilot integration: the server behind this lock is not listening")
        return False
    return True


def _pid_not_running(lock: LockReport, raw: Dict[str, Any], why: str) -> None:
    lock.add("pid-not-running", "the CLI skips this lock: pid %s is not running as the CLI sees it (%s)"
             % (raw["pid"], why),
             "restart the IDE (its lock is stale); an IDE in a container, Flatpak or Snap must write a pid "
             "the CLI's PID namespace can see")


def _folder_finding(lock: LockReport, cwd: str) -> None:
    """Why a usable lock is not the CLI's folder: the most telling relation of its folders."""
    if not lock.folders:
        lock.add("folder-mismatch", "the lock lists no workspace folder, so the CLI never auto-connects to it",
                 "the IDE must list its open folder(s) in workspaceFolders; meanwhile pick it with /ide")
        return
    found = [(rules.relation(folder, cwd), folder) for folder in lock.folders]
    found.sort(key=lambda item: _RELATION_ORDER.index(item[0][0]))
    (code, detail), folder = found[0]
    if code == "symlinked-folder":
        lock.add(code, "the lock lists %s, a path through a symlink to %s; the CLI compares its physical folder "
                 "and never resolves the lock's paths" % (folder, cwd),
                 "the IDE must list the resolved path %s too (realpath); meanwhile pick it with /ide" % cwd)
    elif code == "case-mismatch":
        lock.add(code, "the lock lists %s, which differs from %s only in letter case; the CLI compares "
                 "case-sensitively" % (folder, cwd),
                 "make the IDE list the folder spelled exactly %s, or pick it with /ide" % cwd)
    elif code == "folder-is-parent" and detail == "symlink":
        lock.add(code, "the CLI would start in %s, below the workspace folder %s, which the lock lists through a "
                 "symlink; it auto-connects only when started exactly in a workspace folder, and never matches a "
                 "symlinked one" % (cwd, folder),
                 "pick this IDE with /ide; to auto-connect, the IDE must list the resolved path %s"
                 % os.path.realpath(folder))
    elif code == "folder-is-parent":
        lock.add(code, "the CLI would start in %s, below the workspace folder %s; it auto-connects only when "
                 "started exactly in a workspace folder" % (cwd, folder),
                 "start copilot in %s, or pick this IDE with /ide" % folder)
    elif detail == "relative":
        lock.add(code, "the lock lists the relative path %s, which never equals the CLI's absolute folder" % folder,
                 "the IDE must list absolute folder paths; meanwhile pick it with /ide")
    else:
        where = ", ".join(lock.folders)
        lock.add(code, "the lock is for %s, %s %s" % (where, "which lies below" if detail == "above" else "not",
                                                     cwd),
                 "start copilot in %s to connect at start-up, or pick this IDE with /ide" % lock.folders[0])


def _judge_handshake(lock: LockReport, hs: Handshake, slow: float) -> None:
    lock.handshake = hs
    if hs.failure is not None:
        code, message = hs.failure
        if code == "auth-refused":
            lock.add(code, "the CLI cannot connect: %s" % message,
                     "restart the IDE's Copilot integration: its lock and its server disagree on the nonce "
                     "(the lock may be left over from an earlier run)")
        else:
            lock.add(code, "the CLI cannot connect: %s" % message,
                     "restart the IDE's Copilot integration, and report it to the IDE's plugin if it comes back "
                     "(`%s --lock %s` shows more)" % (program_name("check"), lock.path))
        lock.usable = False
    if hs.discover_seconds is not None and hs.discover_seconds >= slow and (
            hs.failure is None or hs.initialize_seconds is not None):
        lock.add("slow-discover", "server/discover took %.1f s; the CLI waits that long at every start before "
                 "it falls back to initialize" % hs.discover_seconds,
                 "the IDE's server must answer server/discover at once (an error such as -32601 is fine, "
                 "PROTOCOL.md §3)")
    if hs.initialize_seconds is not None and hs.initialize_seconds >= slow:
        lock.add("slow-initialize", "initialize took %.1f s; the CLI waits that long at every connect"
                 % hs.initialize_seconds, "the IDE's server must answer initialize at once")


# ---------------------------------------------------------------------- the verdict


def _pick(report: Report, env: Mapping[str, str], scanned: List[LockReport]) -> None:
    """The CLI's start-up choice (`lock_rules.auto_connect_choice`): the first lock the
    scan keeps, by file name, listing the folder; `several-ides` when more than one
    does; `not-trusted` on the choice."""
    picked, passed_over = lock_rules.auto_connect_choice(scanned, report.folder, lambda lock: lock.folders)
    if picked is None:
        return
    report.picked = picked
    candidates = [picked] + passed_over
    if len(candidates) > 1:
        others = ", ".join("%s (%s)" % (c.ide_name, os.path.basename(c.path)) for c in candidates[1:])
        picked.add("several-ides", "%d IDEs list %s; the CLI picks this one, %s, the first by file name, over %s"
                   % (len(candidates), report.folder, picked.ide_name, others),
                   "close the other IDE windows on this folder, or switch with /ide after start-up")
        for other in candidates[1:]:
            other.add("several-ides", "%d IDEs list %s; the CLI picks %s (%s), the first by file name, not this one"
                      % (len(candidates), report.folder, picked.ide_name, os.path.basename(picked.path)),
                      "close the other IDE windows on this folder, or pick this one with /ide")
    report.would_connect = report.auto_connect and picked.usable
    if not report.auto_connect:
        report.findings.append(Finding(
            "auto-connect-off", "ide.autoConnect is false in %s: the CLI does not connect at start-up"
            % os.path.join(report.config_dir, "settings.json"),
            "turn on \"Auto-connect to matching IDE workspace\" in the CLI's /ide menu, or connect there by hand"))
    trusted_by = rules.trusted_by_config(report.folder, report.config_dir, env)
    if trusted_by is None and not any(c.is_trusted for c in candidates):
        picked.add("not-trusted", "the CLI will ask whether to trust %s at start-up (it connects anyway; the "
                   "folder's MCP servers and hooks wait for the answer)" % report.folder,
                   "answer the prompt (option 2 remembers the folder), or let the IDE say the folder is trusted "
                   "(isTrusted: true in its lock): `%s --trusted`, the setting g:copilot_ide_trusted in Vim and "
                   "Neovim, copilot-ide-trusted in Emacs" % program_name("serve"))


def diagnose(folder: str, env: Optional[Mapping[str, str]] = None, home: Optional[str] = None,
             cli_config_dir: Optional[str] = None, try_handshake: bool = True,
             timeout: float = HANDSHAKE_TIMEOUT, slow: float = SLOW_SECONDS,
             dockerenv: str = "/.dockerenv") -> Report:
    """Everything the CLI started in ``folder`` would do with the IDE lock files.

    ``env``/``home`` default to this process's (the user runs doctor where they run the
    CLI); ``cli_config_dir`` is the CLI's ``--config-dir``; ``dockerenv`` the file that
    says this runs in a Docker container (a remote hint). Raises ``NotADirectoryError``
    when ``folder`` is not a directory. Never writes or deletes a file."""
    env = dict(os.environ if env is None else env)
    home = home if home is not None else rules.home_dir(env)
    if not os.path.isdir(folder):
        raise NotADirectoryError("not a directory: %s" % folder)
    cwd = os.path.realpath(folder)  # process.cwd() is the physical path
    config = rules.resolve_in(rules.config_dir(env, home, cli_config_dir), cwd)
    report = Report(folder=cwd, given=folder, config_dir=config, lock_dir=os.path.join(config, "ide"),
                    handshake_tried=try_handshake)
    report.auto_connect = rules.auto_connect_enabled(config)
    _check_lock_dir(report, env, home, bool(cli_config_dir))
    now_ms = time.time() * 1000
    to_probe: List[_ToProbe] = []
    paths = [os.path.join(report.lock_dir, name) for name in lock_rules.lock_names(report.lock_dir) or []]
    for path, read in zip(paths, lock_rules.read_locks(paths)):  # (retries shared: bounded as a whole)
        lock = LockReport(path=path)
        report.locks.append(lock)
        scanned_pid = _scan(lock, read)
        if scanned_pid is not None:
            to_probe.append(scanned_pid)
    # Every socket at once, as the client's discovery probes them (a probe may wait a
    # second); the findings stay with their lock, in the order of the lock files.
    reasons = lockfile.probe_lock_sockets([_probe_target(raw, alive) for _lock, raw, alive, _why in to_probe],
                                          cwd, now_ms)
    scanned = []
    for (lock, raw, alive, why), reason in zip(to_probe, reasons):
        if not _judge_socket(lock, raw, alive, why, reason):
            continue
        lock.usable = True
        lock.matches = lock_rules.lists_folder(lock.folders, cwd)
        if not lock.matches:
            _folder_finding(lock, cwd)
        scanned.append((lock, raw))
    if try_handshake and scanned:
        results = _run_async(_handshakes([(lock, raw) for lock, raw in scanned], cwd, timeout))
        for (lock, _raw), hs in zip(scanned, results):
            _judge_handshake(lock, hs, slow)
    _pick(report, env, [lock for lock, _raw in scanned])
    if report.picked is None:
        _remote_finding(report, rules.remote_places(env, dockerenv))
    return report


def _remote_finding(report: Report, places: List[str]) -> None:
    """No IDE lists the folder and this runs apart from the editor: the relay would
    bring an editor outside here (docs/RELAY.md)."""
    if not places:
        return
    report.findings.append(Finding(
        "remote", "this runs in %s: Copilot CLI here sees only IDEs on this side, not an editor outside"
        % " and ".join(places),
        "relay the editor here: `%s cli-side --map EDITOR_PATH=%s --via \"ssh|docker exec -i|wsl.exe ... "
        "python3 copilot-ide.pyz relay ide-side --stdio --folder EDITOR_PATH\"` (docs/RELAY.md)"
        % (program_name("relay"), report.folder)))


def _lock_info(raw: Dict[str, Any], cwd: str) -> LockInfo:
    return LockInfo(socket_path=rules.resolve_in(raw["socketPath"], cwd) if not raw["socketPath"].startswith("\\\\")
                    else raw["socketPath"], scheme=raw["scheme"], headers=dict(raw["headers"]), pid=raw["pid"],
                    ide_name=raw["ideName"], timestamp=raw["timestamp"],
                    workspace_folders=list(raw["workspaceFolders"]), is_trusted=raw.get("isTrusted") is True)


async def _handshakes(items: List[Any], cwd: str, timeout: float) -> List[Handshake]:
    """Every usable lock's handshake at once, under one deadline (`handshake` bounds
    each the same way), so five slow servers cost the time of one."""
    return list(await asyncio.gather(*(handshake(_lock_info(raw, cwd), timeout) for _lock, raw in items)))


def _run_async(coro: Any) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
