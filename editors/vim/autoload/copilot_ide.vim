" Forwarders to the Python side (python3/copilot_ide_vim/plugin.py), which does the work.
let s:python3 = expand('<sfile>:p:h:h') . '/python3'
let s:loaded = 0

function! s:load() abort
  if s:loaded
    return 1
  endif
  let g:copilot_ide_python3_dir = s:python3
  try
    py3 import sys, vim
    py3 sys.path.insert(0, vim.eval('g:copilot_ide_python3_dir')) if vim.eval('g:copilot_ide_python3_dir') not in sys.path else None
    py3 import copilot_ide_vim.plugin; _copilot_ide = copilot_ide_vim.plugin.instance()
  catch
    echohl ErrorMsg | echomsg 'copilot_ide: ' . v:exception | echohl None
    return 0
  endtry
  let s:loaded = 1
  return 1
endfunction

function! copilot_ide#start() abort
  if s:load()
    py3 _copilot_ide.start()
  endif
endfunction

function! copilot_ide#stop() abort
  if s:loaded
    py3 _copilot_ide.stop()
  endif
endfunction

function! copilot_ide#leave() abort
  if s:loaded
    py3 _copilot_ide.leave()
  endif
endfunction

function! copilot_ide#status() abort
  if s:load()
    py3 _copilot_ide.status()
  endif
endfunction

function! copilot_ide#send_file() abort
  if s:load()
    py3 _copilot_ide.send_file()
  endif
endfunction

function! copilot_ide#send_selection(line1, line2, range) abort
  if s:load()
    call py3eval('_copilot_ide.send_selection(' . a:line1 . ', ' . a:line2 . ', ' . a:range . ')')
  endif
endfunction

function! copilot_ide#answer(accept, name) abort
  if s:load()
    let g:copilot_ide_answer_name = a:name
    call py3eval('_copilot_ide.answer(' . (a:accept ? 'True' : 'False') . ', vim.eval("g:copilot_ide_answer_name"))')
    unlet g:copilot_ide_answer_name
  endif
endfunction

function! copilot_ide#complete(lead, line, pos) abort
  if !s:loaded
    return []
  endif
  let g:copilot_ide_complete_lead = a:lead
  return py3eval('_copilot_ide.complete(vim.eval("g:copilot_ide_complete_lead"))')
endfunction

" The timer (every g:copilot_ide_poll_ms): drains what the server's thread queued for
" Vim's thread, and hands the selection over when the cursor moved since the last tick.
" A cursor move itself only sets s:moved (a few microseconds): a burst of moves costs
" one look at the selection. Entering Python costs Vim's thread far more than this
" function (about 0.15 ms on a loaded machine, against a few microseconds), so an idle
" tick does not enter it: Python runs when the cursor moved, while it said at its last
" run that something is pending (queued work, a diff, a file to reload), and on every
" s:LISTS_EVERY-th tick, which looks at the quickfix/location lists and at what the
" server's thread queued since. Work queued while idle so waits at most s:LISTS_EVERY
" ticks (250 ms by default).
let s:LISTS_EVERY = 5
let s:moved = 0
let s:busy = 1
let s:ticks = 0
function! copilot_ide#tick(timer) abort
  let s:ticks += 1
  let l:lists = s:ticks % s:LISTS_EVERY == 0
  if s:moved || s:busy || l:lists
    let l:moved = s:moved
    let s:moved = 0
    let s:busy = py3eval('_copilot_ide.tick(' . l:moved . ', ' . l:lists . ')')
  endif
endfunction

" Python on Vim's thread queued work or a file to watch: the next tick runs it.
function! copilot_ide#pending() abort
  let s:busy = 1
endfunction

" Autocommands of a running server (on: 1, off: 0).
function! copilot_ide#autocmds(on) abort
  augroup copilot_ide
    autocmd!
    if a:on
      autocmd CursorMoved,CursorMovedI,BufEnter,WinEnter * let s:moved = 1
      if exists('##ModeChanged')
        autocmd ModeChanged * let s:moved = 1
      endif
      autocmd DirChanged global py3 _copilot_ide.folder_changed()
    endif
  augroup END
endfunction
