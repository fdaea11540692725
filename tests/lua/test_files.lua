-- test_files.lua - files mode: a dataset read from a file reaches the
-- workers as a recipe and each worker reads its own shard; a 2 GiB .npy
-- trains on 1 ps + 2 workers while the coordinator stays small.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data
local TMP = os.getenv("TMPDIR") or "/tmp"
local RUNS = TMP .. "/drover-test-runs"

local function sh(cmd)
  local ok, _, code = os.execute(cmd)
  return ok and 0 or code
end

-- The coordinator's peak resident set (this process), in kB.
local function hwm_kb()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)"))
end

-- A .npy header for a C-order array of `descr` and `shape` (a string
-- like "(3, 4)"), padded to 64 bytes as numpy writes it.
local function npy_header(descr, shape)
  local dict = string.format("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
  local total = (10 + #dict + 1 + 63) // 64 * 64
  local hlen = total - 10
  return "\x93NUMPY\1\0" .. string.char(hlen % 256, hlen // 256) .. dict ..
         string.rep(" ", hlen - #dict - 1) .. "\n"
end

-- A sparse .npy of rows x cols float32 zeros (and labels of u1 zeros):
-- made in a moment, read as zeros.
local function sparse_npy(path, descr, shape, bytes)
  local h = npy_header(descr, shape)
  local f = assert(io.open(path, "wb"))
  f:write(h)
  f:close()
  assert(sh(string.format("truncate -s %d '%s'", #h + bytes, path)) == 0, "truncate")
end

test("files-01 a file dataset is a recipe; one worker reproduces in-process training", function()
  local digits = data.csv("examples/data/digits.csv", { label = -1 })
  local train = digits:split(0.8, { seed = 1 })
  local std = train:shuffle { seed = 3 }:standardize()
  assert(digits.files and std.files, "file datasets carry a recipe")
  assert(not data.synthetic { n = 10, features = 4, classes = 2 }.files, "synthetic ones do not")
  local function exp()
    return drover.experiment {
      name = "t", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
      model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
      train = { data = std, batch = 32, epochs = 2 }, seed = 1, verbose = false }
  end
  drover.seed(1)
  local r1 = exp():fit()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "files01" }
  local r2 = c:fit(exp())
  eq(r2.loss, r1.loss, "loss of the worker that read its own shard")
  local log = assert(io.open(c.run_dir .. "/logs/worker-0.log")):read("a")
  assert(log:find("examples read from its file", 1, true), "worker read its file: " .. log)
end)

test("files-02 a 2 GiB .npy trains on 1 ps + 2 workers, coordinator under 50 MB", function()
  local dir = TMP .. "/drover-files02-" .. os.time() .. "-" .. math.random(1e6)
  assert(sh("mkdir -p '" .. dir .. "'") == 0)
  local rows, cols = 2097152, 256 -- 2^29 floats: 2 GiB
  sparse_npy(dir .. "/x.npy", "<f4", string.format("(%d, %d)", rows, cols), rows * cols * 4)
  sparse_npy(dir .. "/y.npy", "|u1", string.format("(%d,)", rows), rows)
  local ds = data.npy(dir .. "/x.npy", dir .. "/y.npy")
  eq(ds.n, rows, "rows")
  eq(ds.features, cols, "features")
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "files02" }
  local r = c:fit(drover.experiment {
    name = "big", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 },
    model = nn.Sequential { nn.Linear(cols, 16), nn.ReLU(), nn.Linear(16, 2) },
    train = { data = ds, batch = 64, epochs = 1, max_steps = 40 }, seed = 1, verbose = false })
  eq(r.steps, 40, "steps")
  local kb = hwm_kb()
  print(string.format("coordinator VmHWM %.1f MB", kb / 1024))
  assert(kb < 50 * 1024, "coordinator peak RSS " .. kb .. " kB")
  c:shutdown()
  sh("rm -rf '" .. dir .. "'")
end)
