# test_logfwd.sh - `drover node --log-forward`: a node's log records, and
# what it writes to its own stdout and stderr, reach its log in the run
# directory through the coordinator (LOG), although the node's output goes
# elsewhere. The spark launcher's nodes run so; here local nodes, through a
# $DROVER_LAUNCH_EXE wrapper that adds the flag and sends the node's output
# to a file of its own (the executor's stderr on Spark), so it runs in
# seconds (under ASan too).
. tests/cli/lib.sh
RUNS=$TMP/runs
cat > "$TMP/node.sh" <<SH
#!/bin/sh
exec "$DROVER" "\$@" --log-forward >>"$TMP/raw.out" 2>>"$TMP/raw.err"
SH
chmod +x "$TMP/node.sh"
cat > "$TMP/fwd.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "fwd" }
io.stdout:write("run_dir ", c.run_dir, "\n")
-- the worker's own output: a print, stderr, a line longer than the bound,
-- a burst of lines, and a last line without its newline
c:schedule(function()
  print("hello from print", 42)
  io.stderr:write("a line on stderr\n")
  io.stdout:write(string.rep("x", 5000), "\n")
  for i = 1, 300 do io.stdout:write("burst ", i, "\n") end
  io.stdout:write("no newline at the end")
  return true
end):fetch()
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
  grep -q "^[0-9T:.-]*Z worker:0 W call [0-9]* failed: .*boom from the worker" "$dir/logs/worker-0.log"
check "logfwd-01 records are whole lines (each starts with a time stamp)" \
  sh -c "! grep -Ev '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]*Z [a-z]*:[0-9]* ([DIWE]|stdout|stderr) ' '$dir/logs/worker-0.log'"
w=$dir/logs/worker-0.log
check "logfwd-02 a closure's print() reaches the worker's log, stamped, as stdout" \
  grep -q "^[0-9T:.-]*Z worker:0 stdout hello from print	42\$" "$w"
check "logfwd-02 what the closure writes to io.stderr reaches it as stderr" \
  grep -q "^[0-9T:.-]*Z worker:0 stderr a line on stderr\$" "$w"
check "logfwd-02 a burst of 300 lines arrives whole and in order" \
  sh -c "[ \"\$(sed -n 's/^[0-9T:.-]*Z worker:0 stdout burst //p' '$w' | tr '\\n' ' ')\" = \"\$(seq 1 300 | tr '\\n' ' ')\" ]"
check "logfwd-02 a line longer than 4096 bytes comes in pieces of at most 4096" \
  sh -c "[ \$(grep -c '^[0-9T:.-]*Z worker:0 stdout xxxx*\$' '$w') -eq 2 ] && ! grep -q 'x\\{4097\\}' '$w'"
check "logfwd-02 a last line without a newline is sent at exit" \
  grep -q "^[0-9T:.-]*Z worker:0 stdout no newline at the end\$" "$w"
check "logfwd-02 log records are forwarded once (not again as stderr)" \
  sh -c "[ \$(grep -c 'worker:0 I registered\$' '$w') -eq 1 ] && ! grep -q 'worker:0 stderr .*registered' '$w'"
check "logfwd-02 the node's own stdout still has its output" \
  sh -c "grep -q '^hello from print	42\$' '$TMP/raw.out' && grep -q '^burst 300\$' '$TMP/raw.out' && grep -q 'no newline at the end' '$TMP/raw.out'"
check "logfwd-02 the node's own stderr still has the closure's line and the log records" \
  sh -c "grep -q '^a line on stderr\$' '$TMP/raw.err' && grep -q 'worker:0 I registered\$' '$TMP/raw.err'"

# A node ended by SIGTERM forwards what its pipes hold first (a last line
# without its newline included), then dies of the signal as before.
cat > "$TMP/term.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "term" }
io.stdout:write("run_dir ", c.run_dir, "\n")
pcall(function()
  c:schedule(function()
    local f = io.open("/proc/self/stat")
    local pid = f:read("n")
    f:close()
    io.stdout:write("last words before SIGTERM")
    os.execute("kill -TERM " .. pid)
    return true
  end):fetch()
end)
-- the worker is lost, then relaunched (a restart)
local t = drover.clock()
repeat
  local n = c:nodes()[2]
  for _, x in ipairs(c:nodes()) do if x.role == "worker" then n = x end end
  if n.restarts >= 1 and n.state == "ready" then break end
  drover.sleep(0.05)
until drover.clock() - t > 30
c:shutdown()
LUA
DROVER_LAUNCH_EXE="$TMP/node.sh" timeout 60 "$DROVER" run "$TMP/term.lua" >"$TMP/term.out" 2>&1
check "logfwd-03 a run whose worker got SIGTERM ends" [ $? -eq 0 ]
dir=$(sed -n 's/^run_dir //p' "$TMP/term.out")
check "logfwd-03 the SIGTERMed worker's last line reached its log" \
  grep -q "^[0-9T:.-]*Z worker:0 stdout last words before SIGTERM\$" "$dir/logs/worker-0.log"
check "logfwd-03 the worker died of the signal (the launcher saw SIGTERM)" \
  grep -qi "worker:0.*signal 15\|worker:0.*SIGTERM\|worker:0.*status 143" "$dir/events.log"
