-- The proposed edits of the CLI (`diff` messages of the bridge, PROTOCOL.md §4), each in
-- a tab page of its own: the file as it is on disk on the left (the text the bridge
-- read, never the file opened), the proposal on the right, both in diff mode. The
-- proposal's buffer is 'buftype' acwrite: `:w` in it answers through BufWriteCmd (an
-- accept) and never writes a file; `:q` in its window (or closing its tab, or wiping
-- it) rejects. Neovim never writes the file: on SAVED the CLI does, and a watched
-- buffer is reloaded (reload.lua).
--
-- Everything in a diff is the CLI's, so untrusted: the path reaches file functions only
-- when it is a plain local absolute path; tab names and paths are shown escaped
-- (text.visible) and never reach a statusline, where %{} would run; the buffers get
-- syntax highlighting only ('syntax' set, 'filetype' never: no ftplugin, no FileType
-- event, so no language server attaches), 'nomodeline'. A diff that cannot be shown is
-- rejected at once, with the reason shown.
local reload = require("copilot_ide.reload")
local text = require("copilot_ide.text")
local uv = vim.uv or vim.loop

local M = {}

local api = vim.api
local TAB_VAR = "copilot_ide_diff" -- the tab name, as shown
local NUMBER_VAR = "copilot_ide_diff_number" -- the view's number: what finds the tab
local STATUSLINE = "%<Copilot CLI's proposal:  :w accepts  :q rejects"

local send -- the owner's writer of bridge messages
local group -- the owner's augroup
local views = {} -- number -> view, while pending
local by_id = {} -- the bridge's diff id -> view
local count = 0
local retry -- a repeating timer while a view waits to be shown or closed

-- Whether `path` may be given to file functions: a plain local absolute path (no
-- scheme such as scp:// or term://, which Neovim's plugins would act on; no NUL or
-- line break).
function M.local_path(path)
  if type(path) ~= "string" or path == "" or path:find("[%z\n\r]") then
    return false
  end
  if path:sub(1, 1) == "/" then
    return not path:find("^//") or vim.fn.has("win32") == 1
  end
  return vim.fn.has("win32") == 1 and path:find("^%a:[/\\]") ~= nil
end

local function real(path)
  return uv.fs_realpath(path) or vim.fn.fnamemodify(path, ":p")
end

local message = require("copilot_ide.messages").say

-- The syntax to colour a proposal of `path` with, or nil: by the path's name where this
-- Neovim can match one without a buffer (0.8+), else the 'filetype' of a buffer that
-- shows the file (or another of its extension). Never by the text.
local function syntax_of(path)
  local ft
  if vim.fn.has("nvim-0.8") == 1 then
    local ok, found = pcall(vim.filetype.match, { filename = path })
    ft = ok and found or nil
  end
  if not ft and M.local_path(path) then
    local buf = reload.buffer_of(real(path))
    ft = buf and vim.bo[buf].filetype or nil
  end
  if not ft or ft == "" then
    local ext = path:match("%.([%w_]+)$")
    for _, buf in ipairs(ext and api.nvim_list_bufs() or {}) do
      if api.nvim_buf_is_loaded(buf) and api.nvim_buf_get_name(buf):match("%.([%w_]+)$") == ext then
        local f = vim.bo[buf].filetype
        if f ~= "" then
          ft = f
          break
        end
      end
    end
  end
  if type(ft) == "string" and ft:match("^[%w_]+$") then
    return ft
  end
end

local function can_show()
  local m = api.nvim_get_mode()
  return m.mode == "n" and not m.blocking and vim.fn.getcmdwintype() == ""
end

local function set_name(buf, name, number)
  if not pcall(api.nvim_buf_set_name, buf, name) then
    pcall(api.nvim_buf_set_name, buf, name .. " #" .. number)
  end
end

local function fill(buf, lines)
  vim.bo[buf].modeline = false
  vim.bo[buf].undolevels = -1
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
end

