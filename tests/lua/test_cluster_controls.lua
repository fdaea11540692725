-- test_cluster_controls.lua - the training controls on real local
-- clusters: clip_norm (each worker clips its whole gradient, the norm over
-- every ps shard, before it pushes), optim.schedule.plateau (the
-- coordinator watches the evals and sends every ps the reduced rate) and
-- early stopping (stop = { ... }: the coordinator ends the fit).
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data
local S = optim.schedule
local RUNS = os.getenv("TMPDIR") and (os.getenv("TMPDIR") .. "/drover-runs") or "/tmp/drover-test-runs"

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, held = digits:split(0.8, { seed = 1 })
local train2, stats = train:standardize()
local held2 = held:standardize(stats)

local function exp(over)
  drover.seed(3)
  local s = { name = "controls", model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    train = { data = train2, batch = 64, epochs = 2 }, verbose = false }
  for k, v in pairs(over) do s[k] = v end
  return drover.experiment(s)
end

local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- How far the parameters moved in one fit (their L2 distance).
local function moved(e, fit)
  local before = {}
  for i, p in ipairs(e.model:parameters()) do before[i] = p.value:clone() end
  local r = fit(e)
  local sq = 0
  for i, p in ipairs(e.model:parameters()) do
    local d = p.value - before[i]
    sq = sq + (d * d):sum()
  end
  return math.sqrt(sq), r
end

test("cluster-controls-01 clip_norm: one clipped SGD step on 2 ps moves the model by lr * clip_norm", function()
  local c <close> = drover.cluster { ps = 2, worker = 1, runs = RUNS, name = "clip" }
  local one = { data = train2, batch = 64, epochs = 1, max_steps = 1, shuffle = false }
  local clipped = moved(exp { optimizer = optim.SGD { lr = 1, clip_norm = 0.01 }, train = one },
    function(e) return c:fit(e) end)
  near(clipped, 0.01, 1e-5, "the step's norm over both ps shards")
  local free = moved(exp { optimizer = optim.SGD { lr = 1 }, train = one }, function(e) return c:fit(e) end)
  assert(free > 0.1, "an unclipped step moves further: " .. free)
  -- in process, the same step
  local here = moved(exp { optimizer = optim.SGD { lr = 1, clip_norm = 0.01 }, train = one, runs = false },
    function(e) return e:fit() end)
  near(here, clipped, 1e-6, "as in process")
  -- sync, 2 workers: each gradient clipped, then averaged: the update is no longer than clip_norm
  local c2 <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "clipsync" }
  local sync = moved(exp { mode = "sync", optimizer = optim.SGD { lr = 1, clip_norm = 0.01 },
    train = { data = train2, batch = 64, epochs = 1, max_steps = 2 } }, function(e) return c2:fit(e) end)
  assert(sync > 0 and sync <= 0.01 + 1e-6, "sync step norm " .. sync)
end)

test("cluster-controls-02 stop: early stopping ends a cluster fit after patience evals", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "stop" }
  -- a rate too small to improve the eval loss by min_delta
  local e = exp { optimizer = optim.SGD { lr = 1e-6 }, eval = { data = held2, every = 5 },
    train = { data = train2, batch = 64, epochs = 20 },
    stop = { metric = "eval_loss", patience = 2, min_delta = 0.01 } }
  local r = c:fit(e)
  eq(r.stopped_early, true, "stopped early")
  eq(r.best_step, 5, "the first eval was the best")
  assert(r.steps >= 20 and r.steps < 40, "stopped soon after the third bad eval, at step " .. r.steps)
  assert(read(c.run_dir .. "/events.log"):find("fit: stopping early", 1, true), "events.log says why")
  -- a stop without evals is refused
  raises(function() c:fit(exp { stop = { metric = "eval_loss", patience = 2 } }) end,
    "stop needs periodic evals")
end)

test("cluster-controls-03 plateau: the coordinator's reductions reach every ps", function()
  local c <close> = drover.cluster { ps = 2, worker = 1, runs = RUNS, name = "plateau" }
  local lrs = {}
  local e = exp { optimizer = optim.SGD { lr = 1e-6, schedule = S.plateau { patience = 1, factor = 0.5,
      threshold = 0.01 } }, eval = { data = held2, every = 5 },
    train = { data = train2, batch = 64, epochs = 2, max_steps = 30 },
    progress = function(p) if not p.is_eval then lrs[#lrs + 1] = p.lr end end }
  local r = c:fit(e)
  eq(r.steps, 30, "steps")
  near(lrs[1], 1e-6, 1e-12, "the base rate first")
  -- evals at steps 5, 10, ..., 30: reductions after the evals of steps 15 and 25
  near(lrs[#lrs], 0.25e-6, 1e-12, "reduced twice by the end")
  local events = read(c.run_dir .. "/events.log")
  assert(events:find("plateau: learning rate scaled by 0.5", 1, true), "first reduction")
  assert(events:find("plateau: learning rate scaled by 0.25", 1, true), "second reduction")
  for k = 0, 1 do
    local log = read(c.run_dir .. "/logs/ps-" .. k .. ".log") or ""
    assert(log:find("learning rate scaled by 0.25 (plateau)", 1, true), "ps:" .. k .. " took the reduced rate")
  end
  local bad = exp { optimizer = optim.SGD { lr = 0.1, schedule = S.plateau {} } }
  raises(function() c:fit(bad) end, "optim.schedule.plateau needs periodic evals")
end)
