-- :checkhealth copilot_ide: what `copilot-ide doctor` finds, reported the health way,
-- with what only Neovim knows (its Python, the plugin's library, its running bridge).
-- A health check is asked for and may take a moment: it runs Python (each run bounded
-- by a deadline), which nothing else of the plugin does on Neovim's main loop.
local M = {}

local uv = vim.uv or vim.loop
local DEADLINE = 15000 -- ms for each Python run

-- Neovim 0.10 and later: vim.health.start/ok/...; 0.7 to 0.9: require("health").report_*.
local function reporter()
  local h = vim.health
  if h and h.start then
    return h
  end
  local old = h or require("health")
  return {
    start = old.report_start,
    ok = old.report_ok,
    info = old.report_info,
    warn = old.report_warn,
    error = old.report_error,
  }
end

-- Run argv (stdin: `input`); its output and exit status, or nil and why.
local function run(argv, input)
  local out, errs = {}, {}
  local ok, id = pcall(vim.fn.jobstart, argv, {
    on_stdout = function(_, data)
      vim.list_extend(out, data)
    end,
    on_stderr = function(_, data)
      vim.list_extend(errs, data)
    end,
    stdout_buffered = true,
    stderr_buffered = true,
  })
  if not ok or id <= 0 then
    return nil, "cannot run " .. argv[1]
  end
  if input then
    vim.fn.chansend(id, input)
  end
  vim.fn.chanclose(id, "stdin")
  local status = vim.fn.jobwait({ id }, DEADLINE)[1]
  if status == -1 then
    vim.fn.jobstop(id)
    return nil, string.format("no answer within %d s", DEADLINE / 1000)
  end
  return table.concat(out, "\n"), status, table.concat(errs, "\n")
end

local function mode_of(path)
  local st = uv.fs_stat(path)
  return st and string.format("%o", st.mode % 512) or nil, st
end

function M.check()
  local h = reporter()
  local ide = require("copilot_ide")
  local text = require("copilot_ide.text")
  local v = function(s)
    return text.visible(tostring(s))
  end

  h.start("Python")
  local python = ide.python()
  if vim.fn.executable(python) ~= 1 then
    h.error(v(python) .. " is not an executable", { "install Python 3.8 or later, or set g:copilot_ide_python" })
    return
  end
  local out, status = run({ python, "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])" })
  local version = out and out:match("(%d+%.%d+%.%d+)")
  if not version then
    h.error(v(python) .. " does not run: " .. v(out or status))
    return
  end
  local major, minor = version:match("(%d+)%.(%d+)")
  if tonumber(major) < 3 or (tonumber(major) == 3 and tonumber(minor) < 8) then
    h.error(string.format("%s is Python %s: the bridge needs 3.8 or later", v(python), version))
    return
  end
  h.ok(string.format("%s (%s) is Python %s", v(python), v(vim.fn.exepath(python)), version))

  h.start("the bridge")
  local library = ide.library()
  if not library then
    h.error("the ide_protocol library is not beside the plugin", { "build the plugin: make nvim-plugin" })
    return
  end
  h.ok("library: " .. v(library))
  local scratch = vim.fn.tempname()
  vim.fn.mkdir(scratch .. "/ide", "p", 448) -- 0700
  local argv = ide.argv(uv.fs_realpath(vim.fn.getcwd(-1, -1)) or vim.fn.getcwd(-1, -1))
  vim.list_extend(argv, { "--lock-dir", scratch .. "/ide" })
  local started = uv.hrtime()
  local lines, code, errs = run(argv, '{"type":"hello","protocol":1,"unit":"bytes","name":"checkhealth"}\n'
    .. '{"type":"stop"}\n')
  local ms = (uv.hrtime() - started) / 1e6
  vim.fn.delete(scratch, "rf")
  if lines and lines:find('"type": *"ready"') and lines:find('"type": *"stopped"') then
    h.ok(string.format("the bridge starts, writes its lock and stops (%.0f ms)", ms))
  else
    h.error("the bridge does not start: " .. v((errs or ""):match("([^\n]*)\n*$") or code or "?"))
  end

  h.start("lock files (what Copilot CLI reads)")
  local home = vim.env.COPILOT_HOME
  local dir = (home and home ~= "") and (home .. "/ide") or (vim.fn.expand("~") .. "/.copilot/ide")
  local mode, st = mode_of(dir)
  if not st then
    h.info(v(dir) .. " does not exist yet (the first start makes it, mode 700)")
  elseif mode ~= "700" then
    h.warn(string.format("%s has mode %s: other users may read the locks' secrets", v(dir), mode),
      { "chmod 700 " .. v(dir) })
  else
    h.ok(v(dir) .. ": mode 700")
  end
  local state = ide.state()
  local folder = state.folder or uv.fs_realpath(vim.fn.getcwd(-1, -1)) or vim.fn.getcwd(-1, -1)
  if state.running and state.ready then
    local lock = state.ready.lock
    local lmode = mode_of(lock)
    if lmode then
      h.ok(string.format("the bridge (pid %s) serves %s: lock %s, mode %s", v(state.pid), v(folder), v(lock), lmode))
    else
      h.error("the bridge's lock is gone: " .. v(lock), { ":CopilotIdeStop, then :CopilotIdeStart" })
    end
    h.info(string.format("Copilot CLI sessions connected: %d; pending diffs: %d", state.sessions, state.diffs))
  elseif state.running then
    h.warn("the bridge is starting (no lock yet)")
  else
    h.warn("not serving this folder", { ":CopilotIdeStart (g:copilot_ide_autostart starts it with Neovim)" })
  end

  h.start("copilot-ide doctor (would copilot started here connect?)")
  local dargv = { python, "-I", "-c", argv[4], library, "doctor", "--json", "--no-handshake", folder }
  if home and home ~= "" then
    vim.list_extend(dargv, { "--lock-dir", home .. "/ide" })
  end
  local report_text = run(dargv)
  local ok, report = pcall(vim.json.decode, report_text or "")
  if not ok or type(report) ~= "table" then
    h.error("doctor gave no report: " .. v((report_text or ""):sub(1, 200)))
    return
  end
  if report.would_connect == true then
    h.ok(string.format("copilot started in %s connects to %s at start-up", v(report.folder), v(report.ide)))
  else
    h.warn(string.format("copilot started in %s does not connect to an IDE at start-up", v(report.folder)))
  end
  local findings = type(report.findings) == "table" and report.findings or {}
  for _, lock in ipairs(type(report.locks) == "table" and report.locks or {}) do
    for _, f in ipairs(type(lock) == "table" and type(lock.findings) == "table" and lock.findings or {}) do
      findings[#findings + 1] = f
    end
  end
  for _, f in ipairs(findings) do
    if type(f) == "table" then
      h.warn(v(f.code) .. ": " .. v(f.message), f.fix and { v(f.fix) } or nil)
    end
  end
end

return M