local function wipe(buf)
  if buf and api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_delete, buf, { force = true })
  end
end

local function tab_closed(view)
  return not view.tab or not api.nvim_tabpage_is_valid(view.tab)
end

-- Close the view's tab (when it is Neovim's only tab: end its diff) and wipe its
-- buffers. The user's own buffers are never touched.
local function close(view)
  local was = view.state
  view.state = "closed"
  local shown = was == "open" or was == "closing"
  if shown and not tab_closed(view) then
    if #api.nvim_list_tabpages() > 1 then
      pcall(vim.cmd, "tabclose! " .. api.nvim_tabpage_get_number(view.tab))
    else
      pcall(api.nvim_tabpage_del_var, view.tab, TAB_VAR)
      pcall(api.nvim_tabpage_del_var, view.tab, NUMBER_VAR)
      pcall(vim.cmd, "diffoff!")
    end
  end
  wipe(view.proposal)
  wipe(view.disk)
  if shown and not tab_closed(view) and #api.nvim_list_tabpages() > 1 then
    view.state = "closing" -- Neovim refused now (a command-line window...): later
    if was ~= "closing" then
      M.schedule_retry(view)
    end
  end
end

local function forget(view)
  views[view.number] = nil
  by_id[view.id] = nil
end

-- Watch the view's file for the CLI's write (after every answer, docs/BRIDGE.md).
local function watch(view)
  if view.real then
    reload.watch(view.real, view.file_before)
  end
end

-- Answer `view` (accept: true/false): the bridge's diff_answer; its tab goes.
function M.answer_view(view, accept, why)
  forget(view)
  send({ type = "diff_answer", diff = view.id, accept = accept })
  close(view)
  watch(view)
  message(string.format("Copilot IDE: %s %s%s", accept and "accepted" or "rejected", view.name, why or ""))
end

-- The user closed the proposal's window or tab, or wiped its buffer: a no.
function M.check()
  for _, view in pairs(views) do
    if view.state == "open" then
      local gone = tab_closed(view) or not api.nvim_win_is_valid(view.win)
        or not api.nvim_buf_is_valid(view.proposal)
      if gone then
        M.answer_view(view, false, " (its window was closed)")
      end
    end
  end
end

local function write_cmd(view, args)
  if view.state ~= "open" then
    return
  end
  local target = args.file or vim.fn.expand("<afile>")
  local own = api.nvim_buf_get_name(view.proposal)
  if own ~= view.buf_name or (target ~= own and real(target) ~= own and target ~= "") then
    message("copilot_ide: a proposal is never written to a file: :w in its window accepts it, :q rejects it",
      vim.log.levels.ERROR)
    return
  end
  M.answer_view(view, true)
end

local function build(view)
  local n = view.number
  local disk = api.nvim_create_buf(false, true)
  view.disk = disk
  vim.bo[disk].bufhidden = "wipe"
  fill(disk, view.original_lines)
  set_name(disk, string.format("copilot-ide://%d/on-disk/%s", n, text.visible(view.path)), n)
  local proposal = api.nvim_create_buf(false, true)
  view.proposal = proposal
  vim.bo[proposal].buftype = "acwrite"
  vim.bo[proposal].bufhidden = "hide"
  fill(proposal, view.new_lines)
  set_name(proposal, string.format("copilot-ide://%d/%s", n, view.name), n)
  view.buf_name = api.nvim_buf_get_name(proposal)
  api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    buffer = proposal,
    callback = function(args)
      write_cmd(view, args)
    end,
  })
  -- A part of it (:1,2w FILE) or an append (:w >> FILE) is no answer, and no write.
  api.nvim_create_autocmd({ "FileWriteCmd", "FileAppendCmd" }, {
    group = group,
    buffer = proposal,
    callback = function()
      message("copilot_ide: a proposal is never written to a file: :w in its window accepts it, :q rejects it",
        vim.log.levels.ERROR)
    end,
  })
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    buffer = proposal,
    callback = function()
      vim.schedule(M.check)
    end,
  })
  local syntax = syntax_of(view.path)
  vim.cmd("tab sbuffer " .. disk)
  view.tab = api.nvim_get_current_tabpage()
  api.nvim_tabpage_set_var(view.tab, TAB_VAR, view.name)
  api.nvim_tabpage_set_var(view.tab, NUMBER_VAR, n)
  if syntax then
    vim.bo[disk].syntax = syntax
  end
  vim.cmd("diffthis")
  vim.cmd("rightbelow vertical sbuffer " .. proposal)
  view.win = api.nvim_get_current_win()
  vim.wo[view.win].statusline = STATUSLINE
  if syntax then
    vim.bo[proposal].syntax = syntax
  end
  vim.cmd("diffthis")
  pcall(vim.cmd, "normal! gg")
  if vim.fn.diff_hlID(1, 1) == 0 then
    pcall(vim.cmd, "silent! normal! ]c")
  end
  view.state = "open"
  message(string.format("Copilot proposes an edit of %s: :w accepts, :q rejects (or :CopilotIdeAccept, :CopilotIdeReject)",
    text.visible(vim.fn.fnamemodify(view.path, ":t"))), vim.log.levels.WARN)
