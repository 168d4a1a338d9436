-- After every closed diff the CLI may write the file (on SAVED, and after a yes in its
-- own terminal dialog: docs/BRIDGE.md "About diffs"), and Neovim never does. So the
-- file is watched for a while and a buffer showing it is reloaded when it changes. The
-- watch is a libuv timer doing one stat per file per tick; the main loop is entered
-- only when a file changed.
local uv = vim.uv or vim.loop

local M = {}

local api = vim.api
local TICK = 100 -- ms
local WATCH = 30000 -- ms a closed diff's file is watched
-- ms a changed file stays watched: the CLI may write in steps (empty the file, then
-- write the text), and a reload between the steps would leave an empty buffer.
local SETTLE = 3000

local timer
local watched = {} -- path -> { state = "mtime:size" or false, until = ms }

local function state(path)
  local st = uv.fs_stat(path)
  if not st then
    return false
  end
  return string.format("%d.%d:%d", st.mtime.sec, st.mtime.nsec or 0, st.size)
end

-- The loaded buffer holding `path` (a real path), or nil.
local function buffer_of(path)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" and vim.bo[buf].buftype == "" and (uv.fs_realpath(name) or name) == path then
        return buf
      end
    end
  end
end
M.buffer_of = buffer_of

-- The CLI wrote `path`: reload its buffer, unless it has changes of the user's (then
-- Neovim asks, as for any file changed outside: W12).
local function reload(path)
  local buf = buffer_of(path)
  if not buf then
    return
  end
  if not vim.bo[buf].modified then
    vim.bo[buf].autoread = true
  end
  pcall(vim.cmd, "checktime " .. buf)
end

local function tick()
  local now = uv.now()
  local changed = {}
  for path, w in pairs(watched) do
    local s = state(path)
    if s ~= w.state then
      changed[#changed + 1] = path
      w.state = s
      w["until"] = math.max(w["until"], now + SETTLE)
    elseif now > w["until"] then
      watched[path] = nil
    end
  end
  if next(watched) == nil then
    timer:stop()
  end
  if #changed > 0 then
    vim.schedule(function()
      for _, path in ipairs(changed) do
        reload(path)
      end
    end)
  end
end

-- Watch `path` (a local, absolute path: the caller checked it) from now on, its state
-- as `before` (nil: as it is now).
function M.watch(path, before)
  if before == nil then
    before = state(path)
  end
  local w = watched[path]
  if w then
    w["until"] = uv.now() + WATCH
  else
    watched[path] = { state = before, ["until"] = uv.now() + WATCH }
  end
  timer = timer or uv.new_timer()
  if not timer:is_active() then
    timer:start(TICK, TICK, tick)
  end
end

M.state = state

function M.stop()
  watched = {}
  if timer then
    timer:stop()
  end
end

return M
