-- schedules.lua - training controls on the digits MLP: a learning rate
-- warmed up then annealed on a cosine, gradient clipping by global norm,
-- a plateau schedule with early stopping, and a custom metric written
-- with tensor math in the script.
--
--   drover run examples/schedules.lua
--
-- Schedules count optimizer updates (steps), as PyTorch's schedulers do
-- when stepped once per batch. On a cluster (c:fit(exp)) each ps applies
-- the rate of the step it is at; the plateau schedule, clip_norm and stop
-- are in process only for now, and a cluster refuses them by name.

local nn, optim, data = drover.nn, drover.optim, drover.data
local S = optim.schedule

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/data/digits.csv", { label = -1, header = false })
local train, test = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test:standardize(stats)

local function mlp()
  drover.seed(1)
  return nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }
end

-- 1. Warmup then cosine: 50 steps from 0.1 x lr up to lr, then down to
-- eta_min over the rest of the 10 epochs (23 steps each).
local steps = 10 * math.ceil(#train_std / 64)
local sched = S.warmup { steps = 50, start_factor = 0.1,
  after = S.cosine { T_max = steps - 50, eta_min = 1e-4 } }
print(sched)
for _, k in ipairs { 0, 25, 50, 100, 150, steps - 1 } do
  print(string.format("  rate of update %3d: %.5f", k + 1, sched:lr(0.05, k)))
end

local lrs = {}
local exp = drover.experiment {
  name = "digits-cosine", model = mlp(), loss = nn.CrossEntropy(),
  optimizer = optim.SGD { lr = 0.05, momentum = 0.9, schedule = sched, clip_norm = 5.0 },
  train = { data = train_std, batch = 64, epochs = 10 },
  eval = { data = test_std, every = 50 }, seed = 1, verbose = false,
  -- p.lr is the rate the step used, p.grad_norm its norm before clipping
  -- (both also in the run's metrics.jsonl and TensorBoard's train/learning_rate).
  progress = function(p) if not p.is_eval then lrs[#lrs + 1] = p.lr end end,
}
print(exp.optimizer)
local r = exp:fit()
print(string.format("cosine: %d steps, lr %.4f -> %.4f -> %.5f, test accuracy %.4f",
  r.steps, lrs[1], lrs[51], lrs[#lrs], r.eval_accuracy))
assert(r.eval_accuracy >= 0.95, "the cosine run should learn the digits")

-- 2. Plateau and early stopping: cut the rate by 2 when the test loss
-- stalls for 2 evals, stop when it has not improved for 5.
local exp2 = drover.experiment {
  name = "digits-plateau", model = mlp(), loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 3e-3, schedule = S.plateau { factor = 0.5, patience = 2 } },
  train = { data = train_std, batch = 64, epochs = 100 },
  eval = { data = test_std, every = 25 }, seed = 1, verbose = false,
  stop = { metric = "eval_loss", mode = "min", patience = 5 },
}
local r2 = exp2:fit()
print(string.format("plateau: %s after %d of %d steps; best test loss %.4f at step %d",
  r2.stopped_early and "stopped early" or "ran to the end", r2.steps, 100 * math.ceil(#train_std / 64),
  r2.best_metric or r2.eval_loss, r2.best_step or r2.steps))

-- 3. A custom metric with tensor math: per-class recall on the test set.
local m = exp.model
m:evaluate()
local x, y = test_std.x, test_std.y         -- [n, 64] and [n] (views)
local pred = m:forward(x):argmax(2)          -- [n] class ids, 0-based like y
local hit = pred:eq(y)                        -- 0/1 mask
for c = 0, 9 do
  local of_c = y:eq(c)
  local recall = (hit * of_c):sum() / of_c:sum()
  io.write(string.format("%d:%.2f ", c, recall))
end
print()
