-- test_tensor.lua - drover.tensor from Lua: construction, shapes, indexing
-- (views share storage), printing, errors that name the script line.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local tensor = drover.tensor

test("tensor_from_nested_tables", function()
  local t = tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  eq(t:dim(), 2, "dim")
  eq(t:shape()[1], 2, "rows")
  eq(t:shape()[2], 3, "cols")
  eq(t:size(), 6, "size")
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
