-- test_scale_fit.lua - c:scale { worker = N } WHILE a fit runs, on local
-- clusters (coord_scale.c, "during a fit"): grow 2 -> 4 and shrink 4 -> 1
-- from the progress function in an async fit and in a sync fit, the step
-- counts exact (async: the planned steps; sync: the planned global steps,
-- each averaging the gradients of the workers it had, so r.steps is the
-- sum of the quorums); a sync fit scaled 1 -> 2 -> 1 equal to a second run
-- whose quorum changed at the same global steps; above max refused during
-- a fit; a worker SIGKILLed during a scale (the fit still ends exactly).
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read = T.read
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })

-- steps of a few milliseconds: a new worker starts well before the fit ends
local function exp(over)
  drover.seed(5)
  local s = { name = "scalefit", model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
    train = { data = digits, batch = 16, epochs = 100, max_steps = 3000 }, verbose = false }
  for k, v in pairs(over or {}) do s[k] = v end
  return drover.experiment(s)
end

local function workers(c)
  local s, n = {}, 0
  for _, x in ipairs(c:nodes()) do
    if x.role == "worker" then
      s[x.index + 1] = x
      if x.state ~= "removed" then n = n + 1 end
    end
  end
  return s, n
end

-- scale to plan's counts ({ step, count }), each progress call held until
-- the change before is done (tests/lua/scaler.lua)
local scale_with = dofile("tests/lua/scaler.lua")
local function scaler(c, plan, log) return scale_with(c, plan, { log = log }) end

-- the sync quorum changes events.log records: { from_step, replicas }
local function quorums(ev)
  local q = {}
  for r, g, was in ev:gmatch("sync: (%d+) gradients per global step from global step (%d+) %(were (%d+)%)") do
    q[#q + 1] = { tonumber(g), tonumber(r), tonumber(was) }
  end
  return q
end

test("scale-fit-01 async: grow 2 -> 4 then shrink 4 -> 1 during one fit, exact steps", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, min = 1, max = 4 }, runs = RUNS,
    name = "fitasync" }
  local log = {}
  local r = c:fit(exp { progress = scaler(c, { { 100, 4 }, { 1000, 1 } }, log) })
  eq(r.steps, 3000, "the planned steps, exactly")
  eq(#log, 2, "both scales ran")
  local s, n = workers(c)
  eq(n, 1, "one worker left")
  eq(s[2].state, "removed")
  eq(s[3].state, "removed")
  eq(s[4].state, "removed")
  assert(s[3].steps > 0 and s[4].steps > 0, "the new workers trained: " .. s[3].steps .. ", " .. s[4].steps)
  local total = 0
  for k = 1, 4 do total = total + s[k].steps end
  eq(total, 3000, "every step counted once, on one worker")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("scale: worker 2 -> 4 (requested by lua)", 1, true), "events: the grow")
  assert(ev:find("scale: worker 2 -> 4 done (during the fit", 1, true), "events: grow done")
  assert(ev:find("scale: worker 4 -> 1 (requested by lua)", 1, true), "events: the shrink")
  assert(ev:find("node removed worker:3", 1, true), "events: worker:3 removed")
  assert(not ev:find("node lost worker", 1, true), "a removed worker is no loss")
  eq(c:fit(exp { train = { data = digits, batch = 16, epochs = 1, max_steps = 30 } }).steps, 30,
    "the next fit on the one left")
end)

