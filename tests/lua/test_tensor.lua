-- test_tensor.lua - drover.tensor from Lua: construction, shapes, indexing
-- (views share storage), printing, errors that name the script line.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local tensor = drover.tensor

test("tensor_from_nested_tables", function()
  local t = tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  eq(t:dim(), 2, "dim")
  eq(t:shape()[1], 2, "rows")
  eq(t:shape()[2], 3, "cols")
  -- size() is the shape, as Torch7's and PyTorch's; numel() the count
  eq(type(t:size()), "table", "size() is a table")
  eq(#t:size(), 2, "size() has one entry per dimension")
  eq(t:size()[1], 2, "size()[1]")
  eq(t:size()[2], 3, "size()[2]")
  eq(t:numel(), 6, "numel")
  eq(t:size(2), 3, "size(2)")
  eq(#t, 2, "#t")
  eq(t:get(2, 3), 6.0, "get")
  local v = tensor.new { 0.5, -1.5 }
  eq(v:dim(), 1, "1-D")
  eq(v[2], -1.5, "v[2]")
  eq(v[3], nil, "out of range is nil")
end)

test("tensor_constructors", function()
  local z = tensor.zeros(3, 4)
  eq(z:sum(), 0.0, "zeros")
  eq(tensor.ones(2, 5):sum(), 10.0, "ones")
  eq(tensor.full(2.5, { 2, 2 }):sum(), 10.0, "full with a shape table")
  local r = tensor.rand(100, 10)
  local lo, hi = math.huge, -math.huge
  for _, row in ipairs(r:totable()) do
    for _, x in ipairs(row) do lo, hi = math.min(lo, x), math.max(hi, x) end
  end
  if not (lo >= 0 and hi < 1 and hi > 0.9 and lo < 0.1) then error("rand outside [0,1): " .. lo .. " " .. hi) end
  near(tensor.randn(200, 50):mean(), 0, 0.05, "randn mean")
  eq(tensor.is_tensor(r), true, "is_tensor")
  eq(tensor.is_tensor({}), false, "is_tensor table")
end)

test("tensor_seed_reproducible", function()
  drover.seed(42)
  local a = tensor.randn(4, 4):totable()
  drover.seed(42)
  local b = tensor.randn(4, 4):totable()
  local c = tensor.randn(4, 4):totable()
  for i = 1, 4 do
    for j = 1, 4 do eq(a[i][j], b[i][j], "same seed") end
  end
  eq(a[1][1] == c[1][1] and a[2][2] == c[2][2], false, "stream moves on")
end)

test("tensor_rows_are_views", function()
  local t = tensor { { 1, 2 }, { 3, 4 } }
  local row = t[2]
  eq(row:dim(), 1, "row is 1-D")
  eq(row[1], 3.0, "row value")
  row[1] = 30
  eq(t:get(2, 1), 30.0, "writing the row writes the tensor")
  t[1] = { 7, 8 }
  eq(t:get(1, 2), 8.0, "row assignment")
  t:set(1, 1, -1)
  eq(t[1][1], -1.0, "set")
  local tt = t:t()
  eq(tt:get(2, 1), 8.0, "transpose is a view")
  local r = t:reshape(4)
  eq(r[4], 4.0, "reshape")
  local c = t:clone()
  c:fill(0)
  eq(t:get(2, 2), 4.0, "clone is a copy")
end)

test("tensor_totable_and_argmax", function()
  local t = tensor { { 0.1, 0.9, 0.0 }, { 2, 1, 3 } }
  local tab = t:totable()
  near(tab[1][2], 0.9, 1e-6, "totable")
  eq(#tab, 2, "rows")
  local am = t:argmax():totable()
  eq(am[1], 1.0, "argmax row 1 (0-based)")
  eq(am[2], 2.0, "argmax row 2")
  eq(tensor { 5, 9, 1 }:argmax(), 1, "1-D argmax")
end)

test("tensor_prints_shape_and_preview", function()
  local t = tensor { { 0.1, 0.2, 0.3 }, { 0.4, 0.5, 0.6 } }
  eq(tostring(t), "drover.tensor [2, 3]\n  0.1000  0.2000  0.3000\n  0.4000  0.5000  0.6000", "small")
  eq(tostring(tensor { { 1, -2 }, { 30, 4 } }), "drover.tensor [2, 2]\n   1  -2\n  30   4", "integers")
  local big = tostring(tensor.zeros(100, 50))
  local lines = {}
  for l in big:gmatch("[^\n]+") do lines[#lines + 1] = l end
  eq(lines[1], "drover.tensor [100, 50]", "big header")
  eq(#lines, 1 + 5 + 1 + 5, "rows elided in the middle")
  eq(lines[7], "  ...", "elision line")
  eq(lines[2], "  0  0  0  0  ...  0  0  0  0", "columns elided")
end)

test("tensor_errors_name_the_line", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raises(function() tensor { { 1, 2 }, { 3 } } end, "has 1 elements, expected 2")
  if not err:find("test_tensor.lua:" .. line .. ":", 1, true) then error("no script line in: " .. err) end
  raises(function() tensor { { 1, "x" } } end, "element [1][2] is a string, expected a number")
  raises(function() tensor.zeros(2, 3):get(3, 1) end, "out of range 1..2")
  raises(function() tensor.zeros(2, 3):reshape(4, 2) end, "reshape")
end)

test("tensor_close", function()
  local t = tensor.zeros(2, 2)
  t:close()
  eq(tostring(t), "drover.tensor (closed)", "closed prints")
  raises(function() return t:sum() end, "tensor is closed")
end)

-- ---- math (l_tensor_ops.c) ----

local function same(t, want, what)
  local got = t:totable()
  local function walk(g, w, path)
    if type(w) == "table" then
      eq(#g, #w, what .. path .. " length")
      for i = 1, #w do walk(g[i], w[i], path .. "[" .. i .. "]") end
    else
      near(g, w, 1e-5, what .. path)
    end
  end
  walk(got, want, "")
end

test("tensor_arithmetic_and_broadcasting", function()
  local a = tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  same(a + 1, { { 2, 3, 4 }, { 5, 6, 7 } }, "t + n")
  same(1 - a, { { 0, -1, -2 }, { -3, -4, -5 } }, "n - t")
  same(2 * a / 4, { { 0.5, 1, 1.5 }, { 2, 2.5, 3 } }, "n * t / n")
  same(-a, { { -1, -2, -3 }, { -4, -5, -6 } }, "unary minus")
  same(a - tensor { { 1 }, { 2 } }, { { 0, 1, 2 }, { 2, 3, 4 } }, "column broadcast")
  same(a * tensor { { 1, 0, -1 } }, { { 1, 0, -3 }, { 4, 0, -6 } }, "row broadcast")
  same(a + a:t():t(), { { 2, 4, 6 }, { 8, 10, 12 } }, "views")
  same(a / { { 1, 2, 3 } }, { { 1, 1, 1 }, { 4, 2.5, 2 } }, "a table operand")
  same(tensor { { 1 }, { 2 } } + tensor { { 10, 20 } }, { { 11, 21 }, { 12, 22 } }, "both broadcast")
  raises(function() return a + tensor { { 1, 2 } } end, "cannot broadcast [2, 3] with [1, 2]")
  same(a + tensor { 1, 2, 3 }, { { 2, 4, 6 }, { 5, 7, 9 } }, "ranks differ: aligned at the last dimension")
  same(tensor { 10, 20 } - tensor { { 1 }, { 2 } }, { { 9, 19 }, { 8, 18 } }, "[2] - [2, 1]")
  raises(function() return a + tensor { 1, 2 } end, "cannot broadcast [2, 3] with [2] (dimension 2 of the result: 3 vs 2)")
  raises(function() return a + "x" end, "expected, got string")
end)

test("tensor_comparisons_are_masks", function()
  local a = tensor { 1, 5, 3 }
  same(a:gt(2), { 0, 1, 1 }, "gt")
  same(a:ge(3), { 0, 1, 1 }, "ge")
  same(a:lt(a * 0 + 3), { 1, 0, 0 }, "lt tensor")
  same(a:le(3), { 1, 0, 1 }, "le")
  same(a:eq(5), { 0, 1, 0 }, "eq")
  same(a:ne(5), { 1, 0, 1 }, "ne")
  local pred, labels = tensor { { 0.1, 0.9 }, { 0.8, 0.2 }, { 0.3, 0.7 } }, tensor { 1, 1, 1 }
  near(pred:argmax(2):eq(labels):mean(), 2 / 3, 1e-6, "accuracy as a metric")
end)

test("tensor_reductions_along_a_dim", function()
  local a = tensor { { 1, 5, 3 }, { 4, 2, 6 } }
  eq(a:sum(), 21.0, "sum()")
  same(a:sum(1), { 5, 7, 9 }, "sum(1)")
  same(a:sum(2, true), { { 9 }, { 12 } }, "sum(2, keepdim)")
  same(a:mean(2), { 3, 4 }, "mean(2)")
  eq(a:max(), 6.0, "max()")
  eq(a:min(), 1.0, "min()")
  local v, i = a:max(2)
  same(v, { 5, 6 }, "max(2) values")
  same(i, { 1, 2 }, "max(2) 0-based positions")
  same(a:min(1), { 1, 2, 3 }, "min(1)")
  same(a:argmax(1), { 1, 0, 1 }, "argmax(1)")
  same(a:argmax(), { 1, 2 }, "argmax() rows")
  same(a - a:max(2, true), { { -4, 0, -2 }, { -2, -4, 0 } }, "keepdim broadcasts back")
  raises(function() return a:sum(3) end, "dimension 3 is outside 1..2 of a [2, 3] tensor")
  raises(function() return tensor.zeros(0, 2):max() end, "max: empty [0, 2] tensor")
end)

test("tensor_elementwise_functions", function()
  local a = tensor { 1, 4, 9 }
  same(a:sqrt(), { 1, 2, 3 }, "sqrt")
  same(a:log():exp(), { 1, 4, 9 }, "log/exp")
  same((-a):abs(), { 1, 4, 9 }, "abs")
  same(a:clamp(2, 5), { 2, 4, 5 }, "clamp")
  same(a:clamp(nil, 5), { 1, 4, 5 }, "clamp upper only")
  same(a:maximum(tensor { 3, 3, 3 }), { 3, 4, 9 }, "maximum")
  raises(function() return a:clamp(5, 2) end, "lower bound 5 above upper bound 2")
  -- softmax, a data transform in a script
  local x = tensor { { 1, 2, 3 }, { 1, 1, 1 } }
  local e = (x - x:max(2, true)):exp()
  local p = e / e:sum(2, true)
  same(p:sum(2), { 1, 1 }, "softmax rows sum to 1")
  near(p:get(2, 1), 1 / 3, 1e-6, "uniform row")
end)

test("tensor_mm", function()
  local a = tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  same(a:mm(a:t()), { { 14, 32 }, { 32, 77 } }, "a @ a^T")
  same(a:t():mm(a):narrow(1, 1, 1), { { 17, 22, 27 } }, "a^T @ a")
  same(a:mm({ { 1 }, { 0 }, { 1 } }), { { 4 }, { 10 } }, "a table operand")
  raises(function() return a:mm(a) end, "mm: cannot multiply [2, 3] by [2, 3]")
end)

test("tensor_narrow_index_cat_stack", function()
  local a = tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  local n = a:narrow(2, 2, 2)
  same(n, { { 2, 3 }, { 5, 6 } }, "narrow")
  n:set(1, 1, 20)
  eq(a:get(1, 2), 20.0, "narrow is a view")
  a:set(1, 2, 2)
  raises(function() return a:narrow(2, 3, 2) end, "positions 3..4 of dimension 2 are outside [2, 3]")
  same(a:index { 2, 1, 2 }, { { 4, 5, 6 }, { 1, 2, 3 }, { 4, 5, 6 } }, "index rows")
  same(a:index(2, tensor { 3, 1 }), { { 3, 1 }, { 6, 4 } }, "index(dim, tensor)")
  raises(function() return a:index { 3 } end, "outside 1..2 of dimension 1 of [2, 3]")
  raises(function() return a:index { 1.5 } end, "not an integer")
  same(tensor.cat({ a, a }), { { 1, 2, 3 }, { 4, 5, 6 }, { 1, 2, 3 }, { 4, 5, 6 } }, "cat")
  same(tensor.cat({ a, a:narrow(2, 1, 1) }, 2), { { 1, 2, 3, 1 }, { 4, 5, 6, 4 } }, "cat(2)")
  local s = tensor.stack({ a, a * 2 })
  eq(s:dim(), 3, "stack adds a dim")
  eq(s:get(2, 2, 3), 12.0, "stack values")
  eq(tensor.stack({ a, a }, 3):get(2, 3, 2), 6.0, "stack at the end")
  raises(function() return tensor.cat({ a, tensor { 1, 2 } }) end, "tensor 2 is [2], tensor 1 is [2, 3]")
  raises(function() return tensor.stack({ a, a:t() }) end, "tensor 2 is [3, 2], tensor 1 is [2, 3]")
  raises(function() return tensor.cat({ a, 3 }) end, "element 2 of the list is a number")
  raises(function() return tensor.stack({}) end, "list of 1 to")
end)

test("tensor_reshape_overflow_is_refused", function()
  local z = drover.tensor.zeros(0, 4)
  raises(function() return z:reshape(2^62, 4) end, "reshape: cannot view [0, 4]")
  raises(function() return z:reshape(0, 2^62, 4) end, "reshape: cannot view [0, 4]")
  raises(function() return z:reshape({ 2^62, 2^62 }) end, "reshape: cannot view")
  raises(function() return drover.tensor.zeros(2, 4):reshape(-1, 2^62) end, "reshape: cannot view")
  eq(z:reshape(4, 0, 1):dim(), 3, "an empty reshape still works")
end)

test("tensor_empty_with_huge_sizes_is_refused", function()
  -- no elements, but loops over 2^60 rows: refused (it used to hang)
  raises(function() return drover.tensor.zeros(1 << 60, 0) end, "an empty tensor's non-zero sizes multiply to")
  raises(function() return drover.tensor.zeros(0, 4):reshape(1 << 40, 0) end, "reshape: cannot view")
  eq(drover.tensor.zeros(1 << 20, 0):dim(), 2, "an empty tensor of 2^20 rows is fine")
  eq((drover.tensor.zeros(1 << 20, 0):abs():shape())[1], 1 << 20, "and maps over its rows")
end)
