-- test_eval_metrics.lua - eval.metrics = { "auc", "logloss" } from Lua: the
-- result's fields and each eval's, exp:evaluate, printing, save and load,
-- refusals (an unknown name, a model that is not a binary classifier),
-- and on a cluster: the evaluator's AUC over its whole set is the one the
-- coordinator computes on the same parameters. The values themselves are
-- checked against a Python reference by tests/cli/test_eval_metrics.sh.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local d = data.synthetic { n = 2000, features = 12, classes = 2, seed = 7 }
local tr, te = d:split(0.8, { seed = 1 })

local function experiment(extra)
  local e = { model = nn.Sequential { nn.Linear(12, 1) }, loss = nn.BCEWithLogits(),
    optimizer = optim.Adam { lr = 0.05 }, train = { data = tr, batch = 40, epochs = 2 },
    eval = { data = te, every = 20, metrics = { "auc", "logloss" } }, seed = 1, verbose = false }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

test("evalm-l01 results, evals and exp:evaluate carry auc and logloss", function()
  drover.seed(1)
  local exp = experiment()
  local r = exp:fit()
  assert(r.eval_auc > 0.95 and r.eval_auc <= 1, "auc " .. r.eval_auc)
  -- BCEWithLogits is the log loss of sigmoid(logit), unclamped: the same here
  near(r.eval_logloss, r.eval_loss, 1e-6, "log loss is the BCE loss")
  eq(#r.evals, 4)
  assert(r.evals[1].auc < r.evals[4].auc + 0.02 and r.evals[4].auc == r.eval_auc, "evals")
  local e = exp:evaluate()
  eq(e.auc, r.eval_auc); eq(e.logloss, r.eval_logloss)
  assert(tostring(exp):find("every 20 steps; auc, logloss", 1, true), tostring(exp))
  eq(exp.eval.metrics[1], "auc"); eq(exp.eval.metrics[2], "logloss")
  -- asked for one only: the other is absent, not NaN
  local one = experiment { eval = { data = te, metrics = { "logloss" } } }
  local r1 = one:fit()
  eq(r1.eval_auc, nil); assert(r1.eval_logloss > 0, "logloss")
  eq(one:evaluate().auc, nil)
  -- without metrics nothing changes
  local none = experiment { eval = { data = te } }
  eq(none:fit().eval_auc, nil)
end)

test("evalm-l02 two-class softmax: class 1's score ranks the rows", function()
  drover.seed(2)
  local exp = experiment { model = nn.Sequential { nn.Linear(12, 2) }, loss = nn.CrossEntropy() }
  local r = exp:fit()
  assert(r.eval_auc > 0.95, "auc " .. r.eval_auc)
  assert(r.eval_logloss > 0 and r.eval_logloss < 0.5, "logloss " .. r.eval_logloss)
  near(r.eval_logloss, r.eval_loss, 1e-6, "2-class cross-entropy is the log loss")
end)

test("evalm-l03 refusals name what is known and what is needed", function()
  raises(function() experiment { eval = { data = te, metrics = { "auc", "f1" } } } end,
    'eval.metrics[2]: unknown metric f1 (known: "auc", "logloss")')
  raises(function() experiment { eval = { data = te, metrics = "auc" } } end,
    "eval.metrics must be a list of names")
  local mse = experiment { loss = nn.MSE() }
  raises(function() mse:fit() end, "need a binary classifier: loss BCEWithLogits with one output")
end)

test("evalm-l04 save and load keep the metrics", function()
  local exp = experiment()
  exp:fit()
  local dir = os.tmpname()
  os.remove(dir)
  exp:save(dir)
  local back = drover.experiment.load(dir, { train = { data = tr }, eval = { data = te } })
  eq(back.eval.metrics[1], "auc"); eq(back.eval.metrics[2], "logloss")
  local e = back:evaluate()
  near(e.auc, exp:evaluate().auc, 1e-12, "the same model's AUC")
  os.execute("rm -rf '" .. dir .. "'")
end)

test("evalm-l05 a cluster's evaluator computes the whole set's AUC", function()
  drover.seed(3)
  local exp = experiment { train = { data = tr, batch = 40, epochs = 2 },
    eval = { data = te, every = 40, metrics = { "auc", "logloss" } } }
  local c <close> = drover.cluster { ps = 1, worker = 1, evaluator = 1, runs = RUNS,
    name = "evalm05" }
  local r = c:fit(exp)
  assert(r.eval_auc > 0.95, "auc " .. tostring(r.eval_auc))
  local ev = c:evaluate(exp)
  near(ev.auc, r.eval_auc, 1e-9, "the evaluator's AUC is the coordinator's on the same model")
  near(ev.logloss, r.eval_logloss, 1e-9, "and the log loss")
  local f = assert(io.open(c.run_dir .. "/metrics.jsonl"))
  local text = f:read("a")
  f:close()
  assert(text:find('"eval_auc"', 1, true) and text:find('"eval_logloss"', 1, true), "metrics")
  local bad = experiment { loss = nn.MSE() }
  raises(function() c:fit(bad) end, "need a binary classifier")
end)

test("evalm-l06 a cluster without an evaluator: the coordinator computes them", function()
  drover.seed(4)
  local exp = experiment { eval = { data = te, every = 40, metrics = { "auc" } } }
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "evalm06" }
  local r = c:fit(exp)
  assert(r.eval_auc > 0.95, "auc " .. tostring(r.eval_auc))
  eq(r.eval_logloss, nil, "not asked")
  near(c:evaluate(exp).auc, r.eval_auc, 1e-9, "the same model's AUC")
end)

