# test_ls.sh - `drover ls` states, one per way a run ends: done, failed,
# interrupted (SIGINT), crashed (SIGKILL), running; in process and on a
# local cluster, with the exit status. Also: a misspelt launcher leaves no
# run directory, `ps = 0` says so once, and each ps says its sync mode once.
# Every wait is bounded; processes this test started are ended by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"

# row NAME: the `drover ls` line of the run named NAME-<stamp>.
row() { "$DROVER" ls "$RUNS" | grep "^$1-[0-9]"; }
# state NAME / exitcol NAME: its STATE and EXIT (the 6th field from the
# right end of the fixed columns: RUN STATE NODES DATE TIME CKPT EXIT).
state() { row "$1" | awk '{ print $2 }'; }
exitcol() { row "$1" | awk '{ print $7 }'; }

# An in-process fit named by arg[1]; arg[2] says how the script ends.
cat >"$TMP/fit.lua" <<LUA
local nn = drover.nn
local how = arg[2]
local exp = drover.experiment { name = arg[1], runs = "$RUNS", verbose = false,
  model = nn.Linear(4, 2), loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8,
            epochs = (how == "done" or how == "fail") and 1 or 1000000 },
  progress = function(p)
    if p.step == 2 and how ~= "done" and how ~= "fail" then
      local f = assert(io.open("$TMP/" .. arg[1] .. ".ready", "w")); f:close()
    end
  end }
exp:fit()
if how == "fail" then error("boom") end
LUA

"$DROVER" run "$TMP/fit.lua" ipdone done >/dev/null 2>&1
check "ls-01 an in-process run that ended well is done" [ "$(state ipdone)" = done ]
check "ls-01 with exit status 0" [ "$(exitcol ipdone)" = 0 ]
"$DROVER" run "$TMP/fit.lua" ipfail fail >/dev/null 2>&1
check "ls-02 a script that failed after its fit: failed" [ "$(state ipfail)" = failed ]
check "ls-02 with exit status 1" [ "$(exitcol ipfail)" = 1 ]

# interrupted: SIGINT in the middle of a fit
"$DROVER" run "$TMP/fit.lua" ipint long >/dev/null 2>&1 &
pid=$!
if wait_for 30 test -e "$TMP/ipint.ready"; then
  check "ls-03 a live in-process run is running" [ "$(state ipint)" = running ]
  kill -INT $pid
  wait_for 20 sh -c "! kill -0 $pid 2>/dev/null"
fi
kill -9 $pid 2>/dev/null; wait $pid
check "ls-03 SIGINT: interrupted" [ "$(state ipint)" = interrupted ]
check "ls-03 with exit status 130" [ "$(exitcol ipint)" = 130 ]

# crashed: SIGKILL in the middle of a fit
"$DROVER" run "$TMP/fit.lua" ipkill long >/dev/null 2>&1 &
pid=$!
wait_for 30 test -e "$TMP/ipkill.ready"
kill -9 $pid; wait $pid 2>/dev/null
check "ls-04 SIGKILL: crashed" [ "$(state ipkill)" = crashed ]
check "ls-04 no exit status" [ "$(exitcol ipkill)" = - ]

# A local cluster, same ways to end.
cat >"$TMP/cl.lua" <<LUA
local how = arg[2]
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = arg[1] }
if how == "fail" then error("boom") end
if how == "long" then
  local f = assert(io.open("$TMP/" .. arg[1] .. ".ready", "w")); f:close()
  drover.sleep(60)
