-- pretty.lua - formats Lua values for the REPL: format(value) -> string;
-- drover.pretty(...) prints values as the REPL shows them.
--
-- Tables print as Lua constructors with sorted keys: on one line when they
-- are short, else one entry per line indented by two spaces per level.
-- Strings are quoted, userdata go through tostring (multi-line texts such
-- as models are indented to their position), a table met again on its own
-- path prints as <cycle>, and long or deep tables are elided.

local M = {}

M.width = 78      -- a table that fits in this many columns stays on one line
M.max_items = 50  -- entries shown per table before "... (N more)"
M.max_depth = 6   -- deeper tables print as {...}

local keywords = {}
for w in ([[and break do else elseif end false for function goto if in
  local nil not or repeat return then true until while]]):gmatch("%a+") do
  keywords[w] = true
end

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not keywords[s]
end

-- Numbers first (ascending), then strings, then anything else by type and text.
local type_rank = { number = 1, string = 2 }
local function key_less(a, b)
  local ra, rb = type_rank[type(a)] or 3, type_rank[type(b)] or 3
  if ra ~= rb then return ra < rb end
  if ra < 3 then return a < b end
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  return tostring(a) < tostring(b)
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if t == "number" then
    if math.type(v) == "float" and v ~= v then return "nan" end
    if v == math.huge then return "math.huge" elseif v == -math.huge then return "-math.huge" end
    return tostring(v)
  end
  local ok, s = pcall(tostring, v)
  return ok and s or ("<" .. t .. ">")
end

-- Indents every line after the first of a multi-line text by `pad`.
local function indent_rest(s, pad)
  return (s:gsub("\n", "\n" .. pad))
end

local format_value

-- The entries of t as { key_text_or_nil, value } pairs, sequence first.
local function entries(t)
  local out, n = {}, #t
  for i = 1, n do out[#out + 1] = { nil, t[i] } end
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_less)
  for _, k in ipairs(keys) do
    local kt = is_identifier(k) and k or ("[" .. scalar(k) .. "]")
    out[#out + 1] = { kt, t[k] }
  end
  return out
end

local function format_table(t, depth, path, col)
  if path[t] then return "<cycle: " .. tostring(t) .. ">" end
  if next(t) == nil then return "{}" end
  if depth >= M.max_depth then return "{...}" end
  path[t] = true
  local items, shown = entries(t), {}
  local limit = math.min(#items, M.max_items)
  local pad = string.rep("  ", depth + 1)
  for i = 1, limit do
    local k, v = items[i][1], items[i][2]
    local prefix = k and (k .. " = ") or ""
    shown[i] = prefix .. format_value(v, depth + 1, path, #pad + #prefix)
  end
  if #items > limit then shown[#shown + 1] = "... (" .. (#items - limit) .. " more)" end
  path[t] = nil
  local line = "{ " .. table.concat(shown, ", ") .. " }"
  if not line:find("\n", 1, true) and col + #line <= M.width then return line end
  return "{\n" .. pad .. table.concat(shown, ",\n" .. pad) .. "\n" .. string.rep("  ", depth) .. "}"
end

function format_value(v, depth, path, col)
  if type(v) == "table" then
    local mt = getmetatable(v)
    if mt and mt.__tostring and mt ~= M.result_mt then
      return indent_rest(scalar(v), string.rep("  ", depth))
    end
    return format_table(v, depth, path, col)
  end
  if type(v) == "userdata" then return indent_rest(scalar(v), string.rep("  ", depth)) end
  return scalar(v)
end

--- format(value) -> string: the REPL's rendering of one value.
function M.format(v)
  return format_value(v, 0, {}, 0)
end

--- print(...): prints each value formatted, separated by tabs.
function M.print(...)
  local out = {}
  for i = 1, select("#", ...) do out[i] = M.format((select(i, ...))) end
  print(table.concat(out, "\t"))
end

--- The metatable of results (exp:fit(), exp:evaluate(), c:fit(),
--- c:evaluate()): print(r) and tostring(r) show their fields.
M.result_mt = {
  __name = "drover.Result",
  __tostring = function(t) return format_table(t, 0, {}, 0) end,
}

-- drover.pretty(...) is drover.pretty.print(...).
return setmetatable(M, { __call = function(_, ...) return M.print(...) end })
