"""`python3 -m acp`: talk to an ACP agent from the terminal or a script.

    python3 -m acp [--agent CMD | --connect [HOST:]PORT] [--cwd DIR] [--yes | --no | --allow KIND]
                   [--json] [--resume SESSION_ID [--quiet]] [PROMPT...]
    python3 -m acp [--agent CMD | --connect [HOST:]PORT] [--cwd DIR] --list-sessions

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

Terminal commands the agent asks to run (`terminal/create`) need consent: `--yes` or
`--allow once|always`, or a person's answer on the terminal; otherwise they are refused.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

from . import __version__, render
from .client import Client, default_agent
from .endpoints import parse_address, split_command
from .askers import TerminalAsker, TerminalConsentAsker
from .console import Console, ReadlineConsole, write_stderr
from .fs import absolute_anywhere, session_folder
from .errors import (AcpError, AgentExited, AgentNotAcp, AgentStartError, NotAdvertised, ProtocolVersionError,
                     RequestTimeout)
from ._core import jsonrpc, safe_text
from .session import FINAL_TOOL_STATUSES, Session, Turn, text_of

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: How a turn ended, as the exit status (ACP.md §9): 0 only when the agent ended it on
#: its own (`end_turn`); each other stop reason has a code of its own, so that a script
#: can tell them from success and from one another. A cancelled turn is 130, as after
#: Ctrl-C; an `Error:` answer (ACP.md §6) is 1 whatever the stop reason.
EXIT_REFUSAL, EXIT_MAX_TOKENS, EXIT_MAX_TURN_REQUESTS = 3, 4, 5
STOP_REASONS = {  # stop reason: (exit status, what is said on stderr)
    "end_turn": (EXIT_OK, ""),
    "refusal": (EXIT_REFUSAL, "the agent refused to continue"),
    "max_tokens": (EXIT_MAX_TOKENS, "the model reached its token limit"),
    "max_turn_requests": (EXIT_MAX_TURN_REQUESTS, "the turn reached its limit of model requests"),
    "cancelled": (EXIT_INTERRUPTED, "turn cancelled"),
}
EXIT_STATUS_HELP = """exit status:
  0    the turn ended (stop reason end_turn), or nothing to do
  1    an error: an `Error:` answer, a failed start, a lost connection, a dead agent,
       an unknown stop reason, a protocol version other than 1
  2    a usage error (a bad option, or one the agent does not offer)
  %d    the agent refused to continue (stop reason refusal)
  %d    the model reached its token limit (stop reason max_tokens)
  %d    the turn reached its limit of model requests (stop reason max_turn_requests)
  130  cancelled (Ctrl-C, or stop reason cancelled)""" % (EXIT_REFUSAL, EXIT_MAX_TOKENS, EXIT_MAX_TURN_REQUESTS)
# An agent on TCP (ACP.md §8) is already running, so it answers `initialize` at once;
# waiting the full --timeout for a listener that accepted but never speaks (a half-open
# socket, or not an ACP agent) would only hide the problem.
TCP_INITIALIZE_TIMEOUT = 10.0
LOCAL_COMMANDS = ("/commands", "/quit", "/exit")  # handled by the chat, never sent
# `--allow WORD`: the permission policy it names (chosen by option kind, ACP.md §5).
ALLOW_CHOICES = {"once": "allow", "y": "allow", "yes": "allow", "always": "always",
                 "reject": "reject", "n": "reject", "no": "reject"}
# `/commands` typed before the agent's first list came waits this long for it.
COMMANDS_WAIT = 2.0


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
    parser.add_argument("--json", action="store_true",
                        help="print every session update as one JSON line (and the result, "
                             "with sessionId and stopReason, last)")
    sessions = parser.add_mutually_exclusive_group()
    sessions.add_argument("--list-sessions", action="store_true",
                          help="list the agent's sessions (those of --cwd when given) and exit")
    sessions.add_argument("--resume", metavar="SESSION_ID",
                          help="continue an earlier session (its history is shown briefly)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="with --resume: do not show the replayed history")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long to wait for answers other than prompts (default 120)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log protocol and agent stderr")
    parser.add_argument("prompt", nargs="*", help="the prompt (omit for a chat)")
    return parser


class Output:
    """Streams one session's updates as text: message text to stdout, `Error:` text to
    stderr, each tool call once as a line when it reaches a final status."""

    def __init__(self, session: Session, out: Any = None, err: Any = None) -> None:
        self.session = session
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.at_line_start = True
        self.printed: Set[str] = set()
        self.in_error = False

    def _write(self, stream: Any, text: str) -> None:
        if not text:
            return
        if stream is self.err and not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True
        stream.write(safe_text(text))  # the agent's text never drives the terminal
        stream.flush()
        if stream is self.out:
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """A whole line on stdout, starting on a fresh line."""
        if not self.at_line_start:
            self._write(self.out, "\n")
        self._write(self.out, text if text.endswith("\n") else text + "\n")

    def newline(self) -> None:
        if not self.at_line_start:
            self._write(self.out, "\n")

    def start_turn(self) -> None:
        self.in_error = False

    def show(self, update: Dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            text = text_of(update)
            if not self.in_error and text.lstrip().startswith("Error:"):
                self.in_error = True  # ACP.md §6: the error is message text
            self._write(self.err if self.in_error else self.out, text)
        elif kind in ("tool_call", "tool_call_update"):
            call_id = update.get("toolCallId")
            call = self.session.tool_calls.get(call_id) if isinstance(call_id, str) else None
            if call is not None and call.get("status") in FINAL_TOOL_STATUSES and call_id not in self.printed:
                self.printed.add(call_id)  # type: ignore[arg-type]
                self.line(render.tool_call_block(call).rstrip("\n"))
        elif kind == "plan":
            entries = update.get("entries") or []
            marks = {"completed": "x", "in_progress": ">", "pending": " "}
            self.line("[plan] " + "  ".join("[%s] %s" % (marks.get(str(e.get("status")), " "), e.get("content", ""))
                                            for e in entries if isinstance(e, dict)))

    def end_turn(self, turn: Turn) -> None:
        for call_id in turn.tool_call_ids:  # a call left without a final status still gets its line
            call = self.session.tool_calls.get(call_id)
            if call is not None and call_id not in self.printed:
                self.printed.add(call_id)
                self.line(render.tool_call_block(call, with_diff=False).rstrip("\n"))
        self.newline()
        if self.in_error:
            self.err.write("\n")
            self.err.flush()


class App:
    """One run of the command line: a client, one session, turns, Ctrl-C handling."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cwd = session_folder(args.cwd or os.getcwd())  # as given when not here (--connect, ACP.md §8)
        self.session: Optional[Session] = None
        # A chat on a terminal reads through readline (Tab completes slash commands);
        # everything else, permission answers included, through the same one console.
        chat = not args.prompt and not args.list_sessions
        self.console: Any = (ReadlineConsole.for_terminal(self.command_names) if chat else None) \
            or Console.for_stdin()
        self.current: Optional[Turn] = None
        self.interrupts = 0
        self.main_task: Optional["asyncio.Task[int]"] = None
        self.cancelling: Optional["asyncio.Task[None]"] = None  # the turn.cancel() Ctrl-C started
        allow = ALLOW_CHOICES.get(args.allow or "") or ("allow" if args.yes else "reject" if args.no else None)
        questions = self.console.questions  # one question and its answer at a time
        policy: Any = allow if allow is not None else TerminalAsker(self.console.readline, self._ask_write,
                                                                    questions=questions)
        # Terminals (ACP.md §5) run only with consent: an allowing flag, or a person
        # asked on the terminal; with nobody to ask they are refused.
        terminal: Any
        if allow is not None:
            terminal = "reject" if allow == "reject" else "allow"
        elif self.console.isatty():
            terminal = TerminalConsentAsker(self.console.readline, self._ask_write, questions=questions)
        else:
            terminal = "reject"
        self.client = Client(args.agent or default_agent(), connect=args.connect, cwd=self.cwd,
                             permission=policy, terminal=terminal, request_timeout=args.timeout)
        self.output: Optional[Output] = None
        self.replaying = False  # a session/load is replaying history (ACP.md §3.5)

    def command_names(self) -> List[str]:
        """What Tab completes: the latest advertised commands (ACP.md §3.6), then ours."""
        advertised = self.session.commands if self.session is not None else []
        return ["/" + str(c["name"]) for c in advertised
                if isinstance(c, dict) and isinstance(c.get("name"), str)] + list(LOCAL_COMMANDS)

    def _ask_write(self, text: str) -> None:
        if self.output is not None:
            self.output.newline()
        write_stderr(safe_text(text))  # the agent's question never drives the terminal

    # ------------------------------------------------------------------ signals

    def on_sigint(self) -> None:
        turn = self.current
        if turn is not None and not turn.done and self.interrupts == 0:
            self.interrupts = 1
            write_stderr("\n^C: cancelling the turn (press Ctrl-C again to quit)\n")
            self.cancelling = asyncio.ensure_future(turn.cancel())  # awaited in run()
            return
        write_stderr("\n^C: quitting\n")
        if self.main_task is not None:
            self.main_task.cancel()

    def install_signals(self) -> None:
        try:
            asyncio.get_event_loop().add_signal_handler(signal.SIGINT, self.on_sigint)
        except (NotImplementedError, RuntimeError, AttributeError):  # Windows: KeyboardInterrupt
            pass

    # ------------------------------------------------------------------ running

    async def run(self) -> int:
        self.main_task = asyncio.current_task()
        self.install_signals()
        try:
            return await self._run()
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED
        finally:
            if self.cancelling is not None:  # bounded: an agent that stopped reading
                done, _ = await asyncio.wait([self.cancelling], timeout=3.0)
                if not done:
                    self.cancelling.cancel()
            conn = self.client.connection
            # A program that is not an ACP agent will not leave on stdin EOF either.
            grace = 0.5 if conn is not None and isinstance(conn.closed, AgentNotAcp) else 3.0
            try:
                await asyncio.shield(self.client.close(grace=grace))
            except asyncio.CancelledError:
                pass

    async def _run(self) -> int:
        try:
            await self.client.start()
        except AgentStartError as exc:
            if self.args.connect:
                return fail("%s (is `copilot --acp --port PORT` running?)" % exc)
            if self.args.agent is None and not os.environ.get("ACP_AGENT"):  # the default: Copilot CLI
                return fail("%s\nCopilot CLI is not installed here (or not on PATH). Install it with "
                            "`npm install -g @github/copilot`, run `copilot` once to log "
                            "in, then try again; or choose another agent with --agent or ACP_AGENT" % exc)
            return fail("%s (choose one with --agent or ACP_AGENT)" % exc)
        if self.args.json:
            self.client.add_update_listener(self._print_json)
        over_tcp = self.client.address is not None
        timeout = min(self.args.timeout, TCP_INITIALIZE_TIMEOUT) if over_tcp else self.args.timeout
        try:
            info = await self.client.initialize(timeout=timeout)
        except AgentNotAcp as exc:
            return fail("%s (check --agent)" % exc if not over_tcp else str(exc))
        except RequestTimeout as exc:
            if over_tcp:
                return fail("%s accepted the connection but did not answer initialize within %g s"
                            % (self.client.conn.where, timeout))
            return fail("the agent failed to start: %s" % exc)
        except AgentExited as exc:
            return fail(str(exc) if over_tcp else "the agent failed to start: %s" % exc)
        except ProtocolVersionError as exc:
            return fail(str(exc))  # before session/new: nothing more is asked of it
        except (jsonrpc.JsonRpcError, AcpError) as exc:
            return fail("the agent failed to start: %s" % render.error_text(exc))
        if self.args.list_sessions:
            return await self.list_sessions()
        try:
            if self.args.resume:
                session = await self.resume(self.args.resume)
            else:
                session = await self.client.new_session(self.cwd)
        except (AgentExited, RequestTimeout) as exc:
            return fail(str(exc))
        except NotAdvertised as exc:
            return fail(str(exc), EXIT_USAGE)
        except jsonrpc.JsonRpcError as exc:
            what = "resume session %s" % self.args.resume if self.args.resume else "start a session"
            return fail("could not %s: %s" % (what, render.error_text(exc)))
        except AcpError as exc:
            return fail(str(exc))
        self.session = session
        self.output = Output(session)
        if self.args.prompt:
            return await self.turn(session, " ".join(self.args.prompt))
        return await self.chat(session, info)

    # ------------------------------------------------------------------ sessions

    async def list_sessions(self) -> int:
        """One line per session: id, last update, title (`session/list`, ACP.md §3.5)."""
        try:
            sessions = await self.client.list_sessions(cwd=self.cwd if self.args.cwd else None)
        except NotAdvertised as exc:
            return fail(str(exc), EXIT_USAGE)
        except jsonrpc.JsonRpcError as exc:
            return fail("the agent could not list its sessions: %s" % render.error_text(exc))
        except (AgentExited, RequestTimeout, AcpError) as exc:
            return fail(str(exc))
        for entry in sessions:
            if not isinstance(entry, dict):
                continue
            if self.args.json:
                print(json.dumps(entry, ensure_ascii=False), flush=True)
            else:
                print(safe_text("%s  %s  %s" % (entry.get("sessionId"), entry.get("updatedAt") or "-",
                                                render.preview(str(entry.get("title") or "(untitled)")))),
                      flush=True)
        return EXIT_OK

    async def resume(self, session_id: str) -> Session:
        """`session/load`: the agent replays the history before it answers (ACP.md §3.5);
        it is shown briefly unless --quiet. Without --cwd the session's own folder is
        used, as `session/list` reports it."""
        cwd = self.cwd
        # Over TCP the folder is the agent's, maybe on another machine (ACP.md §8).
        elsewhere = self.client.address is not None
        if not self.args.cwd and self.client.can_list_sessions:
            try:
                for entry in await self.client.list_sessions():
                    if isinstance(entry, dict) and entry.get("sessionId") == session_id \
                            and isinstance(entry.get("cwd"), str) and (elsewhere or os.path.isdir(entry["cwd"])):
                        cwd = entry["cwd"]
            except jsonrpc.JsonRpcError:
                pass  # no session/list: the current folder it is
        replayed: List[Dict[str, Any]] = []
        remove = self.client.add_update_listener(
            lambda sid, update: replayed.append(update) if sid == session_id else None)
        self.replaying = True
        try:
            session = await self.client.load_session(session_id, cwd)
        finally:
            self.replaying = False
            remove()
        self.cwd = cwd
        if not self.args.quiet and not self.args.json:
            lines = render.history_lines(replayed)
            print("(resuming session %s: %d earlier %s)"
                  % (session_id, len(lines), "entry" if len(lines) == 1 else "entries"), flush=True)
            for line in lines:
                print("  " + safe_text(line), flush=True)
            if lines:
                print("  ---", flush=True)
        return session

    async def chat(self, session: Session, info: Dict[str, Any]) -> int:
        tty = self.console.isatty()
        if tty:
            agent = info.get("agentInfo") or {}
            names = (agent.get("title") or agent.get("name") or "the agent", agent.get("version") or "",
                     session.session_id)  # the agent's choice: each escaped, one line
            write_stderr("Connected to %s %s (session %s). Type a prompt; /commands lists the "
                         "agent's commands, /quit leaves.\n"
                         % tuple(safe_text(name, multiline=False) for name in names))
        status = EXIT_OK
        while True:
            line = await self.console.readline("> " if tty else "")
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text == "/commands":
                await session.wait_commands(COMMANDS_WAIT)
                self.show_commands(session)
                continue
            status = await self.turn(session, text)
            if self.client.connection is not None and self.client.connection.closed is not None:
                return EXIT_ERROR
        return status

    async def turn(self, session: Session, text: str) -> int:
        assert self.output is not None
        output = self.output
        self.interrupts = 0
        turn = session.prompt(text)
        self.current = turn
        output.start_turn()
        try:
            async for update in turn:
                if not self.args.json:
                    output.show(update)
            result = await turn
        except AgentExited as exc:
            output.newline()
            return fail(str(exc))
        except (jsonrpc.JsonRpcError, RequestTimeout, AcpError) as exc:
            output.newline()
            return fail("the prompt failed: %s" % render.error_text(exc))
        finally:
            self.current = None
        status, note = turn_status(result.stop_reason, result.error)
        if self.args.json:
            # The last line carries what a script needs: sessionId, stopReason, exitCode.
            print(json.dumps({"sessionId": session.session_id,
                              "result": {"sessionId": session.session_id,
                                         "stopReason": result.stop_reason, "usage": result.usage,
                                         "error": result.error, "exitCode": status}},
                             ensure_ascii=False), flush=True)
            if result.error is not None:
                write_stderr(safe_text(result.error) + "\n")  # the agent's text (ACP.md §6): escaped
        else:
            output.end_turn(turn)
        if note:
            write_stderr("(%s)\n" % note)
        return status

    def show_commands(self, session: Session) -> None:
        """`/commands`: the latest `available_commands_update` (a full replacement list,
        ACP.md §3.6), one per line with its input hint; they run without the model."""
        assert self.output is not None
        commands = [c for c in session.commands if isinstance(c, dict) and isinstance(c.get("name"), str)]
        if not commands:
            self.output.line("(the agent has advertised no slash commands)")
            return
        for command in commands:
            given = command.get("input")
            hint: Dict[str, Any] = given if isinstance(given, dict) else {}
            usage = "/" + command["name"] + (" <%s>" % hint["hint"] if isinstance(hint.get("hint"), str) else "")
            self.output.line("  %-24s %s" % (usage, render.preview(str(command.get("description") or ""))))

    def _print_json(self, session_id: str, update: Dict[str, Any]) -> None:
        if self.replaying and self.args.quiet:
            return
        record: Dict[str, Any] = {"sessionId": session_id, "update": update}
        if self.replaying:
            record["replayed"] = True
        print(json.dumps(record, ensure_ascii=False), flush=True)


