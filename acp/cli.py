"""`python3 -m acp`: talk to an ACP agent from the terminal or a script.

    python3 -m acp [--agent CMD | --connect [HOST:]PORT] [--cwd DIR] [--yes | --no | --allow KIND]
                   [--mode ID] [--config ID=VALUE]... [--mcp-server SPEC]... [--attach FILE]...
                   [--add-dir DIR]... [--login [METHOD]] [--json] [--resume SESSION_ID [--quiet]]
                   [PROMPT...]
    python3 -m acp [--agent CMD | --connect [HOST:]PORT] [--cwd DIR] --list-sessions
    python3 -m acp [...] --delete-session SESSION_ID | --logout | --login [METHOD]

The agent is a child on stdio (`--agent`, default `copilot --acp --stdio`) or an agent
already listening on TCP (`--connect`, e.g. `copilot --acp --port 3000`), which keeps
running when we leave. With a prompt: one turn, the answer streamed to stdout, tool
calls one line each (with the diff of an edit), permission questions on stderr
answered from stdin (or by `--yes`/`--no`). Without: a chat that keeps the session;
lines starting with `/` are sent as prompts (the agent's slash commands, ACP.md §3.6),
`/commands` lists the advertised ones, `/quit` leaves. `--resume` continues an earlier
session (`session/load`, ACP.md §3.5), `--list-sessions` lists them.

Exit status (`EXIT_STATUS_HELP`, ACP.md §9): 0 for a turn that ended (`end_turn`); 1
for an `Error:` answer (ACP.md §6), a failed start, an agent that does not speak ACP, a
refused or lost connection, a dead agent or a line over the limit; 2 for bad usage;
3, 4 and 5 for the stop reasons refusal, max_tokens and max_turn_requests; 130 for a
cancelled turn (Ctrl-C: the first cancels the turn, a second quits).

Terminal commands the agent asks to run (`terminal/create`), and a login command it
names (ACP.md §11), need consent: `--yes` or `--allow once|always`, or a person's answer
on the terminal; otherwise they are refused. The session's options (`--mode`,
`--config`, `--mcp-server`, `--attach`, `--add-dir`) are checked against what the agent
offers before any prompt (ACP.md §9).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import List, Optional

from . import __version__
from .cli_app import ALLOW_CHOICES, App
from .console import write_stderr
from .endpoints import parse_address, split_command
from .errors import AgentStartError
from .exit_status import EXIT_INTERRUPTED, EXIT_STATUS_HELP, EXIT_USAGE
from .fs import absolute_anywhere
from .options import OptionError, parse_mcp_server


def program_name(argv0: Optional[str] = None) -> str:
    """`acp-client` when started through the console script (setup.cfg), `python3 -m
    acp` otherwise (`-m`, an interpreter, or a test runner calling `main()`)."""
    base = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    if base.endswith(".py") or base.startswith("python") or base in ("", "-c", "-m", "pytest", "py.test"):
        return "python3 -m acp"
    return base[:-4] if base.lower().endswith(".exe") else base


def build_parser() -> argparse.ArgumentParser:
    prog = program_name()
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_STATUS_HELP,
        description="Drive an Agent Client Protocol agent (default: `copilot --acp --stdio`).")
    parser.add_argument("--version", action="version", version="%s %s" % (prog, __version__))
    parser.add_argument("--agent", metavar="CMD",
                        help="agent command line (default: $ACP_AGENT, else 'copilot --acp --stdio')")
    parser.add_argument("--connect", metavar="[HOST:]PORT",
                        help="connect to an agent listening on TCP (`copilot --acp --port PORT`; "
                             "HOST defaults to 127.0.0.1) instead of starting one")
    parser.add_argument("--folder", "--cwd", dest="cwd", metavar="FOLDER",
                        help="the session's folder (default: the current one); with --connect, "
                             "a folder of the agent's machine is sent as given")
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--yes", "-y", action="store_true",
                        help="allow every permission request once, and the agent's terminal commands")
    answer.add_argument("--no", "-n", action="store_true",
                        help="reject every permission request and terminal command")
    answer.add_argument("--allow", choices=sorted(ALLOW_CHOICES), metavar="once|always|reject",
                        help="answer every permission request by the option's kind: allow once, "
                             "allow always, or reject (once/always also allow terminal commands)")
    parser.add_argument("--mode", metavar="ID",
                        help="the session's mode: one of the agent's mode ids (for ids that are URLs, "
                             "as Copilot's, also their last part: agent, plan, autopilot)")
    parser.add_argument("--config", action="append", default=[], metavar="ID=VALUE",
                        help="set one of the session's config options (repeatable; true or false for a "
                             "boolean one), e.g. allow_all=on")
    parser.add_argument("--mcp-server", action="append", default=[], metavar="SPEC",
                        help="an MCP server for the session (repeatable): NAME=URL (HTTP), NAME=sse:URL, "
                             "or NAME=stdio:COMMAND [ARGS]")
    parser.add_argument("--attach", action="append", default=[], metavar="FILE",
                        help="attach a file to the prompt (repeatable; in a chat, to the first one): an "
                             "image, or any file as an embedded resource, where the agent takes them")
    login = parser.add_mutually_exclusive_group()
    login.add_argument("--login", nargs="?", const="", metavar="METHOD",
                       help="log in first, with the agent's METHOD or its first one (a command it names "
                            "runs only with --yes or your answer); without a prompt, then exit")
    login.add_argument("--logout", action="store_true", help="log out (where the agent offers it) and exit")
    parser.add_argument("--add-dir", action="append", default=[], metavar="FOLDER",
                        help="another folder for the session (repeatable; where the agent offers "
                             "additionalDirectories): the agent's files and commands may reach it too")
    parser.add_argument("--json", action="store_true",
                        help="print every session update as one JSON line (and the result, "
                             "with sessionId and stopReason, last)")
    sessions = parser.add_mutually_exclusive_group()
    sessions.add_argument("--list-sessions", action="store_true",
                          help="list the agent's sessions (those of --cwd when given) and exit")
    sessions.add_argument("--resume", metavar="SESSION_ID",
                          help="continue an earlier session (session/load: its history is shown briefly; "
                               "session/resume where the agent offers only that)")
    sessions.add_argument("--delete-session", metavar="SESSION_ID",
                          help="delete a stored session (where the agent offers session/delete) and exit")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="with --resume: do not show the replayed history")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long to wait for answers other than prompts (default 120)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log protocol and agent stderr")
    parser.add_argument("prompt", nargs="*", help="the prompt (omit for a chat)")
    return parser


def usage_problem(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the command line, checked before anything starts; None if
    nothing. An agent command line is split here, so a stray quote is a usage error
    and not a traceback, and an empty one is refused instead of meaning the default."""
    if args.agent is not None and args.connect is not None:
        return "--agent and --connect exclude each other (a child on stdio, or an agent on TCP)"
    if args.connect is not None:
        try:
            parse_address(args.connect)
        except ValueError as exc:
            return "--connect %s" % exc
    else:
        named = "--agent" if args.agent is not None else "ACP_AGENT"
        command = args.agent if args.agent is not None else os.environ.get("ACP_AGENT")
        if command is not None:
            try:
                split_command(command)
            except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
                return "%s %r: %s" % (named, command, exc)
            except AgentStartError:
                if args.agent is not None or command.strip():
                    return "%s is empty: give the agent's command line" % named
    for option, folder in [("--folder", args.cwd)] + [("--add-dir", folder) for folder in args.add_dir]:
        problem = folder_problem(option, folder, args.connect is not None)
        if problem is not None:
            return problem
    for option, given in (("--list-sessions", args.list_sessions), ("--delete-session", args.delete_session),
                          ("--logout", args.logout)):
        if given and args.prompt:
            return "%s takes no prompt" % option
    for spec in args.mcp_server:
        try:
            parse_mcp_server(spec)
        except OptionError as exc:
            return str(exc)
    for path in args.attach:
        if not os.path.isfile(path):
            return "--attach %s is not a file" % path
    if args.quiet and not args.resume:
        return "--quiet goes with --resume"
    return None


def folder_problem(option: str, folder: Optional[str], over_tcp: bool) -> Optional[str]:
    """A folder given on the command line that cannot be the session's. An agent over
    TCP may run on another machine or OS: its folder is sent as given (ACP.md §8), so
    long as it can be absolute somewhere."""
    if not folder or os.path.isdir(folder):
        return None
    if not over_tcp:
        return "%s %s is not a folder" % (option, folder)
    if not absolute_anywhere(folder):
        return ("%s %s is not a folder here; for an agent on another machine, give its folder as an "
                "absolute path there" % (option, folder))
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # The agent's text may hold characters stdout's encoding lacks (on Windows a pipe
    # or file gets the ANSI code page): escaped, as Python's stderr does, not a crash.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.ERROR,
                        format="%(name)s: %(message)s", stream=sys.stderr)
    problem = usage_problem(args)
    if problem is not None:
        write_stderr("%s: error: %s\n" % (parser.prog, problem))  # one line, exit status 2
        return EXIT_USAGE

    async def run() -> int:
        return await App(args).run()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:  # where signal handlers are unavailable
        return EXIT_INTERRUPTED
