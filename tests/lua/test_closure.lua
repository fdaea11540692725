-- test_closure.lua - shipping a Lua function to another Lua state
-- (closure.c) through drover._closure_roundtrip: the function, its upvalues
-- and arguments are encoded, decoded in a fresh state, run there, and the
-- results come back the same way.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local rt = drover._closure_roundtrip

-- Deep comparison of plain data, with math.type kept apart.
local function same(a, b, path)
  path = path or "value"
  if type(a) ~= type(b) then error(path .. ": " .. type(a) .. " vs " .. type(b), 2) end
  if type(a) == "number" and math.type(a) ~= math.type(b) then
    error(path .. ": " .. math.type(a) .. " vs " .. math.type(b), 2)
  end
  if type(a) ~= "table" then
    if a ~= b and not (a ~= a and b ~= b) then
      error(path .. ": " .. tostring(a) .. " vs " .. tostring(b), 2)
    end
    return
  end
  for k, v in pairs(a) do same(v, b[k], path .. "[" .. tostring(k) .. "]") end
  for k in pairs(b) do
    if a[k] == nil then error(path .. ": extra key " .. tostring(k), 2) end
  end
end

test("closure_01 plain data comes back", function()
  local data = {
    1, 2.5, "three", true, false,
    name = "x\0y\255", nested = { a = { b = { c = { -7, 1e300, -0.0 } } } },
    [10] = "sparse", [2.5] = "float key", [true] = "bool key",
  }
  local r1, r2, r3, r4, r5 = rt(function(...) return ... end, 42, -3.25, "s", false, data)
  eq(r1, 42, "integer")
  eq(r2, -3.25, "float")
  eq(r3, "s", "string")
  eq(r4, false, "boolean")
  same(r5, data)
  eq(#r5.name, 4, "binary string length")
end)

test("closure_02 integers and floats stay distinct", function()
  local a, b, c, d, t = rt(function(x, y) return x, y, x + 0, y // 1, { [1] = 1.0, [2] = 2 } end,
                           1, 1.0)
  eq(math.type(a), "integer", "1")
  eq(math.type(b), "float", "1.0")
  eq(math.type(c), "integer", "1 + 0 computed remotely")
  eq(math.type(d), "float", "1.0 // 1 computed remotely")
  eq(math.type(t[1]), "float", "table value 1.0")
  eq(math.type(t[2]), "integer", "table value 2")
  eq(math.type(rt(function() return math.maxinteger end)), "integer", "maxinteger")
  eq(rt(function() return math.mininteger end), math.mininteger, "mininteger exact")
  local nan = rt(function() return 0 / 0 end)
  assert(nan ~= nan, "NaN survives")
  eq(rt(function() return 1 / 0 end), math.huge, "inf survives")
end)

test("closure_03 upvalues are captured by value", function()
  local count = 0
  local function bump() count = count + 1 end
  bump(); bump(); bump()
  local cfg = { lr = 0.1, layers = { 64, 128, 10 }, name = "mlp" }
  local f = function(x)
    count = count + 100           -- changes the remote copy only
    return count, cfg.lr * x, cfg.layers[2], cfg.name
  end
  local c, lr, l2, name = rt(f, 10)
  eq(c, 103, "counter sent as it was (3) and changed remotely")
  eq(count, 3, "the local counter is untouched")
  near(lr, 1.0, 1e-12, "table upvalue")
  eq(l2, 128, "nested table upvalue")
  eq(name, "mlp", "string field")
  bump()
  eq(rt(function() return count end), 4, "a later send sees the new value")
end)

test("closure_04 multiple returns, nils included, and shared tables", function()
  local n = select("#", rt(function() return 1, nil, 3, nil end))
  eq(n, 4, "trailing nils counted")
  local a, b, c = rt(function() return 1, nil, 3 end)
  eq(a, 1, "first"); eq(b, nil, "second"); eq(c, 3, "third")
  eq(select("#", rt(function() end)), 0, "no results")
  local shared = { 1, 2 }
  local t = { left = shared, right = shared, list = { shared, shared } }
  local same_remote, back = rt(function(x)
    return x.left == x.right and x.list[1] == x.left, x
  end, t)
  eq(same_remote, true, "one table arrives as one table")
  assert(back.left == back.right and back.list[2] == back.left, "and comes back as one")
  local u1, u2 = rt(function(x, y) return x == y, x end, shared, shared)
  eq(u1, true, "shared between arguments")
  eq(u2[2], 2, "content")
end)

test("closure_05 a remote error carries its traceback", function()
  local g = function(x)
    local function deep(y) error("boom " .. y) end -- the line the traceback names
    deep(x)
  end
  local gline = debug.getinfo(1, "l").currentline - 3
  local err = raises(function() rt(g, 7) end, "boom 7")
  assert(err:find("test_closure.lua:" .. gline .. ": boom 7", 1, true), "names the line: " .. err)
  assert(err:find("stack traceback", 1, true), "has a traceback: " .. err)
  assert(err:find("local 'deep'", 1, true), "names the frame: " .. err)
  local rerr = raises(function() rt(function() local t = nil; return t.x end) end, "attempt to index")
  assert(rerr:find("test_closure.lua:" .. (debug.getinfo(1, "l").currentline - 1) .. ":", 1, true),
         "runtime errors too: " .. rerr)
end)

test("closure_06 a userdata upvalue is refused, naming it", function()
  local model = drover.nn.Linear(2, 2)
  local scale = 2
  local f = function(x) return scale * x, model end
  local err = raises(function() rt(f, 1) end, "upvalue 'model' (#2) is a userdata drover.Module")
  assert(err:find("only nil, booleans, numbers, strings and tables of them can be sent", 1, true), err)
  local cfg = { opts = { layers = { drover.tensor.zeros(2) } } }
  raises(function() rt(function() return cfg end) end,
         "upvalue 'cfg' (#1): field 'opts.layers[1]' is a userdata drover.Tensor")
  raises(function() rt(function() return 1 end, io.stdout) end, "argument 1 is a userdata FILE*")
  raises(function() rt(function() return 1 end, coroutine.create(print)) end, "argument 1 is a coroutine")
  raises(function() rt(function() return setmetatable({}, { __index = {} }) end) end,
         "result 1 is a table with a metatable")
  raises(function() rt(function() return drover.tensor.zeros(3) end) end,
         "result 1 is a userdata drover.Tensor")
end)

test("closure_07 a function argument is refused, naming the argument", function()
  raises(function() rt(function() end, 1, 2, { opts = { cb = function() end } }) end,
         "argument 3: field 'opts.cb' is a Lua function")
  raises(function() rt(function() end, print) end, "argument 1 is a C function")
  raises(function() rt(function() end, { ["a key"] = { [3] = print } }) end,
         "argument 1: field '[\"a key\"][3]' is a C function")
  raises(function() rt(function() end, { [print] = 1 }) end,
         "argument 1 has a key that is a C function")
  local helper = function() return 1 end
  raises(function() rt(function() return helper() end) end,
         "functions cannot be sent yet")
end)

test("closure_08 cycles and over-deep tables are refused", function()
  local t = { a = 1 }
  t.self = t
  raises(function() rt(function() return t end) end, "upvalue 't' (#1) contains a cycle at t.self")
  local u = { inner = { list = {} } }
  u.inner.list[1] = u.inner
  raises(function() rt(function() end, 5, u) end,
         "argument 2 contains a cycle at field 'inner.list[1]'")
  local deep = {}
  local cur = deep
  for _ = 1, 100 do cur.next = {}; cur = cur.next end
  raises(function() rt(function() end, deep) end, "nests tables more than 64 deep")
  local ok = {}
  cur = ok
  for _ = 1, 60 do cur.next = {}; cur = cur.next end
  cur.v = "bottom"
  local back = rt(function(x) return x end, ok)
  for _ = 1, 60 do back = back.next end
  eq(back.v, "bottom", "60 levels pass")
end)

test("closure_09 C functions and non-functions are refused", function()
  raises(function() rt(print) end, "cannot send a C function")
  raises(function() rt(math.sqrt, 4) end, "cannot send a C function")
  raises(function() rt(42) end, "expected a Lua function, got a number")
end)

test("closure_10 globals are the remote state's", function()
  CLOSURE_TEST_GLOBAL = 42
  local seen, set = rt(function()
    local before = CLOSURE_TEST_GLOBAL
    CLOSURE_TEST_GLOBAL = "remote"
    return before, CLOSURE_TEST_GLOBAL
  end)
  eq(seen, nil, "a local global is not seen remotely")
  eq(set, "remote", "the remote state has its own")
  eq(CLOSURE_TEST_GLOBAL, 42, "a remote global does not come back")
  local G = _G
  eq(rt(function() return G.CLOSURE_TEST_GLOBAL, G == _G end), nil, "_G as an upvalue is the remote _G")
  eq(select(2, rt(function() return G.CLOSURE_TEST_GLOBAL, G == _G end)), true, "and equals its _G")
  eq(rt(function() return type(string.format) end), "function", "standard libraries there")
  -- A custom _ENV is data like any other upvalue.
  local env = { x = 5 }
  local f
  do
    local _ENV = env
    f = function() return x end
  end
  eq(rt(f), 5, "a plain-table _ENV is sent")
  local menv = setmetatable({}, { __index = _G })
  do
    local _ENV = menv
    f = function() return print end
  end
  raises(function() rt(f) end, "upvalue '_ENV' (#1) is a table with a metatable")
end)

test("closure_11 the drover library works remotely", function()
  local n = 4
  local s, shape, lin = rt(function(k)
    local t = drover.tensor.ones(n, k)
    local m = drover.nn.Linear(k, 2)
    return t:sum(), t:shape(), tostring(m):find("Linear") ~= nil
  end, 3)
  eq(s, 12.0, "tensor sum computed remotely")
  eq(shape[1], 4, "shape rows")
  eq(shape[2], 3, "shape cols")
  eq(lin, true, "nn there too")
end)

test("closure_12 limits on size and count", function()
  local big = string.rep("x", 17 * 1024 * 1024)
  raises(function() rt(function() end, big) end, "larger than 16 MiB")
  local many = {}
  for i = 1, 5000 do many[i] = i end
  raises(function() rt(function() end, table.unpack(many)) end, "at most 4096 can be sent")
  local s = string.rep("y", 1024 * 1024)
  eq(#rt(function(x) return x .. x end, s), 2 * 1024 * 1024, "a 2 MiB result")
end)
