-- train_until.lua - a cluster that trains until told to stop, for the tests
-- that watch or drive a run while it trains (test_attach.sh,
-- test_pyclient.sh, test_replica.sh; lib.sh's trainer_start runs it).
-- Usage: drover run tests/cli/train_until.lua RUNS NAME [REPLICAS]
-- 1 ps (with REPLICAS replicas) + 2 workers train the digits MLP, throttled
-- (5 ms a step), in RUNS under NAME. RUNS/NAME gets the run directory once
-- the cluster is up; RUNS/ckpt-NAME asks one checkpoint; the fit ends when
-- RUNS/stop-NAME exists, or after 90 s. Prints "trained" at the end.
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs, name, replicas = arg[1], arg[2], tonumber(arg[3])
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/../../examples/data/digits.csv", { label = -1 }):standardize()
local t0, calls, asked = drover.clock(), 0, false
local function exists(p) local h = io.open(p) if h then h:close() return true end return false end
local c = drover.cluster { ps = 1, worker = 2, runs = runs, name = name, ps_replicas = replicas }
local f = io.open(runs .. "/" .. name, "w"); f:write(c.run_dir, "\n"); f:close()
local exp = drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = digits, batch = 32, epochs = 100000 }, seed = 1, verbose = false,
  progress = function(p)
    calls = calls + 1
    drover.sleep(0.005)
    if not asked and exists(runs .. "/ckpt-" .. name) then asked = true; c:checkpoint() end
    return calls % 20 ~= 0 or not (exists(runs .. "/stop-" .. name) or drover.clock() - t0 > 90)
  end,
}
c:fit(exp)
c:shutdown()
print("trained")
