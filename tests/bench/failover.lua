-- failover.lua - ps failover benchmarks (run by tests/bench/run.sh):
--  1. the time from a ps SIGKILL to training steps completing again (5 steps
--     done after the kill), async, 1 ps + 2 workers: restored from a
--     checkpoint (every 20 steps) after the ps is started again, and with a
--     replica (ps_replicas = 1) promoted; median of 3 kills each, each on a
--     fresh cluster;
--  2. training throughput with and without a replica per ps (the MLP of
--     cluster.lua: 784-256-256-10, batch 128, SGD with momentum, one thread
--     per process, synthetic MNIST-shaped data), async and sync, best of
--     two each, alternating.
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6

drover.seed(1)
local ds = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
local function experiment(steps, mode, extra)
  local e = {
    mode = mode, name = "mlp",
    model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 128, epochs = 100, max_steps = steps }, verbose = false,
  }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

local function node(c, role, index)
  for _, n in ipairs(c:nodes()) do if n.role == role and n.index == index then return n end end
end

-- Waits (bounded) until the cluster's ps are all serving or in sync.
local function settled(c, replicas)
  for _ = 1, 400 do
    local ready, replica = 0, 0
    for _, n in ipairs(c:nodes()) do
      if n.role == "ps" and n.state == "ready" then ready = ready + 1 end
      if n.role == "ps" and n.state == "replica" then replica = replica + 1 end
    end
    if ready == 1 and replica == replicas then return end
    drover.sleep(0.05)
  end
  error("the ps did not settle")
end

-- One fit that SIGKILLs the ps serving group 0 at step 60: seconds from
-- the kill until 5 train steps completed after it.
local function kill_once(c, replicas, extra)
  local t_kill, done_after, last, took
  local exp = experiment(400, nil, extra)
  exp.progress = function(p)
    if not t_kill then
      if p.step >= 60 then
        local victim
        for _, n in ipairs(c:nodes()) do
          if n.role == "ps" and n.state == "ready" then victim = n end
        end
        os.execute("kill -9 " .. victim.pid)
        t_kill, done_after, last = drover.clock(), 0, p.step
      end
      return
    end
    if took then return end
    if p.step > last then done_after = done_after + (p.step - last) end
    last = p.step -- a rollback moves it back: only increases count
    if done_after >= 5 then took = drover.clock() - t_kill end
  end
  c:fit(exp)
  settled(c, replicas)
  return took
end

local function median3(f)
  local v = { f(), f(), f() }
  table.sort(v)
  return v[2]
end

-- A fresh cluster per kill: the restart back-off doubles with each
-- restart of a node.
local function kill_fresh(replicas, extra)
  local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "failover",
    ps_replicas = replicas }
  local took = kill_once(c, replicas, extra)
  c:shutdown()
  return took
end
local ckpt = median3(function() return kill_fresh(0, { checkpoint = { every = 20, keep = 1 } }) end)
print(string.format("failover_checkpoint_ms %.0f", ckpt * 1000))
local promo = median3(function() return kill_fresh(1) end)
print(string.format("failover_replica_ms %.0f", promo * 1000))

local repl = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "replicas",
  ps_replicas = 1 }

local base = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "mlp" }
local warm = base:fit(experiment(50))
repl:fit(experiment(50))
local steps = math.max(100, math.floor(warm.examples_per_sec * seconds / 128))
local a0, a1, s0, s1 = 0, 0, 0, 0
for _ = 1, 2 do
  a0 = math.max(a0, base:fit(experiment(steps)).examples_per_sec)
  a1 = math.max(a1, repl:fit(experiment(steps)).examples_per_sec)
  s0 = math.max(s0, base:fit(experiment(steps, "sync")).examples_per_sec)
  s1 = math.max(s1, repl:fit(experiment(steps, "sync")).examples_per_sec)
end
print(string.format("cluster_samples_per_sec %.0f", a0))
print(string.format("cluster_replicas_samples_per_sec %.0f", a1))
print(string.format("cluster_sync_samples_per_sec %.0f", s0))
print(string.format("cluster_sync_replicas_samples_per_sec %.0f", s1))
base:shutdown()
repl:shutdown()
