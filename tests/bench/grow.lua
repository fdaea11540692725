-- grow.lua - what growing a fit buys (run by tests/bench/run.sh): 1 ps,
-- digits on a 64-256-10 MLP, batch 32, async fits of `steps` steps (arg 1,
-- 6000). Per pair, alternating: a fit on 1 worker that asks c:scale
-- { worker = 2 } from its progress function at half its steps (the new
-- worker's start counted in its time), a fit on 1 worker, a fit on 2
-- workers (scaled before, not timed). Prints each pair's samples/s and
-- "grow_vs_fixed_mean MEDIAN (median of N pairs; min A, max B)": the
-- growing fit's samples/s over the mean of the fixed fits'. Near 1: the
-- grown fit loses little to the join; above 1 the 2-worker half ran
-- faster than the 2-worker fit's average.
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local steps = tonumber(arg[1]) or 6000
local pairs_n = math.max(3, tonumber(os.getenv("BENCH_PAIRS") or "3"))
local nn, optim = drover.nn, drover.optim
local digits = drover.data.csv("examples/data/digits.csv", { label = -1 })
local batch = 32
local c = drover.cluster { ps = 1, worker = { instances = 1, min = 1, max = 2 }, runs = runs,
  name = "grow" }

local function fit(grow)
  local asked = false
  local exp = drover.experiment { name = "grow",
    model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false, seed = 1,
    train = { data = digits, batch = batch, epochs = 1000, max_steps = steps },
    progress = grow and function(p)
      if not asked and p.step >= steps // 2 then
        asked = true
        c:scale { worker = 2 }
      end
    end or nil }
  local t0 = drover.clock()
  local r = c:fit(exp)
  return r.steps * batch / (drover.clock() - t0)
end

local ratios = {}
for k = 1, pairs_n do
  local g = fit(true)
  c:scale { worker = 1 }
  local one = fit(false)
  c:scale { worker = 2 }
  local two = fit(false)
  c:scale { worker = 1 }
  ratios[k] = g / ((one + two) / 2)
  print(string.format("pair %d: grow_samples_per_sec %.0f fixed1 %.0f fixed2 %.0f ratio %.3f", k,
    g, one, two, ratios[k]))
  io.stdout:flush()
end
c:shutdown()
table.sort(ratios)
local n = #ratios
local m = n % 2 == 1 and ratios[(n + 1) // 2] or (ratios[n // 2] + ratios[n // 2 + 1]) / 2
print(string.format("grow_vs_fixed_mean %.2fx (median of %d pairs; min %.2f, max %.2f)", m, n,
  ratios[1], ratios[n]))
