-- test_metrics.lua - metrics.jsonl's step lines mean one thing in process
-- and on a cluster: `loss` and `accuracy` are the step's batch alone, while
-- the progress callback and the result keep the epoch's means (issue 23).
-- The cluster cases compare step by step with in-process training, so they
-- also check a worker's data order: shuffled as in process, or with
-- train.shuffle = false its rows' order (files mode and rows in SETUP).
local T = dofile("tests/lua/t.lua")
local test, eq, near = table.unpack(T)
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train = digits:split(0.8, { seed = 1 })
local train_std = train:standardize()
local BATCH = 32 -- 1438 rows: 44 batches of 32 and one of 30 an epoch

local function experiment(extra)
  drover.seed(3)
  local e = {
    name = "m", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
    model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
    train = { data = train_std, batch = BATCH, epochs = 2 },
    seed = 1, verbose = false, runs = RUNS,
  }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

-- The step lines of a metrics.jsonl (evaluations left out), in order: the
-- line's text and its numbers by member. No JSON reader in Lua: members
-- are matched by name (the writer's numbers are plain decimals).
local function step_lines(path)
  local t = {}
  for l in io.lines(path) do
    if l:find('"loss":', 1, true) and not l:find('"eval_loss"', 1, true) then
      local n = { text = l }
      for k, v in l:gmatch('"([%w_]+)":([%-%d.eE+]+)') do n[k] = tonumber(v) end
      n.accuracy = n.accuracy or (l:find('"accuracy":null', 1, true) and "null")
      t[#t + 1] = n
    end
  end
  return t
end

local function keys(text)
  local ks = {}
  for k in text:gmatch('"([%w_]+)":') do ks[#ks + 1] = k end
  table.sort(ks)
  return table.concat(ks, ",")
end

-- The loss and accuracy of batch b of one epoch (unshuffled) under the
-- model as it is now.
local function batch_metrics(exp, batches, b)
  local x, y = batches[b][1], batches[b][2]
  local out = exp.model:forward(x)
  return exp.loss(out, y), out:argmax(2):eq(y):mean()
end

test("metrics-01 in process: a step's loss and accuracy are its batch's; progress and result keep the epoch's means", function()
  local batches = {}
  for x, y in train_std:batch(BATCH) do batches[#batches + 1] = { x:clone(), y:clone() } end
  local per = #batches
  eq(per, 45, "batches an epoch")
  local exp = experiment { train = { data = train_std, batch = BATCH, epochs = 2, shuffle = false } }
  -- The model a step sees is the one the previous step's progress call
  -- sees: the expected values of step s + 1 are taken there.
  local want = { { batch_metrics(exp, batches, 1) } }
  local running = {}
  exp.progress = function(p)
    if p.is_eval then return end
    running[p.step] = { p.loss, p.accuracy }
    if p.step < 2 * per then
      want[p.step + 1] = { batch_metrics(exp, batches, p.step % per + 1) }
    end
  end
  local r = exp:fit()
  eq(r.steps, 2 * per, "steps")
  local lines = step_lines(exp:run_dir() .. "/metrics.jsonl")
  eq(#lines, r.steps, "a line per step")
  local sum, acc_sum, seen, differs = 0, 0, 0, 0
  for s, l in ipairs(lines) do
    eq(l.step, s, "step")
    eq(l.epoch, (s - 1) // per + 1, "epoch of step " .. s)
    near(l.loss, want[s][1], 1e-6 * math.max(1, want[s][1]), "the loss of step " .. s .. "'s batch")
    near(l.accuracy, want[s][2], 1e-6, "the accuracy of step " .. s .. "'s batch")
    -- the progress callback: the epoch's running mean of those batches
    if (s - 1) % per == 0 then sum, acc_sum, seen = 0, 0, 0 end
    local n = batches[(s - 1) % per + 1][1]:size(1)
    sum, acc_sum, seen = sum + l.loss * n, acc_sum + l.accuracy * n, seen + n
    near(running[s][1], sum / seen, 1e-5, "progress loss at step " .. s)
    near(running[s][2], acc_sum / seen, 1e-6, "progress accuracy at step " .. s)
    if math.abs(running[s][1] - l.loss) > 1e-3 then differs = differs + 1 end
  end
  assert(differs > per, "batch and running mean should differ on most steps: " .. differs)
  near(r.loss, sum / seen, 1e-5, "the result's loss: the last epoch's mean")
  near(r.accuracy, acc_sum / seen, 1e-6, "the result's accuracy: the last epoch's mean")
  assert(lines[#lines].loss < lines[1].loss, "it learns")
  os.execute("rm -rf '" .. exp:run_dir() .. "'")
end)

test("metrics-02 a cluster's step lines carry the same keys, with its batch's values", function()
  local here = experiment()
  here:fit()
  local mine = step_lines(here:run_dir() .. "/metrics.jsonl")
  local cl = experiment()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "m02" }
  local r = c:fit(cl)
  local theirs = step_lines(c.run_dir .. "/metrics.jsonl")
  eq(#theirs, r.steps, "a cluster line per step")
  eq(#theirs, #mine, "as many steps as in process")
  -- in process the rate is known at every step; on a cluster (the ps
  -- applies it) with a schedule only. node and examples are the cluster's.
  eq(keys(mine[1].text), "accuracy,epoch,loss,lr,step,time", "in-process keys")
  eq(keys(theirs[1].text), "accuracy,epoch,examples,loss,node,step,time", "cluster keys")
  -- One worker trains as one process does (test_cluster.lua, cluster-02;
  -- worker 0 shuffles as a process with the same seed does): the same
  -- batches in the same order give the same losses.
  for s = 1, #mine do
    eq(theirs[s].epoch, mine[s].epoch, "epoch of step " .. s)
    near(theirs[s].loss, mine[s].loss, 1e-5, "loss of step " .. s)
    near(theirs[s].accuracy, mine[s].accuracy, 1.01 / BATCH, "accuracy of step " .. s)
  end
  c:shutdown { grace = 5 }
  os.execute("rm -rf '" .. here:run_dir() .. "' '" .. c.run_dir .. "'")
end)

test("metrics-05 clip_norm on a cluster: each step's gradient norm, as in process, in metrics.jsonl, progress and TensorBoard", function()
  local clip = { optimizer = optim.SGD { lr = 0.05, clip_norm = 1 } }
  local here = experiment(clip)
  here:fit()
  local mine = step_lines(here:run_dir() .. "/metrics.jsonl")
  local seen = 0
  local cl = experiment(clip)
  cl.progress = function(p)
    if not p.is_eval and p.grad_norm == p.grad_norm and p.grad_norm > 0 then seen = seen + 1 end
  end
  local c <close> = drover.cluster { ps = 2, worker = 1, runs = RUNS, name = "m05" }
  local r = c:fit(cl)
  local theirs = step_lines(c.run_dir .. "/metrics.jsonl")
  eq(#theirs, r.steps, "a cluster line per step")
  eq(#theirs, #mine, "as many steps as in process")
  eq(keys(theirs[1].text), "accuracy,epoch,examples,grad_norm,loss,node,step,time", "cluster keys")
  local clipped = 0
  for s = 1, #mine do -- the norm before clipping, over both ps's shards: the whole gradient's
    near(theirs[s].grad_norm, mine[s].grad_norm, 1e-5 * math.max(1, mine[s].grad_norm),
      "grad_norm of step " .. s)
    if mine[s].grad_norm > 1 then clipped = clipped + 1 end
  end
  assert(clipped > 0, "some steps were clipped (a norm over clip_norm)")
  assert(seen > 0, "the progress function sees p.grad_norm")
  local f = io.popen("cat " .. c.run_dir .. "/events/coordinator/events.out.tfevents.*")
  local tb = f:read("a")
  f:close()
  assert(tb:find("train/grad_norm", 1, true), "the coordinator's TensorBoard file has train/grad_norm")
  -- without clip_norm no norm is computed: none is written
  local plain = c:fit(experiment { train = { data = train_std, batch = BATCH, max_steps = 3 } })
  local last = step_lines(c.run_dir .. "/metrics.jsonl")
  eq(plain.steps, 3, "steps")
  assert(not last[#last].text:find("grad_norm", 1, true), "no grad_norm without clip_norm")
  c:shutdown { grace = 5 }
  os.execute("rm -rf '" .. here:run_dir() .. "' '" .. c.run_dir .. "'")
end)

-- train.shuffle = false on a 1 ps + 1 worker cluster: the worker reads
-- its rows in order, so its step losses are the in-process unshuffled
-- fit's (before the fix every worker shuffled whatever train.shuffle said).
local function unshuffled(ds, name)
  local ordered = { data = ds, batch = BATCH, epochs = 2, shuffle = false }
  local here = experiment { train = ordered }
  here:fit()
  local mine = step_lines(here:run_dir() .. "/metrics.jsonl")
  local cl = experiment { train = ordered }
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = name }
  local r = c:fit(cl)
  local theirs = step_lines(c.run_dir .. "/metrics.jsonl")
  eq(#theirs, r.steps, "a cluster line per step")
  eq(#theirs, #mine, "as many steps as in process")
  for s = 1, #mine do
    eq(theirs[s].epoch, mine[s].epoch, "epoch of step " .. s)
    near(theirs[s].loss, mine[s].loss, 1e-5, "loss of step " .. s)
  end
  -- The first step's batch is rows 1..BATCH: its loss is the initial
  -- model's (experiment() seeds 3 before building it) on those rows.
  drover.seed(3)
  local m0 = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) }
  local x1, y1
  for x, y in ds:batch(BATCH) do x1, y1 = x, y break end
  near(theirs[1].loss, nn.CrossEntropy()(m0(x1), y1), 1e-5, "the first batch is rows 1.." .. BATCH)
  c:shutdown { grace = 5 }
  os.execute("rm -rf '" .. here:run_dir() .. "' '" .. c.run_dir .. "'")
end

test("metrics-03 train.shuffle = false, files mode: the worker reads its own rows in order", function()
  assert(train_std.files, "read from a file: the worker reads its shard itself")
  unshuffled(train_std, "m03")
end)

test("metrics-04 train.shuffle = false, rows sent in SETUP: the worker reads them in order", function()
  local mem = data.synthetic { n = 400, features = 64, classes = 10, seed = 2 }
  assert(not mem.files, "built in memory: its rows go in SETUP")
  unshuffled(mem, "m04")
end)
