# test_external.sh - launcher = "external" with simulated nodes
# (bench_scale: many authenticated nodes speaking the real protocol from
# one process): 200 workers and a ps register, no-op closures run across
# them, `drover attach --print` lists every one, a simulated node whose
# process is SIGKILLed is seen lost and the closures go on without it,
# the run ends with every process it started ended. Started again, the
# node registers again and takes closures; lost again, the shutdown does
# not wait for a process that is not ours. The scale bench
# (tests/bench/scale.sh) measures the same path at 1,000 and 10,000 nodes.
# Only processes this test started are signalled, by pid.
. tests/cli/lib.sh
SIM=${BENCH_SCALE:-$(dirname "$DROVER")/bench_scale}
[ -x "$SIM" ] || SIM=$PWD/build/bench_scale
N=200
RUNS=$TMP/runs
mkdir -p "$RUNS"
if ! [ -x "$SIM" ]; then
  fail "external-01 bench_scale is built (make unit builds it)" "no $SIM"
  exit 0
fi
# worker:0..198 and ps:0 in one process, worker:199 alone in another (the
# one killed); both wait for the run's coordinator file.
"$SIM" "$RUNS" $N 500 0 $((N - 1)) >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!
"$SIM" "$RUNS" $N 500 $((N - 1)) $N >"$TMP/sim1.out" 2>"$TMP/sim1.err" &
SIM1_PID=$!

cat >"$TMP/ext.lua" <<LUA
local N = $N
local c = drover.cluster { ps = 1, worker = N, launcher = "external", runs = "$RUNS",
                           name = "ext", reservation_timeout = 60 }
local node = dofile("$PWD/tests/lua/t.lua").node
local ready = 0
for _, n in ipairs(c:nodes()) do if n.state == "ready" then ready = ready + 1 end end
print("ready " .. ready)

-- no-op closures over every node (each answers CALL with an empty result)
local function closures(k)
  local rvs, on = {}, {}
  for i = 1, k do rvs[i] = c:schedule(function() end) end
  c:join()
  local nodes = 0
  for i = 1, k do
    local where = rvs[i]:info().node
    if where and not on[where] then on[where] = true nodes = nodes + 1 end
  end
  return nodes, on
end
local nodes = closures(2000)
print("closures ran on " .. nodes .. " nodes")

-- an attach snapshot of every node, from another process (in the
-- background: the coordinator serves it while this script sleeps)
local out = "$TMP/attach"
os.execute(("(%s attach %s --print >%s.txt 2>&1; echo \$? >%s.rc) &"):format("$DROVER", c.run_dir, out, out))
local t0 = drover.clock()
while drover.clock() - t0 < 30 do
  local f = io.open(out .. ".rc")
  if f then f:close() break end
  drover.sleep(0.05)
end

-- worker:199's process is SIGKILLed: the node is lost, and (its process
-- being someone else's) waited for to register again
local last = "worker:" .. (N - 1)
-- the state of worker:199 once ok(node) holds, or after 30 s
local function wait_state(ok)
  local t, n = drover.clock()
  repeat
    n = node(c, "worker", N - 1)
    if ok(n) then break end
    drover.sleep(0.05)
  until drover.clock() - t > 30
  return n.state
