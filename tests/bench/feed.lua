-- feed.lua - feed-mode benchmarks (run by tests/bench/run.sh):
--  1. training throughput of the MLP 784-256-256-10, batch 128, SGD with
--     momentum, 1 ps + 2 workers, one thread per process: fed by the
--     coordinator (train = { feed = ds }) against each worker reading its
--     own shard (train = { data = ds }), alternating in the same run;
--  2. bytes per second through the coordinator: c:feed of 1024 x 784
--     float32 batches (3.2 MB) into 2 workers' input queues, read by
--     w:next_batch and dropped (run.sh compares it with loopback TCP,
--     measured by bench_pushpull in the same run).
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6

drover.seed(1)
local ds = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "feed" }
local function run(steps, fed)
  local train = { batch = 128, epochs = 100, max_steps = steps }
  if fed then train.feed = ds else train.data = ds end
  local exp = drover.experiment {
    name = "mlp",
    model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = train, verbose = false,
  }
  return c:fit(exp)
end
local warm = run(50)
local steps = math.max(100, math.floor(warm.examples_per_sec * seconds / 2 / 128))
local fed, shard = 0, 0
for _ = 1, 2 do
  shard = math.max(shard, run(steps).examples_per_sec)
  fed = math.max(fed, run(steps, true).examples_per_sec)
end
print(string.format("feed_samples_per_sec %.0f", fed))
print(string.format("shard_samples_per_sec %.0f", shard))

-- 2. the coordinator's feed as a pipe
local big = data.synthetic { n = 16384, features = 784, classes = 10, seed = 2 }
local function pipe(epochs)
  local rvs = {}
  for i = 1, 2 do
    rvs[i] = c:schedule(function(w)
      local n = 0
      while not w:should_stop() do
        if w:next_batch(1024) then n = n + 1 end
      end
      return n
    end)
  end
  local t0 = drover.clock()
  local r = c:feed(big, { batch = 1024, epochs = epochs, shuffle = false })
  local dt = drover.clock() - t0
  for i = 1, 2 do rvs[i]:fetch() end
  return r.taken * 1024 * (784 + 1) * 4 / dt
end
pipe(1)
local best = 0
local epochs = math.max(2, math.floor(seconds * 2))
for _ = 1, 2 do best = math.max(best, pipe(epochs)) end
print(string.format("feed_MB_per_sec %.0f", best / 1e6))
c:shutdown()
