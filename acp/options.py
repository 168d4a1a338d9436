"""What a person asks of a session on the command line, checked against what the agent
offers (ACP.md §3.2, §3.3, §3.5): a mode, config option values, MCP servers, files
attached to a prompt. Pure functions of the agent's answers: each returns what to send,
or raises `OptionError` naming what the agent does take, before anything is sent.
"""
from __future__ import annotations

import base64
import mimetypes
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from .endpoints import split_command
from .errors import AcpError

MAX_ATTACHMENT = 32 * 1024 * 1024  # bytes of one attached file (base64 makes it a third more)


class OptionError(AcpError):
    """An option the agent does not take (a mode, a value, a kind of content)."""


# ------------------------------------------------------------------ modes


def mode_ids(session: Any) -> List[str]:
    """The ids of the session's modes (`modes.availableModes`; else the values of its
    `mode` config option, ACP.md §3.2)."""
    modes = session.modes.get("availableModes") if isinstance(session.modes, dict) else None
    ids = [m["id"] for m in modes or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    if ids:
        return ids
    option = config_option(session, "mode")
    return [value for value, _ in select_values(option)] if option is not None else []


def resolve_mode(session: Any, wanted: str) -> str:
    """The mode id `wanted` names: the id itself, or (for ids that are URLs, as
    Copilot's are) the last segment after `#` or `/`, such as `plan`, when one mode
    alone ends so. An unknown name is an `OptionError` listing the valid ones."""
    ids = mode_ids(session)
    if wanted in ids:
        return wanted
    matches = [mode for mode in ids if _last_segment(mode) == wanted.lower()]
    if len(matches) == 1:
        return matches[0]
    if not ids:
        raise OptionError("the agent offers no modes for this session")
    raise OptionError("unknown mode %r: the agent's modes are %s" % (wanted, _listing(ids, short=True)))


def _last_segment(mode_id: str) -> str:
    return mode_id.replace("#", "/").rstrip("/").rsplit("/", 1)[-1].lower()


# ------------------------------------------------------------------ config options


def config_option(session: Any, config_id: str) -> Optional[Dict[str, Any]]:
    for option in session.config_options:
        if isinstance(option, dict) and option.get("id") == config_id:
            return option
    return None


def select_values(option: Dict[str, Any]) -> List[Tuple[str, str]]:
    """The (value, name) pairs of a `select` option, its groups flattened (a group is
    `{group, name, options}`)."""
    found: List[Tuple[str, str]] = []
    for entry in option.get("options") or []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("options"), list):  # a group
            found.extend(select_values(entry))
        elif isinstance(entry.get("value"), str):
            found.append((entry["value"], str(entry.get("name") or entry["value"])))
    return found


def resolve_config(session: Any, spec: str) -> Tuple[str, Union[str, bool]]:
    """`ID=VALUE` as (config id, value to send): a `select` option takes one of its
    values, a `boolean` one `true` or `false` (sent as a JSON boolean, with its type).
    An unknown id or value is an `OptionError` listing the valid ones."""
    config_id, sep, text = spec.partition("=")
    if not sep or not config_id:
        raise OptionError("--config %r: expected ID=VALUE" % spec)
    option = config_option(session, config_id)
    if option is None:
        ids = [str(o.get("id")) for o in session.config_options if isinstance(o, dict)]
        raise OptionError("unknown config option %r: the agent's options are %s" % (config_id, _listing(ids)))
    kind = option.get("type")
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise OptionError("config option %s is a boolean: true or false, not %r" % (config_id, text))
        return config_id, text.lower() == "true"
    if kind == "select":
        values = [value for value, _ in select_values(option)]
        if text not in values:
            raise OptionError("config option %s cannot be %r: its values are %s" % (config_id, text, _listing(values)))
        return config_id, text
    raise OptionError("config option %s is of a type this client does not know: %r" % (config_id, kind))


LISTED = 40  # an agent's valid names shown at most in one refusal


def _listing(values: Iterable[str], short: bool = False) -> str:
    names = list(values)
    shown = []
    for value in names[:LISTED]:
        segment = _last_segment(value)
        shown.append("%s (%s)" % (value, segment) if short and segment != value.lower() else value)
    more = " and %d more" % (len(names) - LISTED) if len(names) > LISTED else ""
    return ", ".join(shown) + more if shown else "(none)"


# ------------------------------------------------------------------ MCP servers


