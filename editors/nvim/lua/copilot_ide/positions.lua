-- Neovim positions as the bridge reads them (docs/BRIDGE.md, unit "bytes"): 0-based
-- lines, 0-based byte columns of the line's UTF-8, and the text of every line named
-- (the bridge converts to the wire's UTF-16 with it: PROTOCOL.md §4, §5). Each function
-- returns the selected text, the start and end positions, and the lines they name.
local text = require("copilot_ide.text")

local M = {}

local function pos(line, col)
  return { line = line, character = col }
end

local function lines_table(l1, first, l2, last)
  local t = { [tostring(l1)] = text.utf8(first) }
  t[tostring(l2)] = text.utf8(last)
  return t
end

-- An empty selection at the cursor (row 1-based, col a 0-based byte column).
function M.cursor(row, col, line)
  local p = pos(row - 1, col)
  return "", p, p, { [tostring(row - 1)] = text.utf8(line) }
end

-- The bytes of the character at byte `col` (1-based) of `line`, with the composing
-- characters that follow it (Vim selects a character with them), 0 past the end.
local function char_len(line, col)
  if col > #line then
    return 0
  end
  local n = vim.fn.byteidx(line:sub(col), 1)
  return n > 0 and n or #line - col + 1
end

-- A characterwise or linewise visual selection. `mode`: "v" or "V"; the two ends as
-- getpos() gives them ({buf, line, byte col, off}, both 1-based), in any order;
-- `get_lines(l1, l2)`: the buffer's lines l1..l2 (1-based, inclusive); `inclusive`:
-- false under 'selection' exclusive. A characterwise selection ends exclusively:
-- after the last selected character (clamped to its line, as the newline of the
-- last line is never part of it); a linewise one at the end of its last line.
function M.visual(mode, a, b, get_lines, inclusive)
  local l1, c1, l2, c2 = a[2], a[3], b[2], b[3]
  if l2 < l1 or (l2 == l1 and c2 < c1) then
    l1, c1, l2, c2 = l2, c2, l1, c1
  end
  local lines = get_lines(l1, l2)
  local first, last = lines[1] or "", lines[#lines] or ""
  if mode == "V" then
    return text.utf8(table.concat(lines, "\n")), pos(l1 - 1, 0), pos(l2 - 1, #last), lines_table(l1 - 1, first, l2 - 1, last)
  end
  local s = math.min(math.max(c1 - 1, 0), #first)
  local e = math.min(c2 - 1, #last)
  if inclusive then
    e = e + char_len(last, c2)
  end
  e = math.min(e, #last)
  local selected
  if l1 == l2 then
    e = math.max(e, s)
    selected = first:sub(s + 1, e)
  else
    local parts = { first:sub(s + 1) }
    for i = 2, #lines - 1 do
      parts[#parts + 1] = lines[i]
    end
    parts[#parts + 1] = last:sub(1, e)
    selected = table.concat(parts, "\n")
  end
  return text.utf8(selected), pos(l1 - 1, s), pos(l2 - 1, e), lines_table(l1 - 1, first, l2 - 1, last)
end

-- How many screen cells each character takes (a cache: the width of a character other
-- than a tab never depends on where it is). A composing character takes none.
local widths = {}
local function width_of(ch)
  local w = widths[ch]
  if not w then
    w = vim.fn.strdisplaywidth("a" .. ch) - 1
    widths[ch] = w
  end
  return w
end

-- The characters of `line` touching screen cells left..right (1-based, inclusive;
-- right nil: to the line's end): their first and last+1 byte offsets (0-based).
local function row(line, left, right, tabstop)
  local cell, i, n = 0, 1, #line
  local from, to
  while i <= n do
    local len = text.sequence(line, i) or 1
    local b = line:byte(i)
    local w
    if b == 9 then
      w = tabstop - cell % math.max(tabstop, 1)
    elseif b < 128 then
      w = 1
    else
      w = width_of(line:sub(i, i + len - 1))
    end
    local first_cell, last_cell = cell + 1, cell + math.max(w, 1)
    if last_cell >= left and (right == nil or first_cell <= right) then
      from = from or i - 1
      to = i - 1 + len
    end
    cell = cell + w
    i = i + len
  end
  from = from or n
  return from, to or from
end

-- A blockwise selection: lines l1..l2 (1-based), cells left..right as virtcol()
-- counts them (right nil for a block to each line's end, `$`). Its text is its rows
-- joined by newlines; it runs from the top row's first character to the end of the
-- bottom row's last.
function M.block(l1, l2, left, right, get_lines, tabstop)
  local lines = get_lines(l1, l2)
  local rows, s, e = {}, 0, 0
  for k, line in ipairs(lines) do
    local from, to = row(line, left, right, tabstop)
    rows[k] = line:sub(from + 1, to)
    if k == 1 then
      s = from
    end
    if k == #lines then
      e = to
    end
  end
  local first, last = lines[1] or "", lines[#lines] or ""
  return text.utf8(table.concat(rows, "\n")), pos(l1 - 1, s), pos(l2 - 1, e), lines_table(l1 - 1, first, l2 - 1, last)
end

return M
