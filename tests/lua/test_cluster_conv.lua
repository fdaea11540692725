-- test_cluster_conv.lua - the image layers on a local cluster (1 ps + 1
-- worker): a Conv2d model built from its spec on the worker, its 4-D
-- weights on the ps, trains on the bundled digits like the same model in
-- process, and learns them.
local T = dofile("tests/lua/t.lua")
local test, eq = table.unpack(T)
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test_ds:standardize(stats)

local function experiment()
  return drover.experiment {
    name = "conv", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 3e-3 },
    model = nn.Sequential { nn.Unflatten(1, 8, 8), nn.Conv2d(1, 8, 3, { padding = 1 }),
      nn.LeakyReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, { padding = 1, bias = false }), nn.GELU(),
      nn.AvgPool2d(2), nn.Flatten(), nn.Identity(), nn.Linear(32, 10) },
    train = { data = train_std, batch = 32, epochs = 10 },
    eval = { data = test_std, every = 1000 }, seed = 1, verbose = false,
  }
end

local function worst_diff(a, b)
  local worst = 0
  local function walk(u, v)
    if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
    else worst = math.max(worst, math.abs(u - v)) end
  end
  walk(a, b)
  return worst
end

test("cluster-conv 1 ps + 1 worker trains a Conv2d model as in process, and learns digits", function()
  drover.seed(3)
  local here = experiment()
  local rl = here:fit()
  drover.seed(3)
  local exp = experiment()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "conv" }
  local r = c:fit(exp)
  eq(r.steps, rl.steps, "steps")
  local a, b = here.model:parameters(), exp.model:parameters()
  eq(#b, 5, "parameters (the second Conv2d has no bias)")
  eq(#b[1].value:shape(), 4, "Conv2d weight dimensions")
  for i = 1, #a do
    local d = worst_diff(a[i].value:totable(), b[i].value:totable())
    assert(d < 1e-4, a[i].name .. " differs from in-process training by " .. d)
  end
  assert(r.eval_accuracy >= 0.9, "eval accuracy " .. tostring(r.eval_accuracy) .. " (in process " .. tostring(rl.eval_accuracy) .. ")")
  c:shutdown()
end)

test("cluster-conv-idx images [n, 8, 8] from an IDX file reach the worker with their shape", function()
  -- the bundled digits written as IDX images and labels (pixels 0..16 as bytes)
  local rows, labels = {}, {}
  local x, y = digits.x:totable(), digits.y:totable()
  for i = 1, #x do
    local px = {}
    for j = 1, 64 do px[j] = string.char(math.floor(x[i][j])) end
    rows[i] = table.concat(px)
    labels[i] = string.char(math.floor(y[i]))
  end
  local img, lab = os.tmpname(), os.tmpname()
  local f = assert(io.open(img, "wb"))
  f:write(string.pack(">I4I4I4I4", 0x803, #x, 8, 8), table.concat(rows))
  f:close()
  f = assert(io.open(lab, "wb"))
  f:write(string.pack(">I4I4", 0x801, #y), table.concat(labels))
  f:close()
  -- data.idx is read in files mode (the rows stay in the file until used):
  -- the files live until the fit is over
  local ds = data.idx(img, lab)
  eq(table.concat(ds.x:shape(), "x"), "1797x8x8", "IDX shape")
  local tr, te = ds:split(0.8, { seed = 1 })
  local tr_std, st = tr:standardize()
  drover.seed(5)
  local exp = drover.experiment {
    name = "idx", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 3e-3 },
    model = nn.Sequential { nn.Conv2d(1, 8, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(128, 10) },
    train = { data = tr_std, batch = 32, epochs = 5 },
    eval = { data = te:standardize(st), every = 1000 }, seed = 1, verbose = false,
  }
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "idx" }
  local r = c:fit(exp)
  assert(r.eval_accuracy >= 0.9, "eval accuracy " .. tostring(r.eval_accuracy))
  c:shutdown()
  os.remove(img)
  os.remove(lab)
end)