def parse_mcp_server(spec: str) -> Dict[str, Any]:
    """`NAME=URL` (HTTP), `NAME=sse:URL` or `NAME=stdio:COMMAND [ARGS]` as the MCP server
    object of `session/new` (ACP.md §3.2), with empty `headers` or `env`."""
    name, sep, target = spec.partition("=")
    if not sep or not name or not target:
        raise OptionError("--mcp-server %r: expected NAME=URL, NAME=sse:URL or NAME=stdio:COMMAND [ARGS]" % spec)
    if target.startswith("stdio:"):
        line = target[len("stdio:"):]
        if not line.strip():
            raise OptionError("--mcp-server %r: no command" % spec)
        try:
            argv = split_command(line)
        except ValueError as exc:
            raise OptionError("--mcp-server %r: %s" % (spec, exc)) from None
        return {"name": name, "command": argv[0], "args": argv[1:], "env": []}
    kind = "http"
    if target.startswith("sse:"):
        kind, target = "sse", target[len("sse:"):]
    if not target.startswith(("http://", "https://")):
        raise OptionError("--mcp-server %r: the URL must start with http:// or https://" % spec)
    return {"type": kind, "name": name, "url": target, "headers": []}


def check_mcp_servers(servers: List[Dict[str, Any]], agent_capabilities: Dict[str, Any],
                      agent_info: Dict[str, Any]) -> List[str]:
    """Refuse (`OptionError`) an HTTP or SSE server the agent does not advertise
    (`mcpCapabilities`); return warnings for kinds the agent is known to ignore
    (Copilot takes stdio servers in `session/new` and uses none of them, ACP.md §3.2)."""
    advertised = agent_capabilities.get("mcpCapabilities")
    mcp = advertised if isinstance(advertised, dict) else {}
    warnings = []
    for server in servers:
        kind = server.get("type", "stdio")
        if kind in ("http", "sse") and mcp.get(kind) is not True:
            raise OptionError("the agent does not take %s MCP servers (mcpCapabilities.%s): %s"
                              % (kind.upper(), kind, server["name"]))
        if kind == "stdio" and agent_info.get("name") == "Copilot":
            warnings.append("Copilot CLI ignores stdio MCP servers given by an ACP client (ACP.md §3.2): "
                            "%s will not be used; give it to Copilot's own configuration, or over HTTP"
                            % server["name"])
    return warnings


# ------------------------------------------------------------------ attachments

# What each kind of content block needs in `promptCapabilities` (ACP.md §3.3).
_NEEDS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


def check_blocks(blocks: Iterable[Any], prompt_capabilities: Dict[str, Any]) -> None:
    """Refuse (`OptionError`) a prompt with content the agent does not take: images,
    audio and embedded resources need their `promptCapabilities` (ACP.md §3.3); text
    and resource links every agent takes."""
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        need = _NEEDS.get(kind) if isinstance(kind, str) else None
        if need is not None and prompt_capabilities.get(need) is not True:
            raise OptionError("the agent does not take %s in a prompt (promptCapabilities.%s is not true)"
                              % (_WHAT[need], need))


_WHAT = {"image": "images", "audio": "audio", "embeddedContext": "embedded resources (files)"}


def attachment_kind(path: str, prompt_capabilities: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """The content block a file attached to a prompt becomes, and its MIME type: an
    image or audio clip by its MIME type, anything else an embedded resource. An
    `OptionError` names what the agent does not take ("images") when its
    `promptCapabilities` lack it (checked before the file is read)."""
    mime, _ = mimetypes.guess_type(path)
    major = (mime or "").split("/", 1)[0]
    kind = major if major in ("image", "audio") else "resource"
    try:
        check_blocks([{"type": kind}], prompt_capabilities)
    except OptionError as exc:
        raise OptionError("%s: %s" % (exc, path)) from None
    return kind, mime


def attachment_block(path: str, prompt_capabilities: Dict[str, Any], data: bytes) -> Dict[str, Any]:
    """The content block of an attached file holding `data` (`attachment_kind`): an
    image or audio clip, or an embedded resource with its text (or its bytes as a
    blob) and its `file://` URI."""
    kind, mime = attachment_kind(path, prompt_capabilities)
    if kind in ("image", "audio"):
        return {"type": kind, "mimeType": mime, "data": base64.b64encode(data).decode("ascii")}
    uri = file_uri(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"type": "resource", "resource": {"uri": uri, "mimeType": mime or "application/octet-stream",
                                                 "blob": base64.b64encode(data).decode("ascii")}}
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime or "text/plain", "text": text}}


def file_uri(path: str) -> str:
    from pathlib import Path

    return Path(os.path.abspath(path)).as_uri()
