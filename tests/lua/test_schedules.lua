-- test_schedules.lua - optim.schedule.* (PyTorch's formulas, counted in
-- updates), clip_norm, and early stopping (stop = { ... }) in process:
-- the rate each step used, metrics.jsonl's lr, refusals of unknown keys
-- and of what clusters do not support.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data
local S = optim.schedule

test("schedule_formulas_match_pytorch", function()
  local st = S.step { step_size = 30, gamma = 0.5 }
  eq(st:lr(1, 29), 1.0, "step before")
  eq(st:lr(1, 30), 0.5, "step at")
  eq(st:lr(1, 65), 0.25, "step twice")
  local ms = S.multistep { milestones = { 10, 20 }, gamma = 0.1 }
  near(ms:lr(1, 9), 1, 1e-9, "multistep before")
  near(ms:lr(1, 10), 0.1, 1e-6, "multistep first")
  near(ms:lr(1, 99), 0.01, 1e-6, "multistep second")
  local c = S.cosine { T_max = 100, eta_min = 0.001 }
  near(c:lr(0.1, 0), 0.1, 1e-7, "cosine start")
  near(c:lr(0.1, 50), 0.001 + (0.1 - 0.001) / 2, 1e-6, "cosine middle")
  near(c:lr(0.1, 25), 0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi / 4)) / 2, 1e-6, "cosine quarter")
  near(c:lr(0.1, 500), 0.001, 1e-6, "held at eta_min after T_max")
  local w = S.warmup { steps = 10, start_factor = 0.1, after = c }
  near(w:lr(0.1, 0), 0.01, 1e-7, "warmup start")
  near(w:lr(0.1, 5), 0.1 * (0.1 + 0.9 * 0.5), 1e-7, "warmup middle")
  near(w:lr(0.1, 10), 0.1, 1e-7, "cosine starts after warmup")
  near(w:lr(0.1, 60), c:lr(0.1, 50), 1e-9, "cosine shifted by the warmup")
  near(S.warmup { steps = 3 }:lr(1, 0), 1 / 3, 1e-6, "LinearLR's default start_factor")
end)

test("schedule_printing_reads_back", function()
  local w = S.warmup { steps = 10, start_factor = 0.1, after = S.cosine { T_max = 100, eta_min = 0.001 } }
  local o = optim.SGD { lr = 0.1, momentum = 0.9, schedule = w, clip_norm = 1.5 }
  eq(tostring(o), "optim.SGD { lr = 0.1, momentum = 0.9, clip_norm = 1.5, schedule = " ..
    "optim.schedule.warmup { steps = 10, start_factor = 0.1, after = optim.schedule.cosine " ..
    "{ T_max = 100, eta_min = 0.001 } } }", "printed")
  local back = load("return " .. tostring(o), "=back", "t", { optim = optim })()
  eq(tostring(back), tostring(o), "reads back")
  eq(o:config().clip_norm, 1.5, "config clip_norm")
  eq(tostring(o:config().schedule), tostring(w), "config schedule")
  eq(tostring(S.multistep { milestones = { 3, 7 } }), "optim.schedule.multistep { milestones = { 3, 7 }, gamma = 0.1 }", "multistep")
  eq(tostring(S.plateau {}), 'optim.schedule.plateau { metric = "eval_loss", mode = "min", factor = 0.1, ' ..
    'patience = 10, threshold = 0.0001, min_lr = 0 }', "plateau defaults")
  eq(S.plateau { metric = "eval_accuracy" }:lr(1, 5), 1.0, "plateau before any eval")
end)

test("schedule_unknown_keys_and_bad_values", function()
  raises(function() S.cosine { T_max = 10, etamin = 1 } end, "optim.schedule.cosine: unknown option 'etamin' (valid: T_max, eta_min)")
  raises(function() S.cosine {} end, "T_max is required")
  raises(function() S.step { step_size = 0 } end, "step_size must be > 0")
  raises(function() S.step { step_size = 2, gama = 0.1 } end, "unknown option 'gama'")
  raises(function() S.multistep { milestones = { 5, 3 } } end, "milestones must be positive and increasing")
  raises(function() S.multistep { milestones = 5 } end, "milestones must be a list")
  raises(function() S.plateau { metric = "loss" } end, 'metric must be "eval_loss", "eval_accuracy", "eval_auc" or "eval_logloss"')
  raises(function() S.plateau { mode = "up" } end, 'mode must be "min" or "max"')
  raises(function() S.plateau { factor = 1 } end, "factor must be in (0, 1)")
  raises(function() S.warmup { steps = 0 } end, "steps must be > 0")
  raises(function() S.warmup { steps = 5, start_factor = 0 } end, "start_factor must be in (0, 1]")
  raises(function() S.warmup { steps = 5, after = S.warmup { steps = 2 } } end, "after is a warmup already")
  raises(function() S.warmup { steps = 5, after = 1 } end, "after must be a schedule")
  raises(function() optim.Adam { schedule = "cosine" } end, "schedule must be an optim.schedule")
  raises(function() optim.Adam { clip_norm = -1 } end, "clip_norm")
  raises(function() optim.SGD { clipnorm = 1 } end, "unknown option 'clipnorm'")
end)

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, held = digits:split(0.8, { seed = 1 })
local train2, stats = train:standardize()
local held2 = held:standardize(stats)

local function exp(over)
  drover.seed(3)
  local s = { model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    train = { data = train2, batch = 64, epochs = 2 }, verbose = false, runs = false }
  for k, v in pairs(over) do s[k] = v end
  return drover.experiment(s)
end

