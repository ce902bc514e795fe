-- Neovim (Debian's 0.7) as the editor of lsp_cxx_test's
-- NeovimShowsEachFormsApi: with filetype detection on, as a user's config
-- has it, opens a C++ file, starts `fieldprof lsp` for it, and asks for the
-- hover at each position of $FP_POSITIONS (a JSON list of LSP positions).
-- Results go to $FP_OUT as JSON.
vim.cmd('filetype on')
local out = { hovers = {} }

local id = vim.lsp.start_client({
  name = 'fieldprof',
  cmd = { os.getenv('FP_BIN'), 'lsp', '--cache', os.getenv('FP_CACHE') },
  root_dir = vim.fn.fnamemodify(os.getenv('FP_SRC'), ':h'),
  on_exit = function(code) out.exit_code = code end,
})
vim.cmd('edit ' .. os.getenv('FP_SRC'))
local buf = vim.api.nvim_get_current_buf()
out.filetype = vim.bo[buf].filetype
vim.lsp.buf_attach_client(buf, id)
vim.wait(20000, function()
  local c = vim.lsp.get_client_by_id(id)
  return c ~= nil and c.initialized
end, 50)
local uri = vim.uri_from_bufnr(buf)

local f = io.open(os.getenv('FP_POSITIONS'))
local positions = vim.fn.json_decode(f:read('*a'))
f:close()

local function hover(pos)
  local r = vim.lsp.buf_request_sync(buf, 'textDocument/hover',
    { textDocument = { uri = uri }, position = pos }, 10000)
  for _, v in pairs(r or {}) do
    if v.result and v.result.contents then return v.result.contents.value end
  end
  return ''
end
-- The first waits for the index and the parse; the rest are asked once.
vim.wait(30000, function() return hover(positions[1]) ~= '' end, 200)
for _, pos in ipairs(positions) do table.insert(out.hovers, hover(pos)) end

vim.lsp.get_client_by_id(id).stop()
vim.wait(5000, function() return out.exit_code ~= nil end, 50)
local o = io.open(os.getenv('FP_OUT'), 'w')
o:write(vim.fn.json_encode(out))
o:close()
vim.cmd('qa!')
