-- test_scale.lua - c:scale { worker = N } on local clusters, between
-- fits: shrinking (the removed workers exit, are no loss, and the next
-- fit, async or sync, trains its exact steps on the workers left),
-- growing back and past the start up to max (the next fit plans with
-- them), and every refusal: above max, below min, no max to grow to,
-- another role; closures queued or running go on (their futures all
-- resolve). During a fit: test_scale_fit.lua.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read = T.read
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })

local function exp(over)
  drover.seed(5)
  local s = { name = "scale", model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
    train = { data = digits, batch = 32, epochs = 1, max_steps = 25 }, verbose = false }
  for k, v in pairs(over or {}) do s[k] = v end
  return drover.experiment(s)
end

local function states(c)
  local s = {}
  for _, n in ipairs(c:nodes()) do
    if n.role == "worker" then s[n.index + 1] = n.state end
  end
  return s
end

test("scale-01 shrink 3 -> 1 between async fits: removed, no loss, exact steps after", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 3, min = 1, max = 4 }, runs = RUNS,
    name = "shrink", max_restarts = 3 }
  eq(c:fit(exp()).steps, 25, "3 workers")
  eq(c:scale { worker = 1 }, true)
  local s = states(c)
  eq(s[1] ~= "removed", true, "worker:0 stays")
  eq(s[2], "removed")
  eq(s[3], "removed")
  eq(c:scale { worker = 1 }, true, "the count it has: nothing to do")
  local r = c:fit(exp())
  eq(r.steps, 25, "1 worker, the exact steps")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("scale: worker 3 -> 1 (requested by lua)", 1, true), "events.log: the request")
  assert(ev:find("node removed worker:2", 1, true), "events.log: worker:2 removed")
  assert(ev:find("node removed worker:1", 1, true), "events.log: worker:1 removed")
  assert(not ev:find("restarting it", 1, true) and not ev:find("node lost worker", 1, true),
    "a removed worker is no loss")
  -- back up to max: worker:1 and worker:2 come back, worker:3 is new
  eq(c:scale { worker = 4 }, true)
  s = states(c)
  eq(#s, 4, "worker:0..3")
  for k = 1, 4 do assert(s[k] == "ready" or s[k] == "busy", "worker:" .. (k - 1) .. " " .. tostring(s[k])) end
  eq(c:fit(exp()).steps, 25, "4 workers, the exact steps")
  ev = read(c.run_dir .. "/events.log")
  assert(ev:find("scale: worker 1 -> 4 (requested by lua)", 1, true), "events.log: the grow")
  assert(ev:find("node start worker:3 pid %d+ %(scaled up%)"), "events.log: worker:3 launched")
  assert(ev:find("node up worker:3", 1, true), "events.log: worker:3 joined")
  assert(ev:find("fit: 25 steps on 4 workers", 1, true), "the fit planned with 4")
  raises(function() c:scale { worker = 5 } end, "worker = 5 is above max = 4")
end)

test("scale-02 shrink 3 -> 2, then a sync fit: the quorum is the workers left", function()
  local c <close> = drover.cluster { ps = 1, worker = 3, runs = RUNS, name = "shrinksync" }
  eq(c:scale { worker = 2 }, true)
  local r = c:fit(exp { mode = "sync", train = { data = digits, batch = 32, epochs = 1, max_steps = 20 } })
  eq(r.steps, 20, "sync steps exact")
  eq(r.global_steps, 10, "2 gradients per global step")
end)

test("scale-03 refusals: max, min, another role, bad bounds", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, min = 2, max = 3 }, runs = RUNS,
    name = "refuse" }
  raises(function() c:scale { worker = 4 } end, "worker = 4 is above max = 3")
  raises(function() c:scale { worker = 1 } end, "worker = 1 is below min = 2")
  raises(function() c:scale { ps = 2 } end, "c:scale")
  raises(function() c:scale {} end, "worker = N is required")
  local c2 <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "nomax" }
  raises(function() c2:scale { worker = 2 } end, "needs worker = { max = N }")
  eq(#c:nodes(), 3)
  raises(function() drover.cluster { worker = { instances = 2, max = 1 }, runs = RUNS } end,
    "needs min <= instances <= max")
  raises(function() drover.cluster { ps = { instances = 1, max = 2 }, runs = RUNS } end, "max")
end)

test("scale-04 closures queued or running: the scale goes on, and every future still resolves", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, max = 3 }, runs = RUNS, name = "closures" }
  local fs = {}
  for i = 1, 6 do fs[i] = c:schedule(function(w, k) return k * 2 end, i) end
  eq(c:scale { worker = 1 }, true, "while they are queued (test_scale_fit.lua: more of it)")
  c:join()
  for i = 1, 6 do eq(fs[i]:fetch(), i * 2, "closure " .. i) end
  eq(c:scale { worker = 3 }, true, "once they are over")
  local later = {}
  for i = 1, 6 do later[i] = c:schedule(function(w, k) return k + 1 end, i) end
  for i = 1, 6 do eq(later[i]:fetch(), i + 1, "after the scale, closure " .. i) end
end)

test("scale-05 other roles refused, saying why", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, evaluator = 1, runs = RUNS,
    name = "roles" }
  raises(function() c:scale { evaluator = 0 } end,
    "c:scale: evaluator cannot be scaled: a cluster has 0 or 1 evaluator, fixed when it starts")
  raises(function() c:scale { ps = 2 } end, "c:scale: ps cannot be scaled: they hold the model's shards")
  raises(function() c:scale { chief = 1 } end, "c:scale: chief cannot be scaled")
  raises(function() c:scale { foo = 1 } end, "unknown option 'foo'")
  eq(#c:nodes(), 3, "nothing started")
end)
