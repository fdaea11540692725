-- test_feed_ps.lua - feed mode when a ps is lost: the fed batches that
-- failed with it are fed again (real processes on loopback).
local T = dofile("tests/lua/t.lua")
local test, eq = table.unpack(T)
local read, node = T.read, T.node
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train = digits:split(0.8, { seed = 1 })
local train_std = train:standardize()

test("feed-ps-01 SIGKILL of the ps mid-feed: the batches it failed are fed again, none lost", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "feedps01" }
  local victim = node(c, "ps", 0)
  local f = train_std:batch(16)
  local n, killed = 0, false
  local exp = drover.experiment {
    name = "feedps", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
    seed = 1, verbose = false,
    train = { batch = 16, feed_timeout = 60, feed = function()
      n = n + 1
      if not killed and n >= 30 then
        -- stopped first, so that the workers' batches in flight wait on it
        -- and fail with it, then killed: the ps restarts (no checkpoint:
        -- from the initial values) and the feed goes on
        os.execute("kill -STOP " .. victim.pid)
        drover.sleep(0.3)
        os.execute("kill -9 " .. victim.pid)
        killed = true
      end
      return f()
    end },
  }
  local r = c:fit(exp)
  assert(killed, "ps:0 was killed during the feed")
  local read_n = n - 1 -- the last call said nil
  eq(r.fed, read_n, "batches read")
  eq(r.batches, read_n, "every batch read was trained, once")
  local back = node(c, "ps", 0)
  assert(back.pid ~= victim.pid, "a new ps:0 process")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  local ev = read(dir .. "/events.log")
  assert(ev:find("ps:0 lost: training pauses", 1, true), "events.log: the loss\n" .. ev)
  assert(ev:find("retry 1 fed batch of worker:%d"), "events.log: a fed batch retried\n" .. ev)
  assert(ev:find("feed: " .. read_n .. " batches trained of " .. read_n .. " read", 1, true),
    "events.log: the count\n" .. ev)
end)
