-- The selection of the current window, handed to the bridge a moment after the cursor
-- or the Visual area moved. A move itself costs the main loop one Lua call that arms a
-- timer (when it is not armed already); the timer's callback, on the main loop, reads
-- the selection once for a whole burst of moves and sends it when it changed. The
-- bridge then debounces the pushes to the CLI (docs/BRIDGE.md --debounce).
local positions = require("copilot_ide.positions")
local uv = vim.uv or vim.loop

local M = {}

local api = vim.api
local DELAY = 50 -- ms from the first move of a burst to the look at the selection

local send -- the owner's function that writes a message to the bridge
local timer
local armed = false
local last_key
local files = {} -- bufnr -> { name, real path or false }

-- The real path of a buffer holding a file, or nil (help, terminal, a diff's
-- proposal, an unnamed buffer...): cached while the buffer's name stays.
function M.file_of(buf)
  local name = api.nvim_buf_get_name(buf)
  local cached = files[buf]
  if cached and cached[1] == name then
    return cached[2] or nil
  end
  local path = false
  if name ~= "" and vim.bo[buf].buftype == "" and not name:find("^%a[%w+.-]*://") then
    path = uv.fs_realpath(name) or vim.fn.fnamemodify(name, ":p")
  end
  files[buf] = { name, path }
  return path or nil
end

local VISUAL = { v = "v", V = "V", ["\22"] = "\22", s = "v", S = "V", ["\19"] = "\22" }

local function get_lines(buf)
  return function(l1, l2)
    return api.nvim_buf_get_lines(buf, l1 - 1, l2, false)
  end
end

-- The block's screen cells, from its corners (see positions.block).
local function block_cells(v, c, inclusive)
  local function first_cell(l, col)
    return col > 1 and vim.fn.virtcol({ l, col - 1 }) + 1 or 1
  end
  local cells = {
    first_cell(v[2], v[3]),
    vim.fn.virtcol({ v[2], v[3] }),
    first_cell(c[2], c[3]),
    vim.fn.virtcol({ c[2], c[3] }),
  }
  local left = math.min(cells[1], cells[3])
  local right = math.max(cells[2], cells[4]) - (inclusive and 0 or 1)
  if vim.fn.getcurpos()[5] >= 2147483647 then -- `$`: every row to its end
    right = nil
  end
  return left, right
end

-- The current window's selection as a bridge message, or nil when the window shows
-- no file. `key` says what it was read from (nil: unchanged since the last look).
local function read(force)
  local buf = api.nvim_get_current_buf()
  local path = M.file_of(buf)
  if not path then
    return nil
  end
  local mode = VISUAL[api.nvim_get_mode().mode:sub(1, 1)]
  local msg = { type = "selection", path = path }
  if mode then
    local v, c = vim.fn.getpos("v"), vim.fn.getpos(".")
    local key = table.concat({ path, mode, v[2], v[3], c[2], c[3], api.nvim_buf_get_changedtick(buf) }, ":")
    if key == last_key and not force then
      return nil
    end
    last_key = key
    local inclusive = vim.o.selection ~= "exclusive"
    if mode == "\22" then
      local left, right = block_cells(v, c, inclusive)
      msg.text, msg.start, msg["end"], msg.lines = positions.block(
        math.min(v[2], c[2]), math.max(v[2], c[2]), left, right, get_lines(buf), vim.bo[buf].tabstop)
    else
      msg.text, msg.start, msg["end"], msg.lines = positions.visual(mode, v, c, get_lines(buf), inclusive)
    end
  else
    local cursor = api.nvim_win_get_cursor(0)
    local key = path .. ":" .. cursor[1] .. ":" .. cursor[2]
    if key == last_key and not force then
      return nil
    end
    last_key = key
    local line = api.nvim_buf_get_lines(buf, cursor[1] - 1, cursor[1], false)[1] or ""
    msg.text, msg.start, msg["end"], msg.lines = positions.cursor(cursor[1], cursor[2], line)
  end
  return msg
end

-- The look (on the main loop): send the selection when it changed.
function M.flush(force)
  armed = false
  if not send then
    return
  end
  local ok, msg = pcall(read, force)
  if ok and msg then
    send(msg)
  end
end

local flush_later = vim.schedule_wrap(function()
  M.flush(false)
end)

-- The autocommands' callback: all a cursor move costs.
function M.moved()
  if not armed then
    armed = true
    timer:start(DELAY, 0, flush_later)
  end
end

-- Start following the cursor; `write` sends a message to the bridge. The selection of
-- now is sent at once (the CLI's first look, PROTOCOL.md §5).
function M.start(write, group)
  send = write
  last_key = nil
  timer = timer or uv.new_timer()
  local events = { "CursorMoved", "CursorMovedI", "BufEnter", "WinEnter", "ModeChanged" }
  api.nvim_create_autocmd(events, { group = group, callback = M.moved })
  M.flush(true)
end

function M.stop()
  send = nil
  armed = false
  if timer then
    timer:stop()
  end
end

-- For the commands: the selection of the current window (a range), or nil.
M.read = read
M.get_lines = get_lines
M.block_cells = block_cells

return M
