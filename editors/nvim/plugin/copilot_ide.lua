-- copilot_ide: GitHub Copilot CLI's /ide in Neovim (see :help copilot_ide).
-- Loaded at start-up from a package (or 'runtimepath'): it only defines the commands
-- and, unless g:copilot_ide_autostart is 0, asks for the start once Neovim has started
-- (a timer after VimEnter, so start-up never waits for it). The rest loads then.
if vim.g.loaded_copilot_ide then
  return
end
vim.g.loaded_copilot_ide = 1

if vim.fn.has("nvim-0.7") ~= 1 then
  vim.api.nvim_echo({ { "copilot_ide: Neovim 0.7 or later is needed; the plugin does nothing", "WarningMsg" } },
    true, {})
  return
end

local function ide()
  return require("copilot_ide")
end

local command = vim.api.nvim_create_user_command
command("CopilotIdeStart", function()
  ide().start({ announce = true })
end, { desc = "Copilot CLI /ide: serve Neovim's working folder" })
command("CopilotIdeStop", function()
  ide().stop({ announce = true })
end, { desc = "Copilot CLI /ide: stop serving (the lock file goes)" })
command("CopilotIdeStatus", function()
  ide().status()
end, { desc = "Copilot CLI /ide: folder, lock file, sessions, pending diffs" })
command("CopilotIdeSendFile", function()
  ide().send_file()
end, { desc = "Copilot CLI /ide: @file of this buffer into the CLI's prompt" })
command("CopilotIdeSendSelection", function(args)
  ide().send_selection(args.line1, args.line2, args.range)
end, { range = true, desc = "Copilot CLI /ide: the selection (or the lines) into the CLI's prompt" })
local function complete(lead)
  return ide().complete(lead)
end
command("CopilotIdeAccept", function(args)
  ide().answer(true, args.args)
end, { nargs = "?", complete = complete, desc = "Copilot CLI /ide: accept a proposed edit" })
command("CopilotIdeReject", function(args)
  ide().answer(false, args.args)
end, { nargs = "?", complete = complete, desc = "Copilot CLI /ide: reject a proposed edit" })

local function autostart()
  local v = vim.g.copilot_ide_autostart
  if v == nil or (v ~= 0 and v ~= false and v ~= "0" and v ~= "") then
    ide().start()
  end
end

if vim.v.vim_did_enter == 1 then
  vim.schedule(autostart)
else
  vim.api.nvim_create_autocmd("VimEnter", {
    group = vim.api.nvim_create_augroup("copilot_ide_autostart", { clear = true }),
    once = true,
    callback = function()
      vim.defer_fn(autostart, 0)
    end,
  })
end
