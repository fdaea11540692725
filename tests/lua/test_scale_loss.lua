-- test_scale_loss.lua - worker = { min }: a worker lost past its restarts
-- (max_restarts = 0, SIGKILLed by pid) shrinks the cluster instead of
-- failing the fit while at least min workers are left (coord_scale.c, "a
-- lost worker"): an async fit ends with its planned steps, a sync fit with
-- its planned global steps (the quorum of the workers left from the global
-- step being summed); below min the fit fails naming min; the worker lost
-- comes back with c:scale.
local T = dofile("tests/lua/t.lua")
local test, eq, _, raises = table.unpack(T)
local read, node = T.read, T.node
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })

local function exp(over)
  drover.seed(5)
  local s = { name = "scaleloss", model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
    train = { data = digits, batch = 16, epochs = 100, max_steps = 1200 }, verbose = false }
  for k, v in pairs(over or {}) do s[k] = v end
  return drover.experiment(s)
end

-- the progress function: SIGKILLs worker:`index` once the fit passed step `at`
local function killer(c, index, at, out)
  return function(p)
    if out.pid or p.step < at then return end
    out.pid = node(c, "worker", index).pid
    os.execute("kill -9 " .. out.pid)
  end
end

local function up(c)
  local k = 0
  for _, x in ipairs(c:nodes()) do
    if x.role == "worker" and (x.state == "ready" or x.state == "busy") then k = k + 1 end
  end
  return k
end

test("scale-loss-01 async: a worker lost past its restarts shrinks 3 -> 2, the steps exact", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 3, min = 2, max = 3 }, runs = RUNS,
    name = "lossasync", max_restarts = 0 }
  local k = {}
  local r = c:fit(exp { progress = killer(c, 2, 100, k) })
  assert(k.pid, "worker:2 was killed")
  eq(r.steps, 1200, "the planned steps, exactly")
  eq(node(c, "worker", 2).state, "removed", "worker:2 removed")
  eq(up(c), 2, "two workers left")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("worker:2 lost past its restarts: cluster shrinks to 2 workers (min 2)", 1, true),
    "events: the shrink")
  assert(not ev:find("node lost worker", 1, true), "no failure")
  -- the next fit plans with the two left; c:scale brings worker:2 back
  eq(c:fit(exp { train = { data = digits, batch = 16, epochs = 1, max_steps = 40 } }).steps, 40,
    "a fit on the two left")
  eq(c:scale { worker = 3 }, true, "scaled up again")
  eq(up(c), 3, "three workers")
  assert(node(c, "worker", 2).pid ~= k.pid, "worker:2 is a new process")
  eq(c:fit(exp { train = { data = digits, batch = 16, epochs = 1, max_steps = 60 } }).steps, 60,
    "a fit on three")
  assert(node(c, "worker", 2).steps > 0, "worker:2 trained again")
end)

test("scale-loss-02 sync: a worker lost past its restarts: the quorum shrinks, global steps exact", function()
  local c <close> = drover.cluster { ps = 2, worker = { instances = 3, min = 1 }, runs = RUNS,
    name = "losssync", max_restarts = 0 }
  local k = {}
  local r = c:fit(exp { mode = "sync", progress = killer(c, 0, 60, k),
    train = { data = digits, batch = 16, epochs = 100, max_steps = 1500 } })
  assert(k.pid, "worker:0 was killed")
  eq(r.global_steps, 500, "the planned global steps (1500 / 3)")
  assert(r.steps < 1500 and r.steps >= 1000, "gradients of 3 then 2 workers: " .. r.steps)
  eq(node(c, "worker", 0).state, "removed", "worker:0 removed")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("worker:0 lost past its restarts: cluster shrinks to 2 workers (min 1)", 1, true),
    "events: the shrink")
  assert(ev:find("sync: 2 gradients per global step from the one being summed", 1, true),
    "events: the quorum")
  assert(ev:find("sync: the trainers left have their new shards", 1, true), "events: the new shards")
  eq(c:fit(exp { mode = "sync", train = { data = digits, batch = 16, epochs = 1, max_steps = 40 } })
    .global_steps, 20, "the next sync fit on two")
