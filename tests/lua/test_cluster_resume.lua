-- test_cluster_resume.lua - the workers' data positions in cluster
-- checkpoints (issue 12): a ps SIGKILLed mid-fit in sync mode with one
-- worker is restored from a checkpoint, the worker rolled back to its data
-- position and Dropout generator there, and the run ends with parameters
-- bit-identical to an uninterrupted one. Real processes on loopback.
local T = dofile("tests/lua/t.lua")
local test, eq = table.unpack(T)
local read, node = T.read, T.node
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train_std = digits:standardize()

-- Trains 3 epochs, sync, one worker, a checkpoint every 20 steps; kills
-- ps:0 once the fit passed `kill_at` steps (nil: never; "end": once the ps
-- applied the last global step, so the coordinator may notice the loss
-- only as it pulls the trained values). Returns the saved model's bytes,
-- the result and events.log. shuffle: train.shuffle (nil: the default).
local function run(name, kill_at, shuffle)
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = name }
  local victim, killed = node(c, "ps", 0), nil
  local exp = drover.experiment {
    name = name, loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10) },
    train = { data = train_std, batch = 32, epochs = 3, shuffle = shuffle }, seed = 1,
    verbose = false,
    mode = "sync", checkpoint = { every = 20 },
    progress = function(p)
      if not kill_at or killed or (kill_at ~= "end" and p.step < kill_at) then return end
      local ev = read(c.run_dir .. "/events.log")
      if kill_at == "end" and not ev:find("sync: ps:0 applied", 1, true) then return end
      -- once a checkpoint is committed (a slow machine may be past kill_at)
      if not ev:find("checkpoint step %d+: ") then return end
      killed = p.step
      os.execute("kill -9 " .. victim.pid)
    end }
  print(("%s: fitting%s"):format(name, kill_at and (" (ps:0 killed at " .. kill_at .. ")") or ""))
  local r = c:fit(exp)
  if kill_at then assert(killed, "ps:0 was killed during the fit") end
  print(("%s: fit done, %d global steps; saving"):format(name, r.global_steps or -1))
  local path = c.run_dir .. "/final.safetensors"
  c:save(path)
  return read(path), r, read(c.run_dir .. "/events.log"), c.run_dir
end

-- The uninterrupted run, made once for both tests.
local ref
local function reference()
  if not ref then
    local bytes, r = run("r01a", nil)
    ref = { bytes = bytes, r = r }
  end
  return ref.bytes, ref.r
end

test("resume-01 sync, one worker: a ps SIGKILLed mid-fit and restored ends bit-identical", function()
  local want, r0 = reference()
  local got, r1, ev, dir = run("r01b", 50)
  local from = ev:match("restoring from step (%d+)")
  assert(from and tonumber(from) >= 20, ev)
  assert(not ev:find("data goes on where it is", 1, true), "the worker was rolled back: " .. ev)
  eq(r1.global_steps, r0.global_steps, "global steps")
  -- the checkpoint records the worker's position
  local man = read(dir .. "/checkpoints/step-" .. from .. "/manifest.json")
  assert(man:find('"trainers": *"1"') and man:find('"pos.0": *"' .. from .. ' %x+"'), man)
  assert(got == want, "the parameters are bit-identical to an uninterrupted run's")
end)

-- A ps killed once every global step was applied: the coordinator may
-- notice only while it pulls the trained values (or while it waits for a
-- checkpoint). Once that pull waited for ever (the reply it counted could
-- not come); now the lost ps is restored and the steps since the
-- checkpoint run again, as during the fit (tests/cli/test_resume.sh
-- resume-05 makes that moment certain with DROVER_FAULT).
test("resume-02 sync, one worker: a ps SIGKILLed as the fit ends is restored, bit-identical", function()
  local want, r0 = reference()
  local got, r1, ev = run("r02b", "end")
  assert(ev:find("restored from step %d+"), ev)
  eq(r1.global_steps, r0.global_steps, "global steps")
  assert(got == want, "the parameters are bit-identical to an uninterrupted run's")
end)


-- Unshuffled, the worker's position is a place in its rows' order: rolled
-- back there, it reads the batches the uninterrupted run read (and none
-- of them is the one a shuffled run would read at that step).
test("resume-03 sync, shuffle = false: a ps SIGKILLed mid-fit and restored ends bit-identical", function()
  local want, r0 = run("r03a", nil, false)
  assert(want ~= reference(), "unshuffled, the fit ends elsewhere than a shuffled one")
  local got, r1, ev = run("r03b", 50, false)
  local from = ev:match("restoring from step (%d+)")
  assert(from and tonumber(from) >= 20, ev)
  assert(not ev:find("data goes on where it is", 1, true), "the worker was rolled back: " .. ev)
  eq(r1.global_steps, r0.global_steps, "global steps")
  assert(got == want, "the parameters are bit-identical to an uninterrupted run's")
end)
