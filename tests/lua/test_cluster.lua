-- test_cluster.lua - clusters of real processes on loopback: training,
-- variable splitting against in-process training, bad peers, failures.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read, node, sh, alive = T.read, T.node, T.sh, T.alive
local nn, optim, data = drover.nn, drover.optim, drover.data
local DROVER = os.getenv("DROVER") or arg[-1]
local RUNS = T.RUNS

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test_ds:standardize(stats)

local function experiment(extra)
  local e = {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train_std, batch = 32, epochs = 10 },
    eval = { data = test_std, every = 100 }, seed = 1, verbose = false,
  }
  for k, v in pairs(extra or {}) do e[k] = v end
  return drover.experiment(e)
end

test("cluster-01 1 ps + 2 workers + evaluator learns digits", function()
  drover.seed(1)
  local exp = experiment()
  local c <close> = drover.cluster { ps = 1, worker = 2, evaluator = 1, runs = RUNS, name = "c01" }
  local nodes = c:nodes()
  eq(#nodes, 4, "nodes")
  for _, n in ipairs(nodes) do
    eq(n.state, "ready", n.role .. " state")
    assert(alive(n.pid), n.role .. " process alive")
  end
  local r = c:fit(exp)
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. tostring(r.eval_accuracy))
  eq(r.steps, 10 * math.ceil(#train_std / 32), "steps")
  assert(r.loss and r.accuracy and r.examples_per_sec > 0, "result fields")
  local ev = c:evaluate(exp)
  near(ev.accuracy, r.eval_accuracy, 1e-9, "evaluate after fit")
  local steps = 0
  for _, n in ipairs(c:nodes()) do
    steps = steps + n.steps
    if n.role == "worker" then assert(n.steps > 0 and n.examples_per_sec > 0, "per-node rate") end
  end
  eq(steps, r.steps, "steps done by the workers")
  -- c:fit reads the settings as exp:fit does: a field changed to a wrong type is named
  local bad = experiment()
  bad.train.batch = "many"
  raises(function() c:fit(bad) end, 'experiment: train.batch must be a positive integer (got "many")')
  bad = experiment()
  bad.backup_workers = -1
  raises(function() c:fit(bad) end, "experiment: backup_workers must be a non-negative integer")
  raises(function() c:fit({}) end, "expected an experiment")
  raises(function() c:fit(experiment(), { epochs = 2^62 }) end, "cluster: fit takes one argument")
  -- a plateau schedule without evals is refused, not ignored (test_cluster_controls.lua
  -- trains with one, clip_norm and stop)
  bad = experiment()
  bad.eval = nil
  bad.optimizer = optim.SGD { lr = 0.1, schedule = optim.schedule.plateau { patience = 2 } }
  raises(function() c:fit(bad) end, "optim.schedule.plateau needs periodic evals")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  for _, n in ipairs(nodes) do assert(not alive(n.pid), n.role .. " reaped") end
  local events = read(dir .. "/events.log")
  assert(events:find("cluster ready: 4 nodes", 1, true), "events.log: ready")
  assert(events:find("shutdown complete: 0 node failures", 1, true), "events.log: shutdown")
  local mode = io.popen("stat -c %a " .. dir .. "/secret"):read("l")
  eq(mode, "600", "secret mode")
  assert(read(dir .. "/logs/worker-1.log"), "worker log")
  assert(read(dir .. "/metrics.jsonl"):find('"eval_accuracy"', 1, true), "metrics stream")
end)

test("cluster-02b FTRL's fields reach the ps: a 1 ps + 1 worker fit equals one process's", function()
  local ftrl = optim.FTRL { lr = 0.05, beta = 0.5, l1 = 0.01, l2 = 0.1 }
  drover.seed(7)
  local local_exp = experiment { eval = nil, optimizer = ftrl,
                                 train = { data = train_std, batch = 64, epochs = 1, shuffle = false } }
  local_exp:fit()
  drover.seed(7)
  local exp = experiment { eval = nil, optimizer = ftrl,
                           train = { data = train_std, batch = 64, epochs = 1, shuffle = false } }
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "c02b" }
  c:fit(exp)
  local a, b = local_exp.model:parameters(), exp.model:parameters()
  local worst, zeros = 0, 0
  local function walk(u, v)
    if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
    else worst, zeros = math.max(worst, math.abs(u - v)), zeros + (v == 0 and 1 or 0) end
  end
  for i = 1, #a do walk(a[i].value:totable(), b[i].value:totable()) end
  assert(worst < 1e-5, "the cluster's parameters differ by " .. worst)
  assert(zeros > 0, "l1 made some weights exactly 0 on the ps too")
  c:shutdown()
end)

test("cluster-02 a variable split over 2 ps trains like one process", function()
  drover.seed(7)
  local local_exp = experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 3 } }
  local_exp:fit()
  drover.seed(7)
  local exp = experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 3 } }
  local c <close> = drover.cluster { ps = 2, worker = 1, split_threshold = 1000, runs = RUNS,
                                     name = "c02" }
  c:fit(exp)
  local a, b = local_exp.model:parameters(), exp.model:parameters()
  eq(#a, #b, "parameter count")
  for i = 1, #a do
    local x, y = a[i].value:totable(), b[i].value:totable()
    local worst = 0
    local function walk(u, v)
      if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
      else worst = math.max(worst, math.abs(u - v)) end
    end
    walk(x, y)
    assert(worst < 1e-5, a[i].name .. " differs by " .. worst)
  end
  local events = read(c.run_dir .. "/events.log")
  assert(events:find("placement 1.weight: ps:0 rows 0-63, ps:1 rows 64-127", 1, true),
    "1.weight split over both ps")
  c:shutdown()
end)

