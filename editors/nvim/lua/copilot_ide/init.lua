-- copilot_ide: Neovim as the IDE of GitHub Copilot CLI's /ide (see :help copilot_ide).
--
-- Neovim runs no server itself: it starts `copilot-ide bridge` (docs/BRIDGE.md) for its
-- working folder, a Python process on pipes that writes the lock file the CLI looks
-- for, serves the CLI and removes the lock when it stops. This module owns that
-- process and hands each part a function that writes to it: selection.lua (the cursor
-- and Visual area), diagnostics.lua (vim.diagnostic), diffs.lua (proposed edits),
-- reload.lua (files the CLI writes). Nothing on Neovim's main loop waits for the
-- bridge, except Neovim's exit, which gives it a moment to remove its lock.
local diagnostics = require("copilot_ide.diagnostics")
local diffs = require("copilot_ide.diffs")
local job = require("copilot_ide.job")
local positions = require("copilot_ide.positions")
local reload = require("copilot_ide.reload")
local selection = require("copilot_ide.selection")
local text = require("copilot_ide.text")
local uv = vim.uv or vim.loop

local M = {}

local api = vim.api
local GROUP = "copilot_ide"
local NAME = "Neovim"
local STOP_KILL_MS = 5000 -- a stopped bridge still running then is sent SIGTERM
local EXIT_WAIT_MS = 2000 -- what Neovim's exit gives the bridge to remove its lock

-- The bridge's start: the library's folder first on sys.path, then its `bridge`
-- command. Python runs isolated (-I): neither the working folder (a project may hold
-- an `ide_protocol` folder of its own) nor PYTHONPATH is on sys.path (docs/BRIDGE.md).
local LAUNCHER = "import sys; sys.path.insert(0, sys.argv.pop(1)); "
  .. "from ide_protocol.__main__ import main; sys.exit(main(sys.argv[1:]))"

local S = {
  bridge = nil, -- the running bridge (job.lua), nil when stopped
  ready = nil, -- its `ready` (or latest `lock`) message
  folder = nil, -- the folder served (a real path)
  sessions = {}, -- CLI session id -> the `connected` message
  replies = {}, -- request id -> function(reply)
  next_id = 0,
  announce = false, -- say "serving" when ready (a :CopilotIdeStart)
  errors_seen = {}, -- the bridge's error texts already shown
}

local notify = require("copilot_ide.messages").say

local function err(msg)
  notify("copilot_ide: " .. msg, vim.log.levels.ERROR)
end

-- The plugin's folder (this file is lua/copilot_ide/init.lua in it).
local function plugin_root()
  local source = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

-- The folder holding the `ide_protocol` package: the copy a build put beside the plugin
-- (python/), else the checkout the plugin sits in (editors/nvim of the project).
function M.library()
  if vim.g.copilot_ide_library and vim.g.copilot_ide_library ~= "" then
    return vim.fn.fnamemodify(vim.g.copilot_ide_library, ":p")
  end
  local root = plugin_root()
  for _, dir in ipairs({ root .. "/python", vim.fn.fnamemodify(root .. "/../..", ":p") }) do
    if vim.fn.filereadable(dir .. "/ide_protocol/__init__.py") == 1 then
      return uv.fs_realpath(dir) or (dir:gsub("/$", ""))
    end
  end
end

function M.python()
  local p = vim.g.copilot_ide_python
  if type(p) == "string" and p ~= "" then
    return p
  end
  return vim.fn.has("win32") == 1 and "python" or "python3"
end

local function flag(name, default)
  local v = vim.g[name]
  if v == nil then
    return default
  end
  return v ~= 0 and v ~= false and v ~= "0" and v ~= ""
end

