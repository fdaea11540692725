-- test_cluster_conv.lua - the image layers on a local cluster (1 ps + 1
-- worker): a Conv2d model built from its spec on the worker, its 4-D
-- weights on the ps, trains on the bundled digits like the same model in
-- process, and learns them.
local test, eq = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = os.getenv("TMPDIR") and (os.getenv("TMPDIR") .. "/drover-runs") or "/tmp/drover-test-runs"

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
