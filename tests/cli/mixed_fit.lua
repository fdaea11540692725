-- mixed_fit.lua RUNS NAME LAUNCHER OPTS_FILE [BIND] - mixed placement for
-- test_spark_mixed.sh and test_yarn_mixed.sh: 1 ps on "local" beside 2
-- workers on LAUNCHER (its options table: dofile(OPTS_FILE)) learn digits;
-- then a second fit, with checkpoints, whose ps is SIGKILLed mid-fit (it is
-- restarted locally and restored). Prints what the shell checks: "node"
-- lines (pid, its parent, host, where), the accuracies, the coordinator's
-- pid, and the dashboard's snapshot (`drover attach --print`, $DROVER) in
-- RUNS/NAME.dash.
local runs, name, launcher, opts_file, bind = arg[1], arg[2], arg[3], arg[4], arg[5]
local nn, optim, data = drover.nn, drover.optim, drover.data
local node = dofile("tests/lua/t.lua").node
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local function exp(ckpt, progress)
  drover.seed(1)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train_std, batch = 32, epochs = 10 },
    eval = { data = test_ds:standardize(stats), every = 1000 }, seed = 1, verbose = false,
    checkpoint = ckpt, progress = progress,
  }
end
local function ppid(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return -1 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("%) %S+ (%d+)")) or -1
end
local me = assert(io.open("/proc/self/stat")):read("n")
io.stdout:write("coordinator pid ", me, "\n")
local spec = { launcher = launcher, ps = { instances = 1, launcher = "local" }, worker = 2,
  runs = runs, name = name, reservation_timeout = 240 }
spec[launcher] = dofile(opts_file)
if bind and bind ~= "" then spec.bind = bind end
local c = drover.cluster(spec)
io.stdout:write("run_dir ", c.run_dir, "\n")
local function show(tag)
  for _, n in ipairs(c:nodes()) do
    io.stdout:write(string.format("%s %s:%d pid %d ppid %d host %s restarts %d launcher %s where %s\n",
      tag, n.role, n.index, n.pid, ppid(n.pid), n.host, n.restarts, n.launcher, n.where))
  end
end
show("node")
local r = c:fit(exp())
io.stdout:write(string.format("eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
local victim, killed = node(c, "ps", 0)
r = c:fit(exp({ every = 30 }, function(p)
  if killed or p.step < 60 then return end
  killed = p.step
  io.stdout:write("killing ps:0 pid ", victim.pid, " at step ", p.step, "\n")
  os.execute("kill -9 " .. victim.pid)
end))
io.stdout:write(string.format("second fit: eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
show("after")
-- the dashboard's view, from another process
os.execute(string.format("%q attach %q --print >%q 2>&1 &", os.getenv("DROVER"), c.run_dir,
  runs .. "/" .. name .. ".dash"))
for _ = 1, 200 do
  local f = io.open(runs .. "/" .. name .. ".dash")
  local s = f and f:read("a") or ""
  if f then f:close() end
  if s:find("events") then break end
  drover.sleep(0.05)
end
c:shutdown() -- raises if a node failed
io.stdout:write("shut down\n")
