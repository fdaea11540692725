-- scale_up.lua - how soon c:scale gives a local cluster a working worker
-- (run by tests/bench/run.sh): 1 ps + 1 worker, max 2; three times:
-- c:scale { worker = 2 } (launch, register, SPEC), then a 2-step fit whose
-- progress hook notes the first completed step, then back to 1. Prints
-- "scale_up_seconds MEDIAN MIN MAX" (c:scale's return) and
-- "scale_first_step_seconds MEDIAN MIN MAX" (from c:scale to the first step
-- of the fit on 2 workers). Then during a fit, async and sync, three times
-- each: c:scale { worker = 2 } from the progress function at step 20 of a
-- fit on 1 worker, and the time until worker:1's first completed step
-- (its step count in c:nodes()): "scale_fit_first_step_seconds" and
-- "scale_sync_fit_first_step_seconds" (sync: the new worker's first step
-- waits for the global-step barrier), then back to 1 between fits.
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
local function steps_of(index)
  for _, n in ipairs(c:nodes()) do
    if n.role == "worker" and n.index == index then return n.steps end
  end
  return 0
end
local during = { async = {}, sync = {} }
for _, mode in ipairs { "async", "sync" } do
  for k = 1, 3 do
    local t0, t1
    local before = steps_of(1)
    local exp = drover.experiment { name = "scalefit", model = nn.Sequential { nn.Linear(8, 2) },
      loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 }, verbose = false, seed = 1,
      mode = mode, train = { data = data, batch = 8, epochs = 1000, max_steps = 200000 },
      progress = function(p)
        if not t0 and p.step >= 20 then
          t0 = drover.clock()
          c:scale { worker = 2 }
        elseif t0 and not t1 and steps_of(1) > before then
          t1 = drover.clock()
          return true -- stop: the fit was only the stage
        end
      end }
    c:fit(exp)
    during[mode][k] = (t1 or drover.clock()) - (t0 or drover.clock())
    c:scale { worker = 1 }
  end
end
c:shutdown()
local function say(name, v)
  table.sort(v)
  print(string.format("%s %.3f %.3f %.3f", name, v[2], v[1], v[3]))
end
say("scale_up_seconds", up)
say("scale_first_step_seconds", first)
say("scale_fit_first_step_seconds", during.async)
say("scale_sync_fit_first_step_seconds", during.sync)
