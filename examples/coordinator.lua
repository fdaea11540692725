-- coordinator.lua - ClusterCoordinator-style training: the script
-- schedules Lua functions; each runs on whichever worker is idle and
-- trains through the worker object `w`. Results come back as futures.
--
--   drover run examples/coordinator.lua
--
-- c:setup(exp) places the model's variables on the ps and gives each
-- worker the model and its shard of the data, without training. Then
-- every scheduled function receives `w` (w:train_step(), w:pull(),
-- w:compute(), w:push(), w:batch(), w.index, w.name) before its own
-- arguments. A worker lost meanwhile is restarted, and what it was
-- running runs again elsewhere.

local nn, optim, data = drover.nn, drover.optim, drover.data

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/data/digits.csv", { label = -1, header = false })
local train, test = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test:standardize(stats)

drover.seed(1)
local exp = drover.experiment {
  name      = "coordinator",
  model     = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  loss      = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 1e-3 },
  train     = { data = train_std, batch = 32, epochs = 1 },
  seed      = 1,
}

local c <close> = drover.cluster { ps = 1, worker = 2, name = "coordinator" }
c:setup(exp)

-- Runs on a worker: n train steps, the mean loss, and who ran them.
local function train_steps(w, n)
  local sum = 0
  for _ = 1, n do sum = sum + w:train_step() end
  return sum / n, w.name
end

for round = 1, 8 do
  local futures = {}
  for i = 1, 12 do futures[i] = c:schedule(train_steps, 10) end
  c:join()                       -- raises the first error, with its traceback
  local loss, by = 0, {}
  for _, rv in ipairs(futures) do
    local l, who = rv:fetch()
    loss, by[who] = loss + l, (by[who] or 0) + 1
  end
  print(string.format("round %d: mean loss %.4f  (worker:0 ran %d, worker:1 ran %d)",
    round, loss / #futures, by["worker:0"] or 0, by["worker:1"] or 0))
end

local r = c:evaluate(exp, test_std) -- pulls the trained values into exp.model
print(string.format("test loss %.4f  accuracy %.4f", r.loss, r.accuracy))
c:shutdown()
assert(r.accuracy >= 0.9, "test accuracy below 0.9")