end
c:shutdown()
LUA
"$DROVER" run "$TMP/cl.lua" cldone done >/dev/null 2>&1
check "ls-05 a cluster run that ended well is done" [ "$(state cldone)" = done ]
check "ls-05 with exit status 0 and its nodes" sh -c "[ '$(exitcol cldone)' = 0 ] && [ '$(row cldone | awk '{print $3}')' = 2 ]"
"$DROVER" run "$TMP/cl.lua" clfail fail >/dev/null 2>&1
check "ls-06 a cluster script that failed: failed" [ "$(state clfail)" = failed ]
check "ls-06 with exit status 1" [ "$(exitcol clfail)" = 1 ]
"$DROVER" run "$TMP/cl.lua" clint long >/dev/null 2>&1 &
pid=$!
if wait_for 30 test -e "$TMP/clint.ready"; then
  check "ls-07 a live cluster run is running, with its address" sh -c "'$DROVER' ls '$RUNS' | grep -q '^clint-.* running .*127.0.0.1:[0-9]'"
  kill -INT $pid
  wait_for 20 sh -c "! kill -0 $pid 2>/dev/null"
fi
kill -9 $pid 2>/dev/null; wait $pid
check "ls-07 SIGINT on a cluster run: interrupted" [ "$(state clint)" = interrupted ]
check "ls-07 with exit status 130" [ "$(exitcol clint)" = 130 ]
"$DROVER" run "$TMP/cl.lua" clkill long >/dev/null 2>&1 &
pid=$!
wait_for 30 test -e "$TMP/clkill.ready"
CLKILL=$(ls -d "$RUNS"/clkill-* 2>/dev/null)
kill -9 $pid; wait $pid 2>/dev/null
# its nodes notice the coordinator is gone and end by themselves
check "ls-08 a killed coordinator: crashed" [ "$(state clkill)" = crashed ]
check "ls-08 no exit status" [ "$(exitcol clkill)" = - ]
for p in $(awk 'NR > 1 && $2 > 1 { print $2 }' "$CLKILL/nodes.tsv" 2>/dev/null); do
  kill -9 "$p" 2>/dev/null
done

# A misspelt launcher: an error naming it, and no run directory.
cat >"$TMP/bad.lua" <<LUA
print(pcall(drover.cluster, { ps = 1, worker = 1, runs = "$TMP/bad", launcher = "lcoal" }))
print(pcall(drover.cluster, { ps = 0, worker = 1, runs = "$TMP/bad" }))
LUA
"$DROVER" run "$TMP/bad.lua" >"$TMP/bad.out" 2>&1
check "ls-09 a misspelt launcher is named" grep -q "launcher 'lcoal' is not available" "$TMP/bad.out"
check "ls-09 and leaves no run directory" [ -z "$(ls "$TMP/bad" 2>/dev/null)" ]
check "ls-10 ps = 0: 'cluster: needs at least one ps', prefixed once" sh -c "grep -q 'false.*cluster: needs at least one ps' '$TMP/bad.out' && ! grep -q 'cluster: cluster:' '$TMP/bad.out'"

# Each ps logs its sync mode once per fit, not once per variable.
cat >"$TMP/sync.lua" <<LUA
local nn = drover.nn
local c = drover.cluster { ps = 2, worker = 2, runs = "$RUNS", name = "sync" }
c:fit(drover.experiment { verbose = false, mode = "sync",
  model = nn.Sequential { nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2) },
  loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8 } })
c:shutdown()
LUA
"$DROVER" run "$TMP/sync.lua" >"$TMP/sync.out" 2>&1
SYNC=$(ls -d "$RUNS"/sync-* 2>/dev/null)
check "ls-11 each ps says 'sync training' once" sh -c "[ \$(grep -c 'sync training: 2 gradients per update' '$SYNC/logs/ps-0.log') = 1 ] && [ \$(grep -c 'sync training: 2 gradients per update' '$SYNC/logs/ps-1.log') = 1 ]"

# ------------------------------------------------ interrupted, resumable, in the REPL
# A fit with checkpoints every 4 steps; arg[1] names it, arg[2] "cluster"
# trains on a local cluster. It touches NAME.ready once a checkpoint is
# committed and trains until interrupted.
cat >"$TMP/ck.lua" <<LUA
local nn = drover.nn
local name, where = arg[1], arg[2]
local ready = "$TMP/" .. name .. ".ready"
local exp = drover.experiment { name = name, runs = "$RUNS", verbose = false,
  model = nn.Linear(4, 2), loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8,
            epochs = 1000000 },
  checkpoint = { every = 4 },
  progress = function(p)
    if p.step == 9 then local f = assert(io.open(ready, "w")); f:close() end
    io.popen("sleep 0.01"):close()
  end }
