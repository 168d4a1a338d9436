-- vim.diagnostic's diagnostics as the bridge's `diagnostics` messages: one per file
-- whose diagnostics changed (DiagnosticChanged), a moment later, so that a language
-- server's burst of updates is one message. Columns are bytes (vim.diagnostic's own),
-- with the text of every line named; the message goes through unchanged.
local selection = require("copilot_ide.selection")
local text = require("copilot_ide.text")
local uv = vim.uv or vim.loop

local M = {}

local api = vim.api
local DELAY = 100 -- ms

local send
local timer
local dirty = {} -- bufnr -> true: diagnostics changed since the last send
local sent = {} -- path -> true: diagnostics were sent for it (an empty list clears them)

local SEVERITY = { "Error", "Warning", "Information", "Hint" } -- vim.diagnostic.severity 1..4

local function message_of(buf, path)
  local diagnostics, lines = {}, {}
  local count = api.nvim_buf_line_count(buf)
  local function line_text(l)
    local key = tostring(l)
    if lines[key] == nil then
      -- A diagnostic past the buffer's end (stale) names a line that is not there: its
      -- text is empty, and the bridge clamps the column to it.
      lines[key] = l < count and text.utf8(api.nvim_buf_get_lines(buf, l, l + 1, false)[1] or "") or ""
    end
  end
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local lnum, col = math.max(d.lnum or 0, 0), math.max(d.col or 0, 0)
    local end_lnum = math.max(d.end_lnum or lnum, lnum)
    local end_col = math.max(d.end_col or col, 0)
    if end_lnum == lnum then
      end_col = math.max(end_col, col)
    end
    line_text(lnum)
    line_text(end_lnum)
    local item = {
      message = type(d.message) == "string" and text.utf8(d.message) or tostring(d.message),
      severity = SEVERITY[d.severity] or "Error",
      start = { line = lnum, character = col },
      ["end"] = { line = end_lnum, character = end_col },
    }
    if type(d.source) == "string" then
      item.source = text.utf8(d.source)
    end
    if type(d.code) == "string" then
      item.code = text.utf8(d.code)
    elseif type(d.code) == "number" and d.code == math.floor(d.code) then
      item.code = d.code
    end
    diagnostics[#diagnostics + 1] = item
  end
  local msg = { type = "diagnostics", path = path, diagnostics = diagnostics }
  if next(lines) then
    msg.lines = lines
  end
  return msg
end

function M.flush()
  if not send then
    dirty = {}
    return
  end
  local bufs = dirty
  dirty = {}
  for buf in pairs(bufs) do
    if api.nvim_buf_is_valid(buf) then
      local path = selection.file_of(buf)
      if path then
        local ok, msg = pcall(message_of, buf, path)
        if ok and (#msg.diagnostics > 0 or sent[path]) then
          send(msg)
          sent[path] = #msg.diagnostics > 0 or nil
        end
      end
    end
  end
end

local flush_later = vim.schedule_wrap(M.flush)

local function changed(args)
  local buf = args.buf
  if buf and buf > 0 then
    dirty[buf] = true
  else
    for _, b in ipairs(api.nvim_list_bufs()) do
      dirty[b] = true
    end
  end
  if not timer:is_active() then
    timer:start(DELAY, 0, flush_later)
  end
end

-- Start; the diagnostics of every buffer that has some are sent now.
function M.start(write, group)
  send = write
  sent = {}
  timer = timer or uv.new_timer()
  api.nvim_create_autocmd("DiagnosticChanged", { group = group, callback = changed })
  -- A buffer wiped with diagnostics: they go (vim.diagnostic forgets them silently).
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    callback = function(args)
      local path = selection.file_of(args.buf)
      if path and sent[path] and send then
        sent[path] = nil
        send({ type = "diagnostics", path = path, diagnostics = {} })
      end
    end,
  })
  for _, b in ipairs(api.nvim_list_bufs()) do
    dirty[b] = true
  end
  M.flush()
end

function M.stop()
  send = nil
  dirty = {}
  if timer then
    timer:stop()
  end
end

return M
