-- test_schedule.lua - ClusterCoordinator semantics on real clusters of
-- processes on loopback: c:schedule / rv:fetch / c:join / c:done, the
-- bounded queue, TensorFlow's error semantics, at-least-once re-execution
-- when a worker is SIGKILLed, and the worker object w.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read, node, sh, alive = T.read, T.node, T.sh, T.alive
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

-- Runs on a worker: spins for ms milliseconds of CPU (no sleeping call
-- that would pump the worker's loop from inside a closure).
local function spin(w, i, ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
  return i, w.name
end

test("sched-01 a scheduled function's results come back, with w", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s01" }
  local rv = c:schedule(function(w, a, b, t)
    return a + b, w.index, w.role, w.name, { sum = t[1] + t[2], tag = t.tag }, nil, 1.5
  end, 2, 3, { 10, 20, tag = "x" })
  local sum, index, role, name, tbl, none, f = rv:fetch()
  eq(sum, 5, "a + b")
  assert(math.type(sum) == "integer", "integers stay integers")
  assert(index == 0 or index == 1, "w.index " .. tostring(index))
  eq(role, "worker", "w.role")
  eq(name, "worker:" .. index, "w.name")
  eq(tbl.sum, 30, "table result")
  eq(tbl.tag, "x", "table string")
  eq(none, nil, "nil result")
  eq(f, 1.5, "float result")
  eq(rv:state(), "done", "state")
  eq(select("#", rv:fetch()), 7, "fetch again gives the same 7 values")
  assert(tostring(rv):find("RemoteValue", 1, true), tostring(rv))
  c:join()
  eq(c:done(), true, "done after join")
  c:shutdown()
end)

test("sched-02 1,000 closures all run exactly once, spread over the workers", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s02" }
  local rvs = {}
  for i = 1, 1000 do
    -- Each worker counts the closures it runs in its own globals: the
    -- counts it returns must be exactly 1..k, so no run went unreported.
    rvs[i] = c:schedule(function(w, i)
      runs = (runs or 0) + 1
      return i, w.name, runs
    end, i)
  end
  c:join()
  eq(c:done(), true, "done")
  local seen, per = {}, {}
  for i = 1, 1000 do
    local got, name, count = rvs[i]:fetch()
    eq(got, i, "result of closure " .. i)
    per[name] = per[name] or {}
    assert(not per[name][count], name .. " reported run number " .. count .. " twice")
    per[name][count] = true
    seen[i] = true
  end
  local total, workers = 0, 0
  for name, counts in pairs(per) do
    workers = workers + 1
    local k = 0
    for _ in pairs(counts) do k = k + 1 end
    for j = 1, k do assert(counts[j], name .. " has a gap at run " .. j) end
    total = total + k
  end
  eq(total, 1000, "runs over all workers")
  eq(workers, 2, "both workers ran closures")
  c:shutdown()
end)

test("sched-03 an error surfaces with its traceback at join; queued closures are cancelled", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s03" }
  local bad = c:schedule(function(w)
    local function deeper() error("boom from " .. w.name) end
    local t = os.clock() + 0.2 -- long enough for the 200 below to be queued first
    while os.clock() < t do end
    deeper()
  end)
  local later = {}
  -- The error is raised by the first schedule or join after it arrived.
  local err = raises(function()
    for i = 1, 200 do later[#later + 1] = c:schedule(spin, i, 5) end
    c:join()
  end, "boom from worker:")
  assert(err:find("stack traceback", 1, true), "a traceback: " .. err)
  assert(err:find("test_schedule.lua", 1, true), "the traceback names the script: " .. err)
  assert(err:find("deeper", 1, true), "the traceback names the function: " .. err)
  assert(err:find("failed on worker:", 1, true), "it names where it ran: " .. err)
  raises(function() bad:fetch() end, "boom from worker:")
  c:join() -- the error was raised once; what still runs finishes
  local cancelled, done = 0, 0
  for i = 1, #later do
    local st = later[i]:state()
    if st == "cancelled" then
      cancelled = cancelled + 1
      raises(function() later[i]:fetch() end, "cancelled")
    elseif st == "done" then
      done = done + 1
      eq((later[i]:fetch()), i, "a closure that ran keeps its result")
    else
      error("closure " .. i .. " is " .. st)
    end
  end
  eq(cancelled + done, #later, "every closure is cancelled or done")
  -- How many were still queued when the error came depends on the machine's
  -- load (the other worker keeps running closures meanwhile); what must hold
  -- is that those, and only those, were cancelled: events.log says how many.
  if #later == 200 then assert(cancelled > 0, "queued closures were cancelled") end
  if cancelled > 0 then
    local n = read(c.run_dir .. "/events.log"):match("cancel (%d+) queued closures?")
    assert(n, "events.log records the cancellation")
    eq(tonumber(n), cancelled, "events.log's count is the closures found cancelled")
  end
  -- The cluster is usable again.
  eq((c:schedule(function() return 42 end):fetch()), 42, "schedule after the error")
  c:shutdown()
end)

test("sched-04 what cannot be sent is refused, naming it", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "s04" }
  local t = drover.tensor { 1, 2, 3 }
  raises(function() c:schedule(function() return t end) end, "upvalue 't'")
  raises(function() c:schedule(function() return t end) end, "userdata")
  raises(function() c:schedule(function(w, x) return x end, { f = print }) end, "argument 1")
  raises(function() c:schedule(print) end, "schedule:")
  -- A result that cannot come back is the closure's error.
  raises(function() c:schedule(function() return drover.tensor { 1 } end):fetch() end, "result 1")
  raises(function() c:join() end, "result 1") -- and the first error, raised once
  c:shutdown()
end)

test("sched-05 schedule waits while the queue is full", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, max_queue = 4, runs = RUNS, name = "s05" }
  local rvs, most = {}, 0
  for i = 1, 60 do
    rvs[i] = c:schedule(spin, i, 3)
    local queued = 0
    for j = 1, i do if rvs[j]:state() == "queued" then queued = queued + 1 end end
    if queued > most then most = queued end
  end
  assert(most <= 4, "at most max_queue closures queued, saw " .. most)
  eq(most, 4, "the queue filled up")
  c:join()
  for i = 1, 60 do eq((rvs[i]:fetch()), i, "result " .. i) end
  raises(function() drover.cluster { ps = 1, worker = 1, max_queue = 0, runs = RUNS } end, "max_queue")
  c:shutdown()
end)

test("sched-06 done() never waits", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "s06" }
  local rv = c:schedule(spin, 1, 300)
  local t0 = drover.clock()
  eq(c:done(), false, "done() while a closure runs")
  assert(drover.clock() - t0 < 0.2, "done() returned at once")
  c:join()
  eq(c:done(), true, "done() after join")
  eq((rv:fetch()), 1, "result")
  c:shutdown()
end)

test("sched-07 SIGKILL of a worker during 1,000 closures: every result arrives, the worker is back", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s07" }
  local victim = node(c, "worker", 1)
  local rvs = {}
  -- worker:1 spins 20 ms a closure, worker:0 1 ms: the closures worker:1
  -- holds at the kill are still running then (at 1 ms it could end them
  -- all while the kill's shell started, leaving nothing to retry)
  local function slow1(w, i)
    local t = os.clock() + (w.name == "worker:1" and 0.02 or 0.001)
    while os.clock() < t do end
    return i, w.name
  end
  for i = 1, 1000 do rvs[i] = c:schedule(slow1, i) end
  -- Kill worker:1 once a tenth of the closures are through.
  rvs[100]:fetch()
  -- ... at a moment worker:1 holds closures (its results come in bursts).
  local holds
  for _ = 1, 2000 do
    for i = 100, 1000 do
      local info = rvs[i]:info()
      if info.state == "running" and info.node == "worker:1" then holds = true break end
    end
    if holds then break end
    drover.sleep(0.001)
  end
  assert(holds, "worker:1 held closures before the kill")
  os.execute("kill -9 " .. victim.pid)
  c:join()
  for i = 1, 1000 do eq((rvs[i]:fetch()), i, "result of closure " .. i) end
  local back
  for _ = 1, 100 do
    back = node(c, "worker", 1)
    if back.pid ~= victim.pid and back.state == "ready" then break end
    drover.sleep(0.05)
  end
  eq(back.restarts, 1, "worker:1 restarted once")
  assert(back.pid ~= victim.pid and alive(back.pid), "a new worker:1 process")
  assert(not alive(victim.pid), "the old one is gone")
  local log = read(c.run_dir .. "/events.log")
  assert(log:find("node lost worker:1", 1, true), "events.log: the loss")
  assert(log:find("retry %d+ closures? of worker:1"), "events.log: the retry")
  assert(log:find("node restart worker:1", 1, true), "events.log: the restart")
  -- It takes closures again.
  local names = {}
  for i = 1, 40 do names[i] = c:schedule(function(w) local t = os.clock() + 0.002 while os.clock() < t do end return w.name end) end
  local by = {}
  for i = 1, 40 do by[names[i]:fetch()] = true end
  assert(by["worker:1"], "the restarted worker:1 ran closures")
  c:shutdown()
end)

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test_ds:standardize(stats)

local function experiment(extra)
  local e = {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
    train = { data = train_std, batch = 32, epochs = 1 }, seed = 1, verbose = false,
  }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

test("sched-08 closures train through w: train_step, pull/compute/push, batch", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s08" }
  local exp = experiment()
  local r0 = c:fit(exp) -- sets the workers up (model, shard)
  local before = c:evaluate(exp, test_std)
  local rvs = {}
  for i = 1, 300 do
    if i % 2 == 0 then
      rvs[i] = c:schedule(function(w) return w:train_step() end)
    else
      rvs[i] = c:schedule(function(w)
        w:pull()
        local loss, n = w:compute()
        w:push()
        return loss, n
      end)
    end
  end
  c:join()
  for i = 1, 300 do
    local loss, n = rvs[i]:fetch()
    assert(type(loss) == "number" and loss == loss and loss >= 0, "loss " .. tostring(loss))
    assert(math.type(n) == "integer" and n >= 1 and n <= 32, "examples of a step: " .. tostring(n))
  end
  local after = c:evaluate(exp, test_std)
  assert(after.loss < before.loss, ("training through closures lowered the loss: %g -> %g"):format(before.loss, after.loss))
  local x, y = c:schedule(function(w) local x, y = w:batch() return x:shape(), #y end):fetch()
  assert(x[1] >= 1 and x[1] <= 32, "batch rows: " .. x[1]) -- an epoch's last batch is short
  eq(x[2], 64, "batch features")
  eq(y, x[1], "a label per row")
  raises(function()
    c:schedule(function(w) table.sort({ 3, 2, 1 }, function(a, b) w:pull() return a < b end) end):fetch()
  end, "w:pull: cannot wait here")
  raises(function() c:join() end, "w:pull: cannot wait here") -- the first error, raised once
  c:join()
  assert(r0.steps > 0)
  c:shutdown()
end)

test("sched-09 w needs a model: a clear error before any fit", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "s09" }
  raises(function() c:schedule(function(w) return w:train_step() end):fetch() end, "no model yet")
  raises(function() c:join() end, "no model yet")
  c:shutdown()
end)

test("sched-10 shutdown while a lost worker waits for its restart is not a failure", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s10" }
  local victim = node(c, "worker", 1)
  os.execute("kill -9 " .. victim.pid)
  local st
  for _ = 1, 200 do
    st = node(c, "worker", 1).state
    if st == "restarting" then break end
    drover.sleep(0.005)
  end
  eq(st, "restarting", "worker:1 state")
  c:shutdown { grace = 1, timeout = 5 } -- raises if it counted a failure
  for _, n in ipairs({ victim }) do assert(not alive(n.pid), "the old worker:1 is gone") end
end)

test("sched-11 a lone closure of a SIGKILLed worker runs again: join returns", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s11" }
  -- The spin counts CPU time: on a loaded machine 1.5 s of it takes far
  -- longer by the wall clock, so the bound below is generous.
  local rv = c:schedule(spin, 7, 1500)
  local holder
  for _ = 1, 2000 do
    local info = rv:info()
    if info.state == "running" then holder = info.node break end
    drover.sleep(0.002)
  end
  assert(holder, "the closure started")
  local victim = node(c, holder:match("^(%a+)"), tonumber(holder:match(":(%d+)$")))
  os.execute("kill -9 " .. victim.pid)
  -- c:done() never waits: poll it with a bound instead of a join that
  -- would hang (the retried closure used to stay queued forever).
  local t0, finished = drover.clock(), false
  while drover.clock() - t0 < 60 do
    if c:done() then finished = true break end
    drover.sleep(0.05)
  end
  assert(finished, "the retried closure finished within 60 s: " .. rv:info().state)
  c:join()
  eq((rv:fetch()), 7, "its result")
  assert(read(c.run_dir .. "/events.log"):find("retry 1 closure of " .. holder, 1, true), "events.log: the retry")
  c:shutdown()
end)

test("sched-12 a ps refuses NaN gradients, naming where they came from; the worker connects again", function()
  local d = data.synthetic { n = 64, features = 4, classes = 2 }
  for r = 1, 64 do d.x:set(r, 1, 0 / 0) end
  local exp = drover.experiment { name = "t", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    model = nn.Sequential { nn.Linear(4, 2) }, train = { data = d, batch = 8, epochs = 1 }, seed = 1,
    verbose = false }
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "s12" }
  c:setup(exp)
  local before = c:schedule(function(w) w:pull() return w.name end):fetch()
  eq(before, "worker:0", "a pull works")
  raises(function()
    c:schedule(function(w)
      w:pull()
      local loss = w:compute()
      assert(loss ~= loss, "the loss is NaN")
      w:push()
    end):fetch()
  end, "refused: the gradient for var")
  raises(function() c:join() end, "refused") -- the first error, raised once
  -- the link the ps closed is connected again by the next call that needs it
  local ok, how = pcall(function() return c:schedule(function(w) w:pull() return "pulled" end):fetch() end)
  if not ok then -- within its back-off (0.1 s) a call may still find it down
    drover.sleep(0.3)
    c:join()
    ok, how = pcall(function() return c:schedule(function(w) w:pull() return "pulled" end):fetch() end)
  end
  eq(how, "pulled", "the worker pulls again after the refusal")
  assert(read(c.run_dir .. "/logs/ps-0.log"):find("PUSH from worker:0 %([^)]+%) refused: the gradient for var %d+ holds NaN"),
    "the ps log names the worker that sent it, and its connection")
  c:shutdown()
end)

test("sched-13 c:shutdown lets running closures finish within the grace", function()
  local c = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "s13" }
  c:setup(experiment())
  local marks = {}
  for i = 1, 2 do
    marks[i] = os.tmpname()
    os.remove(marks[i])
    -- sleeps (a timer), then trains (a job): both after the SHUTDOWN came
    c:schedule(function(w, path)
      drover.sleep(0.5)
      local loss = w:train_step()
      local f = io.open(path, "w") f:write("done ", loss, "\n") f:close()
    end, marks[i])
  end
  local t0 = drover.clock()
  while drover.clock() - t0 < 10 do
    local n = 0
    for _, x in ipairs(c:nodes()) do n = n + (x.state == "busy" and 1 or 0) end
    if n == 2 then break end
    drover.sleep(0.02)
  end
  c:shutdown { grace = 5 }
  for i = 1, 2 do
    local f = io.open(marks[i])
    assert(f, "closure " .. i .. " finished before its worker exited")
    assert(f:read("a"):match("^done %d"), "it trained")
    f:close()
    os.remove(marks[i])
  end
end)

test("sched-14 drover.sleep waits its whole time after a long computation, in a script and a closure", function()
  -- the loop's clock is cached from its last turn: a timer started from it
  -- after 0.3 s of computing ended a drover.sleep(0.5) after 0.2 s
  local t0 = drover.clock()
  while drover.clock() - t0 < 0.3 do end
  local t1 = drover.clock()
  drover.sleep(0.5)
  local here = drover.clock() - t1
  assert(here >= 0.499, "the script's drover.sleep(0.5) took " .. here .. " s")
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "s14" }
  local there = c:schedule(function()
    local u0 = drover.clock()
    while drover.clock() - u0 < 0.3 do end
    local u1 = drover.clock()
    drover.sleep(0.5)
    return drover.clock() - u1
  end):fetch()
  assert(there >= 0.499, "a closure's drover.sleep(0.5) took " .. there .. " s")
end)
