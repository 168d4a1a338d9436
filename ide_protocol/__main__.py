"""`python3 -m ide_protocol COMMAND ...` (installed: `copilot-ide COMMAND ...`)

    serve [FOLDER]        a terminal IDE for FOLDER: lock file, MCP server, diffs (main job)
    client list|call|watch   talk to a running /ide server as the CLI does
    check [--lock FILE | FOLDER]   conformance checker for any /ide server
    trace                 a tracing proxy between the CLI and a real IDE server
    doctor [FOLDER] [--json]   why the CLI started in FOLDER does or does not see an IDE
    bridge [FOLDER...]    the /ide server for an editor, one JSON message per line (docs/BRIDGE.md)
    relay cli-side|ide-side   the CLI on one machine, the IDE on another (docs/RELAY.md)

    --version             the package version (`ide_protocol.__version__`)

Each command lives in its own module with a `main(argv) -> int`, imported only when
used, so `serve` starts without loading the client, checker or tracer.
"""
from __future__ import annotations

import importlib
import sys
from typing import List, Optional

from . import __version__
from .programs.progname import program_name

COMMANDS = {
    "serve": ("programs.serve", "run a terminal IDE for a folder (the main job)"),
    "client": ("programs.client_cli", "talk to a running /ide server: list, call, watch"),
    "check": ("programs.check", "check a running /ide server against PROTOCOL.md"),
    "trace": ("programs.trace", "trace the wire between the CLI and an IDE server"),
    "doctor": ("programs.doctor", "explain why Copilot CLI does or does not see an IDE"),
    "bridge": ("programs.bridge", "the /ide server for an editor, driven by JSON lines on stdin/stdout"),
    "relay": ("programs.relay", "reach an IDE on another machine, container or WSL (docs/RELAY.md)"),
}


def usage() -> str:
    prog = program_name()
    lines = ["usage: %s COMMAND [ARGS]" % prog, "       %s --version" % prog, "", "commands:"]
    for name, (_, text) in COMMANDS.items():
        lines.append("  %-8s %s" % (name, text))
    lines.append("")
    lines.append("`%s COMMAND --help` for a command's options." % prog)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print("%s %s" % (program_name(), __version__))
        return 0
    command = args[0]
    if command not in COMMANDS:
        print("unknown command %r\n\n%s" % (command, usage()), file=sys.stderr)
        return 2
    package = __package__ or "ide_protocol"
    module = importlib.import_module("." + COMMANDS[command][0], package)
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
