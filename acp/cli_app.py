"""One run of `python3 -m acp` (`App`): the client, the session, the turns and the chat,
and Ctrl-C. `cli.py` parses the command line and hands the options here."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from typing import Any, Dict, List, Optional

from . import render
from .askers import ElicitationAsker, LoginAsker, TerminalAsker, TerminalConsentAsker
from .auth import LoginMethod, is_auth_required
from .cli_output import Output, fail, failure
from .client import Client, default_agent
from .console import Console, ReadlineConsole, write_stderr
from .errors import (AcpError, AgentExited, AgentNotAcp, AgentStartError, LoginFailed, LoginRefused, NotAdvertised,
                     ProtocolVersionError, RequestTimeout)
from .exit_status import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, turn_status
from .fs import read_own_file, session_folder
from .options import (MAX_ATTACHMENT, OptionError, attachment_block, attachment_kind, check_mcp_servers,
                      parse_mcp_server, resolve_config, resolve_mode)
from ._core import jsonrpc, safe_text
from .session import Session, Turn

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


class _LoginNeeded(Exception):
    """A prompt was refused for want of a login (ACP.md §11): log in, then send it again."""


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
        # The agent's requests for information (ACP.md §12) are put to a person on the
        # terminal; declined under --no, or with nobody to ask.
        asking: Any = "decline"
        if self.console.isatty() and allow != "reject":
            asking = ElicitationAsker(self.console.readline, self._ask_write, questions=questions)
        self.client = Client(args.agent or default_agent(), connect=args.connect, cwd=self.cwd,
                             permission=policy, terminal=terminal, request_timeout=args.timeout,
                             elicitation=asking)
        self.output: Optional[Output] = None
        self.replaying = False  # a session/load is replaying history (ACP.md §3.5)
        self.allow = allow  # what --yes, --no or --allow answer for everything (None: ask)
        self.mcp_servers: List[Dict[str, Any]] = []
        self.attachments: List[Dict[str, Any]] = []  # for the next prompt (the first)
        self.relogged = False  # a prompt refused for want of a login was sent again

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
            await self.client.initialize(timeout=timeout)
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
        if self.args.logout:
            return await self.log_out()
        if self.args.login is not None:
            if not await self.log_in():
                return EXIT_ERROR
            if not self.args.prompt:
                return EXIT_OK  # `--login` alone: logged in, nothing more asked
        if self.args.list_sessions:
            return await self.list_sessions()
        if self.args.delete_session:
            return await self.delete_session(self.args.delete_session)
        try:  # what the agent takes, checked before anything is sent (ACP.md §3.2, §3.3)
            self.mcp_servers = [parse_mcp_server(spec) for spec in self.args.mcp_server]
            for warning in check_mcp_servers(self.mcp_servers, self.client.agent_capabilities,
                                             self.client.agent_info):
                write_stderr("Warning: %s\n" % safe_text(warning))
            self.attachments = [await self.attachment(path) for path in self.args.attach]
        except OptionError as exc:
            return fail(str(exc), EXIT_USAGE)
        status = await self.open_session()
        if status is not None:
            return status
        assert self.session is not None
        if self.args.prompt:
            return await self.turn(" ".join(self.args.prompt))
        return await self.chat()

    async def attachment(self, path: str) -> Dict[str, Any]:
        """A file for the prompt as a content block (ACP.md §3.3), refused when the agent
        does not take its kind; read off the event loop, a regular file only."""
        attachment_kind(path, self.client.prompt_capabilities)  # (before the file is read)
        try:
            data = await asyncio.get_running_loop().run_in_executor(None, read_own_file, path, MAX_ATTACHMENT)
        except (OSError, ValueError) as exc:
            raise OptionError("--attach %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None
        return attachment_block(path, self.client.prompt_capabilities, data)

    async def open_session(self) -> Optional[int]:
        """The session (new, or `--resume`d), then `--mode` and `--config`; None when it
        is ready, else the exit status. A session refused for want of a login (ACP.md
        §11) is tried once more after logging in."""
        for attempt in (1, 2):
            try:
                if self.args.resume:
                    self.session = await self.resume(self.args.resume)
                else:
                    self.session = await self.client.new_session(self.cwd, mcp_servers=self.mcp_servers,
                                                                 additional_directories=self.args.add_dir)
            except (AgentExited, RequestTimeout) as exc:
                return fail(str(exc))
            except NotAdvertised as exc:
                return fail(str(exc), EXIT_USAGE)
            except jsonrpc.JsonRpcError as exc:
                if attempt == 1 and is_auth_required(exc):
                    if await self.log_in():
                        continue
                    return EXIT_ERROR
                what = "resume session %s" % self.args.resume if self.args.resume else "start a session"
                return fail("could not %s: %s" % (what, render.error_text(exc)))
            except AcpError as exc:
                return fail(str(exc))
            break
        assert self.session is not None
        self.output = Output(self.session)
        return await self.apply_options(self.session)

    async def apply_options(self, session: Session) -> Optional[int]:
        """`--mode` and `--config`, before any prompt: a name the agent does not offer is
        a usage error listing those it does (ACP.md §3.5)."""
        try:
            if self.args.mode is not None:
                mode = resolve_mode(session, self.args.mode)
                if session.modes.get("availableModes"):
                    await session.set_mode(mode)
                else:  # modes only as the `mode` config option
                    await session.set_config_option("mode", mode)
            for spec in self.args.config:
                await session.set_config_option(*resolve_config(session, spec))
        except (AcpError, jsonrpc.JsonRpcError) as exc:
            return failure(exc, "the agent refused the session's options")
        return None

    # ------------------------------------------------------------------ logging in

    async def log_in(self) -> bool:
        """Log in (ACP.md §11): the agent's methods shown, one chosen (`--login METHOD`,
        or the first usable), and used only with consent: `--yes` or `--allow
        once|always`, or the person's answer on the terminal; `--no`, or nobody to ask,
        refuses and nothing runs. A terminal method's command runs in this terminal;
        then the agent is started afresh."""
        methods = self.client.login_methods()
        if self.args.login:
            methods = [method for method in methods if method.id == self.args.login]
            if not methods:
                offered = ", ".join(m.id for m in self.client.login_methods()) or "none"
                fail("the agent offers no login method %r (it offers: %s)" % (self.args.login, offered))
                return False
        chosen = await self.choose_login(methods)
        if chosen is None:
            fail("the agent needs a login, and none was done")
            return False
        try:
            await self.client.login(chosen.id, consent=lambda method: True)  # (consented above)
        except (LoginFailed, LoginRefused, ProtocolVersionError) as exc:
            fail(str(exc))
            return False
        except (AgentExited, RequestTimeout, jsonrpc.JsonRpcError, AcpError) as exc:
            fail("logging in failed: %s" % render.error_text(exc))
            return False
        write_stderr("(logged in with %s)\n" % safe_text(chosen.id, multiline=False))
        return True

    async def choose_login(self, methods: List[LoginMethod]) -> Optional[LoginMethod]:
        """The method to log in with, once consented to; None: refused (said why)."""
        if self.allow is None and self.console.isatty():
            return await LoginAsker(self.console.readline, self._ask_write, questions=self.console.questions)(methods)
        self._ask_write(render.login_methods(methods))
        usable = [method for method in methods if method.runnable]
        if not usable:
            why = "none of them can be used here"
        elif self.allow == "reject":
            why = "refused by %s" % self.consent_flag()
        elif self.allow is None:
            why = "nobody to ask on a terminal; --yes allows it"
        else:
            self._ask_write("Logging in with [%d] (%s)\n" % (methods.index(usable[0]) + 1, self.consent_flag()))
            return usable[0]
        self._ask_write("(not logged in: %s)\n" % why)
        return None

    def consent_flag(self) -> str:
        return "--yes" if self.args.yes else "--no" if self.args.no else "--allow %s" % self.args.allow

    async def log_out(self) -> int:
        """`logout` (ACP.md §11), where the agent advertises it."""
        try:
            await self.client.logout()
        except (AcpError, jsonrpc.JsonRpcError) as exc:
            return failure(exc, "the agent could not log out")
        write_stderr("(logged out)\n")
        return EXIT_OK

    # ------------------------------------------------------------------ sessions

    async def list_sessions(self) -> int:
        """One line per session: id, last update, title (`session/list`, ACP.md §3.5)."""
        try:  # every page, each printed as it comes
            async for entry in self.client.iter_sessions(cwd=self.cwd if self.args.cwd else None):
                if self.args.json:
                    print(json.dumps(entry, ensure_ascii=False), flush=True)
                else:
                    print(safe_text("%s  %s  %s" % (entry.get("sessionId"), entry.get("updatedAt") or "-",
                                                    render.preview(str(entry.get("title") or "(untitled)")))),
                          flush=True)
        except (AcpError, jsonrpc.JsonRpcError) as exc:
            return failure(exc, "the agent could not list its sessions")
        return EXIT_OK

    async def delete_session(self, session_id: str) -> int:
        """`session/delete` (ACP.md §3.5), where the agent offers it."""
        try:
            await self.client.delete_session(session_id)
        except (AcpError, jsonrpc.JsonRpcError) as exc:
            return failure(exc, "could not delete session %s" % session_id)
        return EXIT_OK

    async def resume(self, session_id: str) -> Session:
        """`session/load`: the agent replays the history before it answers (ACP.md §3.5);
        it is shown briefly unless --quiet. An agent that offers only `session/resume`
        goes on without a history to show. Without --cwd the session's own folder is
        used, as `session/list` reports it."""
        if not self.client.can_load_sessions and not self.client.session_capability("resume"):
            raise NotAdvertised("the agent does not advertise loadSession, nor sessionCapabilities.resume: "
                                "it cannot resume a session (ACP.md §3.5)")
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
            if self.client.can_load_sessions:
                session = await self.client.load_session(session_id, cwd, additional_directories=self.args.add_dir)
            else:
                session = await self.client.resume_session(session_id, cwd,
                                                           additional_directories=self.args.add_dir)
        finally:
            self.replaying = False
            remove()
        self.cwd = cwd
        if not self.client.can_load_sessions:
            if not self.args.json:
                print("(resumed session %s; the agent replays no history)" % safe_text(session_id), flush=True)
        elif not self.args.quiet and not self.args.json:
            lines = render.history_lines(replayed)
            print("(resuming session %s: %d earlier %s)"
                  % (session_id, len(lines), "entry" if len(lines) == 1 else "entries"), flush=True)
            for line in lines:
                print("  " + safe_text(line), flush=True)
            if lines:
                print("  ---", flush=True)
        return session

    async def chat(self) -> int:
        tty = self.console.isatty()
        if tty:
            assert self.session is not None
            agent = self.client.agent_info
            names = (agent.get("title") or agent.get("name") or "the agent", agent.get("version") or "",
                     self.session.session_id)  # the agent's choice: each escaped, one line
            write_stderr("Connected to %s %s (session %s). Type a prompt; /commands lists the "
                         "agent's commands, /quit leaves.\n"
                         % tuple(safe_text(str(name), multiline=False) for name in names))
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
            assert self.session is not None
            if text == "/commands":
                await self.session.wait_commands(COMMANDS_WAIT)
                self.show_commands(self.session)
                continue
            status = await self.turn(text)
            if self.client.connection is not None and self.client.connection.closed is not None:
                return EXIT_ERROR
        return status

    async def turn(self, text: str) -> int:
        """One prompt in the session (with the attachments, the first time). A prompt
        refused for want of a login (ACP.md §11) is sent once more after logging in,
        in a session opened again as the first was (a login starts the agent afresh)."""
        try:
            return await self._turn(text)
        except _LoginNeeded:
            if not await self.log_in():
                return EXIT_ERROR
            self.relogged = True
            # As it was opened before (the agent, started afresh, knows no session of
            # the old connection; one whose prompt was refused has nothing stored).
            status = await self.open_session()
            if status is not None:
                return status
            return await self._turn(text)

    async def _turn(self, text: str) -> int:
        assert self.output is not None and self.session is not None
        output = self.output
        self.interrupts = 0
        attachments, self.attachments = self.attachments, []
        turn = self.session.prompt([{"type": "text", "text": text}] + attachments)
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
        except jsonrpc.JsonRpcError as exc:
            output.newline()
            if is_auth_required(exc) and not self.relogged:
                self.attachments = attachments  # (sent again with the prompt)
                raise _LoginNeeded() from exc
            return fail("the prompt failed: %s" % render.error_text(exc))
        except (RequestTimeout, AcpError) as exc:
            output.newline()
            return fail("the prompt failed: %s" % render.error_text(exc))
        except asyncio.CancelledError:  # quitting mid-turn: its prompt is given up (ACP.md §2)
            await turn.give_up()
            raise
        finally:
            self.current = None
        status, note = turn_status(result.stop_reason, result.error)
        if self.args.json:
            # The last line carries what a script needs: sessionId, stopReason, exitCode.
            print(json.dumps({"sessionId": self.session.session_id,
                              "result": {"sessionId": self.session.session_id,
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
