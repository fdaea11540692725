-- feed_train.lua - feed-mode runs for test_feed.sh. arg[1] is the case:
--   slow SECONDS   1 ps + 2 workers fed the digits for SECONDS (epochs
--                  repeat); prints each worker's batches and the backlog
--                  seen (run with DROVER_FAULT=slow:worker:1:MS)
--   stuck          1 ps + 1 worker, feed_timeout = 1 (run with a slow
--                  worker:0: the timeout names it)
--   stream PATH    the feed is data.stream(PATH) (CSV, label last); prints
--                  the batches trained and the rows read
--   external N K [verbose]  feed = "external", feeders = K: prints the run
--                  directory, trains on what feeders send (tests/cli/feeder.py), N fits;
--                  each one's result with its accuracy; verbose: progress lines too
local nn, optim, data = drover.nn, drover.optim, drover.data
local case = arg[1]
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
local runs = os.getenv("RUNS") or "runs"
local function model(inputs)
  return nn.Sequential { nn.Linear(inputs, 32), nn.ReLU(), nn.Linear(32, 10) }
end
local function exp(train)
  return drover.experiment { name = "feed-" .. case, loss = nn.CrossEntropy(),
    optimizer = optim.Adam { lr = 1e-3 }, model = model(64), train = train, seed = 1,
    verbose = arg[4] == "verbose" }
end

if case == "slow" then
  local seconds = tonumber(arg[2]) or 5
  local d = data.csv(here .. "/../../examples/data/digits.csv", { label = -1 }):standardize()
  local c = drover.cluster { ps = 1, worker = 2, name = "feed-slow", runs = runs }
  local t0 = drover.clock()
  local it = d:batch(16)
  local most = 0
  local r = c:fit(exp { batch = 16, feed = function()
    for _, n in ipairs(c:nodes()) do most = math.max(most, n.backlog or 0) end
    if drover.clock() - t0 > seconds then return nil end
    local x, y = it()
    if x == nil then it = d:batch(16); x, y = it() end
    return x, y
  end })
  local w = {}
  for _, n in ipairs(c:nodes()) do if n.role == "worker" then w[n.index] = n.steps end end
  print(string.format("FED %d TRAINED %d W0 %d W1 %d MOST %d", r.fed, r.batches, w[0], w[1], most))
  c:shutdown()
elseif case == "stuck" then
  local d = data.csv(here .. "/../../examples/data/digits.csv", { label = -1 }):standardize()
  local c = drover.cluster { ps = 1, worker = 1, name = "feed-stuck", runs = runs }
  local ok, err = pcall(c.fit, c, exp { feed = d, batch = 32, feed_timeout = 1 })
  print("STUCK " .. tostring(ok) .. " " .. tostring(err))
  c:shutdown()
elseif case == "external" then
  local c = drover.cluster { ps = 1, worker = 2, name = "feed-ext", runs = runs }
  print("RUN " .. c.run_dir)
  io.stdout:flush()
  for i = 1, tonumber(arg[2]) or 1 do
    local ok, r = pcall(c.fit, c, exp { feed = "external", batch = 10, feed_timeout = 20,
      feeders = tonumber(arg[3]) })
    if ok then print(string.format("EXTERNAL %d fed %d trained acc %s", r.fed, r.batches, r.accuracy))
    else print("EXTERNAL FAILED " .. tostring(r)) end
    io.stdout:flush()
  end
  c:shutdown()
elseif case == "stream" then
  local s = data.stream(arg[2], { label = -1 })
  local c = drover.cluster { ps = 1, worker = 2, name = "feed-stream", runs = runs }
  local ok, r = pcall(c.fit, c, exp { feed = s, batch = 10, feed_timeout = tonumber(arg[3]) })
  if ok then
    print(string.format("STREAM %d batches %d rows", r.batches, s:rows()))
  else
    print("STREAM FAILED " .. tostring(r))
  end
  c:shutdown()
end
