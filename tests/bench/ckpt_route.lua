-- ckpt_route.lua - one way of a cluster checkpoint (issue 25), run by
-- tests/bench/run.sh in alternating pairs against the others:
--   local  the ps writes the run directory itself (the reference)
--   coord  the same ps's file through the coordinator (run.sh sets
--          DROVER_CKPT_VIA_COORD=1), which writes and commits it
--   hdfs   the ps streams its file to HDFS (checkpoint.dir = arg[3]) and
--          the coordinator commits the manifest there by RENAME
-- A 1 ps cluster holding a 12.6M-parameter model with Adam (151 MB file);
-- a fit of two steps (the checkpoint policy's), one warm-up checkpoint,
-- then `n` timed c:checkpoint() calls, each into an emptied directory. Prints "ckpt MODE MB_PER_S SECONDS MB" per call.
-- Usage: drover run ckpt_route.lua MODE N [HDFS_URL]
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local drover_bin = os.getenv("DROVER_BIN") or "./drover"
local mode, n, url = arg[1], tonumber(arg[2]) or 3, arg[3]

drover.seed(1)
local c <close> = drover.cluster { ps = 1, worker = 1, runs = runs, name = "ckroute" }
local ck = { every = 1000000, keep = 0 }
if mode == "hdfs" then ck.dir = url end
local exp = drover.experiment { name = "ckroute", verbose = false,
  model = nn.Sequential { nn.Linear(2048, 2048), nn.Linear(2048, 2048), nn.Linear(2048, 2048),
    nn.Linear(2048, 2) },
  loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 }, checkpoint = ck,
  train = { data = data.synthetic { n = 64, features = 2048, classes = 2, seed = 1 }, batch = 8,
    max_steps = 2 } }
c:fit(exp) -- two steps: c:checkpoint() then goes where this fit's checkpoint.dir says
local f = io.open(c.run_dir .. "/checkpoint-dir")
local dir = f and f:read("l") or (c.run_dir .. "/checkpoints")
if f then f:close() end
local function clear()
  if mode == "hdfs" then os.execute(drover_bin .. " hdfs rm -r " .. dir .. " >/dev/null 2>&1")
  else os.execute("rm -rf " .. dir) end
end
-- The size of the one checkpoint's file, as its manifest says.
local function bytes()
  local man = io.popen(mode == "hdfs" and string.format("%s hdfs cat $(%s hdfs ls %s | "
    .. "sed -n 's|.* \\(step-[0-9]*\\)/$|%s/\\1/manifest.json|p')", drover_bin, drover_bin, dir, dir)
    or ("cat " .. dir .. "/step-*/manifest.json"))
  local text = man:read("a")
  man:close()
  return tonumber(text:match('"size": (%d+)')) or 0
end
clear()
assert(c:checkpoint()) -- the ps's snapshot buffers exist from then on
for _ = 1, n do
  clear()
  local t0 = drover.clock()
  assert(c:checkpoint())
  local s = drover.clock() - t0
  local b = bytes()
  print(string.format("ckpt %s %.1f %.3f %.0f", mode, b / s / 1e6, s, b / 1e6))
end
clear()
