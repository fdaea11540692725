-- dash_train.lua - a cluster run long enough to watch (test_dash_live.sh):
-- 1 ps + 2 workers train the digits MLP for SECONDS (arg 1, 20), print a
-- line, then keep the cluster up for HOLD seconds (arg 2, 0).
local nn, optim, data = drover.nn, drover.optim, drover.data
local seconds, hold = tonumber(arg[1]) or 20, tonumber(arg[2]) or 0
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
local d = data.csv(here .. "/../../examples/data/digits.csv", { label = -1 }):standardize()
drover.seed(1)
local t0
local exp = drover.experiment {
  name = "live", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
  train = { data = d, batch = 32, epochs = 100000 }, seed = 1,
  progress = function() if drover.clock() - t0 > seconds then return false end end,
}
local c = drover.cluster { ps = 1, worker = 2, name = "live", runs = os.getenv("RUNS") or "runs" }
print("training for " .. seconds .. " s")
t0 = drover.clock()
local r = c:fit(exp)
print(string.format("FIT DONE %d steps", r.steps))
if hold > 0 then drover.sleep(hold) end
c:shutdown()
print("SCRIPT DONE")
