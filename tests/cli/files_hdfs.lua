-- files_hdfs.lua - the Lua side of test_files_hdfs.sh (data on HDFS in
-- files mode). arg[1] is the phase:
--   gen DIR     writes the local files the shell then puts on HDFS
--   rss         the 60000x28x28 IDX from HDFS on 1 ps + 2 workers (alone in
--               its process: the peak RSS is the process's)
--   main        every other case
-- $H is the HDFS directory (hdfs://...), $L the local one, $RUNS the runs.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local F = dofile("tests/lua/files_util.lua")
local hwm_kb, npy_header, same_params = F.hwm_kb, F.npy_header, F.same_params
local nn, optim, data = drover.nn, drover.optim, drover.data
local phase, H, L, RUNS = arg[1], os.getenv("H"), os.getenv("L"), os.getenv("RUNS")

-- ============================== gen ======================================

-- digits as x.npy (float32 [n, 64]) and y.npy (uint8 [n]), digits.svm.
local function digits_as(dir)
  local d = data.csv("examples/data/digits.csv", { label = -1 })
  local x, y = d.x:totable(), d.y:totable()
  local fx = assert(io.open(dir .. "/x.npy", "wb"))
  local fy = assert(io.open(dir .. "/y.npy", "wb"))
  local fs = assert(io.open(dir .. "/digits.svm", "wb"))
  fx:write(npy_header("<f4", string.format("(%d, 64)", d.n)))
  fy:write(npy_header("|u1", string.format("(%d,)", d.n)))
  for i = 1, d.n do
    fx:write(string.pack("<" .. string.rep("f", 64), table.unpack(x[i])))
    fy:write(string.char(math.tointeger(y[i])))
    local line = { tostring(math.tointeger(y[i])) }
    for j = 1, 64 do
      if x[i][j] ~= 0 then line[#line + 1] = string.format("%d:%g", j, x[i][j]) end
    end
    fs:write(table.concat(line, " "), "\n")
  end
  fx:close()
  fy:close()
  fs:close()
end

if phase == "gen" then
  local dir = arg[2]
  F.fashion(dir .. "/images.idx", dir .. "/labels.idx", 60000)
  digits_as(dir)
  return
end

-- ============================== helpers ==================================

local function mlp(ds, mode, steps, f)
  return drover.experiment {
    name = "fh", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, mode = mode,
    model = f == 784 and nn.Sequential { nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10) }
      or nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
    train = { data = ds, batch = 32, epochs = steps and nil or 2, max_steps = steps },
    seed = 1, verbose = false }
end

-- What each worker of the run fetched from HDFS for its shard (the
-- hdfs-trace lines DROVER_HDFS_TRACE makes): { {opens, bytes}, ... }.
local function traces(c, workers)
  local out = {}
  for i = 0, workers - 1 do
    local log = T.read(c.run_dir .. "/logs/worker-" .. i .. ".log")
    local o, b = 0, 0
    for oo, bb in log:gmatch("hdfs%-trace: [^\n]-: (%d+) OPEN requests, (%d+) bytes") do
      o, b = o + tonumber(oo), b + tonumber(bb)
    end
    assert(log:find("examples read from its file", 1, true), "worker read its file: " .. log)
    out[#out + 1] = { o, b }
  end
  return out
end

local function fit(ds, workers, mode, name, steps, f)
  drover.seed(1)
  local exp = mlp(ds, mode, steps, f)
  local c <close> = drover.cluster { ps = 1, worker = workers, runs = RUNS, name = name }
  local r = c:fit(exp)
  local tr = traces(c, workers)
  c:shutdown()
  return r, exp.model:parameters(), tr
end

-- ============================== rss ======================================

if phase == "rss" then
  test("fh-01 a 60000x28x28 IDX on HDFS, held out and standardized, trains on 1 ps + 2 workers: coordinator under 60 MB", function()
    local ds = data.idx(H .. "/images.idx", H .. "/labels.idx")
    eq(ds.n, 60000, "rows")
    assert(ds.files and not ds.loaded, "the coordinator keeps a recipe")
    local train = ds:split(6 / 7, { seed = 1 })
    local std = train:standardize()
    local r, _, tr = fit(std, 2, nil, "fh01", 150, 784)
    eq(r.steps, 150, "steps")
    local kb = hwm_kb()
    print(string.format("coordinator VmHWM %.1f MB", kb / 1024))
    assert(kb < (os.getenv("SANITIZED") and 200 or 60) * 1024, "coordinator peak RSS " .. kb .. " kB")
    assert(r.accuracy > 0.5, "learnable: accuracy " .. r.accuracy)
    local size, labels = 16 + 60000 * 784, 8 + 60000
    for i, t in ipairs(tr) do
      print(string.format("worker %d: %d OPEN requests, %d bytes of HDFS", i - 1, t[1], t[2]))
      -- ranges of at most 16 MiB (data_file_span), each file's bytes about once
      -- (a strided shard has rows in every MiB; the headers cost a chunk)
      assert(t[1] >= size // (16 << 20), "byte ranges, not one OPEN of the file: " .. t[1])
      assert(t[2] <= size + 2 * labels + (256 << 10), "read about once: " .. t[2])
    end
  end)
  return
end

-- ============================== main =====================================

test("fh-02 CSV from hdfs:// on 1 ps + 2 workers converges like the local file; workers read ranges", function()
  local digits = data.csv(H .. "/digits.csv", { label = -1 })
  eq(digits.n, 1797, "rows")
  assert(digits.files and not digits.loaded, "files mode")
  local rh, _, tr = fit(digits:shuffle { seed = 3 }:standardize(), 2, nil, "fh02h")
  local local_ = data.csv(L .. "/digits.csv", { label = -1 })
  local rl = fit(local_:shuffle { seed = 3 }:standardize(), 2, nil, "fh02l")
  print(string.format("accuracy hdfs %.4f local %.4f", rh.accuracy, rl.accuracy))
  assert(rh.accuracy > 0.7 and math.abs(rh.accuracy - rl.accuracy) < 0.05, "converges like local")
  local size = #T.read(L .. "/digits.csv")
  for _, t in ipairs(tr) do
    assert(t[1] >= 1 and t[2] <= size + 2, "ranged OPENs of at most the file: " .. t[1] .. " " .. t[2])
  end
end)

-- sync, one worker: what it reads from HDFS is row for row the local file.
local formats = {
  { "csv", function(d) return data.csv(d .. "/digits.csv", { label = -1 }) end },
  { "csv.gz", function(d) return data.csv(d .. "/digits.csv.gz", { label = -1 }) end },
  { "libsvm", function(d) return data.libsvm(d .. "/digits.svm", { features = 64 }) end },
  { "npy", function(d) return data.npy(d .. "/x.npy", d .. "/y.npy") end },
  { "idx", function(d) return data.idx(d .. "/images.idx", d .. "/labels.idx"):split(0.97, { seed = 2 }) end },
}
for k, f in ipairs(formats) do
  test(string.format("fh-03%s %s from HDFS, sync, one worker: bit-identical parameters to the local file", string.char(96 + k), f[1]), function()
    local wide = f[1] == "idx" and 784 or nil
    local function prep(d)
      local ds, held = f[2](d)
      if f[1] == "idx" then ds = held end -- the 3% held out: 1800 rows
      assert(ds.files, "files mode")
      return ds:shuffle { seed = 4 }:standardize()
    end
    -- whole epochs: a sync fit's max_steps may run one step more (a race of its own)
    local rh, ph, tr = fit(prep(H), 1, "sync", "fh03h", nil, wide)
    local rl, pl = fit(prep(L), 1, "sync", "fh03l", nil, wide)
    eq(rh.loss, rl.loss, "loss")
    same_params(ph, pl)
    assert(tr[1][1] >= 1, "the worker read HDFS")
  end)
end

test("fh-04 the eager readers read hdfs:// too: rows as the local file's", function()
  local a = data.csv(H .. "/digits.csv", { label = -1 }):shard(2, 3)
  local b = data.csv(L .. "/digits.csv", { label = -1 }):shard(2, 3)
  eq(a.x:sum(), b.x:sum(), "x")
  eq(table.concat(a.y:totable(), ","), table.concat(b.y:totable(), ","), "y")
  local n1 = data.npy(H .. "/x.npy", H .. "/y.npy")
  eq(n1.x:sum(), data.npy(L .. "/x.npy", L .. "/y.npy").x:sum(), "npy")
  local g = data.csv(os.getenv("W") .. "/digits.csv.gz", { label = -1 })
  eq(g.n, 1797, "webhdfs:// and gzip")
end)

test("fh-05 a malformed line in an HDFS CSV names the URL and the line; a missing file the URL and HDFS's exception", function()
  raises(function() data.csv(H .. "/bad.csv", { label = -1 }) end,
    H .. "/bad.csv:8: expected 65 fields, found 64")
  raises(function() data.csv(H .. "/bad.csv.gz", { label = -1 }) end,
    H .. "/bad.csv.gz:8: expected 65 fields, found 64")
  local err = raises(function() data.csv(H .. "/nope.csv") end, "cannot open '" .. H .. "/nope.csv'")
  assert(err:find("FileNotFoundException: File does not exist: ", 1, true), err)
  raises(function() data.idx(H .. "/nope.idx") end, "cannot open '" .. H .. "/nope.idx'")
  raises(function() data.npy("hdfs:///nope.npy") end, "cannot open 'hdfs:///nope.npy'")
end)
