-- loss.lua - how soon a small cluster finds a lost worker (run by
-- tests/bench/run.sh): 1 ps + 2 workers, local, idle; worker:1 is stopped
-- (SIGSTOP: a hung process, found by its silent heartbeats) or killed
-- (SIGKILL: found by its closed connection), three times each on one
-- cluster, each time waiting until the restarted worker is ready again.
-- Prints "loss_hung_seconds MEDIAN MIN MAX" and "loss_killed_seconds ...":
-- the time from the signal to c:nodes() showing the worker lost (or
-- already restarting).
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local c = drover.cluster { ps = 1, worker = 2, runs = runs, name = "loss", max_restarts = 10 }

local function worker1()
  for _, n in ipairs(c:nodes()) do if n.role == "worker" and n.index == 1 then return n end end
end
local function wait(pred, limit)
  local t0 = drover.clock()
  while drover.clock() - t0 < limit do
    if pred(worker1()) then return drover.clock() - t0 end
    drover.sleep(0.01)
  end
  error("worker:1 did not get there in " .. limit .. " s")
end
local function gone(n) return n.state ~= "ready" and n.state ~= "busy" and n.state ~= "starting" end
local function ready(n) return n.state == "ready" end

local function measure(sig)
  local v = {}
  for i = 1, 3 do
    wait(ready, 60)
    local pid = worker1().pid
    local t0 = drover.clock()
    os.execute(("kill -%s %d"):format(sig, pid))
    wait(gone, 30)
    v[i] = drover.clock() - t0
    if sig == "STOP" then os.execute(("kill -KILL %d 2>/dev/null"):format(pid)) end
  end
  table.sort(v)
  return v
end

for _, k in ipairs { { "hung", "STOP" }, { "killed", "KILL" } } do
  local v = measure(k[2])
  print(("loss_%s_seconds %.3f %.3f %.3f"):format(k[1], v[2], v[1], v[3]))
end
wait(ready, 60)
c:shutdown()