test("schedule_rates_used_in_a_fit", function()
  local sched = S.warmup { steps = 5, start_factor = 0.2, after = S.cosine { T_max = 100 } }
  local lrs = {}
  local e = exp { optimizer = optim.SGD { lr = 0.1, schedule = sched },
    progress = function(p) if not p.is_eval then lrs[p.step] = p.lr end end }
  local r = e:fit()
  eq(#lrs, r.steps, "a rate per step")
  for k = 1, r.steps do near(lrs[k], sched:lr(0.1, k - 1), 1e-7, "step " .. k) end
  -- a second fit continues the schedule from the optimizer's count
  lrs = {}
  e:fit()
  near(lrs[1], sched:lr(0.1, r.steps), 1e-7, "continues")
end)

test("schedule_lr_in_metrics_jsonl", function()
  local dir = os.tmpname()
  os.remove(dir)
  local e = exp { optimizer = optim.Adam { lr = 0.01, schedule = S.step { step_size = 10, gamma = 0.5 } },
    runs = dir, train = { data = train2, batch = 64, epochs = 1, max_steps = 12 } }
  e:fit()
  local f = assert(io.open(e:run_dir() .. "/metrics.jsonl"))
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  local first, last = lines[1], lines[#lines]
  if not first:find('"lr":0.00999999', 1, true) and not first:find('"lr":0.01', 1, true) then
    error("no lr in " .. first)
  end
  if not last:find('"lr":0.00499999', 1, true) and not last:find('"lr":0.005', 1, true) then
    error("no decayed lr in " .. last)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

test("clip_norm_bounds_the_update", function()
  local norms = {}
  local e = exp { optimizer = optim.SGD { lr = 0.1, clip_norm = 0.5 },
    train = { data = train2, batch = 64, epochs = 1, max_steps = 5 },
    progress = function(p) if not p.is_eval then norms[#norms + 1] = p.grad_norm end end }
  e:fit()
  eq(#norms, 5, "a norm per step")
  if not (norms[1] > 0.5) then error("the first gradient should be clipped: " .. norms[1]) end
  -- the same step without clipping moves the parameters further
  local function first_step(opt)
    drover.seed(3)
    local m = nn.Sequential { nn.Linear(64, 10) }
    local before = {}
    for i, p in ipairs(m:parameters()) do before[i] = p.value:clone() end
    drover.experiment { model = m, loss = nn.CrossEntropy(), optimizer = opt, verbose = false,
      runs = false, train = { data = train2, batch = 64, epochs = 1, max_steps = 1, shuffle = false } }:fit()
    local sq = 0
    for i, p in ipairs(m:parameters()) do
      local d = p.value - before[i]
      sq = sq + (d * d):sum()
    end
    return math.sqrt(sq)
  end
  local clipped, free = first_step(optim.SGD { lr = 1, clip_norm = 0.01 }), first_step(optim.SGD { lr = 1 })
  if not (clipped < free) then error(("clipped %g, free %g"):format(clipped, free)) end
  near(clipped, 0.01, 1e-5, "a clipped SGD step moves the parameters by lr * clip_norm")
end)

test("plateau_and_early_stopping", function()
  -- A rate too small to improve the eval loss by min_delta / threshold.
  local lrs = {}
  local e = exp { optimizer = optim.SGD { lr = 1e-6,
      schedule = S.plateau { patience = 1, factor = 0.5, threshold = 0.01 } },
    eval = { data = held2, every = 5 }, train = { data = train2, batch = 64, epochs = 3 },
    progress = function(p) if not p.is_eval then lrs[p.step] = p.lr end end,
    stop = { metric = "eval_loss", patience = 4, min_delta = 0.01 } }
  local r = e:fit()
  eq(r.stopped_early, true, "stopped early")
  eq(r.best_step, 5, "the first eval was the best")
  eq(r.steps, 5 * 6, "stopped after patience + 1 evals without improvement")
  near(lrs[10], 1e-6, 1e-12, "patience 1: not reduced after one bad eval")
  near(lrs[16], 0.5e-6, 1e-12, "reduced after the second bad eval")
  near(lrs[26], 0.25e-6, 1e-12, "and again two evals later")
  eq(r.evals[#r.evals].step, 30, "the stopping eval is the last")
  -- exp:save keeps the schedule, the plateau's reductions and stop
  local dir = os.tmpname()
  os.remove(dir)
  e:save(dir)
  local first
  local back = drover.experiment.load(dir, { train = { data = train2 }, eval = { data = held2 },
    progress = function(p) if not p.is_eval and not first then first = p.lr end end })
  eq(tostring(back.optimizer), tostring(e.optimizer), "the optimizer and its schedule")
  eq(back.stop.patience, 4, "stop")
  near(back.stop.min_delta, 0.01, 1e-12, "stop.min_delta")
  back:fit()
  near(first, 0.25e-6, 1e-12, "the loaded fit goes on at the reduced rate")
  os.execute("rm -rf '" .. dir .. "'")
end)

test("stop_validation", function()
  local E = function(over) return exp(over) end
  raises(function() E { stop = { metric = "eval_loss" } } end, "stop needs periodic evals")
  raises(function() E { eval = { data = held2, every = 5 }, stop = { metric = "loss" } } end,
    'stop.metric must be "eval_loss", "eval_accuracy", "eval_auc" or "eval_logloss"')
  raises(function() E { eval = { data = held2, every = 5 }, stop = { metric = "eval_loss", patince = 2 } } end,
    "unknown field 'stop.patince'")
  raises(function() E { eval = { data = held2, every = 5 }, stop = { metric = "eval_loss", mode = "up" } } end,
    'stop.mode must be "max" or "min"')
  raises(function() E { eval = { data = held2, every = 5 }, stop = { metric = "eval_loss", patience = -1 } } end,
    "stop.patience must be a non-negative integer")
end)
