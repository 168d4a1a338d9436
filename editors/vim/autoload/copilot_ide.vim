" Forwarders to the Python side (python3/copilot_ide_vim/plugin.py), which does the work.
"
" The start never holds Vim's thread for the server: copilot_ide#start() reads what
" only Vim's thread may read (the working folder, $COPILOT_HOME, the options), starts
" Python (its first :py3) and hands those to a Python thread (copilot_ide_vim/__init__.py)
" that imports the plugin and the library and starts the server. The timer below
" enters Python only once the plugin's doorbell rang (copilot_ide_vim/bell.py).
let s:python3 = expand('<sfile>:p:h:h') . '/python3'
let s:loaded = 0    " the Python side is imported: _copilot_ide exists
let s:booting = 0   " a boot thread is at work
let s:boot_ticks = 0  " timer ticks since the boot began
let s:timer = -1
let s:bell = ''     " the doorbell's folder (its name; Python makes it)
let s:ring = ''     " the file that rings in it, or '' when there is no bell
let s:lists = []    " the quickfix/location lists' ids and change ticks, as last seen

" What the server needs from Vim, read on Vim's thread (see copilot_ide_vim/__init__.py).
function! copilot_ide#settings() abort
  return {'folder': getcwd(-1), 'copilot_home': $COPILOT_HOME, 'bell': s:bell_folder(),
        \ 'file': [bufnr(''), expand('%:p'), &buftype],
        \ 'trusted': get(g:, 'copilot_ide_trusted', 0) ? 1 : 0,
        \ 'version': v:version, 'versionlong': get(v:, 'versionlong', 0)}
endfunction

" The doorbell's folder, named here and made by Python (mkdir 0700, which fails when
" the name exists: then there is no bell, and the timer asks Python at its fifth
" ticks), removed by Python when Vim quits. Never tempname(): that makes Vim create
" a temporary folder of its own, which Vim deletes recursively at exit, and an exit
" run twice (a SIGHUP or SIGTERM arriving while Vim exits) cuts its name twice and
" deletes the folder above it, $TMPDIR itself. Vim deletes nothing of the bell's.
" (The name need not be secret: whoever made it first, it is not the plugin's bell.)
function! s:bell_folder() abort
  if empty(s:bell)
    let l:parent = !empty($TMPDIR) ? $TMPDIR : !empty($TEMP) ? $TEMP : '/tmp'
    let s:bell = substitute(l:parent, '[/\\]\+$', '', '') . '/copilot-ide-vim-' . getpid() . '-' . localtime()
  endif
  let s:ring = s:bell . '/ring'
  return s:bell
endfunction

" Python's start (the first :py3), then `statement` with the plugin's folder on
" sys.path (one :py3: each costs Vim's thread an entry into Python).
function! s:python(statement) abort
  let g:copilot_ide_python3_dir = s:python3
  py3 import sys, vim
  execute 'py3 sys.path.insert(0, vim.eval("g:copilot_ide_python3_dir"))'
        \ . ' if vim.eval("g:copilot_ide_python3_dir") not in sys.path else None; ' . a:statement
endfunction

" Python's start, and the boot thread started (nothing else happens on Vim's thread).
function! s:boot() abort
  try
    call s:python('import copilot_ide_vim; '
          \ . '_copilot_ide_boot = copilot_ide_vim.Boot(vim.eval("copilot_ide#settings()"))')
  catch
    echohl ErrorMsg | echomsg 'copilot_ide: ' . v:exception | echohl None
    return
  endtry
  let s:booting = 1
  let s:boot_ticks = 0
  call s:timer_on()
endfunction

" Whether the Python side is there. While the boot thread works, Python is entered
" only once the bell rang: entering Python meanwhile would wait for the import that
" thread runs. Every 40th tick (in case there is no bell) the timer asks all the same.
" `ask` (a command, not the timer) asks regardless.
function! s:ready(...) abort
  if !s:loaded && s:booting
    let s:boot_ticks += 1
    if !(a:0 && a:1) && s:boot_ticks % 40 != 0 && !filereadable(s:ring)
      return 0
    endif
    let l:state = py3eval('_copilot_ide_boot.state()')
    if l:state ==# ''
      return 0
    endif
    let s:booting = 0
    if l:state ==# 'ok'
      let s:loaded = 1
    else  " stopped, or failed before it served: nothing to wait for (the bell goes)
      py3 _copilot_ide_boot.leave()
      if l:state !=# 'stopped'
        echohl ErrorMsg | echomsg 'copilot_ide: could not start: ' . l:state | echohl None
      endif
    endif
  endif
  return s:loaded
endfunction

" For the commands: the Python side now, importing it on Vim's thread if no start made it.
function! s:load() abort
  if s:ready(1)
    return 1
  endif
  if s:booting
    echo 'Copilot IDE: starting, try again in a moment'
    return 0
  endif
  try
    call s:python('import copilot_ide_vim.plugin; _copilot_ide = copilot_ide_vim.plugin.instance()')
  catch
    echohl ErrorMsg | echomsg 'copilot_ide: ' . v:exception | echohl None
    return 0
  endtry
  let s:loaded = 1
  return 1
endfunction