if where == "cluster" then
  local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = name }
  c:fit(exp)
else
  exp:fit()
end
LUA
# newest NAME: the newest checkpoint's step of the run named NAME-<stamp>.
newest() { ls "$RUNS"/$1-*/checkpoints 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1; }

for where in local cluster; do
  name=ckint$where
  "$DROVER" run "$TMP/ck.lua" $name $where >/dev/null 2>&1 &
  pid=$!
  wait_for 60 test -e "$TMP/$name.ready"
  kill -INT $pid
  wait_for 30 sh -c "! kill -0 $pid 2>/dev/null"
  kill -9 $pid 2>/dev/null; wait $pid
  [ $where = cluster ] && for p in $(awk 'NR > 1 && $2 > 1 { print $2 }' "$RUNS"/$name-*/nodes.tsv 2>/dev/null); do
    kill -9 "$p" 2>/dev/null
  done
  step=$(newest $name)
  check "ls-12 a $where run Ctrl-C'd after a checkpoint (step $step): interrupted (resumable from step $step)" \
    sh -c "[ -n '$step' ] && '$DROVER' ls '$RUNS' | grep -q '^$name-[0-9-]* *interrupted (resumable from step $step) '"
done

# The same fit in the REPL (its input a pipe), interrupted: the REPL goes
# on; the run is interrupted, before and after the REPL exits. The REPL
# is no script: its exit status is not the run's (EXIT -), and nothing
# can run it again (no "resumable").
mkfifo "$TMP/repl.in"
"$DROVER" repl <"$TMP/repl.in" >"$TMP/repl.out" 2>&1 &
rpid=$!
exec 3>"$TMP/repl.in"
echo 'arg = { [1] = "ckrepl" }' >&3
echo "dofile('$TMP/ck.lua')" >&3
if wait_for 60 test -e "$TMP/ckrepl.ready"; then
  check "ls-13 a fit running in the REPL: running, local" \
    sh -c "'$DROVER' ls '$RUNS' | grep -q '^ckrepl-[0-9-]* *running *local '"
  kill -INT $rpid
  wait_for 20 sh -c "'$DROVER' ls '$RUNS' | grep -q '^ckrepl-[0-9-]* *interrupted '"
fi
check "ls-13 the REPL goes on" kill -0 $rpid
check "ls-13 its fit interrupted in the REPL: interrupted, local, no exit status" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^ckrepl-[0-9-]* *interrupted *local .* step-[0-9]* *- *\$'"
echo 'print("after " .. "the fit")' >&3
exec 3>&-
wait_for 30 sh -c "! kill -0 $rpid 2>/dev/null"
kill -9 $rpid 2>/dev/null; wait $rpid
check "ls-13 the REPL ran the next line" grep -q "after the fit" "$TMP/repl.out"
check "ls-13 once the REPL has exited: still interrupted, no exit status" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^ckrepl-[0-9-]* *interrupted *local .* step-[0-9]* *- *\$'"

# The columns line up whatever the states' lengths: STARTED begins at the
# same column on every line.
"$DROVER" ls "$RUNS" >"$TMP/ls.out"
cols=$(awk 'NR == 1 { print index($0, "STARTED"); next }
            { if (match($0, / 20[0-9][0-9]-[0-1][0-9]-[0-3][0-9] /)) print RSTART + 1; else print 0 }' \
       "$TMP/ls.out" | sort -u)
check "ls-14 the columns line up past a long STATE (STARTED at column $(echo $cols))" \
  sh -c "[ \$(echo '$cols' | wc -l) -eq 1 ] && grep -q 'resumable from step' '$TMP/ls.out'"
