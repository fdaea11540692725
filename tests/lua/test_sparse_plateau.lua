-- test_sparse_plateau.lua - optim.schedule.plateau with sparse tables in
-- process, and plateau schedules watching eval_auc or eval_logloss.
-- A plateau that cannot improve (threshold 2: no value is ever "better"
-- than its best by 200%) with patience 0 reduces the rate at the second
-- eval, whatever the values, and min_lr = lr * factor stops it there:
-- from then on the dense and the row updates run at lr * factor, which a multistep schedule with its milestone at
-- that eval's step gives too. So the two fits' models are equal bit for
-- bit, and differ from the unreduced fit's.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local nn, optim, data = drover.nn, drover.optim, drover.data
local S = optim.schedule

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

-- label, one numeric column, three categorical ones (hashed to ids)
local path = dir .. "/ctr.tsv"
do
  local f = assert(io.open(path, "w"))
  local x = 12345
  local function rnd(n) x = (x * 1103515245 + 12345) % 2147483648; return x % n end
  for _ = 1, 600 do
    local a, b, c = rnd(40), rnd(15), rnd(7)
    local y = ((a % 3 == 0) ~= (b < 5)) and 1 or 0
    if rnd(10) == 0 then y = 1 - y end
    f:write(("%d\t%d\tc%x\td%x\te%x\n"):format(y, rnd(100), a, b, c))
  end
  f:close()
end
local d = data.csv(path, { sep = "\t", label = 1, categorical = { 3, 4, 5 }, buckets = 2^16 })
local tr, te = d:split(0.8, { seed = 1 })
local trs, st = tr:standardize()
local tes = te:standardize(st)

local EVERY = 6 -- evals at steps 6, 12, ...: the second one reduces

-- Fits a fresh model with `sched` (and eval `metrics`); returns the saved
-- model's bytes, the result and the rates the steps ran at.
local function fit(sched, metrics)
  drover.seed(3)
  local bag = nn.EmbeddingBag(2^16, 4)
  local model = nn.Sequential { nn.Concat { nn.Identity(), bag }, nn.Linear(1 + 3 * 4, 1) }
  local lrs = {}
  local exp = drover.experiment { model = model, loss = nn.BCEWithLogits(),
    optimizer = optim.SGD { lr = 0.2, schedule = sched }, train = { data = trs, batch = 20, epochs = 2 },
    eval = { data = tes, every = EVERY, metrics = metrics }, verbose = false, seed = 5,
    progress = function(p) if not p.is_eval then lrs[p.step] = p.lr end end }
  local r = exp:fit()
  local out = dir .. "/m.st"
  model:save(out)
  local f = assert(io.open(out, "rb"))
  local bytes = f:read("a")
  f:close()
  assert(bag:tables()[1].held > 20, "the table was trained")
  return bytes, r, lrs
end

local function never_better(metric)
  return S.plateau { metric = metric, patience = 0, threshold = 2, factor = 0.5, min_lr = 0.1 }
end

test("splat-01 a plateau reduction rates the table's rows as the dense parameters", function()
  local plain = fit(nil)
  local ref, _, rlrs = fit(S.multistep { milestones = { 2 * EVERY }, gamma = 0.5 })
  local got, r, lrs = fit(never_better("eval_loss"))
  eq(r.steps, 48, "steps")
  eq(lrs[2 * EVERY], rlrs[2 * EVERY], "the eval's own step at the base rate")
  eq(lrs[2 * EVERY + 1], rlrs[2 * EVERY + 1], "the next step reduced")
  assert(lrs[2 * EVERY + 1] < lrs[2 * EVERY], "reduced: " .. tostring(lrs[2 * EVERY + 1]))
  assert(got == ref, "the plateau fit's model (rows and dense) is the multistep one bit for bit")
  assert(got ~= plain, "and not the unreduced one")
end)

test("splat-02 plateau on eval_auc (mode max) and eval_logloss (mode min)", function()
  assert(tostring(S.plateau { metric = "eval_auc" }):find('metric = "eval_auc", mode = "max"', 1, true))
  assert(tostring(S.plateau { metric = "eval_logloss" }):find('metric = "eval_logloss", mode = "min"', 1, true))
  local ref = fit(S.multistep { milestones = { 2 * EVERY }, gamma = 0.5 }, { "auc", "logloss" })
  for _, m in ipairs { "eval_auc", "eval_logloss" } do
    local got, r = fit(never_better(m), { "auc", "logloss" })
    assert(r.eval_auc and r.eval_logloss, "the evals computed both")
    assert(got == ref, m .. ": the reduction came at the second eval")
  end
  -- a watched AUC that improves is not a plateau: threshold 0, mode max
  -- reduces only after evals no better than the best; the rates say so
  local _, r, lrs = fit(S.plateau { metric = "eval_auc", patience = 0, threshold = 0, factor = 0.5 },
    { "auc" })
  local best, scale, reduced = -1, 1, false
  for i, e in ipairs(r.evals) do
    if i < #r.evals then
      if e.auc > best then best = e.auc else scale, reduced = scale * 0.5, true end
      near(lrs[e.step + 1], 0.2 * scale, 1e-8, "the rate after the eval of step " .. e.step)
    end
  end
  assert(reduced, "some eval was no better than the best AUC (" .. best .. ")")
end)

test("splat-03 a watched metric the evals do not compute is refused before the fit", function()
  local function exp(sched, eval)
    return drover.experiment { model = nn.Sequential { nn.Linear(1, 1) }, loss = nn.BCEWithLogits(),
      optimizer = optim.SGD { lr = 0.1, schedule = sched }, train = { data = trs, batch = 20 },
      eval = eval, verbose = false }
  end
  raises(function() exp(S.plateau { metric = "eval_auc" }, { data = tes, every = 5, metrics = { "logloss" } }) end,
    'optim.schedule.plateau: metric = "eval_auc" needs the evals to compute it: eval = { ..., metrics = { "auc" } }')
  raises(function() exp(S.plateau { metric = "eval_logloss" }, nil) end,
    'optim.schedule.plateau: metric = "eval_logloss" needs the evals to compute it')
  raises(function() S.plateau { metric = "auc" } end,
    'metric must be "eval_loss", "eval_accuracy", "eval_auc" or "eval_logloss"')
  exp(S.plateau { metric = "eval_logloss" }, { data = tes, every = 5, metrics = { "logloss" } })
end)

os.execute("rm -rf " .. dir)
