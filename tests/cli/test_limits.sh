# test_limits.sh - a Lua line from a control client runs under a limit:
# an endless loop ends after command_limit seconds with an error to the
# client, the coordinator goes on serving; SIGINT stops the coordinator
# even while such a line spins. Every wait is bounded; only processes this
# test started are signalled, by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs

# limit-01: command_limit = 1
cat > "$TMP/limit.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "limit", command_limit = 1 }
local f = io.open("$TMP/dir.tmp", "w"); f:write(c.run_dir, "\n"); f:close()
os.rename("$TMP/dir.tmp", "$TMP/dir")
local t0 = drover.clock()
while drover.clock() - t0 < 60 and not io.open("$TMP/go") do drover.sleep(0.1) end
c:shutdown()
print("done")
LUA
timeout 90 "$DROVER" run "$TMP/limit.lua" >"$TMP/out" 2>"$TMP/err" &
coord=$!
wait_for 30 test -s "$TMP/dir"
RUN=$(cat "$TMP/dir")
"$DROVER" attach "$RUN" --control --command "while true do end" --timeout 20 >"$TMP/spin.out" 2>&1
check "limit-01 an endless command fails" [ $? -eq 1 ]
check "limit-01 saying it was stopped at its limit" grep -q "stopped after 1 s" "$TMP/spin.out"
[ -n "${LIMITS_DEBUG:-}" ] && cat "$TMP/spin.out"
"$DROVER" attach "$RUN" --control --command "return 6 * 7" >"$TMP/after.out" 2>&1
check "limit-01 the coordinator serves the next command" grep -q "^42$" "$TMP/after.out"
"$DROVER" attach "$RUN" --control --command "local n = 0 for i = 1, 1e6 do n = n + i end return n" \
  >"$TMP/short.out" 2>&1
check "limit-01 a short loop runs whole" grep -q "^500000500000$" "$TMP/short.out"
touch "$TMP/go"
wait $coord
check "limit-01 the run completes (exit 0)" [ $? -eq 0 ]

# limit-02: SIGINT while a command spins (default limit: 10 s)
rm -f "$TMP/dir" "$TMP/go"
cat > "$TMP/int.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "int" }
local f = io.open("$TMP/dir.tmp", "w"); f:write(c.run_dir, "\n"); f:close()
os.rename("$TMP/dir.tmp", "$TMP/dir")
while true do drover.sleep(0.1) end
LUA
timeout 90 "$DROVER" run "$TMP/int.lua" >"$TMP/out2" 2>"$TMP/err2" &
coord=$!
wait_for 30 test -s "$TMP/dir"
RUN=$(cat "$TMP/dir")
"$DROVER" attach "$RUN" --control --timeout 20 \
  --command "io.open('$TMP/spinning', 'w'):close() while true do end" >"$TMP/spin2.out" 2>&1 &
client=$!
wait_for 20 test -e "$TMP/spinning" # the line spins in the coordinator
pids=$(sed -n 's/.*node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log")
kill -INT $coord
gone() { ! kill -0 "$1" 2>/dev/null; }
check "limit-02 SIGINT ends the coordinator within 8 s" wait_for 8 gone $coord
wait $coord
check "limit-02 with status 130" [ $? -eq 130 ]
wait $client
crc=$?
# Its reply ("interrupted") is queued as the coordinator exits: the client
# gets it, or sees the connection end; either way it fails, at once.
check "limit-02 the client's command fails" [ $crc -eq 1 ]
nodes_gone() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
check "limit-02 and no node outlives it by 10 s" wait_for 10 nodes_gone
for p in $pids; do kill -9 "$p" 2>/dev/null; done
true
