"""Logging in to an agent (ACP's authentication, ACP.md §11): the methods it offers in
`authMethods`, what each one means, and running a login command in the person's own
terminal, which happens only with their consent.

Two kinds of method exist. The agent's own (`type` absent or `"agent"`): the client
sends `authenticate {methodId}` and the agent does the rest. A terminal method: the
client runs a login program in the terminal and then starts the agent afresh. ACP's
stable form (`type: "terminal"`, with `args` and `env`) runs the agent's own program
with those arguments added, so it is offered only where the client started the agent;
Copilot's form (`_meta["terminal-auth"]: {command, args, label}`) names the program
itself (`copilot login`). Either way the command comes from the agent, so nothing runs
before the person has seen it, whole, and agreed.
"""
from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .endpoints import join_command
from .errors import LoginFailed
from .process_tree import ProcessTree

AUTH_REQUIRED = -32000  # ACP's "Authentication required" (its error codes)


class LoginCommand:
    """What a terminal method runs: `argv`, and the variables it sets (`env`, only
    those: the rest is this process's environment)."""

    __slots__ = ("argv", "env", "label")

    def __init__(self, argv: List[str], env: Dict[str, str], label: Optional[str] = None) -> None:
        self.argv = argv
        self.env = env
        self.label = label

    @property
    def command_line(self) -> str:
        return join_command(self.argv)


class LoginMethod:
    """One of the agent's `authMethods`: `id`, `name`, `description`, and `command`
    when it is a terminal method this client can run (None for the agent's own)."""

    __slots__ = ("id", "name", "description", "command", "terminal", "raw")

    def __init__(self, raw: Dict[str, Any], command: Optional[LoginCommand], terminal: bool) -> None:
        self.raw = raw
        self.id: str = raw["id"]
        self.name = str(raw.get("name") or raw["id"])
        description = raw.get("description")
        self.description = description if isinstance(description, str) else None
        self.command = command
        self.terminal = terminal  # a terminal method (runnable here or not)

    @property
    def runnable(self) -> bool:
        """The agent's own method, or a terminal method whose command is known here."""
        return not self.terminal or self.command is not None

    def __repr__(self) -> str:
        return "LoginMethod(%r, terminal=%r)" % (self.id, self.terminal)


def login_methods(auth_methods: Sequence[Any], agent_argv: Optional[Sequence[str]]) -> List[LoginMethod]:
    """The agent's `authMethods` as `LoginMethod`s (malformed entries left out).
    `agent_argv` is the agent's own command line when this client started it (a
    stable terminal method runs that program), None when it is reached over TCP."""
    found = []
    for raw in auth_methods:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            continue
        meta = raw.get("_meta")
        copilot = meta.get("terminal-auth") if isinstance(meta, dict) else None
        if raw.get("type") == "terminal":
            command = None
            if agent_argv:
                command = LoginCommand(list(agent_argv) + _strings(raw.get("args")), _variables(raw.get("env")))
            found.append(LoginMethod(raw, command, terminal=True))
        elif isinstance(copilot, dict) and isinstance(copilot.get("command"), str) and copilot["command"]:
            label = copilot.get("label")
            found.append(LoginMethod(raw, LoginCommand([copilot["command"]] + _strings(copilot.get("args")),
                                                       _variables(copilot.get("env")),
                                                       label if isinstance(label, str) else None), terminal=True))
        elif raw.get("type") in (None, "agent"):
            found.append(LoginMethod(raw, None, terminal=False))
    return found


def _strings(value: Any) -> List[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _variables(value: Any) -> Dict[str, str]:
    """`env` as `{name: value}` (ACP v1's form) or `[{name, value}]`; names that could
    not be set (empty, or holding `=`) and values that are not strings are left out."""
    pairs: List[Any] = list(value.items()) if isinstance(value, dict) else [
        (item.get("name"), item.get("value")) for item in value if isinstance(item, dict)] \
        if isinstance(value, list) else []
    return {name: text for name, text in pairs
            if isinstance(name, str) and name and "=" not in name and "\x00" not in name
            and isinstance(text, str) and "\x00" not in text}


def is_auth_required(exc: BaseException) -> bool:
    """The agent refused a request until someone logs in (`-32000`)."""
    return getattr(exc, "code", None) == AUTH_REQUIRED


#: The host's decision: may this method be used (a terminal method: its command run)?
LoginConsent = Callable[[LoginMethod], Union[bool, Awaitable[bool]]]


async def run_login(command: LoginCommand, cwd: Optional[str] = None,
                    base_env: Optional[Mapping[str, str]] = None) -> int:
    """Run a login command in this process's terminal (stdin and stderr inherited, in
    the terminal's foreground so it gets the keys it reads; its stdout goes to our
    stderr, as stdout may carry a host's own data, `--json` lines say) and wait for
    it: its exit status (0: logged in). Its environment is the agent's (`base_env`,
    else ours) with the method's variables. Cancelled, it is ended."""
    env = dict(os.environ if base_env is None else base_env)
    env.update(command.env)
    try:
        stdout: Optional[int] = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no stderr to write to (pythonw): inherited
        stdout = None
    try:
        process = await asyncio.create_subprocess_exec(*command.argv, cwd=cwd, env=env, stdout=stdout)
    except (OSError, ValueError) as exc:
        raise LoginFailed("could not run %s: %s" % (command.command_line,
                                                    getattr(exc, "strerror", None) or exc)) from None
    tree = ProcessTree(process, False)
    try:
        return await process.wait()
    finally:
        if process.returncode is None:  # cancelled (Ctrl-C): nothing of it stays behind
            tree.kill()
            await process.wait()
