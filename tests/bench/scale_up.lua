-- scale_up.lua - how soon c:scale gives a local cluster a working worker
-- (run by tests/bench/run.sh): 1 ps + 1 worker, max 2; three times:
-- c:scale { worker = 2 } (launch, register, SPEC), then a 2-step fit whose
-- progress hook notes the first completed step, then back to 1. Prints
-- "scale_up_seconds MEDIAN MIN MAX" (c:scale's return) and
-- "scale_first_step_seconds MEDIAN MIN MAX" (from c:scale to the first step
-- of the fit on 2 workers).
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local nn, optim = drover.nn, drover.optim
local data = drover.data.synthetic { n = 256, features = 8, classes = 2, seed = 1 }
local c = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, runs = runs, name = "scaleup" }
local up, first = {}, {}
for k = 1, 3 do
  local t0, t1
  local exp = drover.experiment { name = "scaleup", model = nn.Sequential { nn.Linear(8, 2) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 }, verbose = false, seed = 1,
    train = { data = data, batch = 8, epochs = 1, max_steps = 2 },
    progress = function(p) if p.step >= 1 and not t1 then t1 = drover.clock() end end }
  t0 = drover.clock()
  c:scale { worker = 2 }
  up[k] = drover.clock() - t0
  c:fit(exp)
  first[k] = (t1 or drover.clock()) - t0
  c:scale { worker = 1 }
end
c:shutdown()
local function say(name, v)
  table.sort(v)
  print(string.format("%s %.3f %.3f %.3f", name, v[2], v[1], v[3]))
end
say("scale_up_seconds", up)
say("scale_first_step_seconds", first)