end

local function show(view)
  local before = api.nvim_get_current_tabpage()
  local ok, err = pcall(build, view)
  if ok then
    return
  end
  -- What was made goes again; the CLI must not wait for an answer nobody can give.
  if view.tab and api.nvim_tabpage_is_valid(view.tab) and #api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd, "tabclose! " .. api.nvim_tabpage_get_number(view.tab))
  end
  if api.nvim_tabpage_is_valid(before) then
    pcall(api.nvim_set_current_tabpage, before)
  end
  view.state = "failed"
  M.answer_view(view, false, " (it could not be shown: " .. tostring(err):gsub("^.-:%d+: ", "") .. ")")
end

-- Show the views that wait (Neovim is back in Normal mode), close those that could
-- not be closed yet.
local function show_waiting()
  if not can_show() then
    return
  end
  for _, view in pairs(views) do
    if view.state == "waiting" then
      show(view)
    end
  end
  local still = {}
  for _, view in ipairs(M.closing or {}) do
    close(view)
    if view.state == "closing" then
      still[#still + 1] = view
    end
  end
  M.closing = #still > 0 and still or nil
end

local retry_later = vim.schedule_wrap(function()
  show_waiting()
  local waiting = M.closing ~= nil
  for _, view in pairs(views) do
    waiting = waiting or view.state == "waiting"
  end
  if not waiting and retry then
    retry:stop()
  end
end)

function M.schedule_retry(view)
  if view then
    M.closing = M.closing or {}
    table.insert(M.closing, view)
  end
  retry = retry or uv.new_timer()
  if not retry:is_active() then
    retry:start(200, 200, retry_later)
  end
end

local function field(msg, name, kind)
  local v = msg[name]
  if type(v) ~= kind then
    error(string.format("its %q is not a %s", name, kind), 0)
  end
  return v
end

-- A `diff` message of the bridge.
function M.on_diff(msg)
  if type(msg.id) ~= "number" then
    return
  end
  count = count + 1
  local view = { id = msg.id, number = count, state = "waiting" }
  local ok, err = pcall(function()
    view.tab_name = field(msg, "tab", "string")
    view.name = text.visible(view.tab_name)
    view.path = field(msg, "path", "string")
    if not M.local_path(view.path) then
      error("not a local file path: " .. text.visible(view.path), 0)
    end
    view.real = real(view.path)
    view.file_before = reload.state(view.real)
    view.original_lines = text.lines_of(field(msg, "original", "string"))
    view.new_lines = text.lines_of(field(msg, "new", "string"))
  end)
  view.name = view.name or ("diff " .. msg.id)
  views[view.number] = view
  by_id[view.id] = view
  if not ok then
    view.state = "failed"
    M.answer_view(view, false, " (it cannot be shown: " .. tostring(err) .. ")")
    return
  end
  if can_show() then
    show(view)
  else
    message(string.format("Copilot IDE: a proposed edit of %s waits until you are back in Normal mode",
      text.visible(vim.fn.fnamemodify(view.path, ":t"))), vim.log.levels.WARN)
    M.schedule_retry()
  end
end

-- A `diff_closed` message: answered here (its view is gone already), in the CLI's own
-- dialog (`closed_via_tool`), or its CLI left. The file is watched in every case.
function M.on_closed(msg)
  local view = by_id[msg.id]
  if view then
    forget(view)
    close(view)
    message(string.format("Copilot IDE: %s %s (%s)", view.name, tostring(msg.result), tostring(msg.trigger)))
  end
  if M.local_path(msg.path) then
    reload.watch(real(msg.path), view and view.file_before or nil)
  end
end

-- The view a command means: the one named (its tab name, its number, a unique part of
-- its tab name), else the current tab's, else the only one. Nil with a message.
function M.find(name)
  name = vim.trim(name or "")
  if name == "" then
    local ok, here = pcall(api.nvim_tabpage_get_var, 0, NUMBER_VAR)
    if ok and views[here] then
      return views[here]
    end
    local only, n = nil, 0
    for _, view in pairs(views) do
      only, n = view, n + 1
    end
    if n == 1 then
      return only
    end
    message(n == 0 and "copilot_ide: no pending diff"
      or string.format("copilot_ide: %d pending diffs: name one (Tab completes)", n), vim.log.levels.ERROR)
    return nil
  end
  local found = {}
  for _, test in ipairs({
    function(v) return v.name == name end,
    function(v) return tostring(v.number) == name end,
    function(v) return v.name:find(name, 1, true) ~= nil end,
  }) do
    for _, view in pairs(views) do
      if test(view) then
        found[#found + 1] = view
      end
    end
    if #found > 0 then
      break
    end
  end
  if #found == 1 then
    return found[1]
  end
  message(#found == 0 and ("copilot_ide: no pending diff matches " .. name)
    or (name .. " matches several pending diffs: name one by its number (:CopilotIdeStatus)"), vim.log.levels.ERROR)
end

function M.answer(accept, name)
  local view = M.find(name)
  if view then
    M.answer_view(view, accept)
  end
end

function M.complete(lead)
  local names = {}
  for _, view in pairs(views) do
    if view.name:find(lead, 1, true) then
      names[#names + 1] = view.name
    end
  end
  table.sort(names)
  return names
end

function M.status_lines()
  local numbers = vim.tbl_keys(views)
  table.sort(numbers)
  local lines = { string.format("  pending diffs: %d", #numbers) }
  for _, n in ipairs(numbers) do
    local view = views[n]
    lines[#lines + 1] = string.format("    %d. %s%s", n, view.name,
      view.state == "waiting" and " (waits for Normal mode)" or "")
  end
  return lines
end

function M.pending()
  return vim.tbl_count(views)
end

-- Start: `write` sends bridge messages; `augroup` holds the autocommands.
function M.start(write, augroup)
  send, group = write, augroup
  api.nvim_create_autocmd({ "WinClosed", "TabClosed" }, {
    group = group,
    callback = function()
      if next(views) then
        vim.schedule(M.check)
      end
    end,
  })
  api.nvim_create_autocmd("ModeChanged", {
    group = group,
    pattern = "*:n",
    callback = function()
      if retry and retry:is_active() then
        vim.schedule(show_waiting)
      end
    end,
  })
end

-- The bridge stopped or ended: every view goes (the bridge answered them
-- client_disconnected); returns how many were pending.
function M.stop()
  local n = 0
  for _, view in pairs(views) do
    n = n + 1
    forget(view)
    close(view)
    watch(view)
  end
  if retry then
    retry:stop()
  end
  send = function() end
  return n
end

return M
