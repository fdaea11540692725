-- scale_engine.lua SPEC RUNS NAME - c:scale during fits on a launcher's real
-- engine (test_slurm_scale.sh, test_ssh_scale.sh): SPEC is a Lua file
-- returning { cluster = { launcher = ..., its options }, worker = { more
-- worker options }, max = N, over = M (a count the engine cannot hold),
-- probe = a function whose answer is printed after the sync fit, hold =
-- seconds each progress call is held while a change is under way (0.02),
-- exact = true: also a sync fit scaled 1 -> 2 -> 1 compared bit for bit
-- with fits between the same steps, and a worker SIGKILLed as a sync fit
-- grows 1 -> 3, closures while it grows 1 -> 3 and shrinks back }. 1 ps and 2 workers { min = 1,
-- max = N }: an async fit grown 2 -> 4 and shrunk 4 -> 1 from its progress
-- function, 1 -> 2 between fits, a sync fit grown 2 -> 4 and shrunk 4 -> 1,
-- then worker = M refused. Prints "key values" lines for the shell test
-- to check; the cluster is shut down at the end (raises on a node failure).
local spec = dofile(arg[1])
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })

local function say(...)
  io.stdout:write(string.format(...), "\n")
  io.stdout:flush()
end

local function exp(mode, steps, progress)
  drover.seed(5)
  return drover.experiment { name = "scale", mode = mode, progress = progress, verbose = false,
    model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
    train = { data = digits, batch = 16, epochs = 100, max_steps = steps } }
end

local opts = { ps = 1, worker = { instances = 2, min = 1, max = spec.max }, runs = arg[2],
  name = arg[3], reservation_timeout = 90 }
for k, v in pairs(spec.cluster) do opts[k] = v end
for k, v in pairs(spec.worker or {}) do opts.worker[k] = v end
local c = drover.cluster(opts)
say("run_dir %s", c.run_dir)

-- workers by index (1-based) and how many are not removed / up
local function workers()
  local s, live, up = {}, 0, 0
  for _, x in ipairs(c:nodes()) do
    if x.role == "worker" then
      s[x.index + 1] = x
      if x.state ~= "removed" then live = live + 1 end
      if x.state == "ready" or x.state == "busy" then up = up + 1 end
    end
  end
  return s, live, up
end

-- the progress function: scale to plan[k][2] once the fit passed step
-- plan[k][1] and the change before is over, each progress call held
-- (spec.hold) until it is: an engine takes seconds to start a worker, and a
-- fit of small steps could end first (tests/lua/scaler.lua)
local scale_with = dofile("tests/lua/scaler.lua")
local function scaler(plan)
  return scale_with(c, plan, { hold = spec.hold,
    said = function(step, count) say("scaled %d at step %d", count, step) end })
end

local r = c:fit(exp("async", 3000, scaler { { 100, 4 }, { 1500, 1 } }))
local s, live = workers()
local sum = 0
for i = 1, 4 do sum = sum + (s[i] and s[i].steps or 0) end
say("async steps %d sum %d live %d new %d %d", r.steps, sum, live, s[3].steps, s[4].steps)

c:scale { worker = 2 }
local _, live2, up2 = workers()
say("between live %d up %d", live2, up2)

r = c:fit(exp("sync", 1600, scaler { { 40, 4 }, { 500, 1 } }))
local ev = io.open(c.run_dir .. "/events.log"):read("a")
local q = {}
for g in ev:gmatch("sync: %d+ gradients per global step from global step (%d+)") do
  q[#q + 1] = tonumber(g)
end
local want = q[2] and q[1] * 2 + (q[2] - q[1]) * 4 + (800 - q[2]) or -1
local _, live3 = workers()
say("sync global %d steps %d want %d changes %d live %d", r.global_steps, r.steps, want, #q, live3)

if spec.probe then say("probe %s", spec.probe()) end

-- the quorum changes events.log has past the first `from` ones
local function changes(from)
  local e, q = io.open(c.run_dir .. "/events.log"):read("a"), {}
  for g in e:gmatch("sync: %d+ gradients per global step from global step (%d+)") do q[#q + 1] = tonumber(g) end
  return { table.unpack(q, from + 1) }
end

if spec.exact then
  -- a sync fit of 1 worker scaled 1 -> 2 -> 1 equals, bit for bit, fits
  -- run on 1, 2, 1 workers between the same global steps (plain SGD; each
  -- SETUP starts its shard anew, as the new shards do at the barrier)
  local before = #changes(0)
  local a = exp("sync", 800, scaler { { 30, 2 }, { 300, 1 } })
  local ra = c:fit(a)
  local q2 = changes(before)
  local differ = -1
  if #q2 == 2 then
    local b = exp("sync", q2[1])
    c:fit(b)
    c:scale { worker = 2 }
    b.train.max_steps = 2 * (q2[2] - q2[1])
    c:fit(b)
    c:scale { worker = 1 }
    b.train.max_steps = 800 - q2[2]
    c:fit(b)
    differ = 0
    local pa, pb = a.model:parameters(), b.model:parameters()
    local function walk(u, v)
      if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
      elseif u ~= v then differ = differ + 1 end
    end
    for i = 1, #pa do walk(pa[i].value:totable(), pb[i].value:totable()) end
  end
  say("equal global %d changes %d differ %d", ra.global_steps, #q2, differ)

  -- a worker SIGKILLed as a sync fit grows 1 -> 3: restarted by the
  -- launcher, the change done, the global steps exact; then back to 1
  local killed
  local function grown()
    return io.open(c.run_dir .. "/events.log"):read("a"):find("scale: worker 1 -> 3 done", 1, true)
  end
  local rk = c:fit(exp("sync", 600, function(p)
    -- held, blocking, until the change is done (as the scaler above)
    if killed and not grown() then return io.popen("sleep " .. (spec.hold or 0.02)):close() end
    if killed or p.step < 40 then return end
    assert(c:scale { worker = 3 })
    killed = workers()[1].pid
    os.execute("kill -9 " .. killed)
  end))
  local ws, live4 = workers()
  local ev4 = io.open(c.run_dir .. "/events.log"):read("a")
  say("kill global %d live %d restarted %s done %s", rk.global_steps, live4,
    tostring(ws[1].pid ~= killed and ev4:find("node restart worker:0", 1, true) ~= nil),
    tostring(ev4:find("scale: worker 1 -> 3 done", 1, true) ~= nil))
  c:scale { worker = 1 }

  -- schedule loops while the cluster grows 1 -> 3 and shrinks back to 1:
  -- every future resolves with its value (at least once), the added
  -- workers ran closures, the removed ones' queued closures ran elsewhere
  local function spin(w, k)
    local t = os.clock() + 0.02
    while os.clock() < t do end
    return k * 2, w.index
  end
  local fs = {}
  for i = 1, 20 do fs[i] = c:schedule(spin, i) end
  c:scale { worker = 3 }
  for i = 21, 120 do fs[i] = c:schedule(spin, i) end
  c:scale { worker = 1 }
  for i = 121, 140 do fs[i] = c:schedule(spin, i) end
  c:join()
  local right, on = 0, {}
  for i = 1, 140 do
    local v, idx = fs[i]:fetch()
    if v == i * 2 then right = right + 1 end
    on[idx] = true
  end
  local _, live5 = workers()
  say("closures %d added %s live %d", right, tostring(on[1] == true or on[2] == true), live5)
end
local ok, err = pcall(c.scale, c, { worker = spec.over })
say("over %s %s", ok and "accepted" or "refused", tostring(err))
c:shutdown()
say("done")
