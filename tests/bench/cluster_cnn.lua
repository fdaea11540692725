-- cluster_cnn.lua - the CNN of bench_cnn.c (conv 5x5x32, ReLU, max pool 2,
-- conv 5x5x64, ReLU, max pool 2, linear 1024 -> 10; batch 64, SGD with
-- momentum) on a local cluster of 1 ps + 2 workers, one thread a process,
-- synthetic MNIST-shaped data: samples/s, async and sync, best of two
-- each (run by tests/bench/run.sh, which takes medians over repeats).
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6

drover.seed(1)
local ds = data.synthetic { n = 20000, features = 784, classes = 10, seed = 1 }
local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "cnn" }
local function run(steps, mode)
  local exp = drover.experiment {
    mode = mode,
    name = "cnn",
    model = nn.Sequential { nn.Unflatten(1, 28, 28), nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1024, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 64, epochs = 100, max_steps = steps }, verbose = false,
  }
  return c:fit(exp)
end
local warm = run(20)
local steps = math.max(40, math.floor(warm.examples_per_sec * seconds / 64))
local async, sync = 0, 0
for _ = 1, 2 do
  async = math.max(async, run(steps).examples_per_sec)
  sync = math.max(sync, run(steps, "sync").examples_per_sec)
end
print(string.format("cluster_cnn_samples_per_sec %.0f", async))
print(string.format("cluster_cnn_sync_samples_per_sec %.0f", sync))
c:shutdown()
