-- scale.lua - one coordinator and N simulated worker nodes (bench_scale,
-- launcher = "external") on loopback: reservation time, the coordinator's
-- CPU and RSS at steady heartbeats, an attach snapshot, no-op closures/s.
-- usage: drover run tests/bench/scale.lua N RUNS_DIR BENCH_SCALE DROVER [CLOSURES]
-- Prints "name value" lines (tests/bench/scale.sh reads them).
local N, runs, simbin, drover_bin = tonumber(arg[1]), arg[2], arg[3], arg[4]
local K = tonumber(arg[5] or "20000")
os.execute(("mkdir -p %s && %s %s %d >%s.sim.out 2>&1 &"):format(runs, simbin, runs, N, runs))

local function stat() -- utime + stime of this process, in seconds
  local f = assert(io.open("/proc/self/stat"))
  local s = f:read("a")
  f:close()
  local rest = s:match("%) (.*)")
  local fields = {}
  for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- clock ticks at 100 Hz
end
local function rss_mb()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) / 1024 end
  end
end

local t0 = drover.clock()
local c = drover.cluster { ps = 1, worker = N, launcher = "external", runs = runs, name = "scale",
                           reservation_timeout = 300, heartbeat_timeout = 60 }
print(("nodes %d"):format(N))
print(("cluster_up_seconds %.3f"):format(drover.clock() - t0))

-- steady heartbeats: every node at the cluster's interval (500 ms up to
-- 1,000 nodes, then growing with the count: 5 s at 10,000), so the window
-- spans four intervals and the measure does not hang on one burst more or less
drover.sleep(1)
local cpu0, w0 = stat(), drover.clock()
drover.sleep(math.max(5, N / 500))
print(("heartbeat_cpu_percent %.2f"):format(100 * (stat() - cpu0) / (drover.clock() - w0)))
print(("rss_mb %.1f"):format(rss_mb()))

-- an attach snapshot of every node, from another process
local out = runs .. ".attach"
os.execute(("(s=$(date +%%s%%N); %s attach %s --print >%s.txt 2>&1; e=$(date +%%s%%N); " ..
            "echo $(( (e - s) / 1000000 )) >%s.ms) &"):format(drover_bin, c.run_dir, out, out))
local t = drover.clock()
while drover.clock() - t < 60 do
  local f = io.open(out .. ".ms")
  local ms = f and f:read("n")
  if f then f:close() end
  if ms then
    local lines = 0
    for line in io.lines(out .. ".txt") do if line:match("^worker:") then lines = lines + 1 end end
    print(("attach_print_ms %d"):format(ms))
    print(("attach_nodes_shown %d"):format(lines))
    break
  end
  drover.sleep(0.05)
end

-- no-op closures over every node
t = drover.clock()
for _ = 1, K do c:schedule(function() end) end
c:join()
print(("closures_per_sec %.0f"):format(K / (drover.clock() - t)))
t = drover.clock()
c:shutdown { grace = 5, timeout = 60 }
print(("shutdown_seconds %.3f"):format(drover.clock() - t))
