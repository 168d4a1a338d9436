"""Doctor's own knowledge around the CLI's lock rules: where the CLI looks, how a
folder that does not match relates to the CLI's, and the settings and trust it reads.

The rules the CLI applies to each lock file (names and order, parse, schema, pid, socket
probe, folder equality, the start-up choice) are not here: they live once in
`common.lock_rules`, where the client, the checker and `serve` take them too, so that
doctor's prediction and the client's choice cannot disagree (PROTOCOL.md §1). This
module adds what only doctor needs to explain a "no", established by reading the CLI's
bundle and calling its own native helpers (``resolveCopilotHome``,
``folderTrustIsTrusted``):

* Lock directory: ``<config dir>/ide``, where the config dir is ``--config-dir``, else a
  non-empty ``$COPILOT_HOME`` used *verbatim* (a relative one is relative to the CLI's
  working folder, ``~`` is not expanded), else ``$HOME/.copilot``. Older CLIs (0.0.x)
  read ``$HOME/.copilot/ide`` whatever ``COPILOT_HOME`` says. The home is Node's
  ``os.homedir()`` (`home_dir`): ``%USERPROFILE%`` on Windows, not a ``HOME`` that Git
  Bash or MSYS may have set there.
* Why a listed folder is not the CLI's: through a symlink, another letter case, a
  parent, a relative path (`relation`).
* ``ide.autoConnect: false`` in ``settings.json`` turns auto-connect off.
* Folder trust: trusted when ``COPILOT_ALLOW_ALL=true``, when ``config.json``'s
  ``trustedFolders`` holds the folder or a parent of it (those entries *are* resolved
  through symlinks), or when a usable lock for the folder says ``isTrusted: true``.

Nothing here writes, renames or deletes a file.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...common.lock_rules import MAX_LOCK_BYTES, folder_key, lexical, read_regular_file
from ...wire import json_text


# ----------------------------------------------------------------------- directories


def home_dir(env: Mapping[str, str]) -> str:
    """The CLI's home folder, as Node's ``os.homedir()`` finds it: ``$HOME``, on Windows
    ``%USERPROFILE%``; where that is unset, the account's own (`os.path.expanduser`)."""
    return env.get("USERPROFILE" if os.name == "nt" else "HOME") or os.path.expanduser("~")


def config_dir(env: Mapping[str, str], home: str, cli_config_dir: Optional[str] = None) -> str:
    """The CLI's config dir (``resolveCopilotHome``): ``--config-dir``, else a non-empty
    ``COPILOT_HOME`` as written, else ``~/.copilot``. May be relative (see `resolve_in`)."""
    if cli_config_dir:
        return cli_config_dir
    value = env.get("COPILOT_HOME") or ""
    if value:
        return value
    return os.path.join(home, ".copilot")


def resolve_in(path: str, cwd: str) -> str:
    """``path`` as the CLI's file system calls see it from its working folder ``cwd``."""
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def older_cli_lock_dir(home: str) -> str:
    """Where CLIs before 1.0 look: ``$HOME/.copilot/ide``, ignoring ``COPILOT_HOME``."""
    return os.path.join(home, ".copilot", "ide")


# ------------------------------------------------------------------------ remotes

#: The signs that this process runs apart from the user's editor, each with its name.
REMOTE_SIGNS = (("SSH_CONNECTION", "an SSH session"), ("REMOTE_CONTAINERS", "a dev container"),
                ("CODESPACES", "a Codespace"), ("WSL_DISTRO_NAME", "WSL"))


def remote_places(env: Mapping[str, str], dockerenv: str = "/.dockerenv") -> List[str]:
    """Where this runs, when it is somewhere an editor outside cannot be seen from: an
    SSH session, a dev container, a Codespace, WSL, a Docker container (`dockerenv`)."""
    places = ["%s (%s)" % (name, key) for key, name in REMOTE_SIGNS if env.get(key)]
    if os.path.exists(dockerenv):
        places.append("a container (%s)" % dockerenv)
    return places


# ------------------------------------------------------------------------ folders


def _under(child: str, parent: str) -> bool:
    """Whether ``child`` lies below ``parent``, compared as the CLI of this system compares
    folders (`folder_key`: on Windows in any letter case, `/` as `\\`)."""
    child, parent = folder_key(child), folder_key(parent)
    parent = parent.rstrip(os.sep) or os.sep
    return child != parent and child.startswith(parent if parent == os.sep else parent + os.sep)


def _realpath(path: str) -> str:
    """``os.path.realpath``, or the path itself when it cannot name a file (a NUL byte or
    a lone surrogate from an untrusted lock)."""
    try:
        return os.path.realpath(path)
    except ValueError:
        return path


def relation(listed: str, cwd: str) -> Tuple[str, str]:
    """How a listed folder that does not match relates to the CLI's folder ``cwd``:
    ``(code, detail)`` with code ``symlinked-folder``, ``case-mismatch``,
    ``folder-is-parent`` (detail ``symlink`` when only the resolved path is a parent) or
    ``folder-mismatch`` (detail: ``above``, ``relative``, ``empty`` or ``other``). More specific relations win."""
    if not listed:
        return "folder-mismatch", "empty"
    if not os.path.isabs(listed):
        return "folder-mismatch", "relative"
    norm = lexical(listed)
    real = _realpath(norm)
    # Letter case first: on Windows realpath answers the case on disk, so another
    # spelling of the folder itself would otherwise pass for a symlink to it.
    if norm.lower() == cwd.lower():
        return "case-mismatch", ""
    if real == cwd:
        return "symlinked-folder", real
    if real.lower() == cwd.lower():
        return "case-mismatch", ""
    if _under(cwd, norm):
        return "folder-is-parent", ""
    if _under(cwd, real):
        return "folder-is-parent", "symlink"  # a parent, and listed through a symlink too
    if _under(norm, cwd) or _under(real, cwd):
        return "folder-mismatch", "above"
    return "folder-mismatch", "other"


# ------------------------------------------------------------------- settings, trust


def _read_json_object(path: str) -> Optional[Dict[str, Any]]:
    """A settings file as a JSON object, or None: read as the lock files are (a regular
    file of bounded size, never a FIFO), decoded by `json_text` (any depth)."""
    try:
        data = read_regular_file(path)
        if len(data) > MAX_LOCK_BYTES:
            return None
        value = json_text.loads(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def auto_connect_enabled(config: str) -> bool:
    """``ide.autoConnect`` in ``<config dir>/settings.json`` (the ``/ide`` picker's
    setting): only an explicit ``false`` turns start-up auto-connect off."""
    settings = _read_json_object(os.path.join(config, "settings.json")) or {}
    ide = settings.get("ide")
    return not (isinstance(ide, dict) and ide.get("autoConnect") is False)


def trusted_by_config(folder: str, config: str, env: Mapping[str, str]) -> Optional[str]:
    """Why the CLI already trusts ``folder`` without a lock's help, or ``None``:
    ``COPILOT_ALLOW_ALL=true``, or an entry of ``config.json``'s ``trustedFolders`` that
    is the folder or one of its parents (resolved through symlinks, unlike locks)."""
    if env.get("COPILOT_ALLOW_ALL") == "true":
        return "COPILOT_ALLOW_ALL=true"
    cfg = _read_json_object(os.path.join(config, "config.json")) or {}
    entries = cfg.get("trustedFolders")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, str) and os.path.isabs(entry):
            real = _realpath(lexical(entry))
            if real == folder or _under(folder, real):
                return "trustedFolders in %s" % os.path.join(config, "config.json")
    return None
