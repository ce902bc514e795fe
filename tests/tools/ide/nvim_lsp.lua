-- Neovim (Debian's 0.7) as the editor of lsp_test's NeovimShowsHoversAndLenses:
-- starts `fieldprof lsp` as a configured client would, opens a C file, asks
-- for a hover and the code lenses, edits the buffer (Neovim sends the
-- change incrementally) and asks again. Results go to $FP_OUT as JSON.
local out = {}
local function finish()
  local f = io.open(os.getenv('FP_OUT'), 'w')
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd('qa!')
end

local id = vim.lsp.start_client({
  name = 'fieldprof',
  cmd = { os.getenv('FP_BIN'), 'lsp', '--cache', os.getenv('FP_CACHE') },
  root_dir = vim.fn.fnamemodify(os.getenv('FP_SRC'), ':h'),
  init_options = { minCalls = 1000, minRuns = 10, minP50Ns = 1000 },
  on_exit = function(code) out.exit_code = code end,
})
vim.cmd('edit ' .. os.getenv('FP_SRC'))
local buf = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(buf, id)
out.initialized = vim.wait(20000, function()
  local c = vim.lsp.get_client_by_id(id)
  return c ~= nil and c.initialized
end, 50)
local uri = vim.uri_from_bufnr(buf)

-- The hover appears once the server's index is built.
vim.wait(20000, function()
  local r = vim.lsp.buf_request_sync(buf, 'textDocument/hover',
    { textDocument = { uri = uri }, position = { line = 4, character = 14 } }, 2000)
  for _, v in pairs(r or {}) do
    if v.result and v.result.contents then
      out.hover = v.result.contents.value
      return true
    end
  end
  return false
end, 200)
local none = vim.lsp.buf_request_sync(buf, 'textDocument/hover',
  { textDocument = { uri = uri }, position = { line = 4, character = 32 } }, 2000)
out.hover_on_other_name = 'none'
for _, v in pairs(none or {}) do
  if v.result ~= nil and v.result ~= vim.NIL then out.hover_on_other_name = 'some' end
end

-- Code lenses, as Neovim 0.7 shows them (virtual text).
local function lenses(more_than)
  local got = {}
  vim.wait(10000, function()
    vim.lsp.codelens.refresh()
    vim.wait(100)
    got = vim.lsp.codelens.get(buf)
    return #got > more_than
  end, 100)
  local titles = {}
  for _, l in ipairs(got) do
    table.insert(titles, { line = l.range.start.line, title = l.command and l.command.title or '' })
  end
  return titles
end
out.lenses = lenses(0)

-- An edit: a new call on a line inserted above line 5.
vim.api.nvim_buf_set_lines(buf, 5, 5, false, { '  rc += sqlite3_prepare_v2(db, sql, -1, &st, NULL);' })
vim.wait(300)
out.lenses_after_edit = lenses(#out.lenses)
local c = vim.lsp.get_client_by_id(id)
out.sync_kind = c.server_capabilities.textDocumentSync.change
c.stop()
vim.wait(5000, function() return out.exit_code ~= nil end, 50)
finish()
