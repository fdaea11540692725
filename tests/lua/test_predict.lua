-- test_predict.lua - predict: one output row per input row, in order, in
-- process and over the workers of a cluster; writing predictions.
-- With PREDICT_KILL set (tests/cli/test_predict.sh runs it so, with
-- DROVER_FAULT killing worker:1 in the middle), only the cluster case runs.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data
local TMP = os.getenv("TMPDIR") or "/tmp"
local RUNS = TMP .. "/drover-test-runs"
local KILL = os.getenv("PREDICT_KILL")

local digits = data.csv("examples/data/digits.csv", { label = -1 })
drover.seed(1)
local exp = drover.experiment {
  name = "p", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = digits, batch = 32, epochs = 1 }, seed = 1, verbose = false }
exp:fit()

-- The largest difference between two [n, k] tensors, checked shape first.
local function maxdiff(a, b)
  eq(a:size(1), b:size(1), "rows")
  eq(a:size(2), b:size(2), "columns")
  return (a - b):abs():max()
end

if not KILL then
  test("predict-01 exp:predict: one row per input, the model's forward pass", function()
    local p = exp:predict(digits)
    eq(p:size(1), #digits, "rows")
    eq(p:size(2), 10, "outputs")
    local q = exp:predict(digits.x, { batch = 7 })
    assert(maxdiff(p, q) < 1e-4, "same outputs whatever the batch")
    raises(function() exp:predict(42) end, "predict expects a dataset or a tensor")
  end)

  test("predict-02 c:predict on 2 workers: rows in input order", function()
    local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "pred02" }
    local p = c:predict(exp, digits, { batch = 50 }) -- files mode: the workers read digits.csv
    local q = exp:predict(digits, { batch = 50 })
    eq(maxdiff(p, q), 0, "the workers' outputs are the in-process ones, row for row")
    local shipped = c:predict(exp, digits.x, { batch = 50 }) -- a tensor: its rows travel
    eq(maxdiff(shipped, q), 0, "rows sent by the coordinator: the same outputs")
    local one = c:predict(exp, drover.tensor.zeros(1, 64))
    eq(one:size(1), 1, "a single row")
    local ev = assert(io.open(c.run_dir .. "/events.log")):read("a")
    assert(ev:find("predict 1: 1797 rows in 36 batches, read by the workers from its file", 1, true), ev)
    assert(ev:find("predict 2: 1797 rows in 36 batches\n", 1, true), ev)
  end)

  test("predict-05 one cluster predicts and fits more often than the queue has producer slots", function()
    local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "pred05" }
    local small = digits:split(0.05, { seed = 1 })
    local q = exp:predict(small.x)
    for i = 1, 12 do -- a slot is taken again once its producer is removed
      eq(maxdiff(c:predict(exp, small.x), q), 0, "predict " .. i)
    end
    c:fit(drover.experiment { loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
      model = nn.Sequential { nn.Linear(64, 10) }, train = { data = small, batch = 32, epochs = 1 },
      verbose = false })
    eq(c:predict(exp, small.x):size(1), #small, "and after a fit")
  end)

  test("predict-03 write_csv and write_npy round-trip predictions", function()
    local p = exp:predict(digits)
    local dir = TMP .. "/drover-pred03-" .. os.time() .. "-" .. math.random(1e6)
    os.execute("mkdir -p '" .. dir .. "'")
    data.write_csv(dir .. "/p.csv", p)
    data.write_npy(dir .. "/p.npy", p)
    local a = data.csv(dir .. "/p.csv", { label = false })
    eq(tostring(a):match("no labels") ~= nil, true, "printed without labels: " .. tostring(a))
    eq(maxdiff(a.x, p), 0, "csv round trip")
    local b = data.npy(dir .. "/p.npy")
    eq(maxdiff(b.x, p), 0, "npy round trip")
    raises(function() data.write_npy(dir .. "/none/p.npy", p) end, "cannot write")
    os.execute("rm -rf '" .. dir .. "'")
  end)
else
  test("predict-04 a worker SIGKILLed mid-predict: every row once, in order", function()
    local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "pred04",
                                       max_restarts = 1 }
    local p = c:predict(exp, digits, { batch = 20 }) -- files mode
    local q = exp:predict(digits, { batch = 20 })
    eq(maxdiff(p, q), 0, "every row predicted, in order")
    local shipped = c:predict(exp, digits.x, { batch = 20 }) -- rows sent (the restarted worker too)
    eq(maxdiff(shipped, q), 0, "and with the rows sent")
    local ev = assert(io.open(c.run_dir .. "/events.log")):read("a")
    assert(ev:find("node lost worker:1: killed by signal 9", 1, true), "worker:1 was killed: " .. ev)
    assert(ev:find("retry %d+ predict batch") , "its batches were retried: " .. ev)
  end)
end
