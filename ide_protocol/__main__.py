"""`python3 -m ide_protocol COMMAND ...`

    serve [FOLDER]        a terminal IDE for FOLDER: lock file, MCP server, diffs (main job)
    client list|call|watch   talk to a running /ide server as the CLI does
    check [--lock FILE | FOLDER]   conformance checker for any /ide server
    trace                 a tracing proxy between the CLI and a real IDE server

Each command lives in its own module with a `main(argv) -> int`, imported only when
used, so `serve` starts without loading the client, checker or tracer.
"""
from __future__ import annotations

import importlib
import sys
from typing import List, Optional

COMMANDS = {
    "serve": ("programs.serve", "run a terminal IDE for a folder (the main job)"),
    "client": ("programs.client_cli", "talk to a running /ide server: list, call, watch"),
    "check": ("programs.check", "check a running /ide server against PROTOCOL.md"),
    "trace": ("programs.trace", "trace the wire between the CLI and an IDE server"),
}


def usage() -> str:
    lines = ["usage: python3 -m ide_protocol COMMAND [ARGS]", "", "commands:"]
    for name, (_, text) in COMMANDS.items():
        lines.append("  %-8s %s" % (name, text))
    lines.append("")
    lines.append("`python3 -m ide_protocol COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    command = args[0]
    if command not in COMMANDS:
        print("unknown command %r\n\n%s" % (command, usage()), file=sys.stderr)
        return 2
    package = __package__ or "ide_protocol"
    module = importlib.import_module("." + COMMANDS[command][0], package)
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
