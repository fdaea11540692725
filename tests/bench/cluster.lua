-- cluster.lua - cluster benchmarks (run by tests/bench/run.sh):
--  1. time until a 1 ps + 8 worker local cluster is ready (registered,
--     spec sent), best of 5;
--  2. training throughput of the MLP 784-256-256-10, batch 128, SGD with
--     momentum, 1 ps + 2 workers, async and sync (each ps step averages
--     both workers' gradients), one thread per process, on synthetic
--     MNIST-shaped data (the PyTorch RPC reference runs in the same
--     benchmark, from run.sh).
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6

local best = math.huge
for _ = 1, 5 do
  local t0 = drover.clock()
  local c = drover.cluster { ps = 1, worker = 8, runs = runs, name = "ready" }
  best = math.min(best, drover.clock() - t0)
  c:shutdown { grace = 1 }
end
print(string.format("cluster_ready_ms_1ps_8workers %.1f", best * 1000))

drover.seed(1)
local ds = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "mlp" }
local function run(steps, mode)
  local exp = drover.experiment {
    mode = mode,
    name = "mlp",
    model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 128, epochs = 100, max_steps = steps }, verbose = false,
  }
  return c:fit(exp)
end
local warm = run(50)
-- Size the measured run to about `seconds` from the warm-up's rate.
local steps = math.max(100, math.floor(warm.examples_per_sec * seconds / 128))
-- Async and sync alternate, best of two each: the VM's speed drifts.
local async, sync = 0, 0
for _ = 1, 2 do
  async = math.max(async, run(steps).examples_per_sec)
  sync = math.max(sync, run(steps, "sync").examples_per_sec)
end
print(string.format("cluster_samples_per_sec %.0f", async))
print(string.format("cluster_sync_samples_per_sec %.0f", sync))
c:shutdown()
