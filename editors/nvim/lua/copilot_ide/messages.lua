-- The plugin's messages: one line each (cut to the screen's width), shown one at a time,
-- at most one every TICK ms, each kept in :messages. Two lines echoed in one moment (a
-- burst of the bridge's output: six diffs closed at once) would leave Neovim at "Press
-- ENTER", taking the user's next key; one at a time, each replaces the last on the
-- screen and none is lost from the history.
local text = require("copilot_ide.text")
local uv = vim.uv or vim.loop

local M = {}

local TICK = 40 -- ms
local HIGHLIGHT = { [vim.log.levels.ERROR] = "ErrorMsg", [vim.log.levels.WARN] = "WarningMsg" }

local queue = {}
local timer

local function show_one()
  local item = table.remove(queue, 1)
  if item then
    pcall(vim.api.nvim_echo, { { text.one_line(item[1]), HIGHLIGHT[item[2]] } }, true, {})
  end
  if #queue == 0 and timer then
    timer:stop()
  end
end

local show_later = vim.schedule_wrap(show_one)

-- Say `msg` (at `level`, a vim.log.levels value: it picks the highlight).
function M.say(msg, level)
  queue[#queue + 1] = { msg, level or vim.log.levels.INFO }
  timer = timer or uv.new_timer()
  if not timer:is_active() then
    timer:start(0, TICK, show_later)
  end
end

return M
