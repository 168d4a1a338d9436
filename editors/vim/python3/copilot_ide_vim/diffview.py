"""The diff tab of one `open_diff`: the file as it is on the left, the proposal on the
right (read-only, named after the tab name), in Vim's diff mode.

Runs only on Vim's thread (from the plugin's timer or a command). The tab is found by
its tab-local variable `t:copilot_ide_diff_number` (tab numbers change as tabs come and
go), which holds the view's `number`, not the tab name: two diffs may have one tab name
and each waits in its own tab (PROTOCOL.md §4). `t:copilot_ide_diff` holds the tab name
as Vim can hold it, for the person and their scripts (`vim_name`: control characters in
caret notation; a NUL cannot be in a Vim string at all).

Only the user's closing of the diff rejects it: the tab (`:tabclose`), the proposal's
window (`:q` in it) or its buffer (`:bwipeout`). The proposal buffer is
`bufhidden=hide`, so `:bnext` in its window or a quickfix jump into it only shows
another buffer there: the diff stays pending (`closed_by_user` tells them apart, at the
plugin's timer ticks). See doc/copilot_ide.txt.

The left side is the file's buffer, unless that buffer has unsaved changes: the CLI
edits the file on disk, so the diff then shows the file as it is on disk (a scratch
buffer of what the server read), with a warning.
The IDE never writes the file (PROTOCOL.md §4): on SAVED the CLI does.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple

import vim  # type: ignore

from .positions import lines_of
from .vimtext import as_int, echo, literal, visible

TAB_VAR = "copilot_ide_diff"  # the tab name, as Vim shows it
NUMBER_VAR = "copilot_ide_diff_number"  # the view's number: what finds the tab


def number_here() -> int:
    """The number of the diff whose tab is the current one, 0 in any other tab."""
    return as_int(vim.eval("get(t:, %s, 0)" % literal(NUMBER_VAR)))


def file_state(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def same_file(name: str, path: str) -> bool:
    """Whether a buffer's name is `path` (both as real, normalised paths)."""
    return bool(name) and os.path.realpath(name) == path


def buffer_of(path: str) -> Any:
    """The buffer holding `path` (a real path), or None."""
    return next((b for b in vim.buffers if same_file(b.name, path)), None)


class DiffView:
    """One pending diff and its tab. `state`: "waiting" (not shown yet: Vim was busy in
    insert or command-line mode), "open", "failed" (Vim could not show it: the diff
    stays pending for the commands), "closed"."""

    def __init__(self, diff: Any, number: int) -> None:
        self.diff = diff
        self.number = number
        self.tab_name: str = diff.tab_name
        self.vim_name = visible(self.tab_name)
        # Normalised (`ws/./hello.txt`, symlinks), as the plugin compares buffers' names.
        self.path: str = os.path.realpath(diff.original_file_path)
        self.state = "waiting"
        self.failures = 0  # times Vim refused to open the tab
        self.proposal: Optional[int] = None  # buffer number
        self.proposal_win = 0  # its window's id
        self.disk: Optional[int] = None  # the scratch buffer of the file on disk, if any
        self.file_before = file_state(self.path)  # to notice the CLI's write

    def open(self) -> None:
        """Open the tab. Raises vim.error when Vim refuses (the caller retries later);
        what was opened before a failure is closed again."""
        before = as_int(vim.eval("tabpagenr('$')"))
        try:
            self._open()
        except BaseException:
            if as_int(vim.eval("tabpagenr('$')")) > before:
                vim.command("silent! tabclose!")  # the tab this open made (the current one)
            self._wipe()
            self.state = "waiting"
            raise

    def _open(self) -> None:
        own = buffer_of(self.path)
        unsaved = own is not None and as_int(vim.eval("getbufvar(%d, '&modified')" % own.number))
        if unsaved:
            filetype = vim.eval("getbufvar(%d, '&filetype')" % own.number)
            vim.command("tabnew")
            vim.command("setlocal buftype=nofile bufhidden=wipe noswapfile nobuflisted")
            disk = vim.current.buffer
            self.disk = disk.number
            self._name(disk, "%s (on disk)" % self.path)
            disk[:] = lines_of(self.diff.original_contents)
            vim.command("let &l:filetype = " + literal(filetype))
            vim.command("setlocal nomodifiable readonly")
        else:
            saved_shortmess = vim.eval("&shortmess")
            try:
                # No ATTENTION prompt for a swap file from a timer: it would wait for a key.
                vim.command("set shortmess+=A")
                name = own.name if own is not None else self.path
                vim.command("tabedit " + vim.eval("fnameescape(%s)" % literal(name)))
            finally:
                vim.command("let &shortmess = " + literal(saved_shortmess))
        vim.command("let t:%s = %s | let t:%s = %d" % (TAB_VAR, literal(self.vim_name), NUMBER_VAR, self.number))
        vim.command("diffthis")
        filetype = vim.eval("&l:filetype")
        vim.command("rightbelow vertical new")
        vim.command("setlocal buftype=nofile bufhidden=hide noswapfile nobuflisted")
        buf = vim.current.buffer
        self.proposal = buf.number
        self.proposal_win = as_int(vim.eval("win_getid()"))
        self._name(buf, self.vim_name)
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
        if unsaved:
            echo("%s has unsaved changes: the diff shows the file on disk, which Copilot edits. "
                 ":CopilotIdeAccept or :CopilotIdeReject" % name, "WarningMsg", remember=True)
        else:
            echo("Copilot proposes an edit of %s: :CopilotIdeAccept or :CopilotIdeReject" % name, "WarningMsg",
                 remember=True)

    def _name(self, buf: Any, name: str) -> None:
        try:
            buf.name = name
        except vim.error:  # E95: that name is taken (by a buffer the user made)
            buf.name = "%s #%d" % (name, self.number)

    def tab_number(self) -> int:
        """The tab's number now, 0 when it is gone."""
        return as_int(vim.eval("index(map(range(1, tabpagenr('$')), {_, t -> gettabvar(t, %s, 0)}), %d) + 1"
                               % (literal(NUMBER_VAR), self.number)))

    def closed_by_user(self) -> bool:
        """Whether the user closed the open diff's tab or the proposal's window. A window
        that shows another buffer now (`:bnext`, a quickfix jump) is not a closing."""
        if self.state != "open":
            return False
        return self.tab_number() == 0 or as_int(vim.eval("win_id2tabwin(%d)[0]" % self.proposal_win)) == 0

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
            vim.command("diffoff! | unlet! t:%s t:%s" % (TAB_VAR, NUMBER_VAR))
            if current != tab:
                vim.command("%dtabnext" % current)
        self._wipe()

    def _wipe(self) -> None:
        for bufnr in (self.proposal, self.disk):
            if bufnr is not None and as_int(vim.eval("bufexists(%d)" % bufnr)):
                vim.command("silent! bwipeout! %d" % bufnr)
        self.proposal = self.disk = None

    def file_changed(self) -> bool:
        return file_state(self.path) != self.file_before
