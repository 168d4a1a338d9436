"""The diff tab of one `open_diff`: the file as it is on the left, the proposal on the
right (read-only, named after the tab name), in Vim's diff mode.

Runs only on Vim's thread (from the plugin's timer or a command). The tab is found by
its tab-local variable `t:copilot_ide_diff` (tab numbers change as tabs come and go).
The proposal buffer is `bufhidden=wipe`: when its window goes (`:q`, `:tabclose`), it is
wiped, and the plugin takes that as the user's "no" (see doc/copilot_ide.txt).
The IDE never writes the file (PROTOCOL.md §4): on SAVED the CLI does.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple

import vim  # type: ignore

from .positions import lines_of
from .vimtext import as_int, echo, literal

TAB_VAR = "copilot_ide_diff"


def file_state(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class DiffView:
    """One pending diff and its tab. `state`: "waiting" (not shown yet: Vim was busy in
    insert or command-line mode), "open", "closed"."""

    def __init__(self, diff: Any, number: int) -> None:
        self.diff = diff
        self.number = number
        self.tab_name: str = diff.tab_name
        self.path: str = diff.original_file_path
        self.state = "waiting"
        self.failures = 0  # times Vim refused to open the tab
        self.proposal: Optional[int] = None  # buffer number
        self.file_before = file_state(self.path)  # to notice the CLI's write

    def open(self) -> None:
        """Open the tab. Raises vim.error when Vim refuses (the caller retries later)."""
        saved_shortmess = vim.eval("&shortmess")
        try:
            # No ATTENTION prompt for a swap file from a timer: it would wait for a key.
            vim.command("set shortmess+=A")
            vim.command("tabedit " + vim.eval("fnameescape(%s)" % literal(self.path)))
        finally:
            vim.command("let &shortmess = " + literal(saved_shortmess))
        vim.command("let t:%s = %s" % (TAB_VAR, literal(self.tab_name)))
        vim.command("diffthis")
        filetype = vim.eval("&l:filetype")
        vim.command("rightbelow vertical new")
        vim.command("setlocal buftype=nofile bufhidden=wipe noswapfile nobuflisted")
        buf = vim.current.buffer
        self.proposal = buf.number
        try:
            buf.name = self.tab_name
        except vim.error:  # E95: that name is taken (by a buffer the user made)
            buf.name = "%s #%d" % (self.tab_name, self.number)
        buf[:] = lines_of(self.diff.new_file_contents)
        vim.command("let &l:filetype = " + literal(filetype))
        vim.command("setlocal nomodifiable readonly")
        vim.command("diffthis")
        vim.command("let &l:statusline = %s" % literal("%<:CopilotIdeAccept or :CopilotIdeReject"))
        vim.command("autocmd copilot_ide_diff BufWipeout <buffer=%d> py3 _copilot_ide.proposal_wiped(%d)"
                    % (buf.number, buf.number))
        vim.command("normal! gg")
        if as_int(vim.eval("diff_hlID(1, 1)")) == 0:
            vim.command("silent! normal! ]c")
        self.state = "open"
        name = os.path.basename(self.path) or self.path
        echo("Copilot proposes an edit of %s: :CopilotIdeAccept or :CopilotIdeReject" % name, "WarningMsg",
             remember=True)

    def tab_number(self) -> int:
        """The tab's number now, 0 when it is gone."""
        return as_int(vim.eval("index(map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, %s, '')}), %s) + 1"
                               % (literal(TAB_VAR), literal(self.tab_name))))

    def close(self) -> None:
        """Close the tab (or, when it is Vim's last one, end its diff and leave the
        file). The file's buffer stays (hidden when modified: nothing is lost)."""
        if self.state == "closed":
            return
        was = self.state
        self.state = "closed"  # before the wipe below: that wipe is not the user's "no"
        if was != "open":
            return
        tab = self.tab_number()
        if tab and as_int(vim.eval("tabpagenr('$')")) > 1:
            vim.command("tabclose! %d" % tab)
        elif tab:
            current = as_int(vim.eval("tabpagenr()"))
            vim.command("%dtabnext" % tab)
            vim.command("diffoff! | unlet! t:%s" % TAB_VAR)
            if current != tab:
                vim.command("%dtabnext" % current)
        if self.proposal is not None and as_int(vim.eval("bufexists(%d)" % self.proposal)):
            vim.command("silent! bwipeout! %d" % self.proposal)

    def file_changed(self) -> bool:
        return file_state(self.path) != self.file_before
