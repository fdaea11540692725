-- hdfs_data.lua - files-mode training from HDFS against the same file on
-- local disk (run by tests/bench/hdfs_data.sh): the MLP 784-256-256-10 of
-- cluster.lua, batch 128, SGD with momentum, 1 ps + 2 workers, one thread
-- each, on a 60000x28x28 IDX (images, labels) at arg[1] (a local
-- directory) and arg[2] (the same files on HDFS). Each measurement is the
-- wall time from data.idx (the coordinator's pass over the file) to the
-- end of a fit of a fixed number of steps (the workers' reads of their
-- shards included), as examples per second; local and HDFS alternate,
-- arg[3] pairs, one "pair LOCAL HDFS" line each.
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local ldir, hdir, pairs_ = arg[1], arg[2], tonumber(arg[3]) or 3
local steps = tonumber(os.getenv("BENCH_STEPS")) or 1000

local function once(dir)
  drover.seed(1)
  local t0 = drover.clock()
  local ds = data.idx(dir .. "/images.idx", dir .. "/labels.idx")
  local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "hdfsdata" }
  local exp = drover.experiment {
    name = "mlp",
    model = nn.Sequential { nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                            nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 128, epochs = 100, max_steps = steps }, verbose = false,
  }
  local r = c:fit(exp)
  local dt = drover.clock() - t0
  c:shutdown()
  assert(r.steps == steps, "steps " .. r.steps)
  return steps * 128 / dt
end

for _ = 1, pairs_ do
  print(string.format("pair %.0f %.0f", once(ldir), once(hdir)))
  io.stdout:flush()
end
