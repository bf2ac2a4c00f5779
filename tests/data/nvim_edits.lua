-- Neovim's built-in LSP client attached to `gradgate server`, editing a buffer: open a
-- file, wait for its diagnostics, then make two edits (Neovim sends them as incremental
-- changes) and wait after each for the diagnostics to move where the edit put the
-- flagged lines. Writes the lines of each round as JSON to $GRADGATE_NVIM_OUT, quits.
local out = os.getenv("GRADGATE_NVIM_OUT")
local cmd = { os.getenv("GRADGATE_PYTHON"), "-m", "gradgate", "server" }
local client_id = vim.lsp.start_client({
  name = "gradgate", cmd = cmd, root_dir = vim.fn.getcwd(), init_options = { debounce = 0 },
})
vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("GRADGATE_FILE")))
vim.lsp.buf_attach_client(0, client_id)

local function lines_now()
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(found, d.lnum + 1) end
  table.sort(found)
  return found
end

local function settle(first)
  vim.wait(60000, function()
    local now = lines_now()
    return #now > 0 and (first == nil or now[1] == first)
  end, 20)
  return lines_now()
end

local rounds = { settle(nil) }
local first = rounds[1][1]
-- three comment lines above everything: every statement moves down three lines
vim.api.nvim_buf_set_lines(0, 0, 0, false, { "# one", "# two", "# three" })
table.insert(rounds, settle(first + 3))
-- a comment inside the class that holds the flagged lines, ten lines above the first
vim.api.nvim_buf_set_lines(0, first + 3 - 11, first + 3 - 11, false, { "        # inside the class" })
table.insert(rounds, settle(first + 4))
local handle = io.open(out, "w")
handle:write(vim.fn.json_encode(rounds))
handle:close()
vim.lsp.stop_client(client_id, true)
vim.cmd("qa!")