def turn_status(stop_reason: Optional[str], error: Optional[str]) -> Tuple[int, str]:
    """The exit status of a turn and the note said on stderr (ACP.md §9): an `Error:`
    answer is 1 whatever the stop reason (ACP.md §6: errors come as `end_turn`); a
    stop reason the agent should not send is 1 too, never taken for success."""
    if error is not None:
        return EXIT_ERROR, ""
    known = STOP_REASONS.get(stop_reason or "")
    if known is None:
        return EXIT_ERROR, "the agent ended the turn with an unknown stop reason: %s" % safe_text(
            repr(stop_reason), multiline=False)
    return known


def fail(message: str, status: int = EXIT_ERROR) -> int:
    write_stderr("Error: %s\n" % safe_text(message))  # may quote the agent: never drives the terminal
    return status


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
    if args.cwd and not os.path.isdir(args.cwd):
        # An agent over TCP may run on another machine or OS: its folder is sent as
        # given (ACP.md §8), as long as it can be absolute somewhere.
        if args.connect is None:
            return "--folder %s is not a folder" % args.cwd
        if not absolute_anywhere(args.cwd):
            return ("--folder %s is not a folder here; for an agent on another machine, give its "
                    "folder as an absolute path there" % args.cwd)
    if args.list_sessions and args.prompt:
        return "--list-sessions takes no prompt"
    if args.quiet and not args.resume:
        return "--quiet goes with --resume"
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