test("cluster-03 bad options are named", function()
  raises(function() drover.cluster { ps = 0, worker = 1, runs = RUNS } end, "at least one ps")
  raises(function() drover.cluster { ps = 1, workers = 2, runs = RUNS } end, "workers")
  raises(function() drover.cluster { ps = 1, launcher = "yarn", runs = RUNS } end, "yarn")
  raises(function() drover.cluster { worker = { instance = 2 }, runs = RUNS } end, "instance")
  raises(function() drover.cluster { worker = { memory = "4Q" }, runs = RUNS } end, "4Q")
  raises(function() drover.cluster { worker = { cpus = -1 }, runs = RUNS } end, "cpus")
  raises(function() drover.cluster { worker = "two", runs = RUNS } end, "count or a table")
  raises(function() drover.cluster { slurm = { partition = 1 }, runs = RUNS } end, "partition")
  raises(function() drover.cluster { slurm = { queue = "x" }, runs = RUNS } end, "queue")
  raises(function() drover.cluster { files = { "a" }, runs = RUNS } end, "launchers \"ssh\", \"spark\", \"yarn\" and \"external\"")
  raises(function() drover.cluster { transport = "udp", runs = RUNS } end,
         "cluster: transport 'udp': expected auto (shared memory between processes on one host, else TCP), unix or tcp")
  raises(function() drover.cluster { transport = 2, runs = RUNS } end, "cluster: transport must be a string")
end)

test("cluster-15 per-role resources: cpus reach each node's threads; every node reports what it got",
  function()
  local c = drover.cluster { ps = { instances = 1, cpus = 2 }, worker = { instances = 2, cpus = 1,
    memory = "256M" }, runs = RUNS, name = "res" }
  local host = io.popen("hostname"):read("l")
  for _, n in ipairs(c:nodes()) do
    eq(n.cpus, n.role == "ps" and 2 or 1, n.role .. " threads")
    assert(n.affinity >= 1, "affinity reported")
    assert(n.memory > 0, "memory reported")
    eq(n.hostname, host, "hostname")
    eq(n.slurm_job, nil, "no Slurm job outside Slurm")
  end
  local tsv = read(c.run_dir .. "/nodes.tsv")
  local rows = {}
  for line in tsv:gmatch("[^\n]+") do rows[#rows + 1] = line end
  eq(#rows, 4, "a header and 3 nodes in nodes.tsv")
  assert(rows[1]:find("^node\tpid\thost\taddress\tcpus_asked\tthreads"), rows[1])
  -- worker:1, asked 1 cpu and 256 MiB: got 1 thread
  local w1 = tsv:match("\nworker:1\t[^\n]+")
  assert(w1, tsv)
  local f = {}
  for v in w1:gmatch("[^\t]+") do f[#f + 1] = v end
  eq(f[4], "127.0.0.1", "address")
  eq(f[5], "1", "cpus asked")
  eq(f[6], "1", "threads")
  eq(f[8], tostring(256 * 1024 * 1024), "memory asked")
  assert(read(c.run_dir .. "/events.log"):find("node got worker:1 on " .. host .. ": 1 threads", 1, true),
    "events.log says what worker:1 got")
  c:shutdown()
end)

-- Sends bytes to host:port with bash's /dev/tcp and closes.
local function poke(port, bytes)
  return sh(string.format("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d; printf \"%s\" >&3; sleep 0.2' 2>/dev/null",
    port, bytes))
end

test("cluster-04 random, truncated and oversized frames leave coordinator and ps running", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "c04" }
  local cport = tonumber(c.address:match(":(%d+)$"))
  local psport = c:nodes()[1].port
  assert(psport and psport > 0, "ps port")
  for _, port in ipairs { cport, psport } do
    poke(port, "hello there, this is not a frame")
    poke(port, "DRV1")                                            -- truncated header
    poke(port, "DRV1\\001\\052\\000\\000\\000\\000\\000\\000\\377\\377\\377\\177") -- 2 GiB PUSH
    poke(port, "\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377\\377")
  end
  for _, n in ipairs(c:nodes()) do eq(n.state, "ready", n.role .. " still ready") end
  local r = c:fit(experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 1 } })
  assert(r.steps > 0, "training still works")
  c:shutdown()
  local log = read(c.run_dir .. "/logs/coordinator.log")
  assert(log:find("magic", 1, true) or log:find("before authentication", 1, true),
    "the coordinator logged why it closed the bad connections")
end)

