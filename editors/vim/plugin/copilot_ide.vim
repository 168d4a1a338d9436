" copilot_ide.vim: Copilot CLI's /ide protocol in Vim (see :help copilot_ide).
" Loaded at start-up from 'runtimepath', or later with :runtime: the server for Vim's
" working folder starts at once if Vim has started, else just after VimEnter (a timer:
" after Vim's first screen). Nothing here enters Python; the start itself holds Vim's
" thread only for Python's own start (see autoload/copilot_ide.vim).
if exists('g:loaded_copilot_ide')
  finish
endif
let g:loaded_copilot_ide = 1

if !has('python3') || !has('timers')
  echomsg 'copilot_ide: this Vim has no +python3 (and +timers): the plugin does nothing (try vim-nox)'
  finish
endif

let g:copilot_ide_autostart = get(g:, 'copilot_ide_autostart', 1)
let g:copilot_ide_trusted = get(g:, 'copilot_ide_trusted', 0)

command! -bar CopilotIdeStart call copilot_ide#start()
command! -bar CopilotIdeStop call copilot_ide#stop()
command! -bar CopilotIdeStatus call copilot_ide#status()
command! -bar CopilotIdeSendFile call copilot_ide#send_file()
command! -bar -range CopilotIdeSendSelection call copilot_ide#send_selection(<line1>, <line2>, <range>)
command! -bar -nargs=? -complete=customlist,copilot_ide#complete CopilotIdeAccept
      \ call copilot_ide#answer(1, <q-args>)
command! -bar -nargs=? -complete=customlist,copilot_ide#complete CopilotIdeReject
      \ call copilot_ide#answer(0, <q-args>)

augroup copilot_ide_diff
augroup END
augroup copilot_ide_life
  autocmd!
  autocmd VimLeavePre * call copilot_ide#leave()
augroup END

if g:copilot_ide_autostart
  if v:vim_did_enter
    call copilot_ide#start()
  else
    autocmd copilot_ide_life VimEnter * ++once call timer_start(0, {-> copilot_ide#start()})
  endif
endif
