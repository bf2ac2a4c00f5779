-- Neovim's built-in LSP client attached to `gradgate server`: open a file, wait for the
-- diagnostics, write them as JSON to $GRADGATE_NVIM_OUT, quit. Works from Neovim 0.7.
local out = os.getenv("GRADGATE_NVIM_OUT")
local cmd = { os.getenv("GRADGATE_PYTHON"), "-m", "gradgate", "server" }
local client_id = vim.lsp.start_client({ name = "gradgate", cmd = cmd, root_dir = vim.fn.getcwd() })
vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("GRADGATE_FILE")))
vim.lsp.buf_attach_client(0, client_id)
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local found = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  table.insert(found, { line = d.lnum + 1, column = d.col + 1, code = lsp.code or d.code,
                        source = d.source, message = d.message })
end
table.sort(found, function(a, b) return a.line < b.line end)
local handle = io.open(out, "w")
handle:write(vim.fn.json_encode(found))
handle:close()
vim.lsp.stop_client(client_id, true)
vim.cmd("qa!")
