-- Text that crosses a boundary: bytes of the buffer on their way to the bridge, and
-- strings of the CLI (tab names, paths: untrusted) on their way to the screen.
-- Pure functions, no editor state: the one place for these rules.
local M = {}

-- The length of the valid UTF-8 sequence at byte i of s, or nil when the byte there
-- starts none (a stray continuation byte, an overlong form, a surrogate, a code point
-- past U+10FFFF, a truncated sequence): the rules of a strict decoder, such as
-- Python's, which the bridge is.
local function sequence(s, i)
  local b = s:byte(i)
  if b < 0x80 then
    return 1
  end
  local n, lo, hi
  if b >= 0xC2 and b <= 0xDF then
    n, lo, hi = 2, 0x80, 0xBF
  elseif b == 0xE0 then
    n, lo, hi = 3, 0xA0, 0xBF
  elseif b == 0xED then
    n, lo, hi = 3, 0x80, 0x9F
  elseif b >= 0xE1 and b <= 0xEF then
    n, lo, hi = 3, 0x80, 0xBF
  elseif b == 0xF0 then
    n, lo, hi = 4, 0x90, 0xBF
  elseif b >= 0xF1 and b <= 0xF3 then
    n, lo, hi = 4, 0x80, 0xBF
  elseif b == 0xF4 then
    n, lo, hi = 4, 0x80, 0x8F
  else
    return nil
  end
  local second = s:byte(i + 1)
  if not second or second < lo or second > hi then
    return nil
  end
  for k = 2, n - 1 do
    local c = s:byte(i + k)
    if not c or c < 0x80 or c > 0xBF then
      return nil
    end
  end
  return n
end
M.sequence = sequence

-- s with each byte that is not part of valid UTF-8 replaced by `replace(byte)`.
local function map_invalid(s, replace)
  if not s:find("[\128-\255]") then
    return s
  end
  local out, i, n, from = {}, 1, #s, 1
  while i <= n do
    local len = sequence(s, i)
    if len then
      i = i + len
    else
      out[#out + 1] = s:sub(from, i - 1)
      out[#out + 1] = replace(s:byte(i))
      i = i + 1
      from = i
    end
  end
  if from == 1 then
    return s
  end
  out[#out + 1] = s:sub(from)
  return table.concat(out)
end

-- A buffer line as the bridge can read it: its bytes that are not UTF-8 (a file read
-- with ++bad=keep) become "?", one byte for one, so that byte columns stay as they are
-- (docs/BRIDGE.md: the unit is bytes of the line's UTF-8).
function M.utf8(s)
  return map_invalid(s, function()
    return "?"
  end)
end

local function hex(b)
  return string.format("<%02x>", b)
end

-- A string of the CLI as it may be shown: control characters in caret notation (ESC as
-- ^[, NUL as ^@, DEL as ^?), C1 controls and bidirectional overrides as <xx> / <U+XXXX>,
-- bytes that are not UTF-8 as <xx>. Nothing in it can move the cursor, colour the
-- terminal or reorder what is shown around it.
function M.visible(s)
  s = map_invalid(s, hex)
  s = s:gsub("[%z\1-\31\127]", function(c)
    local b = c:byte()
    return b == 127 and "^?" or "^" .. string.char(b + 64)
  end)
  s = s:gsub("\194([\128-\159])", function(c)
    return hex(c:byte())
  end)
  -- U+202A..U+202E and U+2066..U+2069 (bidi embeddings, overrides, isolates), U+200E/F.
  s = s:gsub("\226\128([\142\143\170-\174])", function(c)
    return string.format("<U+20%02X>", c:byte() - 0x80)
  end)
  s = s:gsub("\226\129([\166-\169])", function(c)
    return string.format("<U+20%02X>", c:byte() - 0x80 + 0x40)
  end)
  return s
end

-- A file's text as buffer lines (a final newline makes no empty last line; CRLF line
-- ends lose their CR, as a buffer with 'fileformat' dos shows them).
function M.lines_of(text)
  local lines = vim.split(text, "\n", { plain = true })
  if #lines > 1 and lines[#lines] == "" then
    lines[#lines] = nil
  end
  for i, line in ipairs(lines) do
    if line:sub(-1) == "\r" then
      lines[i] = line:sub(1, -2)
    end
  end
  return lines
end

-- One line for the command line, cut to the screen's width, so that a message never
-- leaves Neovim at "Press ENTER".
function M.one_line(s)
  s = M.visible((s:gsub("%s+", " ")))
  local width = math.max(vim.o.columns - 15, 20)
  if vim.fn.strdisplaywidth(s) > width then
    s = vim.fn.strcharpart(s, 0, width - 1) .. "…"
  end
  return s
end

return M
