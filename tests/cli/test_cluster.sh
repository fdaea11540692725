# test_cluster.sh - cluster processes from outside: reservation timeouts,
# the coordinator's death, exit statuses, and that nothing is left behind.
# Node pids come from each run's events.log; every wait is bounded; only
# processes this test started are signalled, by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs

# pids of the nodes a run started ("node start worker:1 pid 123").
node_pids() { sed -n 's/.*node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$1"/events.log; }

# wait_gone SECONDS PID...: true once none of the pids is alive.
wait_gone() {
  limit=$(( $1 * 10 )); shift
  i=0
  while [ $i -lt $limit ]; do
    left=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left=1; done
    [ $left -eq 0 ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# cluster-t01: reservation timeout names the missing node and quotes its log
cat > "$TMP/hang.lua" <<LUA
local ok, err = pcall(drover.cluster, { ps = 1, worker = 2, reservation_timeout = 2,
                                        runs = "$RUNS", name = "hang" })
assert(not ok)
io.stderr:write(err, "\n")
os.exit(3)
LUA
DROVER_FAULT=hang:worker:1 timeout 30 "$DROVER" run "$TMP/hang.lua" 2>"$TMP/hang.err"
check "cluster-t01 a reservation timeout is an error" [ $? -eq 3 ]
check "cluster-t01 it names the missing node" grep -q "missing worker:1" "$TMP/hang.err"
check "cluster-t01 it quotes that node's log" grep -q "worker-1.log" "$TMP/hang.err"
check "cluster-t01 registered nodes are not named missing" sh -c "! grep -q 'missing.*ps:0' '$TMP/hang.err'"
dir=$(ls -d "$RUNS"/hang-* | head -n 1)
pids=$(node_pids "$dir")
check "cluster-t01 every node it started is gone" wait_gone 5 $pids

# cluster-t02: SIGKILL of the coordinator leaves no node 10 s later
cat > "$TMP/sleep.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 2, evaluator = 1, runs = "$RUNS", name = "orphans" }
io.stdout:write("ready\n"); io.stdout:flush()
-- Busy, without pumping and without a child process: killed long before 60 s.
local t = os.clock()
while os.clock() - t < 60 do end
LUA
"$DROVER" run "$TMP/sleep.lua" >"$TMP/sleep.out" 2>&1 &
coord=$!
i=0; while [ $i -lt 300 ] && ! grep -q ready "$TMP/sleep.out"; do sleep 0.1; i=$((i + 1)); done
check "cluster-t02 the cluster came up" grep -q ready "$TMP/sleep.out"
dir=$(ls -d "$RUNS"/orphans-* | head -n 1)
pids=$(node_pids "$dir")
check "cluster-t02 four nodes started" [ "$(echo $pids | wc -w)" -eq 4 ]
kill -9 $coord
wait $coord 2>/dev/null
check "cluster-t02 no node outlives the coordinator by 10 s" wait_gone 10 $pids
for p in $pids; do kill -9 "$p" 2>/dev/null; done

# cluster-t03: a script that never shuts down a failed cluster exits non-zero
cat > "$TMP/fail.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "fail" }
for _, n in ipairs(c:nodes()) do
  if n.role == "worker" and n.index == 0 then os.execute("kill -9 " .. n.pid) end
end
os.execute("sleep 1")
-- no c:shutdown(): the finalizer finds the failure
LUA
timeout 60 "$DROVER" run "$TMP/fail.lua" >"$TMP/fail.out" 2>&1
rc=$?
check "cluster-t03 exit status is non-zero" [ $rc -ne 0 ] && [ $rc -ne 124 ]
check "cluster-t03 the failed node is named" grep -q "worker:0" "$TMP/fail.out"

# cluster-t04: the demo example runs and leaves nothing behind
( cd "$TMP" && timeout 120 "$DROVER" run "$OLDPWD/examples/cluster_digits.lua" >"$TMP/demo.out" 2>&1 )
check "cluster-t04 examples/cluster_digits.lua succeeds" [ $? -eq 0 ]
check "cluster-t04 it reports test accuracy" grep -q "test loss" "$TMP/demo.out"
dir=$(ls -d "$TMP"/runs/cluster-digits-* | head -n 1)
check "cluster-t04 its run directory exists" [ -d "$dir" ]
pids=$(node_pids "$dir")
check "cluster-t04 every node was reaped" wait_gone 2 $pids

# cluster-t05: the ClusterCoordinator example trains through scheduled closures
( cd "$TMP" && timeout 120 "$DROVER" run "$OLDPWD/examples/coordinator.lua" >"$TMP/coord.out" 2>&1 )
check "cluster-t05 examples/coordinator.lua succeeds" [ $? -eq 0 ]
check "cluster-t05 both workers ran closures" grep -q "worker:0 ran [1-9].*worker:1 ran [1-9]" "$TMP/coord.out"
check "cluster-t05 it reports test accuracy" grep -q "test loss" "$TMP/coord.out"
dir=$(ls -d "$TMP"/runs/coordinator-* | head -n 1)
pids=$(node_pids "$dir")
check "cluster-t05 every node was reaped" wait_gone 2 $pids
