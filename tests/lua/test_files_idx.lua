-- test_files_idx.lua - IDX in files mode: data.idx keeps a recipe, each
-- worker reads its own rows (byte ranges of a plain file, a gzip file
-- streamed), and a Fashion-MNIST-sized set trains on 1 ps + 2 workers with
-- the coordinator's peak RSS under 60 MB. No Fashion-MNIST ships in a
-- package this project can fetch, so the files are made here (by
-- files_util.lua): 60000 28x28 uint8 images whose class draws a band of
-- rows and a band of columns over seeded noise, learnable as the real set
-- is (first test: the peak RSS is the process's, so nothing big comes
-- before it).
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local sh = T.sh
local F = dofile("tests/lua/files_util.lua")
local hwm_kb = F.hwm_kb
local nn, optim, data = drover.nn, drover.optim, drover.data
local TMP = os.getenv("TMPDIR") or "/tmp"
local RUNS = TMP .. "/drover-test-runs"
local DIR = TMP .. "/drover-files-idx-" .. os.time() .. "-" .. math.random(1e6)
assert(sh("mkdir -p '" .. DIR .. "'") == 0)

-- images-N.idx and labels-N.idx of n Fashion-MNIST-shaped examples.
local function fashion(n)
  local ip, lp = DIR .. "/images-" .. n .. ".idx", DIR .. "/labels-" .. n .. ".idx"
  F.fashion(ip, lp, n)
  return ip, lp
end

local function experiment(train, steps, mode)
  return drover.experiment {
    name = "idx", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, mode = mode,
    model = nn.Sequential { nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10) },
    train = { data = train, batch = 64, epochs = 1, max_steps = steps }, seed = 1, verbose = false }
end

test("idx-01 Fashion-MNIST-sized IDX, held out, standardized, on 1 ps + 2 workers: coordinator under 60 MB", function()
  local ip, lp = fashion(60000)
  local ds = data.idx(ip, lp)
  eq(ds.n, 60000, "rows")
  eq(ds.features, 784, "features")
  eq(ds.classes, 10, "classes")
  assert(ds.files and not ds.loaded, "the coordinator keeps a recipe, not the rows")
  local train, held = ds:split(6 / 7, { seed = 1 })
  local std, stats = train:standardize()
  assert(not std.loaded and not train.loaded and not held.loaded, "no rows copied")
  local m = stats:mean()
  assert(m:get(1) > 10 and m:get(1) < 120, "streamed mean " .. m:get(1))
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "idx01" }
  local r = c:fit(experiment(std, 150))
  eq(r.steps, 150, "steps")
  local kb = hwm_kb()
  print(string.format("coordinator VmHWM %.1f MB", kb / 1024))
  -- Under ASan the peak is its quarantine of freed blocks (up to 256 MB),
  -- not the rows: there the "no rows here" checks below are the proof.
  if not os.getenv("SANITIZED") then
    assert(kb < 60 * 1024, "coordinator peak RSS " .. kb .. " kB")
  end
  assert(r.accuracy > 0.5, "learnable: accuracy " .. r.accuracy)
  assert(not std.loaded and not held.loaded, "the fit did not load the rows here")
  for i = 0, 1 do
    local log = assert(io.open(c.run_dir .. "/logs/worker-" .. i .. ".log")):read("a")
    assert(log:find("examples read from its file", 1, true), "worker read its file: " .. log)
  end
  c:shutdown()
end)

-- A FIFO feeding path once: a dataset read from it has no recipe (the
-- rows go in SETUP, the path before files mode). The writer is ours, by pid.
local function fifo_of(path)
  local fifo, pidf = path .. ".fifo", path .. ".pid"
  assert(sh(string.format("rm -f '%s' && mkfifo '%s' && (timeout 60 cat '%s' > '%s' & echo $! > '%s')",
    fifo, fifo, path, fifo, pidf)) == 0)
  return fifo, function()
    local f = io.open(pidf)
    local pid = f and f:read("n")
    if f then f:close() end
    if pid then sh("kill " .. math.tointeger(pid) .. " 2>/dev/null") end
  end
end