function! copilot_ide#start() abort
  if s:ready(1)
    py3 _copilot_ide.start()
  elseif s:booting
    echo 'Copilot IDE: starting'
  else
    call s:boot()
  endif
endfunction

function! copilot_ide#stop() abort
  if s:ready(1)
    py3 _copilot_ide.stop()
  elseif s:booting
    " Stopped before its start ended: the boot thread starts nothing, or stops it.
    py3 _copilot_ide_boot.leave()
    let s:booting = 0
    call copilot_ide#timer(0)
    echo 'Copilot IDE: stopped'
  endif
endfunction

" VimLeavePre: the lock goes now, whatever the start's stage.
function! copilot_ide#leave() abort
  call copilot_ide#timer(0)
  if s:loaded
    py3 _copilot_ide.leave()
  elseif s:booting
    py3 _copilot_ide_boot.leave()
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
  if !s:ready()
    return []
  endif
  let g:copilot_ide_complete_lead = a:lead
  return py3eval('_copilot_ide.complete(vim.eval("g:copilot_ide_complete_lead"))')
endfunction

" The repeating timer (every g:copilot_ide_poll_ms) on (1) or off (0).
function! s:timer_on() abort
  call copilot_ide#timer(1)
endfunction
function! copilot_ide#timer(on) abort
  if a:on && s:timer < 0
    let s:busy = 1
    let s:timer = timer_start(max([get(g:, 'copilot_ide_poll_ms', 50), 10]), 'copilot_ide#tick', {'repeat': -1})
  elseif !a:on && s:timer >= 0
    call timer_stop(s:timer)
    let s:timer = -1
  endif
endfunction

" The timer: runs, on Vim's thread, what the server's thread queued, and hands the
" selection over when the cursor moved since the last tick. A cursor move itself only
" sets s:moved (a few microseconds): a burst of moves costs one look at the selection.
" Entering Python costs Vim's thread far more than this function (about 0.15 ms on a
" loaded machine, against a few microseconds), so an idle tick does not enter it:
" Python runs when the cursor moved, while it said at its last run that something is
" pending (a diff, a file to reload), and when an every s:LISTS_EVERY-th tick finds
" the bell rung (work queued by the server's thread) or the quickfix/location lists
" changed: what the server queues while Vim idles waits s:LISTS_EVERY ticks (250 ms
" by default) at most. While the boot thread works, a tick only looks for the ring
" (s:ready()).
let s:LISTS_EVERY = 5
let s:moved = 0
let s:busy = 1
let s:ticks = 0
function! copilot_ide#tick(timer) abort
  let s:ticks += 1
  " An idle tick, most of them: nothing moved, nothing pending, not a fifth tick.
  if s:loaded && !s:moved && !s:busy && s:ticks % s:LISTS_EVERY
    return
  endif
  if !s:loaded
    if !s:ready()
      if !s:booting  " the boot failed or was stopped: no more ticks
        call copilot_ide#timer(0)
      endif
      return
    endif
    let l:look = 1  " just loaded: the server's _started waits
  else
    let l:look = s:ticks % s:LISTS_EVERY == 0
  endif
  let l:rung = l:look && (empty(s:ring) || filereadable(s:ring))
  let l:lists = l:look && s:lists_changed()
  let l:moved = s:moved && s:cursor_changed()
  let s:moved = 0
  if l:moved || s:busy || l:rung || l:lists
    let s:busy = py3eval('_copilot_ide.tick(' . l:moved . ', ' . l:lists . ', ' . l:rung . ')')
  endif
endfunction

" Whether the cursor or the Visual area is elsewhere than at the last look (an
" autocommand fired without a move, or moved it back: Python need not look). Of the
" mode, only which Visual mode counts: Insert or Command-line mode (an Ex command
" typed) selects what Normal mode does.
let s:cursor = []
let s:VISUAL = ['v', 'V', "\<C-V>"]
function! s:cursor_changed() abort
  let l:mode = mode()
  let l:cursor = [bufnr(''), index(s:VISUAL, l:mode) < 0 ? '' : l:mode, line('v'), col('v'), line('.'), col('.')]
  if l:cursor == s:cursor
    return 0
  endif
  let s:cursor = l:cursor
  return 1
endfunction

" Whether the quickfix list or a window's location list changed since the last look
" (at the first look after the server's start, whether there is any list).
function! s:lists_changed() abort
  let l:lists = [getqflist({'id': 0, 'changedtick': 0})]
        \ + map(getwininfo(), {_, w -> getloclist(w.winid, {'id': 0, 'changedtick': 0})})
  if l:lists == s:lists
    return 0
  endif
  let l:first = empty(s:lists)
  let s:lists = l:lists
  return !l:first || !empty(filter(copy(l:lists), 'v:val.id'))
endfunction

" Python on Vim's thread queued work or a file to watch: the next tick runs it.
function! copilot_ide#pending() abort
  let s:busy = 1
endfunction

" The server is up (on Vim's thread, from Python, which hands over the selection of
" now next): its autocommands, the cursor as handed over, the lists to be looked at
" anew, and whether the timer has a bell to look for (else it asks Python).
function! copilot_ide#started(bell) abort
  call copilot_ide#autocmds(1)
  call s:cursor_changed()
  let s:lists = []
  if !a:bell
    let s:ring = ''
  endif
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
