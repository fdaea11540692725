-- backup.lua - sync training with a backup worker (run by tests/bench/run.sh
-- twice: as is, and with DROVER_FAULT=slow:worker:2:MS making worker:2 a
-- straggler). 1 ps + 3 workers, backup_workers = 1: each global step
-- applies the first 2 gradients, so the straggler should cost at most its
-- share of the step rate. Prints the global steps per second.
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6
drover.seed(1)
local ds = data.synthetic { n = 20000, features = 256, classes = 10, seed = 1 }
local c = drover.cluster { ps = 1, worker = 3, cpus = 1, runs = runs, name = "backup" }
local function run(steps)
  local exp = drover.experiment {
    name = "backup", mode = "sync", backup_workers = 1, verbose = false,
    model = nn.Sequential { nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 64, epochs = 1000, max_steps = steps },
  }
  local t0 = drover.clock()
  local r = c:fit(exp)
  return r.global_steps / (drover.clock() - t0)
end
local warm = run(200)
local steps = math.max(400, math.floor(warm * 2 * seconds / 2))
local best = 0
for _ = 1, 2 do best = math.max(best, run(steps)) end
print(string.format("sync_backup_global_steps_per_sec %.0f", best))
c:shutdown()
