-- test_scale_repl.lua - c:scale { worker = N } during a sync fit with ps
-- replicas (ps_replicas = 1): the quorum change (SYNC_STOP { replicas })
-- reaches the replica as the primary forwards it, and a replica synced
-- later gets the quorum in REPL_SYNC. Scaled 1 -> 2, the primary SIGKILLed
-- (the replica promoted goes on with 2 gradients per global step), the
-- restarted one synced and the new primary SIGKILLed in turn (promoted
-- with REPL_SYNC's quorum), then 2 -> 1: the global steps exact, the
-- parameters bit for bit those of fits without replicas or kills that had
-- 1, 2, then 1 worker for the same global steps (as scale-fit-03).
local T = dofile("tests/lua/t.lua")
local test, eq = T[1], T[2]
local read, node = T.read, T.node
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })

local function events(c) return read(c.run_dir .. "/events.log") end

-- "sync: R gradients per global step from global step G (were W)": { G, R, W }
local function quorums(ev)
  local q = {}
  for r, g, was in ev:gmatch("sync: (%d+) gradients per global step from global step (%d+) %(were (%d+)%)") do
    q[#q + 1] = { tonumber(g), tonumber(r), tonumber(was) }
  end
  return q
end

-- the progress function's plan, one stage a call once its condition holds
local function plan(c, log)
  local stage, at = 1, 0
  local function scale(n)
    local ok, err = pcall(c.scale, c, { worker = n })
    if not ok and tostring(err):find("not over yet", 1, true) then return false end
    assert(ok, err)
    return true
  end
  local function kill(role_index)
    local v = node(c, "ps", role_index)
    log[#log + 1] = v
    os.execute("kill -9 " .. v.pid)
  end
  local stages = {
    function(p) return p.step >= 40 and scale(2) end,
    function() -- the quorum crossed: the primary goes
      if #quorums(events(c)) < 1 then return false end
      kill(0)
      return true
    end,
    function(p) -- ps:0 back and synced (REPL_SYNC): the new primary goes
      if not events(c):find("node synced ps:0", 1, true) then return false end
      if at == 0 then at = p.step end
      if p.step < at + 40 then return false end
      kill(1)
      at = p.step
      return true
    end,
    function(p) return events(c):find("replica ps:0 promoted", 1, true) and p.step >= at + 40 and scale(1) end,
  }
  return function(p)
    local f = stages[stage]
    if f and f(p) then
      log.stages = stage
      stage = stage + 1
    elseif stage > 1 and (f or #quorums(events(c)) < 2) then
      -- held, blocking, until the stage's condition holds (the last: the
      -- quorum's change back to 1): a new worker, a restarted ps's sync
      -- take a while on a loaded machine, and drover.sleep would run the
      -- fit's steps with the loop (its 3,000 take 2 s)
      io.popen("sleep 0.02"):close()
    end
  end
end

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

local STEPS = 3000

-- plain SGD (no optimizer state on the ps) from the same seed
local function exp(steps, progress)
  drover.seed(5)
  return drover.experiment {
    name = "scalerepl", model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false, mode = "sync",
    train = { data = digits, batch = 16, epochs = 100, max_steps = steps }, progress = progress }
end

test("scale-repl-01 sync fit, ps_replicas = 1: 1 -> 2, primaries SIGKILLed, 2 -> 1, exact global steps", function()
  local c <close> = drover.cluster { ps = 1, ps_replicas = 1, worker = { instances = 1, min = 1, max = 2 },
    runs = RUNS, name = "scalerepl" }
  local log = {}
  local a = exp(STEPS, plan(c, log))
  local r = c:fit(a)
  eq(log.stages, 4, "every stage ran: scale, kill, kill, scale")
  eq(r.global_steps, STEPS, "the planned global steps (STEPS / 1)")
  local ev = events(c)
  local q = quorums(ev)
  eq(#q, 2, "two quorum changes")
  eq(q[1][2], 2, "2 gradients")
  eq(q[2][2], 1, "then 1")
  eq(r.steps, q[1][1] + (q[2][1] - q[1][1]) * 2 + (STEPS - q[2][1]), "each global step had its quorum")
  assert(ev:find("ps group 0: replica ps:1 promoted in place of ps:0: no update lost", 1, true), "ps:1 promoted")
  assert(ev:find("ps group 0: replica ps:0 promoted in place of ps:1: no update lost", 1, true), "ps:0 promoted")
  assert(not ev:find("restoring from step", 1, true), "no rollback")
  -- the replica applied the quorum the primary forwarded, before its promotion
  assert(read(log[1].log and node(c, "ps", 1).log):find("sync training: 2 gradients per update", 1, true),
    "ps:1 (the replica at the change) got the quorum of 2")
  c:shutdown()
  local g1, g2 = q[1][1], q[2][1]
  local ref <close> = drover.cluster { ps = 1, worker = { instances = 1, max = 2 }, runs = RUNS, name = "replref" }
  local b = exp(g1)
  eq(ref:fit(b).global_steps, g1, "1 worker")
  ref:scale { worker = 2 }
  b.train.max_steps = 2 * (g2 - g1)
  eq(ref:fit(b).global_steps, g2 - g1, "2 workers")
  ref:scale { worker = 1 }
  b.train.max_steps = STEPS - g2
  eq(ref:fit(b).global_steps, STEPS - g2, "1 worker again")
  same_params(a.model:parameters(), b.model:parameters(), "scaled with replicas and kills vs fits between")
end)
