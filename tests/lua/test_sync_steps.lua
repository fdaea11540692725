-- test_sync_steps.lua - a sync fit reports exactly the train steps whose
-- gradients were applied, the same on every run: the same fit run again
-- and again gives the same r.steps, r.global_steps, loss and parameters.
-- It used to count a step handed out past the last global step (its
-- gradient dropped by the ps) when the coordinator had queued it before
-- it learned the fit was over: 31 steps for max_steps = 30, at times.
local T = dofile("tests/lua/t.lua")
local test, eq, near = table.unpack(T)
local read = T.read
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 }):standardize()
local FITS = 10

-- A busy wait (the progress function runs inside the coordinator's fit
-- loop): it leaves the workers' RESULTs queued up behind it, so that the
-- coordinator learns of the last global step late, as a loaded machine
-- would make it.
local function stall(s)
  local t = os.clock() + s
  while os.clock() < t do end
end

local function experiment(backup)
  drover.seed(4)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
    train = { data = digits, batch = 32, epochs = 3, max_steps = 30 }, seed = 4,
    verbose = false, mode = "sync", backup_workers = backup,
  }
end

-- The metrics.jsonl step lines of the fit that wrote lines from `from` on.
local function metric_steps(dir, from)
  local n, i = 0, 0
  for l in io.lines(dir .. "/metrics.jsonl") do
    i = i + 1
    if i > from and l:find('"step":', 1, true) and not l:find('"eval_', 1, true) then n = n + 1 end
  end
  return n, i
end

local function worker_steps(c)
  local all = 0
  for _, n in ipairs(c:nodes()) do if n.role == "worker" then all = all + n.steps end end
  return all
end

-- One fit: what must be the same on every run.
local function fit(c, backup, path, lines)
  local exp = experiment(backup)
  local calls, last = 0, 0
  exp.progress = function(p)
    if p.is_eval then return end
    calls, last = calls + 1, p.step
    if p.step % 7 == 0 then stall(0.02) end
  end
  local before = worker_steps(c)
  local r = c:fit(exp)
  exp.model:save(path)
  local m
  m, lines = metric_steps(c.run_dir, lines)
  return { steps = r.steps, global = r.global_steps, loss = r.loss, last = last, metrics = m,
           nodes = worker_steps(c) - before, file = read(path) }, lines
end

local function runs(workers, backup, check)
  local c <close> = drover.cluster { ps = 1, worker = workers, runs = RUNS,
                                     name = ("sync-steps-%d-%d"):format(workers, backup) }
  local path = os.tmpname()
  local first, lines
  for i = 1, FITS do
    local got
    got, lines = fit(c, backup, path, lines or 0)
    local what = ("fit %d of %d workers, %d backup: "):format(i, workers, backup)
    eq(got.metrics, got.steps, what .. "metrics.jsonl step lines")
    eq(got.last, got.steps, what .. "the last step progress saw")
    eq(got.nodes, got.steps, what .. "the workers' steps")
    check(got, what)
    first = first or got
    eq(got.steps, first.steps, what .. "r.steps as the first fit's")
    eq(got.global, first.global, what .. "r.global_steps as the first fit's")
    if backup == 0 then -- which gradient a backup worker's update takes is timing
      near(got.loss, first.loss, 1e-12, what .. "loss")
      assert(got.file == first.file, what .. "the saved parameters differ from the first fit's")
    end
  end
  os.remove(path)
  c:shutdown { grace = 5 }
end

test("sync-steps-01 1 ps + 1 worker, max_steps = 30: 30 steps, the same parameters, every run", function()
  runs(1, 0, function(got, what)
    eq(got.steps, 30, what .. "r.steps")
    eq(got.global, 30, what .. "r.global_steps")
  end)
end)

test("sync-steps-02 2 workers, no backup: each of 15 global steps takes both gradients", function()
  runs(2, 0, function(got, what)
    eq(got.global, 15, what .. "r.global_steps")
    eq(got.steps, 30, what .. "r.steps")
  end)
end)

-- With a backup worker the second gradient of a global step is dropped by
-- design: r.steps counts the applied ones, one per global step here.
test("sync-steps-03 2 workers, 1 backup: the dropped gradients are not steps", function()
  runs(2, 1, function(got, what)
    eq(got.global, 30, what .. "r.global_steps")
    eq(got.steps, 30, what .. "r.steps")
  end)
end)