test("evalm-l07 early stopping and keep_best watch eval_auc or eval_logloss", function()
  drover.seed(5)
  -- min_delta = 1: only the first eval (step 20) is ever better; patience 1
  local exp = experiment { stop = { metric = "eval_auc", patience = 1, min_delta = 1 },
    runs = RUNS, name = "evalm07",
    checkpoint = { every = 20, keep = 1, keep_best = { metric = "eval_auc" } } }
  local r = exp:fit()
  eq(r.stopped_early, true); eq(r.best_step, 20)
  eq(#r.evals, 3, "evals at 20, 40, 60: the second bad one stops the fit")
  local h = io.popen("cat " .. exp:run_dir() .. "/checkpoints/step-*/manifest.json")
  local man = h:read("a")
  h:close()
  assert(man:find('"eval_auc"', 1, true) and man:find('"eval_logloss"', 1, true), man)
  local ll = experiment { stop = { metric = "eval_logloss", patience = 0, min_delta = 10 } }
  local r2 = ll:fit()
  eq(r2.stopped_early, true); eq(r2.best_step, 20, "log loss: lower is better (mode min)")
  raises(function() experiment { eval = { data = te, every = 20, metrics = { "logloss" } },
    stop = { metric = "eval_auc", patience = 1 } } end,
    'stop.metric = "eval_auc" needs the evals to compute it: eval = { ..., metrics = { "auc" } }')
  raises(function() experiment { eval = { data = te, every = 20, metrics = { "logloss" } },
    optimizer = optim.SGD { lr = 0.1, schedule = optim.schedule.plateau { metric = "eval_auc" } } } end,
    'optim.schedule.plateau: metric = "eval_auc" needs the evals to compute it')
end)

test("evalm-l08 a cluster stops early on its evaluator's AUC", function()
  drover.seed(6)
  local exp = experiment { stop = { metric = "eval_auc", patience = 1, min_delta = 1 } }
  local c <close> = drover.cluster { ps = 1, worker = 1, evaluator = 1, runs = RUNS,
    name = "evalm08" }
  local r = c:fit(exp)
  eq(r.stopped_early, true); eq(r.best_step, 20)
  local f = assert(io.open(c.run_dir .. "/events.log"))
  local ev = f:read("a")
  f:close()
  assert(ev:find("the eval of step 60%): no better eval_auc since step 20"), ev)
end)