end)

test("scale-loss-03 below min: the loss fails the fit, naming min", function()
  local c = drover.cluster { ps = 1, worker = { instances = 2, min = 2 }, runs = RUNS,
    name = "lossmin", max_restarts = 0 }
  local k = {}
  raises(function() c:fit(exp { progress = killer(c, 1, 50, k) }) end,
    "worker:1 lost: killed by signal 9 (restarts exhausted: 0 of 0); 1 worker left, below min = 2")
  eq(node(c, "worker", 1).state, "lost", "worker:1 lost")
  raises(function() c:shutdown() end, "1 node failure")
end)

test("scale-loss-04 without min: a loss past the restarts fails the fit as before", function()
  local c = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "lossnomin", max_restarts = 0 }
  local k = {}
  local err = raises(function() c:fit(exp { progress = killer(c, 1, 50, k) }) end,
    "worker:1 lost: killed by signal 9 (restarts exhausted: 0 of 0)")
  assert(not tostring(err):find("below min", 1, true), "no min to name: " .. tostring(err))
  raises(function() c:shutdown() end, "1 node failure")
end)

test("scale-loss-05 between fits: the cluster shrinks, closures go on on the workers left", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, min = 1 }, runs = RUNS,
    name = "lossidle", max_restarts = 0 }
  local pid = node(c, "worker", 0).pid
  os.execute("kill -9 " .. pid)
  for _ = 1, 200 do
    if node(c, "worker", 0).state == "removed" then break end
    drover.sleep(0.025)
  end
  eq(node(c, "worker", 0).state, "removed", "worker:0 removed")
  local fs = {}
  for i = 1, 10 do fs[i] = c:schedule(function(w, x) return x + 1, w.index end, i) end
  for i = 1, 10 do
    local v, idx = fs[i]:fetch()
    eq(v, i + 1, "closure " .. i)
    eq(idx, 1, "on worker:1")
  end
  eq(c:fit(exp { train = { data = digits, batch = 16, epochs = 1, max_steps = 30 } }).steps, 30, "a fit")
end)

test("scale-loss-06 sync: a ps lost after a scale rolls back to a checkpoint of fewer workers", function()
  -- the first checkpoint (1 worker), scaled to 2 after it, ps:0 killed
  -- once the quorum changed: restored from that checkpoint, the rollback
  -- says the count it had and goes on with the 2 workers (their quorum);
  -- the global steps exact
  local c <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, runs = RUNS,
    name = "lossrollback" }
  local scaled, killed, first
  local r = c:fit(exp { mode = "sync", checkpoint = { every = 400 },
    train = { data = digits, batch = 16, epochs = 100, max_steps = 2400 },
    progress = function(p)
      if killed then return end
      local ev = read(c.run_dir .. "/events.log")
      if not scaled then
        first = ev:match("checkpoint step (%d+): ")
        if first then scaled = c:scale { worker = 2 } end
      elseif ev:find("sync: 2 gradients per global step from global step", 1, true) then
        killed = node(c, "ps", 0).pid
        os.execute("kill -9 " .. killed)
      end
    end })
  assert(killed, "ps:0 was killed")
  eq(r.global_steps, 2400, "the planned global steps")
  local ev = read(c.run_dir .. "/events.log")
  local step = ev:match("restoring from step (%d+) ")
  assert(step, "restored from a checkpoint")
  if step == first then
    assert(ev:find("the checkpoint of step " .. first .. " had 1 workers: the fit goes on with the 2 it has now",
      1, true), "events: the count it had")
  end
  assert(not ev:find("node lost worker", 1, true), "no worker lost")
end)
