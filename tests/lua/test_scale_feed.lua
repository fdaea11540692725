-- test_scale_feed.lua - c:scale { worker = N } during a fed fit (train =
-- { feed = dataset }): grow 2 -> 4 and shrink 4 -> 1 in one async fit,
-- every batch trained exactly once (the new workers take batches at once,
-- a removed worker's batches not started go back to the queue).
local T = dofile("tests/lua/t.lua")
local test, eq = T[1], T[2]
local read = T.read
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })

local function workers(c)
  local s, up, ready = {}, 0, 0
  for _, x in ipairs(c:nodes()) do
    if x.role == "worker" then
      s[x.index + 1] = x
      if x.state ~= "removed" and x.state ~= "removing" then up = up + 1 end
      if x.state == "ready" or x.state == "busy" then ready = ready + 1 end
    end
  end
  return s, up, ready
end

-- scale to plan's counts ({ batches trained, count }), each progress call
-- held until the change before is done: the new workers must be up to take
-- batches (tests/lua/scaler.lua)
local scale_with = dofile("tests/lua/scaler.lua")
local function scaler(c, plan, log) return scale_with(c, plan, { log = log }) end

test("scale-feed-01 fed async fit: grow 2 -> 4, shrink 4 -> 1, every batch trained once", function()
  drover.seed(3)
  local c <close> = drover.cluster { ps = 1, worker = { instances = 2, min = 1, max = 4 }, runs = RUNS,
    name = "scalefeed" }
  local batch, epochs = 16, 6
  local per = math.ceil(#digits / batch)
  local log = {}
  local r = c:fit(drover.experiment {
    name = "scalefeed", model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false,
    train = { feed = digits, batch = batch, epochs = epochs },
    progress = scaler(c, { { 60, 4 }, { per * 3, 1 } }, log) })
  eq(#log, 2, "both scales ran")
  eq(r.fed, epochs * per, "batches read")
  eq(r.batches, epochs * per, "batches trained, each once")
  eq(r.steps, epochs * per, "steps")
  local s, up = workers(c)
  eq(up, 1, "one worker left")
  local total = 0
  for k = 1, 4 do total = total + s[k].steps end
  eq(total, epochs * per, "every batch counted once, on one worker")
  assert(s[3].steps > 0 and s[4].steps > 0, "the new workers trained: " .. s[3].steps .. ", " .. s[4].steps)
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("scale: worker 2 -> 4 done (during the fit", 1, true), "events: grow done")
  assert(ev:find("node removed worker:3", 1, true), "events: worker:3 removed")
  assert(ev:find("scale: worker 4 -> 1 (requested by lua)", 1, true), "events: the shrink")
  assert(not ev:find("node lost worker", 1, true), "a removed worker is no loss")
  assert(ev:find(("feed: %d batches trained of %d read"):format(epochs * per, epochs * per), 1, true),
    "events: every batch read trained")
  eq(c:fit(drover.experiment { name = "after", model = nn.Sequential { nn.Linear(64, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false,
    train = { feed = digits, batch = 64, epochs = 1 } }).batches, math.ceil(#digits / 64),
    "the next fed fit on the one left")
end)

test("scale-feed-02 fed fit: a worker lost past its restarts shrinks 3 -> 2, every batch trained", function()
  local c <close> = drover.cluster { ps = 1, worker = { instances = 3, min = 2 }, runs = RUNS,
    name = "scalefeedloss", max_restarts = 0 }
  local batch, epochs = 16, 4
  local per = math.ceil(#digits / batch)
  local pid
  local r = c:fit(drover.experiment {
    name = "scalefeedloss", model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false,
    train = { feed = digits, batch = batch, epochs = epochs },
    progress = function(p)
      if pid or p.step < 60 then return end
      pid = T.node(c, "worker", 2).pid
      os.execute("kill -9 " .. pid)
    end })
  assert(pid, "worker:2 was killed")
  eq(r.fed, epochs * per, "batches read")
  eq(r.batches, epochs * per, "every batch trained (those worker:2 held fed again)")
  eq(T.node(c, "worker", 2).state, "removed", "worker:2 removed")
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("worker:2 lost past its restarts: cluster shrinks to 2 workers (min 2)", 1, true),
    "events: the shrink")
  assert(ev:find(("feed: %d batches trained of %d read"):format(epochs * per, epochs * per), 1, true),
    "events: every batch read trained")
end)
