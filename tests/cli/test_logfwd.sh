# test_logfwd.sh - `drover node --log-forward`: a node's log records reach
# its log in the run directory through the coordinator (LOG), although its
# own stdout and stderr go nowhere. The spark launcher's nodes run so; here
# local nodes, through a $DROVER_LAUNCH_EXE wrapper that adds the flag and
# throws the node's output away, so it runs in seconds (under ASan too).
. tests/cli/lib.sh
RUNS=$TMP/runs
cat > "$TMP/node.sh" <<SH
#!/bin/sh
exec "$DROVER" "\$@" --log-forward >/dev/null 2>&1
SH
chmod +x "$TMP/node.sh"
cat > "$TMP/fwd.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "fwd" }
io.stdout:write("run_dir ", c.run_dir, "\n")
-- a record logged by the worker while it runs: a closure's error
local ok = pcall(function() c:schedule(function() error("boom from the worker") end):fetch() end)
io.stdout:write("closure failed ", tostring(not ok), "\n")
c:shutdown()
LUA
DROVER_LAUNCH_EXE="$TMP/node.sh" timeout 60 "$DROVER" run "$TMP/fwd.lua" >"$TMP/fwd.out" 2>&1
check "logfwd-01 a cluster whose nodes forward their logs runs" [ $? -eq 0 ]
dir=$(sed -n 's/^run_dir //p' "$TMP/fwd.out")
for n in ps-0 worker-0; do
  r=$(echo "$n" | tr - :)
  check "logfwd-01 $n's records reach its log through the coordinator" \
    grep -q "^[0-9T:.-]*Z $r I registered\$" "$dir/logs/$n.log"
  check "logfwd-01 $n's log has its records up to the shutdown" \
    grep -q "^[0-9T:.-]*Z $r I shutdown requested" "$dir/logs/$n.log"
done
check "logfwd-01 records from before REGISTERED were kept and sent after it" \
  grep -q "^[0-9T:.-]*Z worker:0 I connected to the coordinator at " "$dir/logs/worker-0.log"
check "logfwd-01 the worker's record of the failed closure is there" \
  grep -q "^[0-9T:.-]*Z worker:0 W call 1 failed: .*boom from the worker" "$dir/logs/worker-0.log"
check "logfwd-01 records are whole lines (each starts with a time stamp)" \
  sh -c "! grep -v '^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:.]*Z [a-z]*:[0-9]* [DIWE] ' '$dir/logs/worker-0.log'"
