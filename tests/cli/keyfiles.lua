-- keyfiles.lua SPEC RUNS NAME DIR: 1 ps + 2 workers with the cluster options
-- the Lua file SPEC returns; prints, once every node registered, each
-- node's key file (DROVER_SECRET_FILE in its environment, looked up in its
-- own mount namespace: /proc/PID/root) and whether it is still there, and
-- what the run's keys/ holds. Then writes DIR/victim ("NODE_PID PARENT_PID
-- NODE_CWD") and waits (60 s at most) for DIR/killed, written by the test
-- once it SIGKILLed worker:1 (the node or its parent, by pid), waits for
-- worker:1 to be back (90 s at most), prints the same of the new process
-- and each node's working directory, and shuts down.
local spec = dofile(arg[1])
spec.ps, spec.worker, spec.runs, spec.name = 1, 2, arg[2], arg[3]
local dir = arg[4]
local c = drover.cluster(spec)
local function node(role, index)
  for _, n in ipairs(c:nodes()) do if n.role == role and n.index == index then return n end end
end
local function sh(cmd)
  local p = io.popen(cmd)
  local s = p:read("a")
  p:close()
  return (s:gsub("\n$", ""))
end
local function report(tag, n)
  local f = io.open("/proc/" .. n.pid .. "/environ", "rb")
  local env = f and f:read("a") or ""
  if f then f:close() end
  local path = ("\0" .. env):match("%zDROVER_SECRET_FILE=([^%z]*)")
  local st = "unknown"
  if path then
    local g = io.open("/proc/" .. n.pid .. "/root" .. path, "rb")
    st = g and "present" or "gone"
    if g then g:close() end
  end
  print(tag, n.role .. ":" .. n.index, n.pid, st, path or "-")
end
local function keysdir(tag)
  print(tag, "keys [" .. sh("ls -A '" .. c.run_dir .. "/keys' | tr '\\n' ' '") .. "]")
end
print("run_dir", c.run_dir)
for _, n in ipairs(c:nodes()) do report("up", n) end
keysdir("up")
io.stdout:flush()
local v = node("worker", 1)
local parent = sh("awk '{ print $4 }' /proc/" .. v.pid .. "/stat")
local f = io.open(dir .. "/victim.tmp", "w")
f:write(v.pid, " ", parent, " ", sh("readlink /proc/" .. v.pid .. "/cwd"), "\n")
f:close()
os.rename(dir .. "/victim.tmp", dir .. "/victim")
local t0 = drover.clock()
while drover.clock() - t0 < 60 and not io.open(dir .. "/killed") do drover.sleep(0.1) end
local back
t0 = drover.clock()
while drover.clock() - t0 < 90 and not back do
  local n = node("worker", 1)
  if n.pid ~= v.pid and n.state == "ready" then back = n end
  drover.sleep(0.1)
end
assert(back, "worker:1 is not back within 90 s")
print("back", back.pid, "restarts", back.restarts)
report("again", back)
keysdir("again")
for _, n in ipairs(c:nodes()) do print("cwd", n.role .. ":" .. n.index, sh("readlink /proc/" .. n.pid .. "/cwd")) end
io.stdout:flush()
c:shutdown()
print("finished")