end
local function gone(n) return n.state ~= "ready" end
local function back(n) return n.state == "ready" and n.restarts >= 1 end
os.execute("kill -9 $SIM1_PID")
print(last .. " after the kill " .. wait_state(gone))
local after, on = closures(500)
print("after the loss closures ran on " .. after .. " nodes" .. (on[last] and ", the lost one among them" or ""))
-- whoever runs it starts it again: it registers and takes closures
os.execute(("%s %s %d 500 %d %d >$TMP/sim2.out 2>&1 & echo \$! >$TMP/sim2.pid"):format("$SIM", "$RUNS", N, N - 1, N))
print(last .. " started again " .. wait_state(back))
after, on = closures(2000)
print("then closures ran on " .. after .. " nodes" .. (on[last] and ", " .. last .. " among them" or ""))
-- lost again, and the run shuts down at once: nothing of ours to wait for
local f = io.open("$TMP/sim2.pid")
os.execute("kill -9 " .. f:read("n"))
f:close()
print(last .. " after the second kill " .. wait_state(gone))
local ok, err = pcall(c.shutdown, c, { grace = 5, timeout = 120 })
print("shutdown " .. tostring(ok) .. " " .. tostring(err))
LUA
timeout 90 "$DROVER" run "$TMP/ext.lua" >"$TMP/out" 2>"$TMP/err"
rc=$?
# The simulator ends once the coordinator has closed every connection.
wait_for 20 sh -c "! kill -0 $SIM_PID 2>/dev/null"
sim_gone=$?
SIM2_PID=$(cat "$TMP/sim2.pid" 2>/dev/null)
kill -9 "$SIM_PID" "$SIM1_PID" $SIM2_PID 2>/dev/null
wait "$SIM_PID" "$SIM1_PID" 2>/dev/null
dir=$(ls -d "$RUNS"/ext-* 2>/dev/null | head -n 1)
check "external-01 the run ends (exit 0): $rc" [ $rc -eq 0 ]
check "external-01 every simulated node registered" grep -q "^ready $((N + 1))$" "$TMP/out"
check "external-02 no-op closures ran across the nodes" grep -Eq "^closures ran on ([2-9]|[1-9][0-9]+) nodes" "$TMP/out"
check "external-03 attach --print exits 0" grep -qx 0 "$TMP/attach.rc"
check "external-03 the snapshot lists every worker" \
  sh -c "[ \$(grep -c '^worker:' '$TMP/attach.txt') -eq $N ]"
check "external-03 and the ps" grep -q '^ps:0' "$TMP/attach.txt"
check "external-04 the SIGKILLed simulated node is seen lost" grep -q "^worker:$((N - 1)) after the kill restarting$" "$TMP/out"
check "external-04 events.log says it was lost" grep -q "node lost worker:$((N - 1)): its connection closed" "$dir/events.log"
check "external-04 closures go on without it" grep -Eq '^after the loss closures ran on [0-9]+ nodes$' "$TMP/out"
check "external-04 started again, it registers" grep -q "^worker:$((N - 1)) started again ready$" "$TMP/out"
check "external-04 and takes closures again" grep -q "^then closures ran on .*, worker:$((N - 1)) among them$" "$TMP/out"
check "external-05 lost again, the shutdown waits for no process (within the run's bound)" \
  grep -q "^shutdown true nil$" "$TMP/out"
check "external-05 the simulator ended when the run did" [ $sim_gone -eq 0 ]
check "external-05 it registered every node it held" grep -q "^registered $N nodes" "$TMP/sim.out"
grep -q "^shutdown" "$TMP/out" && [ $rc -eq 0 ] || { tail -5 "$TMP/err"; cat "$TMP/out"; cat "$TMP/sim.err" "$TMP/sim1.err" "$TMP/sim2.out"; }

# external-06: past 500 nodes heartbeats slow down with the count (1 ms a
# node at the default 0.5 s): 600 workers and a ps are told 0.601 s, and
# events.log says so with the silence limit (the 5 s: over 4 intervals).
M=600
RUNS6=$TMP/runs6
mkdir -p "$RUNS6"
"$SIM" "$RUNS6" $M 500 >"$TMP/sim6.out" 2>"$TMP/sim6.err" &
SIM6_PID=$!
kill_at_exit $SIM6_PID
cat >"$TMP/ext6.lua" <<LUA
local c = drover.cluster { ps = 1, worker = $M, launcher = "external", runs = "$RUNS6",
                           name = "ext6", reservation_timeout = 60 }
drover.sleep(0.5)
print("dir " .. c.run_dir)
c:shutdown { grace = 5, timeout = 60 }
LUA
timeout 90 "$DROVER" run "$TMP/ext6.lua" >"$TMP/out6" 2>"$TMP/err6"
rc6=$?
wait_for 20 sh -c "! kill -0 $SIM6_PID 2>/dev/null"
dir6=$(sed -n 's/^dir //p' "$TMP/out6")
check "external-06 the run ends (exit 0): $rc6" [ $rc6 -eq 0 ]
check "external-06 every node is told the grown interval" grep -qx "heartbeat interval 601 ms" "$TMP/sim6.out"
check "external-06 events.log says it" \
  grep -q "heartbeats every 0.6 s for 601 nodes (silence limit 5 s)" "$dir6/events.log"
