-- checkpoint.lua - cluster checkpoints (issue 12), run by tests/bench/run.sh.
-- Each figure is measured in `pairs` alternating pairs against a reference
-- measured in the same run; one line per pair:
--   write  A B C a checkpoint of a 1 ps cluster holding a 12.6M-parameter
--                model with Adam (values and two slots, 151 MB), in MB/s:
--                A the ps's write (its thread: the file, hashed meanwhile,
--                fsync, rename), B the whole checkpoint from c:checkpoint()
--                to the committed manifest (the copy, the write, the
--                commit); C the same bytes written by `dd ... conv=fsync`
--                (one sequential write and an fsync) into the same directory
--   train  A B   samples/s of 1 ps + 2 workers training the MLP
--                784-256-256-10 (async, batch 128) with a checkpoint every
--                2 s; B: the same without checkpoints
--   pause  MS    the ps's copy of its shards per checkpoint (its log says),
--                for the training runs above and for the 151 MB model
--   failover S   from the SIGKILL of ps:0 to the first step completed after
--                it was restored from the newest checkpoint (of which 0.2 s
--                is the restart back-off)
-- Usage: drover run checkpoint.lua SECONDS PAIRS
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local seconds = tonumber(arg[1]) or 6
local pairs_n = tonumber(arg[2]) or 3

local function size(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n
end

-- The "training paused X ms" figures in a ps log, from line `from` on.
local function pauses(log)
  local out, f = {}, io.open(log)
  if not f then return out end
  for l in f:lines() do
    local ms = l:match("training paused ([%d.]+) ms")
    if ms then out[#out + 1] = tonumber(ms) end
  end
  f:close()
  return out
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  if #s == 0 then return 0 end
  return #s % 2 == 1 and s[(#s + 1) / 2] or (s[#s / 2] + s[#s / 2 + 1]) / 2
end

-- ---- write throughput -------------------------------------------------
-- The "written in X ms" figures of a ps log (its write thread: the file,
-- hashed meanwhile, fsynced and renamed).
local function writes(log)
  local out, f = {}, io.open(log)
  if not f then return out end
  for l in f:lines() do
    local ms = l:match("written in ([%d.]+) ms")
    if ms then out[#out + 1] = tonumber(ms) end
  end
  f:close()
  return out
end
do
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = runs, name = "ckbench" }
  local exp = drover.experiment { name = "ckbench", verbose = false,
    model = nn.Sequential { nn.Linear(2048, 2048), nn.Linear(2048, 2048), nn.Linear(2048, 2048) },
    loss = nn.MSE(), optimizer = optim.Adam { lr = 1e-3 },
    train = { data = data.synthetic { n = 64, features = 2048, classes = 2, seed = 1 }, batch = 8 } }
  c:setup(exp)
  local dir, log = c.run_dir .. "/checkpoints", c.run_dir .. "/logs/ps-0.log"
  os.execute("rm -rf " .. dir)
  assert(c:checkpoint()) -- a first one: the ps's snapshot buffers exist from then on
  for _ = 1, pairs_n do
    os.execute("rm -rf " .. dir)
    local t0 = drover.clock()
    assert(c:checkpoint())
    local ck = drover.clock() - t0
    local bytes = size(dir .. "/step-0/ps-0.safetensors")
    local w = writes(log)
    local thread = w[#w] / 1e3
    local ref = c.run_dir .. "/seq.bin"
    t0 = drover.clock()
    os.execute(string.format("dd if=/dev/zero of=%s bs=1M count=%d conv=fsync 2>/dev/null", ref,
      math.floor(bytes / 1048576 + 0.5)))
    local seq = drover.clock() - t0
    os.remove(ref)
    print(string.format("write %.1f %.1f %.1f (MB/s: the ps's write, the whole checkpoint, dd; "
      .. "%.0f MB in %.3f s, %.3f s, %.3f s)", bytes / thread / 1e6, bytes / ck / 1e6,
      bytes / seq / 1e6, bytes / 1e6, thread, ck, seq))
  end
  local p = pauses(log)
  table.remove(p, 1) -- the first copy went into fresh pages
  print(string.format("pause_big %.1f (median ms to copy %.0f MB, of %d)", median(p),
    size(dir .. "/step-0/ps-0.safetensors") / 1e6, #p))
  os.execute("rm -rf " .. dir)
end

-- ---- training with and without checkpoints ----------------------------
local ds = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
local function mlp_exp(ckpt, steps, progress)
  return drover.experiment { name = "ckbench", verbose = false,
    model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = { data = ds, batch = 128, epochs = 1000, max_steps = steps }, checkpoint = ckpt,
    progress = progress }
end
do
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "ckbench" }
  local function rate(ckpt, steps)
    local r = c:fit(mlp_exp(ckpt, steps))
    return r.examples_per_sec
  end
  local warm = rate(nil, 300)
  local steps = math.max(600, math.floor(warm / 128 * seconds))
  local log = c.run_dir .. "/logs/ps-0.log"
  -- The order alternates (with first, then without first): a fixed order
  -- would put any drift between the two fits of a pair on one side.
  for i = 1, pairs_n do
    local with, without
    if i % 2 == 1 then
      with = rate({ every_seconds = 2, keep = 2 }, steps)
      without = rate(nil, steps)
    else
      without = rate(nil, steps)
      with = rate({ every_seconds = 2, keep = 2 }, steps)
    end
    print(string.format("train %.0f %.0f", with, without))
  end
  local p = pauses(log)
  print(string.format("pause_mlp %.2f (median ms to copy the MLP's shards, of %d checkpoints)", median(p), #p))
end

-- ---- ps failover ------------------------------------------------------
-- A fresh cluster each time: a node's restart back-off doubles with each
-- of its restarts (0.2 s first), which would add up across the pairs.
for _ = 1, pairs_n do
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "ckbench" }
  local function node(role, index)
    for _, n in ipairs(c:nodes()) do if n.role == role and n.index == index then return n end end
  end
  local killed, t_kill, restored_at, t_back
  c:fit(mlp_exp({ every = 50, keep = 1 }, 400, function(p)
    if t_back then return end
    if not killed and p.step >= 120 then
      killed = node("ps", 0).pid
      t_kill = drover.clock()
      os.execute("kill -9 " .. killed)
    elseif killed and not restored_at then
      local n = node("ps", 0)
      if n.pid ~= killed and n.state ~= "restoring" and n.state ~= "restarting" then restored_at = p.step end
    elseif restored_at and p.step > restored_at then
      t_back = drover.clock()
    end
  end))
  print(string.format("failover %.3f", t_back and t_back - t_kill or -1))
end
