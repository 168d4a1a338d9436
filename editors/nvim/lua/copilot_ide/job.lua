-- The bridge process (docs/BRIDGE.md): `copilot-ide bridge` started with jobstart on
-- pipes (never a pty: a pty echoes and cuts long lines), one JSON object per line each
-- way. This module only frames: it hands each decoded message to its owner's
-- on_message, and says once how the process ended. It never waits: writes are queued
-- by Neovim's event loop (chansend), output comes in callbacks.
local M = {}

local Job = {}
Job.__index = Job

-- What a line may hold at most (the bridge's own output limit is 512 MiB of waiting
-- messages; a line larger than this is a bridge gone wrong, not a diff).
local MAX_LINE = 768 * 1024 * 1024
local STDERR_LINES = 20 -- kept for the message when the bridge ends

-- Start `opts.argv` in `opts.cwd`. Returns the job, or nil and the reason.
-- opts.on_message(msg), opts.on_exit(code, stderr_tail, job), opts.on_garbage(text).
function M.start(opts)
  local self = setmetatable({ opts = opts, partial = {}, partial_size = 0, stderr = {}, closed = false }, Job)
  local ok, id = pcall(vim.fn.jobstart, opts.argv, {
    cwd = opts.cwd,
    on_stdout = function(_, data)
      self:_stdout(data)
    end,
    on_stderr = function(_, data)
      self:_stderr(data)
    end,
    on_exit = function(_, code)
      self.exited = true
      self.code = code
      opts.on_exit(code, table.concat(self.stderr, "\n"), self)
    end,
  })
  if not ok then
    return nil, (tostring(id):gsub("^Vim:", ""))
  end
  if id == 0 then
    return nil, "invalid arguments"
  elseif id == -1 then
    return nil, string.format("%q is not an executable", opts.argv[1])
  end
  self.id = id
  self.pid = vim.fn.jobpid(id)
  return self
end

-- Output in chunks cut anywhere: data[1] continues the last chunk's incomplete line,
-- data[#data] is the new incomplete end ("" when the chunk ended with a newline).
function Job:_stdout(data)
  local n = #data
  if n == 1 then
    if data[1] ~= "" then
      self.partial[#self.partial + 1] = data[1]
      self.partial_size = self.partial_size + #data[1]
      if self.partial_size > MAX_LINE then
        self.partial, self.partial_size = {}, 0
        self.opts.on_garbage("a line longer than " .. MAX_LINE .. " bytes")
        self:kill()
      end
    end
    return
  end
  self.partial[#self.partial + 1] = data[1]
  local first = table.concat(self.partial)
  self.partial, self.partial_size = {}, 0
  self:_line(first)
  for i = 2, n - 1 do
    self:_line(data[i])
  end
  if data[n] ~= "" then
    self.partial[1] = data[n]
    self.partial_size = #data[n]
  end
end

function Job:_line(line)
  if line == "" or self.closed_output then
    return
  end
  local ok, msg = pcall(vim.json.decode, line)
  if not ok or type(msg) ~= "table" or type(msg.type) ~= "string" then
    self.opts.on_garbage("a line that is not a message: " .. line:sub(1, 80))
    return
  end
  self.opts.on_message(msg, self)
end

function Job:_stderr(data)
  for i, line in ipairs(data) do
    if line ~= "" or i < #data then
      if i == 1 and self.stderr_open then
        self.stderr[#self.stderr] = (self.stderr[#self.stderr] .. line):sub(1, 2000)
      else
        self.stderr[#self.stderr + 1] = line:sub(1, 2000)
        if #self.stderr > STDERR_LINES then
          table.remove(self.stderr, 1)
        end
      end
    end
  end
  self.stderr_open = data[#data] ~= ""
end

-- One message, one line. False when it could not be written (the bridge has gone: its
-- on_exit tells the owner).
function Job:send(msg)
  if self.closed or self.exited then
    return false
  end
  local ok, encoded = pcall(vim.json.encode, msg)
  if not ok then
    return false
  end
  return (pcall(vim.fn.chansend, self.id, encoded .. "\n"))
end

-- The end of the bridge's input: it stops (removing its lock first) and exits.
function Job:close()
  if not self.closed then
    self.closed = true
    pcall(vim.fn.chanclose, self.id, "stdin")
  end
end

-- SIGTERM (the bridge removes its lock on it too); Neovim follows with SIGKILL later.
function Job:kill()
  if not self.exited then
    pcall(vim.fn.jobstop, self.id)
  end
end

-- At Neovim's exit only: wait (at most `ms`) until the process has ended.
function Job:wait(ms)
  if not self.exited then
    pcall(vim.fn.jobwait, { self.id }, ms)
  end
end

return M
