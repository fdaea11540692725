-- lua_fuzz.lua - random calls of the public drover.* functions and of the
-- methods of what they return, with hostile arguments (huge, negative and
-- non-finite numbers, wrong types, empty and odd tables, closed objects).
-- An error is the right answer to most of them; a crash (a sanitizer
-- report under `make asan`, a signal otherwise) is the bug this looks for.
--
--   drover run tests/fuzz/lua_fuzz.lua [SEED [CALLS]]
--
-- tests/run.sh runs it with a fixed seed and count (so a failure repeats),
-- in `make test` and, under ASan/UBSan, in `make asan`. A crash prints the
-- last call on stderr first ("call 123: drover.tensor.zeros(...)"): with
-- the same SEED it happens again.
local seed = math.tointeger(tonumber(arg and arg[1] or "")) or 14
local calls = math.tointeger(tonumber(arg and arg[2] or "")) or 3000
math.randomseed(seed)
local R = math.random

-- Sizes are tiny (products stay in the thousands) or far beyond memory
-- (allocation must fail cleanly); nothing in between, so that a call the
-- library accepts never makes gigabytes.
local numbers = {
  -1, 0, 1, 2, 3, 4, 7, -7, 0.5, -0.0, 1e-30, 1e30, 0 / 0, 1 / 0, -1 / 0,
  2 ^ 40, 2 ^ 53, 2 ^ 62, -2 ^ 62, 2 ^ 63, 2 ^ 64, math.maxinteger, math.mininteger,
  math.maxinteger - 1, 1 << 40, 1 << 62, -(1 << 62), 4611686018427387904 // 3,
}
local strings = { "", "x", "relu", "sum", "mean", "none", "async", "sync", "\0", ("A"):rep(300),
  "/nonexistent/file", "%s%n%p", "-1", "2^62", "nan" }

local pool = {} -- objects returned by calls: tensors, modules, datasets...
local function keep(v)
  local t = type(v)
  if t ~= "userdata" and t ~= "table" then return end
  if drover.tensor.is_tensor(v) then
    local ok, n = pcall(function() local s = 1 for _, d in ipairs(v:shape()) do s = s * d end return s end)
    if not ok or n > 100000 then return end
  end
  if #pool < 48 then pool[#pool + 1] = v else pool[R(#pool)] = v end
end

local value -- forward
local function random_table(depth)
  local t, k = {}, R(0, 5)
  local how = R(4)
  for i = 1, k do
    if how == 1 then t[i] = numbers[R(#numbers)]
    elseif how == 2 then t[i] = value(depth + 1)
    elseif how == 3 then t[strings[R(#strings)]] = value(depth + 1)
    else t[i] = { numbers[R(#numbers)], R(0, 3) } end
  end
  if R(8) == 1 then t.data = pool[R(math.max(#pool, 1))] end
  return t
end

function value(depth)
  depth = depth or 0
  local k = R(depth > 2 and 6 or 9)
  if k <= 3 then return numbers[R(#numbers)]
  elseif k == 4 then return strings[R(#strings)]
  elseif k == 5 then return ({ true, false, nil, print })[R(4)]
  elseif k == 6 then return #pool > 0 and pool[R(#pool)] or nil
  elseif k == 7 then return R(0, 4)
  else return random_table(depth) end
end

-- The public functions, by name. Left out: what starts processes or waits
-- (cluster, dash, sleep), prints pages (help) or reads run directories
-- (train.resume_dir, experiment.load, train.read_saved).
local skip = { cluster = true, dash = true, sleep = true, help = true, resume_dir = true,
  load = true, read_saved = true, print = true }
local funcs = {}
local function collect(t, prefix, depth)
  local names = {}
  for k in pairs(t) do names[#names + 1] = k end
  table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(names) do
    local v = t[k]
    if type(k) == "string" and not skip[k] then
      if type(v) == "function" then funcs[#funcs + 1] = { prefix .. k, v }
      elseif type(v) == "table" and depth < 3 then collect(v, prefix .. k .. ".", depth + 1) end
    end
  end
end
collect(drover, "drover.", 0)
-- data.synthetic's default is MNIST-sized (188 MB): keep it small here.
for _, e in ipairs(funcs) do
  if e[1] == "drover.data.synthetic" then
    local synthetic = e[2]
    e[2] = function(t, ...)
      if type(t) == "table" and t.n == nil then t.n = 16 end
      return synthetic(t, ...)
    end
  end
end

-- Methods of an object: from __methods (or __index when a table).
local method_skip = { fit = true, save = true, checkpoint = true, run = true, dash = true,
  export = true, set_checkpoint = true }
local function methods(obj)
  local mt = getmetatable(obj)
  local m = type(mt) == "table" and (rawget(mt, "__methods") or rawget(mt, "__index"))
  if type(m) ~= "table" then return nil end
  local names = {}
  for k, f in pairs(m) do
    if type(f) == "function" and not method_skip[k] then names[#names + 1] = k end
  end
  table.sort(names)
  return m, names
end

local function describe(v)
  if type(v) == "string" then return ("%q"):format(#v > 20 and v:sub(1, 20) .. "..." or v) end
  if type(v) == "table" then return "{...}" end
  return tostring(v)
end

-- A few objects to start from, so methods get called from the first call.
for _, f in ipairs {
  function() return drover.tensor.zeros(2, 3) end, function() return drover.tensor.new { { 1, 2 }, { 3, 4 } } end,
  function() return drover.tensor.zeros(0, 4) end, function() return drover.nn.Linear(3, 2) end,
  function() return drover.nn.Sequential { drover.nn.Linear(4, 3), drover.nn.ReLU() } end,
  function() return drover.data.synthetic { n = 16, features = 4 } end,
  function() return drover.nn.CrossEntropy() end, function() return drover.optim.SGD { lr = 0.1 } end,
} do keep(f()) end

local errors = 0
for i = 1, calls do
  local name, f, self
  if #pool > 0 and R(2) == 1 then
    self = pool[R(#pool)]
    local m, names = methods(self)
    if m and #names > 0 then
      name = names[R(#names)]
      f = m[name]
      name = ":" .. name
    end
  end
  if not f then
    self = nil
    local e = funcs[R(#funcs)]
    name, f = e[1], e[2]
  end
  local args, n = {}, R(0, 4)
  for k = 1, n do args[k] = value() end
  if self ~= nil then table.insert(args, 1, self); n = n + 1 end
  local shown = {}
  for k = 1, n do shown[k] = describe(args[k]) end
  io.stderr:write(("call %d: %s(%s)\n"):format(i, name, table.concat(shown, ", ")))
  local res = table.pack(pcall(f, table.unpack(args, 1, n)))
  if res[1] then
    for k = 2, res.n do keep(res[k]) end
  else
    errors = errors + 1
  end
  if i % 200 == 0 then collectgarbage() end
end
collectgarbage()
print(("PASS lua_fuzz seed %d: %d calls (%d raised an error), no crash"):format(seed, calls, errors))