-- Starts `drover node` in the background with the given secret file and
-- waits (pumping the loop, so the coordinator answers) until it exits.
local function rogue_node(c, secret, out)
  local node = string.format("%s node --coord %s --role worker --index 0 --run-dir %s --bind 127.0.0.1 --heartbeat-ms 500 --timeout-ms 5000",
    DROVER, c.address, c.run_dir)
  os.remove(out .. ".rc")
  os.execute(string.format("(DROVER_SECRET_FILE=%s timeout 20 %s > %s 2>&1; echo $? > %s.rc) &",
    secret, node, out, out))
  for _ = 1, 200 do
    local f = io.open(out .. ".rc")
    if f then
      local rc = tonumber(f:read("l"))
      f:close()
      if rc then return rc, read(out) end
    end
    drover.sleep(0.1)
  end
  error("the rogue node did not finish")
end

test("cluster-05 a wrong secret is refused; a duplicate task is refused", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "c05" }
  local tmp = os.tmpname()
  local f = io.open(tmp, "w")
  f:write(string.rep("ab", 32) .. "\n") -- a bare secret: no node's key file
  f:close()
  os.execute("chmod 600 " .. tmp)
  local rc, out = rogue_node(c, tmp, tmp .. ".out")
  assert(rc ~= 0 and rc ~= 124, "a node with a malformed key file exits non-zero, got " .. rc)
  assert(out:find("key file '" .. tmp .. "' line 1", 1, true), "the file and line are named: " .. out)
  f = io.open(tmp, "w")
  f:write("coord " .. string.rep("ab", 32) .. "\n") -- well formed, the wrong key
  f:close()
  rc, out = rogue_node(c, tmp, tmp .. ".out")
  assert(rc ~= 0 and rc ~= 124, "a node with the wrong secret exits non-zero, got " .. rc)
  assert(out:find("wrong secret", 1, true) or out:find("authentication", 1, true),
    "the node says why: " .. out)
  assert(read(c.run_dir .. "/logs/coordinator.log"):find("authentication failed", 1, true),
    "the coordinator logged the refusal")
  -- a duplicate worker:0 with its genuine keys: tests/cli/test_keyfiles.sh
  -- (keys-04), which copies the key file before the node removes it
  os.remove(tmp)
  os.remove(tmp .. ".out")
  os.remove(tmp .. ".out.rc")
  for _, n in ipairs(c:nodes()) do eq(n.state, "ready", n.role .. " unaffected") end
  local r = c:fit(experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 1 } })
  assert(r.steps > 0, "the cluster still trains")
  c:shutdown()
end)

test("cluster-06 without restarts a killed worker fails the run, named with its log", function()
  local c = drover.cluster { ps = 1, worker = 2, max_restarts = 0, runs = RUNS, name = "c06" }
  local victim
  for _, n in ipairs(c:nodes()) do if n.role == "worker" and n.index == 1 then victim = n end end
  os.execute("kill -9 " .. victim.pid)
  local err = raises(function() c:fit(experiment()) end, "worker:1 lost")
  assert(tostring(err):find("signal 9", 1, true), "the cause is named: " .. tostring(err))
  raises(function() c:shutdown() end, "1 node failure")
end)

test("cluster-07 a silent worker (SIGSTOP) is detected and named", function()
  local c = drover.cluster { ps = 1, worker = 2, heartbeat = 0.2, heartbeat_timeout = 1.5,
                             max_restarts = 0, runs = RUNS, name = "c07" }
  local victim
  for _, n in ipairs(c:nodes()) do if n.role == "worker" and n.index == 0 then victim = n end end
  os.execute("kill -STOP " .. victim.pid)
  local t0 = drover.clock()
  local err = raises(function() c:fit(experiment { train = { data = train_std, batch = 32, epochs = 50 } }) end,
    "worker:0 lost: silent for")
  local waited = drover.clock() - t0
  assert(waited < 10, "detected within the timeout, took " .. waited .. " s")
  raises(function() c:shutdown() end, "worker:0 lost")
  assert(not alive(victim.pid), "the stopped worker was killed")
end)

