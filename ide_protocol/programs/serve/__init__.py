"""`python3 -m ide_protocol serve [FOLDER]`: a complete terminal "IDE" for one folder.

It is what an editor integration would be, with the terminal as the editor: it writes
the lock file and serves the `/ide` protocol (so Copilot CLI started in FOLDER connects
to it), prints who connects and every tool call as it happens, shows each proposed diff
as a coloured unified diff and lets its user accept or reject it, and reads commands on
standard input, one per line, so a person or a script (through a pipe) can drive it:

    select PATH L1[:C1]-L2[:C2]    the editor's selection (pushed as selection_changed)
    ref PATH [L1-L2]               send a file (or lines of it) to the CLI (add_file_reference)
    addsel PATH L1[:C1]-L2[:C2]    send a selection to the CLI's input (add_selection)
    diag PATH LINE SEVERITY MESSAGE    add a diagnostic (diag PATH clear / diag clear)
    accept [N | --tab NAME]        answer a waiting diff (reject likewise); N is the number
                                   printed with it, NAME its tab name (see `help`)
    deselect                       no active editor (get_selection answers current: false)
    folders PATH [PATH...]         the workspace folders the lock lists (rewritten in place)
    status, help, quit

Lines and columns are 1-based, as editors show them (a column is a cursor position
counted in characters, so `1:1-1:6` selects the first five characters); they are
converted to the wire's 0-based lines and UTF-16 characters. The selection's text is
read from the file. A PATH is relative to the folder or absolute.

Everything runs on one asyncio loop; standard input is read through
`loop.connect_read_pipe` (pipes, terminals, sockets). A thread reads it only where the
loop cannot (Windows consoles and pipes, or `/dev/null`); a regular file is read
directly. The lock file and the socket directory are removed on every way out: `quit`,
end of input, Ctrl-C, SIGTERM, SIGHUP.

The package is split by job: `program` (options, the run and its ways to stop), `ide`
(the IDE: callbacks and commands), `diffs` (the waiting diffs and how they are shown),
`commands` (command words, ranges, file text), `peers` (who is connected) and `trace`
(summaries and `--trace`). What it shares with `bridge` is beside it, in
`programs.terminal`: escaped output through a writer that never blocks, standard input
for the loop, and the signals that stop a program.
"""
from __future__ import annotations

from .program import main

__all__ = ["main"]
