-- test_feed.lua - feed mode (train = { feed = ... }) on clusters of real
-- processes on loopback: a dataset, a function, backpressure, timeouts.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read, node = T.read, T.node
local nn, optim, data, tensor = drover.nn, drover.optim, drover.data, drover.tensor
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test_ds:standardize(stats)

local function experiment(trainf, extra)
  local e = {
    name = "feed", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
    train = trainf, eval = { data = test_std }, seed = 1, verbose = false,
  }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

-- batches of a dataset as a function source: each batch once
local function batches_of(ds, batch)
  local f = ds:batch(batch) -- the generic-for step: x, y, then nothing
  return function() return f() end
end

test("feed-01 a dataset fed to 2 workers trains every batch once", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feed01" }
  local exp = experiment { feed = train_std, batch = 32, epochs = 3 }
  local r = c:fit(exp)
  local per = math.ceil(#train_std / 32)
  eq(r.fed, 3 * per, "batches read")
  eq(r.batches, 3 * per, "batches trained")
  eq(r.steps, 3 * per, "steps")
  assert(r.eval_accuracy >= 0.9, "eval accuracy " .. tostring(r.eval_accuracy))
  local steps = 0
  for _, n in ipairs(c:nodes()) do
    if n.role == "worker" then
      assert(n.steps > 0, n.role .. n.index .. " trained")
      steps = steps + n.steps
    end
  end
  eq(steps, r.steps, "steps by the workers")
end)

test("feed-02 a function source; epochs call it again after nil", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feed02" }
  local calls, gen = 0, nil
  local src = batches_of(train_std, 50)
  local exp = experiment { feed = function()
    calls = calls + 1
    return src()
  end, batch = 50 }
  local r = c:fit(exp)
  local per = math.ceil(#train_std / 50)
  eq(r.fed, per, "batches read")
  eq(r.batches, per, "batches trained")
  assert(r.eval_accuracy > 0.5, "it learned: " .. tostring(r.eval_accuracy))
  -- a restarting function with epochs = 2: read twice
  local pass = 0
  local it = batches_of(train_std, 100)
  exp = experiment { feed = function()
    local x, y = it()
    if x == nil then it = batches_of(train_std, 100) end
    return x, y
  end, batch = 100, epochs = 2 }
  r = c:fit(exp)
  eq(r.fed, 2 * math.ceil(#train_std / 100), "two passes")
  eq(r.batches, r.fed, "all trained")
  -- max_steps stops reading
  exp = experiment { feed = batches_of(train_std, 10), batch = 10, max_steps = 7 }
  r = c:fit(exp)
  eq(r.fed, 7, "max_steps batches read")
  eq(r.batches, 7, "max_steps batches trained")
end)

test("feed-03 a bad source fails the fit with its message; the cluster goes on", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "feed03" }
  raises(function() c:fit(experiment { feed = function() error("no more coffee") end }) end,
    "no more coffee")
  raises(function() c:fit(experiment { feed = function() return 1, 2 end }) end,
    "must return two tensors")
  raises(function()
    c:fit(experiment { feed = function() return tensor.zeros(4, 64), tensor.zeros(3) end })
  end, "feed: batch 1 has x")
  raises(function() drover.experiment { loss = nn.MSE(), optimizer = optim.SGD { lr = 1 },
    model = nn.Linear(2, 1), train = { feed = 42 } } end, "train.feed must be a dataset")
  raises(function() drover.experiment { loss = nn.MSE(), optimizer = optim.SGD { lr = 1 },
    model = nn.Linear(2, 1), train = { feed = train_std, data = train_std } } end, "two sources")
  raises(function() drover.experiment { loss = nn.MSE(), optimizer = optim.SGD { lr = 1 },
    model = nn.Linear(2, 1), train = { data = train_std, feed_timeout = 3 } } end,
    "feed_timeout needs train.feed")
  -- only a dataset's batches are the coordinator's to order
  for _, src in ipairs { "external", "-", function() end } do
    raises(function() drover.experiment { loss = nn.MSE(), optimizer = optim.SGD { lr = 1 },
      model = nn.Linear(2, 1), train = { feed = src, shuffle = false } } end,
      "train.shuffle orders a dataset's batches")
  end
  drover.experiment { loss = nn.MSE(), optimizer = optim.SGD { lr = 1 }, model = nn.Linear(2, 1),
    train = { feed = train_std, shuffle = false } }
  raises(function() experiment({ feed = train_std }):fit() end, "train it with c:fit")
  raises(function() c:fit(experiment({ feed = train_std }, { mode = "sync" })) end,
    "trains asynchronously")
  -- still usable
  local r = c:fit(experiment { feed = train_std, batch = 64 })
  eq(r.batches, math.ceil(#train_std / 64), "a fit after the failures")
end)

test("feed-04 a stuck source hits feed_timeout naming the workers waiting", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feed04" }
  local n = 0
  local src = batches_of(train_std, 32)
  local exp = experiment { feed = function()
    n = n + 1
    if n > 5 then return false end -- nothing yet, ever
    return src()
  end, batch = 32, feed_timeout = 1 }
  local err = raises(function() c:fit(exp) end, "feed_timeout: no progress for 1 s")
  assert(err:find("waiting for one: worker:0 worker:1", 1, true), err)
  assert(err:find("5 batches read, 5 trained", 1, true), err)
  -- a feed that moves never times out, however long it takes in all
  n = 0
  local slow = batches_of(train_std, 100)
  exp = experiment { feed = function()
    n = n + 1
    if n % 2 == 0 then return false end
    return slow()
  end, batch = 100, feed_timeout = 1 }
  local r = c:fit(exp)
  eq(r.batches, math.ceil(#train_std / 100), "a slow feed completes")
end)

test("feed-05 SIGKILL of a worker mid-feed: its batches go to another, each trained once", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feed05" }
  local victim = node(c, "worker", 1)
  local src, n, killed = batches_of(train_std, 16), 0, false
  local exp = experiment { feed = function()
    n = n + 1
    if not killed and n >= 40 then
      -- stopped first, so that the batches it holds stay unanswered (its
      -- results already sent are counted meanwhile), then killed
      os.execute("kill -STOP " .. victim.pid)
      drover.sleep(0.2)
      if (node(c, "worker", 1).backlog or 0) == 0 then
        os.execute("kill -CONT " .. victim.pid)
        goto go_on
      end
      os.execute("kill -9 " .. victim.pid)
      killed = true
      for _ = 1, 100 do -- the loss is noticed, worker:1 restarts; the feed goes on meanwhile
        local b = node(c, "worker", 1)
        if b.pid ~= victim.pid and (b.state == "ready" or b.state == "busy") then break end
        drover.sleep(0.05)
      end
    end
    ::go_on::
    local x, y = src()
    if x == nil and n < 400 then src = batches_of(train_std, 16); x, y = src() end
    return x, y
  end, batch = 16, epochs = 1 }
  local r = c:fit(exp)
  assert(killed, "worker:1 was killed during the feed")
  local per = n - 1 -- the last call said nil
  eq(r.fed, per, "batches read")
  eq(r.batches, per, "every batch trained, once")
  eq(r.steps, per, "steps")
  local steps = 0
  for _, nd in ipairs(c:nodes()) do steps = steps + nd.steps end
  eq(steps, per, "steps counted per node")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  local events = read(dir .. "/events.log")
  assert(events:find("node lost worker:1: killed by signal 9", 1, true), "events.log: the loss")
  assert(events:find("retry %d+ fed batch") and events:find("of worker:1"), "events.log: the retry")
  assert(events:find("feed: " .. per .. " batches trained of " .. per .. " read", 1, true),
    "events.log: the count")
end)

test("feed-06 c:feed into input queues; scheduled functions read w:next_batch until should_stop", function()
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feed06" }
  local rvs = {}
  for i = 1, 2 do
    rvs[i] = c:schedule(function(w)
      local rows, labels = 0, 0
      while not w:should_stop() do
        local x, y = w:next_batch(25)
        if x then
          assert(x:shape()[1] <= 25 and x:shape()[2] == 64 and y:shape()[1] == x:shape()[1])
          rows = rows + x:shape()[1]
          labels = labels + y:sum()
        end
      end
      return rows, labels, w.name
    end)
  end
  local r = c:feed(train_std, { batch = 10, shuffle = false })
  eq(r.fed, math.ceil(#train_std / 10), "batches fed")
  eq(r.taken, r.fed, "batches taken")
  local rows, labels, names = 0, 0, {}
  for i = 1, 2 do
    local n, l, name = rvs[i]:fetch()
    rows, labels = rows + n, labels + l
    names[name] = true
  end
  eq(rows, #train_std, "every row read once")
  local want = 0
  for _, y in train_std:batch(100) do want = want + y:sum() end
  eq(labels, want, "the labels add up")
  assert(names["worker:0"] and names["worker:1"], "both workers read")
  -- w:terminate() stops the feed early: the rest is never read
  local rv = c:schedule(function(w)
    local got = 0
    while not w:should_stop() do
      local x = w:next_batch(10)
      if x then got = got + 1 end
      if got == 3 then w:terminate() end
    end
    return got
  end)
  local src = batches_of(train_std, 10)
  r = c:feed(function() return src() end, { batch = 10 })
  assert(r.fed < math.ceil(#train_std / 10), "the feed stopped early: " .. r.fed)
  assert(rv:fetch() >= 3, "the reader took its batches")
  -- w:terminate() with no feed running: nothing to stop, the worker stays
  eq(c:schedule(function(w) w:terminate() return w:should_stop() end):fetch(), true, "terminate, no feed")
  for _, n in ipairs(c:nodes()) do assert(n.state == "ready" or n.state == "busy", n.role .. " " .. n.state) end
  eq(c:schedule(function(w) return w.name end):fetch():match("^worker:") ~= nil, true, "still serving")
  raises(function() c:feed(nil) end, "a feed source")
  raises(function() c:feed(train_std, { bogus = 1 }) end, "bogus")
  raises(function() c:feed(function() return nil end, { shuffle = true }) end,
         "shuffle orders a dataset's batches")
end)