test("scale-fit-02 sync: grow 2 -> 4 then shrink 4 -> 1, exact global steps and quorums", function()
  -- two ps: every ps changes its quorum at the same global step
  local c <close> = drover.cluster { ps = 2, worker = { instances = 2, min = 1, max = 4 }, runs = RUNS,
    name = "fitsync" }
  local log = {}
  local r = c:fit(exp { mode = "sync", progress = scaler(c, { { 40, 4 }, { 600, 1 } }, log),
    train = { data = digits, batch = 16, epochs = 100, max_steps = 1600 } })
  eq(r.global_steps, 800, "the planned global steps (1600 / 2)")
  local q = quorums(read(c.run_dir .. "/events.log"))
  eq(#q, 2, "two quorum changes")
  eq(q[1][2], 4, "4 gradients")
  eq(q[1][3], 2, "were 2")
  eq(q[2][2], 1, "then 1")
  local want = q[1][1] * 2 + (q[2][1] - q[1][1]) * 4 + (800 - q[2][1]) * 1
  eq(r.steps, want, "each global step averaged the gradients of the workers it had")
  -- at the end of the trainers' passes (train.reshard = "epoch"): 1797
  -- rows in 2 shards of 57 batches of 16, then 4 of 29
  eq(q[1][1] % 57, 0, "2 -> 4 at the end of a pass of 57 global steps")
  eq((q[2][1] - q[1][1]) % 29, 0, "4 -> 1 at the end of a pass of 29")
  local _, n = workers(c)
  eq(n, 1, "one worker left")
end)

local function same_params(a, b, what)
  for i = 1, #a do
    local differ = 0
    local function walk(u, v)
      if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
      elseif u ~= v then differ = differ + 1 end
    end
    walk(a[i].value:totable(), b[i].value:totable())
    eq(differ, 0, what .. ": " .. a[i].name .. ": values that differ")
  end
end

test("scale-fit-03 sync 1 -> 2 -> 1 during a fit equals fits with those workers at those steps", function()
  -- The reference: three fits, 1 worker for the global steps before the
  -- first change, 2 until the second, 1 after; plain SGD keeps no state
  -- on the ps and every worker's SETUP starts its shard's order anew, as
  -- the SETUP of the new shards does during the fit.
  local function sync_exp(steps, progress)
    return exp { mode = "sync", progress = progress,
      train = { data = digits, batch = 16, epochs = 100, max_steps = steps } }
  end
  local c <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, runs = RUNS, name = "fiteq" }
  local log = {}
  local a = sync_exp(800, scaler(c, { { 30, 2 }, { 300, 1 } }, log))
  local r = c:fit(a)
  eq(r.global_steps, 800, "the planned global steps")
  local q = quorums(read(c.run_dir .. "/events.log"))
  eq(#q, 2, "two quorum changes")
  local g1, g2 = q[1][1], q[2][1]
  eq(r.steps, g1 + (g2 - g1) * 2 + (800 - g2), "the gradients applied")
  c:shutdown()
  local ref <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, runs = RUNS, name = "fitref" }
  local b = sync_exp(g1)
  eq(ref:fit(b).global_steps, g1, "1 worker")
  ref:scale { worker = 2 }
  b.train.max_steps = 2 * (g2 - g1)
  eq(ref:fit(b).global_steps, g2 - g1, "2 workers")
  ref:scale { worker = 1 }
  b.train.max_steps = 800 - g2
  eq(ref:fit(b).global_steps, 800 - g2, "1 worker again")
  same_params(a.model:parameters(), b.model:parameters(), "scaled during the fit vs fits between")
end)

test("scale-fit-04 during a fit: above max refused, a change under way refused, the fit goes on", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, min = 2, max = 3 }, runs = RUNS,
    name = "fitrefuse" }
  local errs = {}
  local r = c:fit(exp { train = { data = digits, batch = 16, epochs = 100, max_steps = 600 },
    progress = function(p)
      if errs.max or p.step < 50 then return end
      local ok, e = pcall(c.scale, c, { worker = 4 })
      errs.max = ok and "accepted" or tostring(e)
      ok, e = pcall(c.scale, c, { worker = 1 })
      errs.min = ok and "accepted" or tostring(e)
      eq(c:scale { worker = 3 }, true, "up to max")
      ok, e = pcall(c.scale, c, { worker = 2 })
      errs.busy = ok and "accepted" or tostring(e)
    end })
  eq(r.steps, 600, "the fit's steps")
  assert(errs.max:find("worker = 4 is above max = 3", 1, true), errs.max)
  assert(errs.min:find("worker = 1 is below min = 2", 1, true), errs.min)
  assert(errs.busy:find("worker 2 -> 3 asked during this fit is not over yet", 1, true), errs.busy)
  local _, n = workers(c)
  eq(n, 3, "3 workers after the fit")
end)

test("scale-fit-05 a worker SIGKILLed during a sync scale: the fit still ends, its global steps exact", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, max = 4 }, runs = RUNS,
    name = "fitkill", max_restarts = 3 }
  local killed
  local r = c:fit(exp { mode = "sync", train = { data = digits, batch = 16, epochs = 100, max_steps = 1200 },
    progress = function(p)
      if killed or p.step < 40 then return end
      eq(c:scale { worker = 4 }, true, "grow")
      local s = workers(c)
      killed = s[2].pid
      os.execute("kill -9 " .. killed)
    end })
  eq(r.global_steps, 600, "the planned global steps")
  local s, n = workers(c)
  eq(n, 4, "4 workers")
  assert(s[2].pid ~= killed, "worker:1 restarted")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("node lost worker:1: killed by signal 9", 1, true), "events: worker:1 lost")
  assert(ev:find("node restart worker:1", 1, true), "events: worker:1 restarted")
  assert(ev:find("scale: worker 2 -> 4 done", 1, true), "events: the scale completed")
end)

