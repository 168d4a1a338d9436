-- The plugin's messages: one line each, and the messages of one moment (a burst of the
-- bridge's output, a command) joined into one line, shown a moment later. Two lines at
-- once would leave Neovim at "Press ENTER", taking the user's next key.
local text = require("copilot_ide.text")
local uv = vim.uv or vim.loop

local M = {}

local JOIN_MS = 30
local HIGHLIGHT = { [vim.log.levels.ERROR] = "ErrorMsg", [vim.log.levels.WARN] = "WarningMsg" }

local held = {}
local level = vim.log.levels.INFO
local timer

local show = vim.schedule_wrap(function()
  local lines = held
  held = {}
  local hl = HIGHLIGHT[level]
  level = vim.log.levels.INFO
  if #lines > 0 then
    pcall(vim.api.nvim_echo, { { text.one_line(table.concat(lines, " | ")), hl } }, true, {})
  end
end)

-- Say `msg` (at `lvl`, a vim.log.levels value: the gravest of a line colours it).
function M.say(msg, lvl)
  lvl = lvl or vim.log.levels.INFO
  held[#held + 1] = msg
  if lvl > level then
    level = lvl
  end
  timer = timer or uv.new_timer()
  if not timer:is_active() then
    timer:start(JOIN_MS, 0, show)
  end
end

return M
