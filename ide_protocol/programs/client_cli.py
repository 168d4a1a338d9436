"""`copilot-ide client list [FOLDER] | call TOOL [JSON] | watch [FOLDER]`.

A command line over `IdeClient`, so anyone can read the selection or diagnostics of a
running IDE (VS Code, Visual Studio, JetBrains, our own `serve`) or watch its pushes,
without writing Python. The server is found as the CLI finds it (PROTOCOL.md §1): the
lock whose `workspaceFolders` holds `--folder` (default: the current directory), or
the lock file given with `--lock`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Awaitable, Coroutine, List, Optional, Tuple, Type

from .. import __version__
from ..wire import jsonrpc
from ..common import tools
from ..common.terminal_text import safe_text
from ..client import ClientError, IdeClient, NoIdeFound, discovery, program_client_info
from .options import LOCK_DIR_DEFAULT, no_ide_advice, one_line
from .progname import program_name
from .terminal.stdio import utf8_output


def _add_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    """The options every action takes. They are added to the main parser and again to
    each action's parser, so `client call TOOL --folder X` works as well as `client
    --folder X call TOOL`; the action's copies default to "not given" (SUPPRESS) so that
    they never overwrite a value given before the action."""
    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    p.add_argument("--lock", metavar="FILE", default=default(None), help="use this lock file")
    p.add_argument("--folder", metavar="DIR", default=default(None),
                   help="find the IDE whose workspace is DIR (default: cwd)")
    p.add_argument("--lock-dir", metavar="DIR", default=default(None),
                   help="where to look for lock files (default: %s)" % LOCK_DIR_DEFAULT)
    p.add_argument("--json", action="store_true", default=default(False),
                   help="machine-readable output (one JSON document per line)")
    p.add_argument("--timeout", type=float, default=default(60.0),
                   help="seconds per request (default 60, as the CLI)")


def _parser() -> argparse.ArgumentParser:
    prog = program_name("client")
    p = argparse.ArgumentParser(prog=prog, description="Talk to a running /ide server as Copilot CLI does.")
    p.add_argument("--version", action="version", version="%s %s" % (prog, __version__))
    _add_options(p, defaults=True)
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    listing = sub.add_parser("list", help="connect and list the server's tools: list [FOLDER]")
    listing.add_argument("folder_arg", nargs="?", metavar="FOLDER", help="the IDE's workspace folder (as --folder)")
    _add_options(listing, defaults=False)
    call = sub.add_parser("call", help="call a tool: call TOOL [JSON-ARGUMENTS]")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", default="{}", help='JSON object, e.g. \'{"uri": "file:///a.py"}\'')
    _add_options(call, defaults=False)
    watch = sub.add_parser("watch", help="print pushes (selection_changed, ...) as they come: watch [FOLDER]")
    watch.add_argument("folder_arg", nargs="?", metavar="FOLDER", help="the IDE's workspace folder (as --folder)")
    watch.add_argument("--count", type=int, default=0, help="stop after N pushes (0: until interrupted)")
    _add_options(watch, defaults=False)
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command line, options before or after the action; `--lock` and `--folder`
    exclude each other wherever they are given."""
    parser = _parser()
    args = parser.parse_args(argv)
    positional = getattr(args, "folder_arg", None)
    if positional is not None:
        if args.folder is not None and args.folder != positional:
            parser.error("the folder is given twice (%s and --folder %s): give it once" % (positional, args.folder))
        args.folder = positional
    if args.lock is not None and args.folder is not None:
        parser.error("--lock and --folder exclude each other (a lock file names its folders)")
    return args


def _client(args: argparse.Namespace) -> IdeClient:
    me = program_client_info("client")  # who we are in clientInfo (client/identity.py)
    if args.lock:
        return IdeClient.from_lock_file(args.lock, timeout=args.timeout, client_name=me["name"],
                                        client_version=me["version"])
    lock, passed_over = discovery.choose(args.folder, args.lock_dir)
    if passed_over:  # several IDEs serve this folder: say which one answers, and why
        print(discovery.describe_choice(lock, passed_over, one_line), file=sys.stderr, flush=True)
    return IdeClient(lock, timeout=args.timeout, client_name=me["name"], client_version=me["version"])


def _emit(args: argparse.Namespace, obj: Any, text: str) -> None:
    if args.json:
        line = json.dumps(obj, ensure_ascii=False)
        if safe_text(line) != line:  # control characters JSON leaves raw (C1, bidi): all escaped
            line = json.dumps(obj)
        print(line, flush=True)
    else:
        print(safe_text(text), flush=True)  # what the IDE sent never drives the terminal


async def _run(args: argparse.Namespace) -> int:
    client = _client(args)
    # Subscribed before connecting: the stream opens with the current selection (§5).
    queue = client.subscribe() if args.action == "watch" else None
    async with client:
        if not args.json:
            print("# connected to %s (pid %d), session %s" % (one_line(client.lock.ide_name), client.lock.pid,
                                                             one_line(client.session_id)), file=sys.stderr)
        if args.action == "list":
            tool_list = client.tools or []
            if args.json:
                _emit(args, tool_list, "")
            else:
                for tool in tool_list:
                    schema = tool.get("inputSchema")
                    props = schema.get("properties") if isinstance(schema, dict) else None
                    names = ", ".join(str(p) for p in props) if isinstance(props, dict) else ""
                    print(safe_text("%-20s %s" % (tool.get("name"), names or "-")))
                    print(safe_text("    %s" % (tool.get("description"),)))
            return 0
        if args.action == "call":
            try:
                arguments = json.loads(args.arguments)
            except ValueError as exc:
                print("arguments must be a JSON object: %s" % exc, file=sys.stderr)
                return 2
            if not isinstance(arguments, dict):
                print("arguments must be a JSON object", file=sys.stderr)
                return 2
            timeout = None if args.tool == "open_diff" else args.timeout  # open_diff waits for the user (§4)
            result = await client.call_tool(args.tool, arguments, timeout=timeout)
            try:
                value = tools.parse_text_result(result)
            except tools.ToolError as exc:
                _emit(args, result, "error: %s" % exc)
                return 1
            _emit(args, value, json.dumps(value, indent=2, ensure_ascii=False) if not isinstance(value, str) else value)
            return 0
        # watch
        seen = 0
        assert queue is not None
        while True:
            push = await queue.get()
            if push is IdeClient.END:
                error = client.stream_error
                if error is not None:
                    raise error
                return 0
            seen += 1
            _emit(args, push.raw, "%s %s" % (push.method, json.dumps(push.params, ensure_ascii=False)))
            if args.count and seen >= args.count:
                return 0


def run_command(command: Coroutine[Any, Any, int], label: str, error_status: int,
                errors: Tuple[Type[BaseException], ...] = (ClientError, OSError, ValueError)) -> int:
    """Run a command-line program's coroutine; its exit status. Ctrl-C is 130, no IDE
    found is 1, an expected failure (`errors`) is `error_status` with one line on
    stderr, never a traceback (shared by `client` and `trace`).

    An error's text quotes the server (a JSON-RPC error's message, the body of an HTTP
    refusal) or the lock files (`NoIdeFound`): it is printed through `one_line`, here,
    for every command that runs through this function."""
    try:
        return asyncio.run(command)
    except KeyboardInterrupt:
        return 130
    except NoIdeFound as exc:
        print("%s: %s\n%s" % (label, exc.describe(one_line), no_ide_advice(exc.folder)), file=sys.stderr)
        return 1
    except errors as exc:
        print("%s: %s" % (label, one_line(exc)), file=sys.stderr)
        return error_status


def main(argv: Optional[List[str]] = None) -> int:
    utf8_output()
    args = parse_args(argv)
    return run_command(_run(args), program_name("client"), 1,
                       (ClientError, jsonrpc.JsonRpcError, OSError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