-- The bridge's command line for `folder`.
function M.argv(folder)
  local argv = { M.python(), "-I", "-c", LAUNCHER, M.library() or "", "bridge", folder, "--name", NAME }
  if flag("copilot_ide_trusted", false) then
    argv[#argv + 1] = "--trusted"
  end
  return argv
end

-- Neovim's working folder, as the CLI compares it: its real path.
local function working_folder()
  local cwd = vim.fn.getcwd(-1, -1)
  return uv.fs_realpath(cwd) or cwd
end

local function send(msg)
  return S.bridge ~= nil and S.bridge:send(msg)
end

local function request(msg, on_reply)
  S.next_id = S.next_id + 1
  msg.id = S.next_id
  S.replies[S.next_id] = on_reply
  if not send(msg) then
    S.replies[S.next_id] = nil
    return false
  end
  return true
end

local function count_sessions()
  return vim.tbl_count(S.sessions)
end

-- ------------------------------------------------------------ the bridge's messages

local handlers = {}

function handlers.ready(msg)
  S.ready = msg
  if S.announce then
    S.announce = false
    notify("Copilot IDE: serving " .. table.concat(msg.folders or {}, ", "))
  end
end

function handlers.lock(msg)
  S.ready = msg
end

function handlers.connected(msg)
  if type(msg.session) == "string" then
    S.sessions[msg.session] = msg
  end
end

function handlers.disconnected(msg)
  if type(msg.session) == "string" then
    S.sessions[msg.session] = nil
  end
end

function handlers.status(msg)
  S.sessions = {}
  for _, s in ipairs(type(msg.sessions) == "table" and msg.sessions or {}) do
    if type(s) == "table" and type(s.id) == "string" then
      S.sessions[s.id] = s
    end
  end
end

handlers.diff = diffs.on_diff
handlers.diff_closed = diffs.on_closed

function handlers.error(msg, replied)
  if replied then
    return
  end
  if msg.line == 1 then -- the hello: the bridge could not serve (no lock folder...)
    err("cannot start: " .. tostring(msg.message))
    M.stop()
    return
  end
  local what = tostring(msg.message)
  if not S.errors_seen[what] then -- once each: a message sent at every move would repeat it
    S.errors_seen[what] = true
    notify(string.format("copilot_ide: the bridge refused line %s: %s", tostring(msg.line), what),
      vim.log.levels.WARN)
  end
end

function handlers.dropped(msg)
  notify(string.format("copilot_ide: %s messages of the bridge were lost (a proposed edit among them was rejected)",
    tostring(msg.messages)), vim.log.levels.WARN)
end

function handlers.stopped(msg, _, bridge)
  if bridge.announce_stop then
    notify("Copilot IDE: stopped (lock file removed" .. (bridge.announce_stop ~= true and bridge.announce_stop or "") .. ")")
  end
end

local function on_message(msg, bridge)
  local current = bridge == S.bridge
  if not current and msg.type ~= "stopped" then
    return -- a stopped bridge's last words
  end
  local reply = current and msg.id ~= nil and S.replies[msg.id]
  if reply then
    S.replies[msg.id] = nil
  end
  local handler = handlers[msg.type]
  local ok, e = true, nil
  if handler then
    ok, e = pcall(handler, msg, reply, bridge)
  end
  if reply then
    local ok2, e2 = pcall(reply, msg)
    ok, e = ok and ok2, e or e2
  end
  if not ok then
    err("could not handle the bridge's " .. tostring(msg.type) .. ": " .. tostring(e):gsub("^.-:%d+: ", ""))
  end
end

-- ------------------------------------------------------------------ start and stop

local function teardown()
  pcall(api.nvim_del_augroup_by_name, GROUP)
  selection.stop()
  diagnostics.stop()
  local pending = diffs.stop()
  S.bridge, S.ready, S.sessions, S.replies = nil, nil, {}, {}
  return pending
end

local function on_exit(code, stderr, bridge)
  if bridge ~= S.bridge then
    return -- stopped by us, or replaced
  end
  teardown()
  local last = vim.trim(stderr):match("([^\n]*)$") or ""
  err(string.format("the bridge ended (exit %d)%s; :CopilotIdeStart starts it again", code,
    last ~= "" and (": " .. last) or ""))
end

local function on_garbage(what)
  err("the bridge wrote " .. what)
end

function M.running()
  return S.bridge ~= nil
end

-- :CopilotIdeStart (and the autostart): the bridge for Neovim's working folder. Never
-- waits: the lock appears when the bridge says `ready`.
function M.start(opts)
  opts = opts or {}
  if S.bridge then
    if opts.announce then
      notify("Copilot IDE: already serving " .. (S.folder or "?"))
    end
    return
  end
  local python = M.python()
  if vim.fn.executable(python) ~= 1 then
    err(string.format("cannot start: no Python here: %s is not an executable (Python 3.8 or later; "
      .. "set g:copilot_ide_python)", python))
    return
  end
  if not M.library() then
    err("cannot start: the ide_protocol library is not beside the plugin (build it with: make nvim-plugin)")
    return
  end
  local folder = working_folder()
  local bridge, why = job.start({
    argv = M.argv(folder),
    cwd = folder,
    on_message = on_message,
    on_exit = on_exit,
    on_garbage = on_garbage,
  })
  if not bridge then
    err("cannot start the bridge: " .. tostring(why))
    return
  end
  S.bridge, S.folder, S.ready, S.sessions, S.replies = bridge, folder, nil, {}, {}
  S.announce = opts.announce
  S.errors_seen = {}
  bridge:send({ type = "hello", protocol = 1, unit = "bytes", name = NAME })
  local group = api.nvim_create_augroup(GROUP, { clear = true })
  api.nvim_create_autocmd("DirChanged", {
    group = group,
    pattern = { "global", "auto" },
    callback = function()
      M.folder_changed()
    end,
  })
  api.nvim_create_autocmd("VimLeavePre", {
    group = group,
    callback = function()
      M.leave()
    end,
  })
  selection.start(send, group)
  diagnostics.start(send, group)
  diffs.start(send, group)
end

-- :CopilotIdeStop: the bridge stops (its lock goes first; pending diffs are answered
-- REJECTED, client_disconnected, by it). Never waits for it.
function M.stop(opts)
  opts = opts or {}
  local bridge = S.bridge
  if not bridge then
    if opts.announce then
      notify("Copilot IDE: not running")
    end
    return
  end
  local pending = teardown()
  bridge.announce_stop = opts.announce and (pending > 0 and string.format("; %d pending diff%s rejected",
    pending, pending == 1 and "" or "s") or true)
  bridge:send({ type = "stop" })
  bridge:close()
  vim.defer_fn(function()
    bridge:kill()
  end, STOP_KILL_MS)
  if opts.announce then
    notify("Copilot IDE: stopping")
  end
end

-- VimLeavePre: the bridge stops, and Neovim waits (a little) until it has ended, so
-- that no lock and no process is left when Neovim is gone.
function M.leave()
  local bridge = S.bridge
  if not bridge then
    return
  end
  teardown()
  reload.stop()
  bridge:send({ type = "stop" })
  bridge:close()
  bridge:wait(EXIT_WAIT_MS)
  bridge:kill()
end

-- DirChanged: serve the new working folder (the bridge rewrites its lock in place:
-- PROTOCOL.md §1).
function M.folder_changed()
  if not S.bridge then
    return
  end
  local folder = working_folder()
  if folder ~= S.folder then
    S.folder = folder
    request({ type = "folders", folders = { folder } }, function() end)
  end
end

-- ------------------------------------------------------------------------ commands

function M.status()
  if not S.bridge then
    notify("Copilot IDE: not running (:CopilotIdeStart)")
    return
  end
  local function show(answered)
    local r = S.ready or {}
    local lines = {
      "Copilot IDE: serving " .. text.visible(table.concat(r.folders or { S.folder }, ", ")),
      "  lock " .. text.visible(tostring(r.lock or "(not written yet)")) .. "  (bridge pid "
        .. tostring(r.pid or S.bridge.pid) .. ", library " .. text.visible(M.library() or "?") .. ")",
      string.format("  sessions connected: %d%s", count_sessions(), answered and "" or " (the bridge did not answer)"),
    }
    for id, s in pairs(S.sessions) do
      lines[#lines + 1] = string.format("    %s %s %s%s", text.visible(id:sub(1, 8)), text.visible(tostring(s.client or "?")),
        text.visible(tostring(s.client_version or "")), type(s.name) == "string" and s.name ~= ""
        and (" \"" .. text.visible(s.name) .. "\"") or "")
    end
    vim.list_extend(lines, diffs.status_lines())
    api.nvim_echo({ { table.concat(lines, "\n") } }, true, {})
  end
  local done = false
  local function answer(reply)
    if not done then
      done = true
      show(reply ~= nil and reply.type == "status")
    end
  end
  if not request({ type = "status" }, answer) then
    answer(nil)
    return
  end
  vim.defer_fn(function()
    answer(nil)
  end, 1500)
end

local function current_file()
  local path = selection.file_of(api.nvim_get_current_buf())
  if not path then
    err("this buffer is not a file")
  end
  return path
end

local function require_running()
  if not S.bridge then
    err("not running (:CopilotIdeStart)")
    return false
  end
  return true
end

local function sent(what)
  return function(reply)
    if reply.type == "sent" then
      if (reply.sessions or 0) > 0 then
        notify(string.format("Copilot IDE: sent %s to %d Copilot CLI session%s", what, reply.sessions,
          reply.sessions == 1 and "" or "s"))
      else
        err("no Copilot CLI is connected")
      end
    else
      err(tostring(reply.message))
    end
  end
end

function M.send_file()
  local path = require_running() and current_file()
  if path then
    request({ type = "add_file", path = path }, sent(text.visible(vim.fn.fnamemodify(path, ":t"))))
  end
end

-- :[range]CopilotIdeSendSelection: the visual selection itself (:'<,'> right after
-- one), else the lines of the range.
function M.send_selection(line1, line2, range)
  local path = require_running() and current_file()
  if not path then
    return
  end
  local buf = api.nvim_get_current_buf()
  local get = selection.get_lines(buf)
  local msg = { type = "add_selection", path = path }
  local v1, v2 = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  local vmode = vim.fn.visualmode()
  if range > 0 and v1[2] == line1 and v2[2] == line2 and vmode ~= "" then
    local inclusive = vim.o.selection ~= "exclusive"
    if vmode == "\22" then
      local left, right = selection.block_cells(v1, v2, inclusive)
      msg.text, msg.start, msg["end"], msg.lines = positions.block(line1, line2, left, right, get, vim.bo.tabstop)
    else
      msg.text, msg.start, msg["end"], msg.lines = positions.visual(vmode, v1, v2, get, inclusive)
    end
  else
    msg.text, msg.start, msg["end"], msg.lines = positions.visual("V", { 0, line1, 1 }, { 0, line2, 1 }, get, true)
  end
  request(msg, sent(string.format("%s:%d-%d", text.visible(vim.fn.fnamemodify(path, ":t")),
    msg.start.line + 1, msg["end"].line + 1)))
end

function M.answer(accept, name)
  diffs.answer(accept, name)
end

function M.complete(lead)
  return diffs.complete(lead)
end

-- For a statusline: "Copilot[N]" with N CLI sessions connected, "Copilot[-]" with
-- none, "" when not running.
function M.statusline()
  if not S.bridge then
    return ""
  end
  local n = count_sessions()
  return n > 0 and string.format("Copilot[%d]", n) or "Copilot[-]"
end

-- What :checkhealth reads (health.lua): the running bridge, as the plugin knows it.
function M.state()
  return { running = S.bridge ~= nil, ready = S.ready, folder = S.folder,
    pid = S.bridge and S.bridge.pid, sessions = count_sessions(), diffs = diffs.pending() }
end

-- lazy.nvim and packer call setup(); the options are the g: variables' (without the
-- copilot_ide_ prefix). Autostart happens when the plugin file loads, as without it.
function M.setup(opts)
  for k, v in pairs(opts or {}) do
    vim.g["copilot_ide_" .. k] = v
  end
end

M.flag = flag

return M
