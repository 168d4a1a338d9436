"""`python3 -m acp`: talk to an ACP agent from the terminal or a script.

    python3 -m acp [--agent CMD] [--cwd DIR] [--yes | --no] [--json] [PROMPT...]

With a prompt: one turn, the answer streamed to stdout, tool calls one line each (with
the diff of an edit), permission questions on stderr answered from stdin (or by
`--yes`/`--no`). Without: a chat that keeps the session; lines starting with `/` are
sent as prompts (the agent's slash commands, ACP.md §3.6), `/quit` leaves.

Exit status: 0; 1 for an `Error:` answer (ACP.md §6), a failed start or a dead agent;
130 after Ctrl-C (the first cancels the turn, a second quits); 2 for bad usage.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any, Dict, List, Optional, Set

from . import render
from .client import Client, default_agent
from .console import Console, write_stderr
from .errors import AcpError, AgentExited, AgentStartError, RequestTimeout
from ._core import jsonrpc
from .permissions import TerminalAsker
from .session import FINAL_TOOL_STATUSES, Session, Turn, text_of

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m acp",
        description="Drive an Agent Client Protocol agent (default: `copilot --acp --stdio`).")
    parser.add_argument("--agent", metavar="CMD",
                        help="agent command line (default: $ACP_AGENT, else 'copilot --acp --stdio')")
    parser.add_argument("--cwd", metavar="DIR", help="the session's folder (default: the current one)")
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--yes", "-y", action="store_true", help="allow every permission request once")
    answer.add_argument("--no", "-n", action="store_true", help="reject every permission request")
    parser.add_argument("--json", action="store_true",
                        help="print every session update as one JSON line (and the result last)")
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
        stream.write(text)
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
            self.line("[plan] " + "  ".join("[%s] %s" % (marks.get(e.get("status"), " "), e.get("content", ""))
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
        self.cwd = os.path.abspath(args.cwd or os.getcwd())
        self.console = Console.for_stdin()
        self.current: Optional[Turn] = None
        self.interrupts = 0
        self.main_task: Optional["asyncio.Task[int]"] = None
        if args.yes:
            policy: Any = "allow"
        elif args.no:
            policy = "reject"
        else:
            policy = TerminalAsker(self.console.readline, self._ask_write)
        self.client = Client(args.agent or default_agent(), cwd=self.cwd, permission=policy,
                             request_timeout=args.timeout)
        self.output: Optional[Output] = None

    def _ask_write(self, text: str) -> None:
        if self.output is not None:
            self.output.newline()
        write_stderr(text)

    # ------------------------------------------------------------------ signals

    def on_sigint(self) -> None:
        turn = self.current
        if turn is not None and not turn.done and self.interrupts == 0:
            self.interrupts = 1
            write_stderr("\n^C: cancelling the turn (press Ctrl-C again to quit)\n")
            asyncio.ensure_future(turn.cancel())
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
            try:
                await asyncio.shield(self.client.close())
            except asyncio.CancelledError:
                pass

    async def _run(self) -> int:
        try:
            await self.client.start()
        except AgentStartError as exc:
            return fail("%s (choose one with --agent or ACP_AGENT)" % exc)
        if self.args.json:
            self.client.add_update_listener(self._print_json)
        try:
            info = await self.client.initialize()
            session = await self.client.new_session(self.cwd)
        except AgentExited as exc:
            return fail("the agent failed to start: %s" % exc)
        except (RequestTimeout, jsonrpc.JsonRpcError, AcpError) as exc:
            return fail("the agent failed to start: %s" % exc)
        self.output = Output(session)
        if self.args.prompt:
            return await self.turn(session, " ".join(self.args.prompt))
        return await self.chat(session, info)

    async def chat(self, session: Session, info: Dict[str, Any]) -> int:
        tty = self.console.isatty()
        if tty:
            agent = info.get("agentInfo") or {}
            write_stderr("Connected to %s %s (session %s). Type a prompt; /quit leaves.\n"
                         % (agent.get("title") or agent.get("name") or "the agent",
                            agent.get("version") or "", session.session_id))
        status = EXIT_OK
        while True:
            if tty:
                write_stderr("> ")
            line = await self.console.readline()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
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
            return fail("the prompt failed: %s" % exc)
        finally:
            self.current = None
        if self.args.json:
            print(json.dumps({"sessionId": session.session_id,
                              "result": {"stopReason": result.stop_reason, "usage": result.usage,
                                         "error": result.error}}, ensure_ascii=False), flush=True)
            if result.error is not None:
                write_stderr(result.error + "\n")
        else:
            output.end_turn(turn)
        if result.error is not None:
            return EXIT_ERROR
        if result.stop_reason == "cancelled" and self.interrupts:
            write_stderr("(turn cancelled)\n")
            return EXIT_INTERRUPTED
        return EXIT_OK

    def _print_json(self, session_id: str, update: Dict[str, Any]) -> None:
        print(json.dumps({"sessionId": session_id, "update": update}, ensure_ascii=False), flush=True)


def fail(message: str) -> int:
    write_stderr("Error: %s\n" % message)
    return EXIT_ERROR


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.ERROR,
                        format="%(name)s: %(message)s", stream=sys.stderr)
    if args.cwd and not os.path.isdir(args.cwd):
        fail("--cwd %s is not a folder" % args.cwd)
        return EXIT_USAGE

    async def run() -> int:
        return await App(args).run()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:  # where signal handlers are unavailable
        return EXIT_INTERRUPTED