test("scale-fit-06 scale while closures run: every future resolves, on the workers of the time", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, max = 3 }, runs = RUNS,
    name = "fitcalls", max_restarts = 3 }
  local function spin(w, k)
    local t = os.clock() + 0.02
    while os.clock() < t do end
    return k * 2, w.index
  end
  local fs = {}
  for i = 1, 60 do fs[i] = c:schedule(spin, i) end
  eq(c:scale { worker = 3 }, true, "grow while closures run")
  for i = 61, 120 do fs[i] = c:schedule(spin, i) end
  eq(c:scale { worker = 1 }, true, "shrink while closures run")
  for i = 121, 150 do fs[i] = c:schedule(spin, i) end
  c:join()
  local on = {}
  for i = 1, 150 do
    local v, idx = fs[i]:fetch()
    eq(v, i * 2, "closure " .. i)
    on[idx] = true
  end
  assert(on[2], "worker:2, added, ran closures")
  local _, n = workers(c)
  eq(n, 1, "1 worker left")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("scale: worker 3 -> 1 done", 1, true), "events: the shrink done")
  assert(not ev:find("node lost worker", 1, true), "no loss")
end)

test("scale-fit-07 sync 1 -> 2 -> 4 in files mode: every example once per epoch, across the changes", function()
  -- Row i of 96 is the id i, its target 1: an Embedding(96, 1) from 0
  -- with plain SGD changes row i only with example i's gradient, by the
  -- same steps for every row that was used in the same epochs with the
  -- same worker counts. Every row the same at the end = each example
  -- once per epoch (96 rows: 24, 12, 6 batches of 4 a pass over 1, 2, 4
  -- shards; 144 global steps end a pass whichever boundaries the changes
  -- took). With train.reshard = "step" the shards change within an
  -- epoch: rows differ.
  local path = RUNS .. "/ids.csv"
  os.execute("mkdir -p " .. RUNS)
  local f = assert(io.open(path, "w"))
  f:write("id,y\n")
  for i = 0, 95 do f:write(i, ",1\n") end
  f:close()
  local ids = data.csv(path, { label = -1, header = true })
  local function run(reshard)
    local c <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 4 }, runs = RUNS,
      name = "fitepoch" }
    drover.seed(3)
    local m = nn.Sequential { nn.Embedding(96, 1), nn.Flatten() }
    for _, p in ipairs(m:parameters()) do p.value:fill(0) end
    local log = {}
    local r = c:fit(drover.experiment { name = "fitepoch", mode = "sync", model = m, loss = nn.MSE(),
      optimizer = optim.SGD { lr = 0.1 }, verbose = false, progress = scaler(c, { { 5, 2 }, { 30, 4 } }, log),
      train = { data = ids, batch = 4, epochs = 6, reshard = reshard } })
    eq(r.global_steps, 144, "the planned global steps")
    eq(#log, 2, "both scales asked")
    local lo, hi = math.huge, -math.huge
    for _, w in ipairs(m:parameters()[1].value:totable()) do
      lo, hi = math.min(lo, w[1]), math.max(hi, w[1])
    end
    return lo, hi, quorums(read(c.run_dir .. "/events.log"))
  end
  local lo, hi, q = run("epoch")
  eq(#q, 2, "two quorum changes")
  eq(q[1][1] % 24, 0, "1 -> 2 at the end of a pass of 24 global steps")
  eq((q[2][1] - q[1][1]) % 12, 0, "2 -> 4 at the end of a pass of 12")
  assert(lo > 0 and lo == hi, string.format("every row the same: %.17g .. %.17g", lo, hi))
  lo, hi = run("step")
  assert(lo < hi, string.format("reshard = \"step\": rows differ (%.17g .. %.17g)", lo, hi))
end)

test("scale-fit-08 sync with backup_workers = 1: 3 -> 5 -> 3, every global step exactly its quorum's gradients", function()
  -- A backup worker's gradients are dropped now and then, so a worker's
  -- count of applied gradients falls behind the global step it is at:
  -- the ps hold the barrier (SYNC_STOP hold_at), not those counts. With
  -- one ps a step's RESULT counts exactly when that ps applied it, so
  -- r.steps must be the sum over global steps of each one's quorum
  -- (n - 1: 2, then 4, then 2 again).
  local c <close> = drover.cluster { ps = 1, worker = { instances = 3, min = 1, max = 5 }, runs = RUNS,
    name = "fitbackup" }
  local log = {}
  local r = c:fit(exp { mode = "sync", backup_workers = 1, progress = scaler(c, { { 60, 5 }, { 900, 3 } }, log),
    train = { data = digits, batch = 16, epochs = 100, max_steps = 2400, reshard = "step" } })
  eq(r.global_steps, 1200, "the planned global steps (2400 / 2)")
  eq(#log, 2, "both scales ran")
  local q = quorums(read(c.run_dir .. "/events.log"))
  eq(#q, 2, "two quorum changes")
  eq(q[1][2], 4, "4 gradients a step with 5 workers")
  eq(q[2][2], 2, "2 with 3")
  eq(r.steps, q[1][1] * 2 + (q[2][1] - q[1][1]) * 4 + (1200 - q[2][1]) * 2,
    "each global step applied its quorum's gradients, no more, no fewer")
end)