-- Walks the TFRecord framing of a tfevents file (lengths only: the CRCs
-- and the protobuf inside are checked by tests/unit/test_events.c).
-- Returns the number of records and the bytes, or nil and why.
local function tfrecords(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  local pos, n = 1, 0
  while pos <= #s do
    if pos + 11 > #s then return nil, "truncated header at byte " .. pos end
    pos = pos + 12 + string.unpack("<I8", s, pos) + 4
    if pos - 1 > #s then return nil, "record " .. (n + 1) .. " runs past the end" end
    n = n + 1
  end
  return n, s
end

-- The one events file in dir/events/<who>, named as TensorFlow names them.
local function only_file(dir, who)
  local p = io.popen("ls " .. dir)
  local names = {}
  for name in p:lines() do names[#names + 1] = name end
  p:close()
  eq(#names, 1, "files in " .. dir)
  assert(names[1]:match("^events%.out%.tfevents%.%d%d%d%d%d%d%d%d%d%d%..+%." .. who .. "$"),
    "TensorBoard's file name: " .. names[1])
  return dir .. "/" .. names[1]
end

test("cluster-08 a chief writes TensorBoard summaries", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, chief = 1, worker = 1, runs = RUNS, name = "c08" }
  local r = c:fit(experiment { train = { data = train_std, batch = 64, epochs = 1 },
                               eval = { data = test_std, every = 10 } })
  local chief_steps
  for _, n in ipairs(c:nodes()) do if n.role == "chief" then chief_steps = n.steps end end
  assert(chief_steps and chief_steps > 0, "the chief trained")
  local dir = c.run_dir
  c:shutdown { grace = 5 } -- the chief's file is complete once it has exited
  -- The chief: the version record, then train/loss and train/accuracy per step it ran.
  local n, s = tfrecords(only_file(dir .. "/events/chief", "chief"))
  assert(n, s)
  eq(string.unpack("<I8", s, 1), 24, "the first record is Event{wall_time, file_version}")
  assert(s:find("brain.Event:2", 1, true), "file_version")
  eq(n, 1 + 2 * chief_steps, "chief records")
  assert(s:find("train/accuracy", 1, true) and not s:find("eval/", 1, true), "chief tags")
  -- The coordinator: every step (loss, accuracy, examples/s) and each evaluation.
  n, s = tfrecords(only_file(dir .. "/events/coordinator", "coordinator"))
  assert(n, s)
  assert(n >= 1 + 3 * r.steps + 2 * math.floor(r.steps / 10), "coordinator records: " .. n)
  for _, tag in ipairs { "train/loss", "train/examples_per_sec", "eval/loss", "eval/accuracy" } do
    assert(s:find(tag, 1, true), "coordinator tag " .. tag)
  end
end)

test("cluster-09 SIGKILL of a worker in the middle of fit: the run finishes", function()
  drover.seed(1)
  -- worker:0 is stopped (SIGSTOP) while worker:1 comes back: the fit's
  -- 2,700 steps take half a second, and on a loaded machine worker:0 alone
  -- ended them before the restart (CI once). The heartbeat timeout is past
  -- the wait so the stopped worker:0 is not lost.
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "c09",
                                     heartbeat_timeout = 60 }
  local victim, other = node(c, "worker", 1), node(c, "worker", 0)
  local killed_at, steps_at_kill
  local exp = experiment {
    train = { data = train_std, batch = 32, epochs = 60 }, eval = { data = test_std, every = 600 },
    progress = function(p)
      if killed_at then return end
      if p.step < 100 then return end
      killed_at = p.step
      steps_at_kill = node(c, "worker", 1).steps
      os.execute("kill -STOP " .. other.pid .. "; kill -9 " .. victim.pid)
      local back
      for _ = 1, 600 do
        local n = node(c, "worker", 1)
        if n.pid ~= victim.pid and (n.state == "ready" or n.state == "busy") then back = true break end
        drover.sleep(0.05)
      end
      os.execute("kill -CONT " .. other.pid)
      assert(back, "worker:1 came back within 30 s")
    end,
  }
  local r = c:fit(exp)
  assert(killed_at, "the worker was killed during the fit")
  assert(node(c, "worker", 1).steps > steps_at_kill, "the restarted worker trained in the same fit")
  eq(r.steps, 60 * math.ceil(#train_std / 32), "every planned step completed, once")
  assert(r.eval_accuracy >= 0.9, "eval accuracy " .. tostring(r.eval_accuracy))
  local back = node(c, "worker", 1)
  eq(back.state, "ready", "worker:1 is back")
  eq(back.restarts, 1, "worker:1 restarts")
  assert(back.pid ~= victim.pid and alive(back.pid), "a new worker:1 process")
  assert(not alive(victim.pid), "the old one is gone")
  local steps = 0
  for _, n in ipairs(c:nodes()) do steps = steps + n.steps end
  eq(steps, r.steps, "steps counted per node")
  -- A second fit uses the restarted worker from the start.
  local before = back.steps
  local r2 = c:fit(experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 1 } })
  eq(r2.steps, math.ceil(#train_std / 64), "second fit steps")
  assert(node(c, "worker", 1).steps > before, "worker:1 trained in the second fit")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  local events = read(dir .. "/events.log")
  assert(events:find("node lost worker:1: killed by signal 9", 1, true), "events.log: the loss")
  assert(events:find("node restart worker:1 (1 of 3)", 1, true), "events.log: the restart")
  assert(events:find("shutdown complete: 0 node failures", 1, true), "a recovered loss is no failure")
end)

test("cluster-10 restarts are bounded", function()
  drover.seed(1)
  local c = drover.cluster { ps = 1, worker = 2, max_restarts = 1, runs = RUNS, name = "c10" }
  local pids, kills = { node(c, "worker", 1).pid }, 0
  -- Enough epochs that the fit outlasts worker:1's restart (0.2 s back-off
  -- plus start-up) on a fast machine: the second kill needs the restarted
  -- worker busy. The fit ends at that kill, so the length costs nothing.
  local exp = experiment {
    train = { data = train_std, batch = 32, epochs = 1000 }, eval = nil,
    progress = function(p)
      local n = node(c, "worker", 1)
      if kills == 0 and p.step >= 50 then
        kills = 1
        os.execute("kill -9 " .. pids[1])
      elseif kills == 1 and n.state == "busy" and n.pid ~= pids[1] then
        kills = 2
        pids[2] = n.pid
        os.execute("kill -9 " .. n.pid)
      end
    end,
  }
  local err = raises(function() c:fit(exp) end, "worker:1 lost")
  eq(kills, 2, "killed twice")
  assert(tostring(err):find("restarts exhausted: 1 of 1", 1, true),
    "the message says the restarts ran out: " .. tostring(err))
  eq(node(c, "worker", 1).state, "lost", "worker:1 state")
  raises(function() c:shutdown() end, "1 node failure")
  for _, pid in ipairs(pids) do assert(not alive(pid), "worker:1 pid " .. pid .. " is gone") end
end)

test("cluster-11 a silent worker (SIGSTOP) is killed and restarted; the run finishes", function()
  drover.seed(1)
  local c <close> = drover.cluster { ps = 1, worker = 2, heartbeat = 0.2, heartbeat_timeout = 1,
                                     runs = RUNS, name = "c11" }
  local victim = node(c, "worker", 0)
  local stopped
  local r = c:fit(experiment {
    train = { data = train_std, batch = 32, epochs = 20 }, eval = nil,
    progress = function(p)
      if not stopped and p.step >= 50 then
        stopped = true
        os.execute("kill -STOP " .. victim.pid)
      end
    end,
  })
  eq(r.steps, 20 * math.ceil(#train_std / 32), "every planned step completed, once")
  local steps = 0
  for _, n in ipairs(c:nodes()) do steps = steps + n.steps end
  eq(steps, r.steps, "steps counted per node")
  for _ = 1, 100 do
    if node(c, "worker", 0).state == "ready" then break end
    drover.sleep(0.1)
  end
  local back = node(c, "worker", 0)
  eq(back.state, "ready", "worker:0 is back")
  eq(back.restarts, 1, "worker:0 restarts")
  assert(back.pid ~= victim.pid, "a new process")
  assert(not alive(victim.pid), "the stopped process was killed")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  local events = read(dir .. "/events.log")
  assert(events:find("node lost worker:0: silent for", 1, true), "events.log: silent")
  assert(events:find("node restart worker:0 (1 of 3)", 1, true), "events.log: the restart")
end)

-- Sync training: r.steps counts the train steps whose gradient the ps
-- applied (a dropped one is no step of the fit); r.global_steps the
-- updates every ps applied, ceil(W / (n - k)) for the W steps an async fit
-- would run.
local function node_steps(c, role)
  local t, all = {}, 0
  for _, n in ipairs(c:nodes()) do
    if n.role == role then t[n.index] = n.steps end
    all = all + n.steps
  end
  return t, all
end

test("cluster-12 sync, 1 ps + 2 workers, learns digits", function()
  drover.seed(1)
  local exp = experiment { mode = "sync", train = { data = train_std, batch = 32, epochs = 20 } }
  local c <close> = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "c12" }
  raises(function() experiment { mode = "sync", backup_workers = -1 } end, "backup_workers")
  raises(function() c:fit(experiment { mode = "sync", backup_workers = 2 }) end,
    "backup_workers is 2 but there are 2 trainers")
  local r = c:fit(exp)
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. tostring(r.eval_accuracy))
  local w = 20 * math.ceil(#train_std / 32)
  eq(r.global_steps, w // 2, "global steps: 2 gradients each")
  local per, all = node_steps(c, "worker")
  eq(all, r.steps, "r.steps are the workers' steps")
  -- Without backup workers every gradient is part of an update, and no
  -- worker is handed a step past the last update (test_sync_steps.lua)
  eq(r.steps, 2 * r.global_steps, "worker steps")
  eq(per[0], r.global_steps, "worker:0 in every step")
  eq(per[1], r.global_steps, "worker:1 in every step")
  local dir = c.run_dir
  c:shutdown { grace = 5 }
  local events = read(dir .. "/events.log")
  assert(events:find("fit: sync, " .. r.global_steps .. " global steps of 2 gradients", 1, true),
    "events.log: the sync plan")
  assert(events:find("sync: ps:0 applied " .. r.global_steps .. " global steps", 1, true),
    "events.log: the ps reached the last step")
  assert(read(dir .. "/logs/ps-0.log"):find("dropped 0 late gradients", 1, true),
    "ps log: nothing dropped without backup workers")
end)

test("cluster-22 the ps applies the schedule's rate of its step: like one process", function()
  local sched = optim.schedule.warmup { steps = 20, start_factor = 0.1,
    after = optim.schedule.multistep { milestones = { 30, 60 }, gamma = 0.5 } }
  local function exp()
    drover.seed(11)
    return experiment { eval = nil, optimizer = optim.SGD { lr = 0.05, momentum = 0.9, schedule = sched },
                        train = { data = train_std, batch = 64, epochs = 4 } }
  end
  local local_exp = exp()
  local_exp:fit()
  local cl = exp()
  local c <close> = drover.cluster { ps = 2, worker = 1, split_threshold = 1000, runs = RUNS,
                                     name = "c22" }
  local r = c:fit(cl)
  local a, b = local_exp.model:parameters(), cl.model:parameters()
  for i = 1, #a do
    local d = a[i].value - b[i].value
    local worst = math.max(d:max(), -d:min())
    assert(worst < 1e-5, a[i].name .. " differs by " .. worst)
  end
  -- metrics.jsonl carries the rate of each step, as the ps applied it
  local lrs = {}
  for l in io.lines(c.run_dir .. "/metrics.jsonl") do
    local step, lr = l:match('"step":(%d+).*"lr":([%d.e-]+)')
    if step then lrs[tonumber(step)] = tonumber(lr) end
  end
  eq(#lrs, r.steps, "a rate per step")
  for _, k in ipairs { 1, 10, 21, 50, 51, 81, r.steps } do
    near(lrs[k], sched:lr(0.05, k - 1), 1e-9, "step " .. k)
  end
  c:shutdown()
end)

test("cluster-13 sync with one worker is async with one worker, bit for bit", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "c13" }
  local function run(mode)
    drover.seed(5)
    local exp = experiment { mode = mode, eval = nil,
                             train = { data = train_std, batch = 64, epochs = 2 } }
    local r = c:fit(exp)
    return r, exp.model:parameters()
  end
  local ra, a = run("async")
  local rs, s = run("sync")
  eq(rs.global_steps, ra.steps, "one update per async step")
  eq(ra.global_steps, nil, "async results have no global steps")
  for i = 1, #a do
    local x, y = a[i].value:totable(), s[i].value:totable()
    local differ = 0
    local function walk(u, v)
      if type(u) == "table" then for k = 1, #u do walk(u[k], v[k]) end
      elseif u ~= v then differ = differ + 1 end
    end
    walk(x, y)
    eq(differ, 0, a[i].name .. ": values that differ")
  end
  c:shutdown()
end)

test("cluster-14 sync with a backup worker: a slowed worker's gradients are dropped", function()
  -- DROVER_FAULT reaches the nodes through the environment, so the run
  -- is a child drover; it prints what the checks below need.
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(string.format([[
local nn, optim, data = drover.nn, drover.optim, drover.data
local d = data.csv("examples/data/digits.csv", { label = -1 }):standardize()
drover.seed(3)
local exp = drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = d, batch = 32, epochs = 2 }, seed = 3, verbose = false,
  mode = "sync", backup_workers = 1,
}
local c <close> = drover.cluster { ps = 1, worker = 3, runs = %q, name = "c14" }
local r = c:fit(exp)
local s = {}
for _, n in ipairs(c:nodes()) do if n.role == "worker" then s[n.index] = n.steps end end
print(string.format("OUT %%d %%d %%d %%d %%d %%s", r.steps, r.global_steps, s[0], s[1], s[2],
  c.run_dir))
c:shutdown { grace = 5 }
]], RUNS))
  f:close()
  local p = io.popen("DROVER_FAULT=slow:worker:2:50 " .. DROVER .. " run " .. script .. " 2>&1")
  local out = p:read("a")
  p:close()
  os.remove(script)
  local steps, global, s0, s1, s2, dir = out:match("OUT (%d+) (%d+) (%d+) (%d+) (%d+) (%S+)")
  assert(steps, "the run finished: " .. out)
  steps, global = tonumber(steps), tonumber(global)
  local per = { [0] = tonumber(s0), tonumber(s1), tonumber(s2) }
  eq(global, math.ceil(2 * math.ceil(1797 / 32) / 2), "global steps: 2 gradients each")
  eq(per[0] + per[1] + per[2], steps, "r.steps are the workers' steps")
  -- A node's steps are its applied gradients; the dropped ones are in its log.
  local dropped = select(2, read(dir .. "/logs/worker-2.log"):gsub("dropped a late gradient", ""))
  assert(read(dir .. "/logs/worker-2.log"):find("DROVER_FAULT=slow:worker:2:50", 1, true),
    "the fault reached worker:2")
  assert(dropped > 0, "worker:2's late gradients were dropped")
  assert(per[2] < per[0] and per[2] < per[1],
    string.format("applied gradients: worker:2 %d, worker:0 %d, worker:1 %d", per[2], per[0], per[1]))
  -- Every update took 2 gradients, and only those count.
  eq(steps, 2 * global, "r.steps: the applied gradients")
  assert(read(dir .. "/events.log"):find("sync: %d+ train steps' gradients dropped, not counted"),
    "events.log: the dropped ones counted")
  assert(read(dir .. "/logs/ps-0.log"):find("sync training: " .. global .. " updates applied, dropped",
    1, true), "ps log: late gradients counted")
end)

-- A diverged fit stops at its first non-finite loss (issue 14: it used to
-- go on, writing nulls); what it wrote is still plain JSON.
test("cluster-16 a diverged loss stops the fit; metrics.jsonl never has a bare nan", function()
  local ds = drover.data.synthetic { n = 64, features = 4, classes = 2 }
  local exp = drover.experiment { model = nn.Sequential { nn.Linear(4, 1) }, loss = nn.MSE(),
    optimizer = drover.optim.SGD { lr = 1e30 }, train = { data = ds, batch = 16, epochs = 1 },
    eval = { data = ds, every = 4 } }
  local c = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "c15" }
  raises(function() c:fit(exp) end, "worker:0: train step failed at step 2: the loss is infinite")
  raises(function() c:shutdown() end, "node failure")
  local text = read(c.run_dir .. "/metrics.jsonl")
  assert(not text:lower():find("nan", 1, true) and not text:lower():find("inf", 1, true), text)
  for line in text:gmatch("[^\n]+") do
    assert(line:match('^{"time":[0-9.e-]+,"step":%d+,.*}$'), "line: " .. line)
  end
end)

-- ---- checkpoints and ps failover (issue 12) --------------------------------

local function step_dirs(dir)
  local p = io.popen("ls " .. dir .. "/checkpoints 2>/dev/null")
  local steps = {}
  for l in p:lines() do
    local n = l:match("^step%-(%d+)$")
    if n then steps[#steps + 1] = tonumber(n) end
  end
  p:close()
  table.sort(steps)
  return steps
end

test("cluster-17 checkpoint = {...}: each ps writes its shards, the coordinator commits; keep", function()
  drover.seed(1)
  local exp = experiment { train = { data = train_std, batch = 32, epochs = 3 },
    checkpoint = { every = 30, keep = 2 } }
  local c <close> = drover.cluster { ps = 2, worker = 2, runs = RUNS, name = "c17",
    split_threshold = 1000 }
  local r = c:fit(exp)
  local total = 3 * math.ceil(#train_std / 32)
  eq(r.steps, total, "steps")
  local steps = step_dirs(c.run_dir)
  eq(#steps, 2, "keep = 2 leaves two checkpoints")
  eq(steps[2], total, "the last one is of the last step")
  local last = c.run_dir .. "/checkpoints/step-" .. total
  local man = read(last .. "/manifest.json")
  for _, f in ipairs { "ps-0.safetensors", "ps-1.safetensors" } do
    assert(man:find('"' .. f .. '"', 1, true), "manifest names " .. f)
  end
  assert(man:find('"kind": *"cluster"') and man:find('"mode": *"async"'), man)
  local ev = read(c.run_dir .. "/events.log")
  assert(ev:find("checkpoint step 3%d: %d+ bytes from 2 ps"), "events: the first checkpoint")
  -- c:save pulls the cluster's parameters into one file; drover export
  -- merges the ps files of the last checkpoint into the same model.
  local saved, exported = c.run_dir .. "/saved.safetensors", c.run_dir .. "/exported.safetensors"
  c:save(saved)
  eq(sh(DROVER .. " export " .. c.run_dir .. " -o " .. exported .. " >/dev/null"), 0, "drover export")
  local a, b = nn.load(saved), nn.load(exported)
  local x = drover.tensor.randn(4, 64)
  local ya, yb = a:forward(x), b:forward(x)
  for i = 1, 4 do for j = 1, 10 do eq(ya[i][j], yb[i][j], "saved == exported") end end
  -- c:checkpoint() after the fit: now, of the same step (kept as it is).
  assert(c:checkpoint())
  -- PyTorch reads a ps file and the merged one (the venv `make venv` makes).
  local py = (os.getenv("VENV") or "build/venv") .. "/bin/python"
  eq(sh("test -x " .. py), 0, "the test venv " .. py .. " exists (make venv)")
  do
    local script = c.run_dir .. "/check.py"
    local f = assert(io.open(script, "w"))
    f:write(([[
import torch, safetensors.torch as st
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
m.load_state_dict(st.load_file("%s"))
p0 = st.load_file("%s/ps-0.safetensors")
assert any(k.startswith("0.") or k.startswith("2.") for k in p0), list(p0)
]]):format(exported, last))
    f:close()
    eq(sh(py .. " " .. script), 0, "PyTorch loads the exported model and reads a ps file")
  end
end)

-- Kills ps:0 with SIGKILL once the fit passed `at` steps and, with ckpt,
-- once a checkpoint is committed (on a loaded machine the first one was
-- still being written 150 steps after it began, and the kill then found
-- none to restore from).
local function fit_killing_ps(name, mode, at, ckpt)
  drover.seed(1)
  local c = drover.cluster { ps = 2, worker = 2, runs = RUNS, name = name, split_threshold = 1000 }
  local victim = node(c, "ps", 0)
  local killed
  local exp = experiment { mode = mode, train = { data = train_std, batch = 32, epochs = 10 },
    eval = { data = test_std, every = 1000 }, checkpoint = ckpt,
    progress = function(p)
      if killed or p.step < at then return end
      if ckpt and not read(c.run_dir .. "/events.log"):find("checkpoint step %d+: ") then return end
      killed = p.step
      os.execute("kill -9 " .. victim.pid)
    end }
  local r = c:fit(exp)
  assert(killed, "ps:0 was killed during the fit")
  local back = node(c, "ps", 0)
  eq(back.restarts, 1, "ps:0 restarts")
  assert(back.pid ~= victim.pid and not alive(victim.pid), "a new ps:0 process")
  return c, r, read(c.run_dir .. "/events.log")
end

test("cluster-18 SIGKILL of a ps mid-fit (async): restored from the newest checkpoint", function()
  local c <close>, r, ev = fit_killing_ps("c18", "async", 200, { every = 50 })
  eq(r.steps, 10 * math.ceil(#train_std / 32), "the exact step count")
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. tostring(r.eval_accuracy))
  local from = ev:match("restoring from step (%d+)")
  -- the newest committed before the kill (a loaded machine may still be
  -- writing the one after it when the kill comes)
  local newest
  for step in ev:sub(1, (ev:find("ps:0 lost", 1, true))):gmatch("checkpoint step (%d+): ") do newest = step end
  assert(from and from == newest, ev)
  assert(ev:find("node restoring ps:0", 1, true) and ev:find("restored from step " .. from, 1, true), ev)
  assert(not ev:find("no checkpoint yet", 1, true), "a restore from a checkpoint says only that")
end)

test("cluster-19 SIGKILL of a ps mid-fit (sync): every global step is applied once more", function()
  local c <close>, r, ev = fit_killing_ps("c19", "sync", 200, { every = 50 })
  eq(r.global_steps, math.ceil(10 * math.ceil(#train_std / 32) / 2), "global steps")
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. tostring(r.eval_accuracy))
  assert(ev:find("restoring from step %d+"), ev)
end)

test("cluster-20 SIGKILL of a ps before any checkpoint: the fit starts over, saying so", function()
  local c <close>, r, ev = fit_killing_ps("c20", "async", 100, nil)
  eq(r.steps, 10 * math.ceil(#train_std / 32), "the exact step count")
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. tostring(r.eval_accuracy))
  assert(ev:find("no checkpoint yet: the ps restart from the initial values and the fit starts over",
    1, true), ev)
end)

test("cluster-21 a full disk fails one cluster checkpoint by name; training goes on", function()
  local full = RUNS .. "/full21"
  os.execute("mkdir -p " .. full)
  if sh("[ $(id -u) -eq 0 ] && mount -t tmpfs -o size=4m tmpfs " .. full .. " 2>/dev/null") ~= 0 then
    print("SKIP cluster-21: mounting a tmpfs needs root")
    return
  end
  -- In a process of its own: a log record the full disk refused makes a
  -- run's process exit 1 ("records lost"), which is right, and would end
  -- this file's with it. The 48 KB left are room for most of the logs,
  -- not for a checkpoint (2 ps of ~58 KB).
  local script = RUNS .. "/c21.lua"
  local f = assert(io.open(script, "w"))
  f:write(string.format([[
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local full = %q
drover.seed(1)
local c <close> = drover.cluster { ps = 2, worker = 2, runs = full, name = "c21", split_threshold = 1000 }
local filled, emptied
local exp = drover.experiment { name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }, seed = 1, verbose = false,
  train = { data = train_std, batch = 32, epochs = 4 },
  eval = { data = test_ds:standardize(stats), every = 1000 }, checkpoint = { every = 30, keep = 1 },
  progress = function(p)
    if p.step >= 45 and not filled then
      filled = true
      os.execute("a=$(df -k --output=avail " .. full .. " | tail -n 1); " ..
        "dd if=/dev/zero of=" .. full .. "/filler bs=1k count=$((a - 48)) 2>/dev/null")
    elseif p.step >= 100 and filled and not emptied then
      emptied = true
      os.remove(full .. "/filler")
    end
  end }
local r = c:fit(exp)
print(string.format("OUT %%d %%s", r.steps, c.run_dir))
]], full))
  f:close()
  local p = io.popen(DROVER .. " run " .. script .. " 2>&1; echo \"STATUS $?\"")
  local out = p:read("a")
  p:close()
  local ok, err = pcall(function()
    local steps, dir = out:match("OUT (%d+) (%S+)")
    assert(steps, "the run finished: " .. out)
    eq(tonumber(steps), 4 * math.ceil(#train_std / 32), "training went on to the end")
    local status = tonumber(out:match("STATUS (%d+)"))
    assert(status == 0 or (status == 1 and out:find("records lost: ", 1, true)),
      "status 0, or 1 for log records the full disk refused: " .. out)
    local ev = read(dir .. "/events.log")
    assert(ev:find("checkpoint step %d+ failed: ps:%d: [^\n]*No space left on device[^\n]*the previous " ..
      "checkpoint is kept and training goes on"), ev)
    local steps_kept = step_dirs(dir)
    eq(#steps_kept, 1, "keep = 1, no half checkpoint left")
    eq(steps_kept[1], tonumber(steps), "later checkpoints are taken")
  end)
  os.execute("umount " .. full)
  assert(ok, err)
end)

test("cluster-30 a non-finite loss stops the fit, naming the node and the step", function()
  local d = data.synthetic { n = 64, features = 4, classes = 2 }
  for r = 1, 64 do d.x:set(r, 2, 0 / 0) end -- every batch's loss is NaN
  local exp = drover.experiment {
    name = "nan", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    model = nn.Sequential { nn.Linear(4, 2) }, train = { data = d, batch = 8, epochs = 2 },
    seed = 1, verbose = false }
  local c = drover.cluster { ps = 1, worker = 2, runs = RUNS, name = "c30" }
  local err = raises(function() c:fit(exp) end, "train step failed at step")
  assert(err:find("worker:%d: train step failed at step %d+: the loss is NaN; its gradients were not pushed"),
    "the node, the step and the cause: " .. err)
  raises(function() c:shutdown() end, "node failure")
end)

test("cluster-31 one ps death between fits is one node failure, and the ps shows lost", function()
  local c = drover.cluster { ps = 1, worker = 2, max_restarts = 0, runs = RUNS, name = "c31" }
  local exp = experiment { eval = nil, train = { data = train_std, batch = 64, epochs = 1 } }
  c:fit(exp)
  os.execute("kill -9 " .. node(c, "ps", 0).pid)
  raises(function() c:fit(exp) end, "ps:0 lost")
  eq(node(c, "ps", 0).state, "lost", "c:nodes() shows the ps lost")
  local err = raises(function() c:shutdown() end, "node failure")
  assert(err:find("1 node failure", 1, true), "one death, one failure: " .. err)
end)
