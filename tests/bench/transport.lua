-- transport.lua - one measurement of a local cluster for tests/bench/transport.sh,
-- which runs it alternately with DROVER_TRANSPORT=auto (shared memory
-- between the co-located processes) and tcp. Usage:
--   drover run tests/bench/transport.lua mlp|closures [seconds]
--  mlp: samples/s of the MLP 784-256-256-10 (batch 128, SGD with momentum,
--       one thread a process) on 1 ps + 2 workers, async;
--  closures: no-op closures scheduled then joined per second, 2 workers.
-- Each prints its figure, then "links" and each node's links as c:nodes()
-- gives them (role:index[coord=shm,...]): transport.sh checks that they
-- took the path it asked for.
local nn, optim, data = drover.nn, drover.optim, drover.data
local part = arg[1] or "mlp"
local seconds = tonumber(arg[2]) or 6
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"

local function mlp()
  drover.seed(1)
  local ds = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
  local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "link-mlp" }
  local function run(steps)
    return c:fit(drover.experiment {
      name = "mlp",
      model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10) },
      loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
      train = { data = ds, batch = 128, epochs = 100, max_steps = steps }, verbose = false,
    })
  end
  local warm = run(50)
  local steps = math.max(100, math.floor(warm.examples_per_sec * seconds / 128))
  print(string.format("cluster_samples_per_sec %.0f", run(steps).examples_per_sec))
  return c
end

local function closures()
  local c = drover.cluster { ps = 1, worker = 2, max_queue = 4096, runs = runs,
                             name = "link-sched" }
  local function noop() end
  local function rate(n)
    local t0 = drover.clock()
    for _ = 1, n do c:schedule(noop) end
    c:join()
    return n / (drover.clock() - t0)
  end
  -- Warm-up, sized to about a third of `seconds` a measurement; best of 3
  -- as schedule.lua keeps.
  local n = math.max(20000, math.floor(rate(20000) * seconds / 3))
  local best = 0
  for _ = 1, 3 do best = math.max(best, rate(n)) end
  print(string.format("closures_per_sec_2workers %.0f", best))
  return c
end

local c = (part == "closures" and closures or mlp)()
local links = {}
for _, nd in ipairs(c:nodes()) do
  links[#links + 1] = string.format("%s:%d[%s]", nd.role, nd.index, nd.links or "")
end
print("links " .. table.concat(links, " "))
c:shutdown()
