-- cluster_digits.lua - the digits MLP trained by a local cluster: one
-- parameter server, two workers and an evaluator, each its own process,
-- talking over authenticated TCP on loopback.
--
--   drover run examples/cluster_digits.lua        (what `make demo` runs)
--
-- The ps holds the model's variables and applies the optimizer; each
-- worker trains on its own half of the data (pull values, compute a
-- gradient on a batch, push it); the evaluator measures the held-out set
-- as training goes. Everything the run produces lands in runs/<name>-<time>/.

local nn, optim, data = drover.nn, drover.optim, drover.data

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/data/digits.csv", { label = -1, header = false })
local train, test = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test:standardize(stats)

drover.seed(1)
local exp = drover.experiment {
  name      = "cluster-digits",
  model     = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  loss      = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 1e-3 },
  train     = { data = train_std, batch = 32, epochs = 20, shuffle = true },
  eval      = { data = test_std, every = 200 },
  seed      = 1,
}

-- Start the processes; this returns once all of them have registered.
local c = drover.cluster { launcher = "local", ps = 1, worker = 2, evaluator = 1,
                           name = "cluster-digits" }
print(c)
for _, n in ipairs(c:nodes()) do
  print(string.format("  %-12s pid %-7d %s", n.role .. ":" .. n.index, n.pid, n.state))
end

local r = c:fit(exp)            -- blocks, while the event loop keeps running
print(string.format("trained %d steps in %.2f s (%.0f examples/s)", r.steps, r.seconds,
  r.examples_per_sec))
print(string.format("test loss %.4f  accuracy %.4f", r.eval_loss, r.eval_accuracy))
print("evaluate:", drover.pretty.format(c:evaluate(exp)))

c:shutdown { grace = 5 }        -- workers first, then the ps; every child reaped
print("run directory: " .. c.run_dir)
assert(r.eval_accuracy >= 0.95, "test accuracy below 0.95")
