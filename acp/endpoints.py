"""How to reach an agent: the command line that starts one on stdio, or the address of
one listening on TCP (ACP.md §8), checked and normalised before anything is started.

Pure functions, shared by the connection and the command line (which turns their
ValueError into a one-line usage error).
"""
from __future__ import annotations

import os
import shlex
import socket
from typing import Any, List, Sequence, Tuple, Union

from .errors import AgentStartError

DEFAULT_AGENT = "copilot --acp --stdio"
DEFAULT_HOST = "127.0.0.1"  # where `copilot --acp --port P` listens (loopback only, ACP.md §8)

Argv = Union[str, Sequence[str]]
Address = Tuple[str, int]


def split_command(command: Argv, windows: bool = os.name == "nt") -> List[str]:
    """A command line as argv: split like a POSIX shell would (no expansion), or on
    Windows as Windows programs split their own (`windows_argv`), so that
    `"C:\\Program Files\\copilot.exe" --acp` names the program without its quotes."""
    if isinstance(command, str):
        argv = windows_argv(command) if windows else shlex.split(command)
    else:
        argv = [str(part) for part in command]
    if not argv or not argv[0]:
        raise AgentStartError("empty agent command")
    return argv


def windows_argv(command: str) -> List[str]:
    """A Windows command line as the C runtime splits it into argv (the rules of
    Microsoft's "Parsing C command-line arguments"; `subprocess.list2cmdline` is their
    inverse): words are separated by spaces and tabs; double quotes group a word and are
    removed; 2n backslashes before a quote are n backslashes and the quote groups, 2n+1
    are n backslashes and a literal quote; other backslashes are literal. A quote left
    open is refused (ValueError "No closing quotation", as a POSIX line's is): the C
    runtime would run it to the end of the line, which is seldom what was meant."""
    argv: List[str] = []
    word: List[str] = []
    in_word = quoted = False
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c == "\\":
            j = i
            while j < n and command[j] == "\\":
                j += 1
            count = j - i
            if j < n and command[j] == '"':
                word.append("\\" * (count // 2))
                if count % 2:
                    word.append('"')
                    i = j + 1
                else:
                    i = j  # the quote groups, below
            else:
                word.append("\\" * count)
                i = j
            in_word = True
            continue
        if c == '"':
            quoted = not quoted
            in_word = True
        elif c in " \t" and not quoted:
            if in_word:
                argv.append("".join(word))
                word, in_word = [], False
        else:
            word.append(c)
            in_word = True
        i += 1
    if quoted:
        raise ValueError("No closing quotation")
    if in_word:
        argv.append("".join(word))
    return argv


def join_command(argv: Sequence[str], windows: bool = os.name == "nt") -> str:
    """argv as one command line, the inverse of `split_command`: quoted as a POSIX shell
    reads it, or on Windows as Windows programs split theirs (`subprocess.list2cmdline`),
    so that a person is shown what will run, as it would be typed there."""
    if windows:
        import subprocess  # (only for this: the agent's process is started elsewhere)

        return subprocess.list2cmdline(list(argv))
    return " ".join(shlex.quote(arg) for arg in argv)


def parse_address(text: Union[str, int, Sequence[Any]]) -> Address:
    """`[HOST:]PORT` (or `[V6ADDR]:PORT`, a port number, a `(host, port)` pair) as a
    `(host, port)` pair; the host defaults to 127.0.0.1, where the agent listens.
    Raises ValueError with a message fit for a user."""
    if isinstance(text, int):
        host, port_text = DEFAULT_HOST, str(text)
    elif not isinstance(text, str):
        host, port = tuple(text)
        return parse_address("%s:%s" % (host if ":" not in str(host) else "[%s]" % host, port))
    elif text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ValueError("%r: expected [ADDRESS]:PORT" % text)
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
    else:
        host, port_text = DEFAULT_HOST, text
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError("%r: the port must be a number from 1 to 65535" % text)
    return host or DEFAULT_HOST, int(port_text)


def keep_alive(sock: Any) -> None:
    """TCP keep-alive probes, so a peer that vanished without a FIN (a half-open
    socket) ends the connection within about a minute instead of never."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except (OSError, AttributeError):
        pass