test("idx-02 one worker: files mode trains as the rows shipped in SETUP (sync) and as in-process (async)", function()
  local ip, lp = fashion(2000)
  local lazy = data.idx(ip, lp):shuffle { seed = 5 }:standardize()
  local fifo, stop = fifo_of(lp)
  local shipped = data.idx(ip, fifo):shuffle { seed = 5 }:standardize()
  stop()
  assert(lazy.files and not lazy.loaded, "lazy")
  assert(not shipped.files and shipped.loaded, "read through a pipe: no recipe, rows held")
  -- whole epochs (a sync fit counts exactly its applied steps either way: test_sync_steps.lua)
  local function run(ds, mode)
    drover.seed(1)
    local exp = experiment(ds, nil, mode)
    local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "idx02" }
    local r = c:fit(exp)
    c:shutdown()
    return r, exp.model:parameters()
  end
  local r1, p1 = run(lazy, "sync")
  local r2, p2 = run(shipped, "sync")
  eq(r1.steps, 32, "steps: one epoch of 2000 rows in batches of 64")
  eq(r1.steps, r2.steps, "steps")
  eq(r1.loss, r2.loss, "loss: files mode and rows in SETUP")
  F.same_params(p1, p2)
  local r3 = run(lazy)
  drover.seed(1)
  local r4 = experiment((data.idx(ip, lp):shuffle { seed = 5 }:standardize())):fit()
  eq(r3.loss, r4.loss, "loss: files mode and in-process")
  assert(r4.loss < 1, "learnt: loss " .. r4.loss)
end)

test("idx-03 a .gz IDX is lazy too, reads as the plain one and trains on 2 workers", function()
  local ip, lp = fashion(2000)
  assert(sh(string.format("gzip -kf '%s' '%s'", ip, lp)) == 0)
  local gz = data.idx(ip .. ".gz", lp .. ".gz")
  local plain = data.idx(ip, lp)
  assert(gz.files and not gz.loaded, "a gzip IDX is lazy")
  eq(gz.classes, 10, "classes of the streamed labels")
  local a, b = gz:shuffle(2):shard(1, 3), plain:shuffle(2):shard(1, 3)
  eq(table.concat(a.x:shape(), "x"), "667x28x28", "shape")
  eq(table.concat(a.y:totable(), ","), table.concat(b.y:totable(), ","), "labels")
  for _, at in ipairs { { 1, 1, 1 }, { 5, 14, 3 }, { 667, 28, 28 }, { 300, 7, 20 } } do
    eq(a.x:get(table.unpack(at)), b.x:get(table.unpack(at)), "pixel " .. table.concat(at, ","))
  end
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "idx03" }
  local r = c:fit(experiment(gz:standardize(), 20))
  eq(r.steps, 20, "steps")
  c:shutdown()
end)

test("idx-04 a truncated IDX fails on the coordinator naming the file and the byte", function()
  local ip, lp = fashion(100)
  local cut = DIR .. "/cut.idx"
  assert(sh(string.format("head -c 50000 '%s' > '%s'", ip, cut)) == 0)
  raises(function() data.idx(cut, lp) end,
    cut .. ": byte 50000: file ends early: expected 78416 bytes")
  raises(function() data.idx(ip, ip) end, ip .. ": byte 3: labels must be 1-D, found 3 dimensions")
  assert(sh(string.format("gzip -kc '%s' | head -c 2000 > '%s.gz'", ip, cut)) == 0)
  local err = raises(function() data.idx(cut .. ".gz", lp) end, cut .. ".gz: byte ")
  assert(err:find("of the gzip file", 1, true), err)
  local long = DIR .. "/long.idx"
  assert(sh(string.format("cat '%s' '%s' > '%s'", lp, lp, long)) == 0)
  raises(function() data.idx(ip, long) end, long .. ": byte 108: 108 unexpected bytes after the data")
end)

test("idx-05 a worker whose copy has another size fails its SETUP naming the file", function()
  local ip, lp = fashion(500)
  local ds = data.idx(ip, lp)
  assert(sh(string.format("printf 'xx' >> '%s'", ip)) == 0) -- changed after the coordinator read it
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "idx05", max_restarts = 0 }
  local err = raises(function() c:fit(experiment(ds, 5)) end, ip .. ": 392018 bytes here, 392016 where")
  assert(err:find("SETUP", 1, true), err)
  pcall(c.shutdown, c) -- it reports the failure again
end)

sh("rm -rf '" .. DIR .. "'")
