# test_life.sh - a run's life from the terminal: one process per run
# directory (a lock: concurrent `drover run --resume`s, exactly one trains,
# the others are refused naming it; the lock dies with its holder and the
# nodes never hold it), a finished run is not run again, one run-name rule
# for every command (a directory, a full name or a unique prefix; an
# ambiguous prefix lists the candidates), `drover stop` (a checkpoint, then
# the end as on Ctrl-C; --now; the view key refused; an in-process run,
# its checkpoint first too; a fit in the REPL, a cluster the REPL hosts:
# the REPL goes on) and `drover rm` (refuses a running run). Every wait is bounded; every
# process this test starts is ended by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"
PIDS=""
trap 'for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; [ -n "$KEEP_TMP" ] || rm -rf "$TMP"' EXIT

# A cluster fit of 256 steps, ~5 s, checkpoints every arg[3] steps. arg[1]
# runs, arg[2] the run's name. Its progress function holds the coordinator
# for 30 ms a turn, so the worker's tasks wait (drover.sleep would pump the
# loop, os.execute would ignore SIGINT meanwhile as system() does).
cat >"$TMP/life.lua" <<'LUA'
local nn, optim = drover.nn, drover.optim
local runs, name, every = arg[1], arg[2], tonumber(arg[3])
local data = drover.data.synthetic { n = 512, features = 8, classes = 2, seed = 1 }
local exp = drover.experiment { name = name, model = nn.Sequential { nn.Linear(8, 2) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 },
  train = { data = data, batch = 8, epochs = 4 }, verbose = false, seed = 1, runs = runs,
  checkpoint = { every = every }, progress = function() io.popen("sleep 0.03"):close() end }
local c = drover.cluster { ps = 1, worker = 1, runs = runs, name = name }
local r = c:fit(exp)
c:shutdown()
print("steps " .. r.steps)
LUA

# An in-process fit: arg[3] "long" trains until stopped, else 2 epochs;
# a checkpoint every arg[4] steps (4).
cat >"$TMP/fit.lua" <<'LUA'
local nn = drover.nn
local runs, name, how, every = arg[1], arg[2], arg[3], tonumber(arg[4]) or 4
local exp = drover.experiment { name = name, runs = runs, verbose = false,
  model = nn.Linear(4, 2), loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8,
            epochs = how == "long" and 1000000 or 2 },
  checkpoint = { every = every },
  progress = function() if how == "long" then drover.sleep(0.01) end end }
exp:fit()
LUA

# nodes DIR: the pids of DIR's nodes (nodes.tsv), each remembered for the end.
nodes() { awk -F'\t' 'NR > 1 && $2 > 0 { print $2 }' "$1/nodes.tsv" 2>/dev/null; }
remember_nodes() { for p in $(nodes "$1"); do PIDS="$PIDS $p"; done; }
# holds PID FILE: whether process PID has FILE open.
holds() { ls -l "/proc/$1/fd" 2>/dev/null | grep -qF -- "-> $2"; }
gone() { ! kill -0 "$1" 2>/dev/null; }
lines() { wc -l <"$1" | tr -d ' '; }
# logged NAME: whether the run NAME-<stamp> has logged 5 steps.
logged() { [ "$(cat "$RUNS"/$1-*/metrics.jsonl 2>/dev/null | wc -l)" -ge 5 ]; }

# ------------------------------------------------ a run interrupted after a checkpoint
"$DROVER" run "$TMP/life.lua" "$RUNS" life 16 >"$TMP/first.out" 2>&1 &
first=$!
PIDS="$PIDS $first"
wait_for 60 sh -c "ls -d '$RUNS'/life-*/checkpoints/step-* >/dev/null 2>&1"
RUN=$(ls -d "$RUNS"/life-* 2>/dev/null | head -n 1)
remember_nodes "$RUN"
kill -INT "$first"
wait_for 30 gone "$first"
wait "$first"
check "life-01 a cluster run interrupted after a checkpoint (status 130)" [ $? -eq 130 ]
check "life-01 ls: interrupted" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^$(basename "$RUN") *interrupted'"

# ------------------------------------------------ the lock: held by the coordinator, not its nodes
"$DROVER" run --resume "$RUN" >"$TMP/a.out" 2>&1 &
a=$!
PIDS="$PIDS $a"
wait_for 60 sh -c "grep -q ' $a\$' '$RUN/coordinator' 2>/dev/null && [ -s '$RUN/nodes.tsv' ] && grep -q 'fit: ' '$RUN/events.log'"
remember_nodes "$RUN"
NODES=$(nodes "$RUN")
check "life-02 the resumed run's coordinator holds $RUN/lock" holds "$a" "$RUN/lock"
check "life-02 with its pid in it" [ "$(cat "$RUN/lock" 2>/dev/null)" = "$a" ]
nheld=0
for p in $NODES; do holds "$p" "$RUN/lock" && nheld=$((nheld + 1)); done
check "life-02 none of its nodes ($(echo $NODES)) holds the lock (close-on-exec)" \
  [ -n "$NODES" -a "$nheld" -eq 0 ]
# (nodes delete their key files once read: keys/ may be empty, the run's
# own keys must be the same bytes after the refused resume)
before=$(cat "$RUN/secret" "$RUN/control.key" "$RUN/view.key" 2>/dev/null | sha256sum)
"$DROVER" run --resume "$RUN" >"$TMP/b.out" 2>"$TMP/b.err"
check "life-02 a second resume while it runs is refused" [ $? -eq 1 ]
check "life-02 naming the holder's pid" grep -q "in use by another drover process (pid $a)" "$TMP/b.err"
check "life-02 its files are intact" \
  sh -c "[ -s '$RUN/secret' ] && [ -s '$RUN/control.key' ] && [ -d '$RUN/keys' ] &&
    [ \"\$(cat '$RUN/secret' '$RUN/control.key' '$RUN/view.key' | sha256sum)\" = '$before' ]"
check "life-02 the run goes on" kill -0 "$a"

# The lock goes with its holder, however it dies.
kill -9 "$a"
wait "$a" 2>/dev/null

# ------------------------------------------------ three resumes at once: exactly one trains
before=$(grep -c "cluster run resumed" "$RUN/events.log")
for k in 1 2 3; do
  "$DROVER" run --resume "$RUN" >"$TMP/r$k.out" 2>"$TMP/r$k.err" &
  eval "r$k=\$!"
  eval "PIDS=\"\$PIDS \$r$k\""
done
winner="" refused=0 wins=0
for k in 1 2 3; do
  eval "p=\$r$k"
  wait_for 120 gone "$p"
  wait "$p"
  rc=$?
  if [ $rc -eq 0 ]; then winner=$p wins=$((wins + 1)); fi
  grep -q "in use by another drover process (pid [0-9]*)" "$TMP/r$k.err" && refused=$((refused + 1))
done
check "life-03 after a SIGKILLed holder, one of three resumes trains to the end" [ "$wins" -eq 1 ]
check "life-03 the two others are refused" [ "$refused" -eq 2 ]
named=$(cat "$TMP"/r*.err | sed -n 's/.*in use by another drover process (pid \([0-9]*\)).*/\1/p' | sort -u)
check "life-03 naming the one that trains ($winner, named $(echo $named))" [ "$named" = "$winner" ]
check "life-03 one coordinator resumed the run" \
  [ "$(grep -c "cluster run resumed" "$RUN/events.log")" -eq $((before + 1)) ]
check "life-03 its fit ran to the end" grep -q "fit done: 256 steps" "$RUN/events.log"
remember_nodes "$RUN"

# ------------------------------------------------ a finished run is not run again
n0=$(lines "$RUN/events.log")
"$DROVER" run --resume "$RUN" >"$TMP/fin.out" 2>"$TMP/fin.err"
check "life-04 resuming a finished run is refused" [ $? -eq 1 ]
check "life-04 already finished at step 256 (exit 0)" \
  grep -q "already finished at step 256 (exit 0)" "$TMP/fin.err"
check "life-04 saying how to start afresh" grep -q "drover run .*life.lua $RUNS life 16" "$TMP/fin.err"
check "life-04 its script did not run" [ "$(lines "$RUN/events.log")" -eq "$n0" ]

# ------------------------------------------------ one run-name rule for every command
"$DROVER" run "$TMP/fit.lua" "$RUNS" namesone >/dev/null 2>&1
"$DROVER" run "$TMP/fit.lua" "$RUNS" namestwo >/dev/null 2>&1
"$DROVER" run "$TMP/fit.lua" "$RUNS" namestwo >/dev/null 2>&1
ONE=$(ls -d "$RUNS"/namesone-* | head -n 1)
check "life-05 the runs to name exist" [ -d "$ONE" -a "$(ls -d "$RUNS"/namestwo-* | wc -l)" -eq 2 ]
# by a unique prefix, every command finds namesone-...
"$DROVER" attach --runs "$RUNS" nameso --print >"$TMP/n1.out" 2>&1
check "life-05 attach: a unique prefix" grep -q "^run $(basename "$ONE") " "$TMP/n1.out"
"$DROVER" logs nameso --runs "$RUNS" >"$TMP/n2.out" 2>&1
check "life-05 logs: a unique prefix" grep -q "fit done" "$TMP/n2.out"
"$DROVER" export-metrics nameso --runs "$RUNS" >"$TMP/n3.out" 2>&1
check "life-05 export-metrics: a unique prefix" grep -q "^wall_time,tag,step,value,node" "$TMP/n3.out"
"$DROVER" export nameso --runs "$RUNS" -o "$TMP/one.safetensors" >"$TMP/n4.out" 2>&1
check "life-05 export: a unique prefix" grep -q "the model of step 16 of nameso" "$TMP/n4.out"
"$DROVER" run --resume nameso --runs "$RUNS" >"$TMP/n5.out" 2>&1
check "life-05 run --resume: a unique prefix" grep -q "cannot resume '$ONE': it already finished" "$TMP/n5.out"
"$DROVER" stop nameso --runs "$RUNS" >"$TMP/n6.out" 2>&1
check "life-05 stop: a unique prefix" grep -q "run '$ONE' is not running" "$TMP/n6.out"
( cd "$TMP" && "$DROVER" logs "$(basename "$ONE")" >"$TMP/n7.out" 2>&1 )
check "life-05 a full name is looked up in ./runs" grep -q "fit done" "$TMP/n7.out"
# an ambiguous prefix: every command lists the candidates and does nothing
for cmd in "attach --print" logs export-metrics "export -o $TMP/x.safetensors" "run --resume" stop rm; do
  $DROVER $cmd names --runs "$RUNS" >/dev/null 2>"$TMP/amb.err"
  rc=$?
  check "life-06 $cmd: an ambiguous prefix is an error" [ $rc -eq 1 ]
  check "life-06 $cmd: that lists the 3 candidates" \
    sh -c "grep -q \"run 'names' is ambiguous: 3 runs\" '$TMP/amb.err' &&
           [ \$(grep -c '^  names\(one\|two\)-' '$TMP/amb.err') -eq 3 ]"
done
check "life-06 nothing was removed" [ "$(ls -d "$RUNS"/names* | wc -l)" -eq 3 ]
"$DROVER" logs nosuch --runs "$RUNS" >/dev/null 2>"$TMP/none.err"
check "life-06 no such run: says where it looked" grep -q "no run 'nosuch'.*drover ls" "$TMP/none.err"

# ------------------------------------------------ drover stop: a checkpoint, then as Ctrl-C
# (checkpoints every 1000 steps: the stop's is the only one)
"$DROVER" run "$TMP/life.lua" "$RUNS" stopfg 1000 >"$TMP/fg.out" 2>&1 &
fg=$!
PIDS="$PIDS $fg"
wait_for 60 sh -c "grep -q 'fit: ' '$RUNS'/stopfg-*/events.log 2>/dev/null"
FG=$(ls -d "$RUNS"/stopfg-* | head -n 1)
remember_nodes "$FG"
sleep 1
"$DROVER" rm "$FG" >/dev/null 2>"$TMP/rmrun.err"
check "life-07 rm refuses a running run" [ $? -eq 1 ]
check "life-07 naming its process" grep -q "run '$FG' is running (pid $fg)" "$TMP/rmrun.err"
check "life-07 and leaves it whole" [ -s "$FG/events.log" -a -s "$FG/secret" ]
"$DROVER" stop --key "$FG/view.key" "$FG" >/dev/null 2>"$TMP/view.err"
check "life-08 the view key cannot stop a run" [ $? -eq 1 ]
check "life-08 it says the control key is needed" grep -q "control key" "$TMP/view.err"
check "life-08 the run goes on" kill -0 "$fg"
"$DROVER" stop --runs "$RUNS" stopfg >"$TMP/stop.out" 2>&1
check "life-09 drover stop succeeds once the run ended" [ $? -eq 0 ]
check "life-09 it says a checkpoint comes first" grep -q "stopping: a checkpoint of step [0-9]*" "$TMP/stop.out"
check "life-09 the run's process is gone" gone "$fg"
wait "$fg"
check "life-09 it ended as on Ctrl-C (status 130)" [ $? -eq 130 ]
step=$(ls "$FG/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
check "life-09 the stop's checkpoint was committed (step $step)" [ -n "$step" ]
check "life-09 after the stop was asked" \
  sh -c "sed -n '/stop requested/,\$p' '$FG/events.log' | grep -q 'checkpoint step $step:'"
check "life-09 ls: interrupted, its checkpoint the newest" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^$(basename "$FG") *interrupted .* step-$step '"
timeout 120 "$DROVER" run --resume "$FG" >"$TMP/fgres.out" 2>&1
check "life-09 the resume continues from that checkpoint" \
  grep -q "resum.*from step $step" "$FG/events.log"
remember_nodes "$FG"

# --now, on a detached run: no checkpoint (none periodic either)
(cd "$TMP" && "$DROVER" run --detach "$TMP/life.lua" "$RUNS" stopnow 1000) >"$TMP/det.out" 2>&1
DET=$(sed -n 's/^run directory: *//p' "$TMP/det.out")
dpid=$(sed -n 's/^pid: *//p' "$TMP/det.out")
PIDS="$PIDS $dpid"
wait_for 60 sh -c "grep -q 'fit: ' '$DET/events.log' 2>/dev/null"
remember_nodes "$DET"
"$DROVER" stop --now "$DET" >"$TMP/now.out" 2>&1
check "life-10 stop --now of a detached run succeeds" [ $? -eq 0 ]
check "life-10 its process is gone" gone "$dpid"
check "life-10 no checkpoint was taken" sh -c "! grep -q '^[^ ]* checkpoint step' '$DET/events.log'"
check "life-10 it ended as on Ctrl-C" grep -q "process exit: 130 (signal 2)" "$DET/events.log"

# an in-process run: SIGINT to its process
"$DROVER" run "$TMP/fit.lua" "$RUNS" stopip long >/dev/null 2>&1 &
ip=$!
PIDS="$PIDS $ip"
wait_for 60 sh -c "ls -d '$RUNS'/stopip-*/checkpoints/step-* >/dev/null 2>&1"
IP=$(ls -d "$RUNS"/stopip-* | head -n 1)
"$DROVER" stop "$IP" >"$TMP/ip.out" 2>&1
check "life-11 stop of an in-process run succeeds" [ $? -eq 0 ]
check "life-11 its process is gone" gone "$ip"
wait "$ip"
check "life-11 it ended as on Ctrl-C (status 130)" [ $? -eq 130 ]
"$DROVER" stop "$IP" >/dev/null 2>"$TMP/ip2.err"
check "life-11 a run that is not running cannot be stopped" [ $? -eq 1 ]
check "life-11 it says so" grep -q "is not running" "$TMP/ip2.err"

# an in-process run, gracefully: its fit checkpoints the step it is at
# first (none periodic: every 100000 steps), then it ends as on Ctrl-C
"$DROVER" run "$TMP/fit.lua" "$RUNS" stopck long 100000 >/dev/null 2>&1 &
ip=$!
PIDS="$PIDS $ip"
wait_for 60 logged stopck
CK=$(ls -d "$RUNS"/stopck-* | head -n 1)
"$DROVER" stop "$CK" >"$TMP/ck.out" 2>&1
check "life-13 stop of an in-process run with checkpoints succeeds" [ $? -eq 0 ]
check "life-13 it says a checkpoint comes first" grep -q "checkpoints the step its fit is at" "$TMP/ck.out"
wait "$ip"
check "life-13 it ended as on Ctrl-C (status 130)" [ $? -eq 130 ]
step=$(ls "$CK/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
check "life-13 a checkpoint of the step it was at (step $step), after the stop was asked" \
  sh -c "[ -n '$step' ] && sed -n '/stop requested (drover stop)/,\$p' '$CK/events.log' | grep -q 'checkpoint step-$step committed'"
check "life-13 ls: interrupted (resumable from step $step)" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^$(basename "$CK") *interrupted (resumable from step $step) '"
"$DROVER" run --resume "$CK" >/dev/null 2>&1 &
res=$!
PIDS="$PIDS $res"
check "life-13 the resume continues from that checkpoint" \
  wait_for 60 grep -q "fit 1: resuming from step $step" "$CK/events.log"
kill -9 "$res" 2>/dev/null
wait "$res" 2>/dev/null

# --now: no checkpoint first
"$DROVER" run "$TMP/fit.lua" "$RUNS" stopipnow long 100000 >/dev/null 2>&1 &
ip=$!
PIDS="$PIDS $ip"
wait_for 60 logged stopipnow
NOW=$(ls -d "$RUNS"/stopipnow-* | head -n 1)
"$DROVER" stop --now "$NOW" >/dev/null 2>&1
check "life-14 stop --now of an in-process run succeeds" [ $? -eq 0 ]
wait "$ip"
check "life-14 it ended as on Ctrl-C (status 130)" [ $? -eq 130 ]
check "life-14 with no checkpoint" [ -z "$(ls "$NOW/checkpoints" 2>/dev/null)" ]

# a fit in the REPL (its input a pipe): stop checkpoints and interrupts the
# fit; the REPL goes on, and `stop` does not wait for it to exit
mkfifo "$TMP/repl.in"
"$DROVER" repl <"$TMP/repl.in" >"$TMP/repl.out" 2>&1 &
rp=$!
PIDS="$PIDS $rp"
exec 3>"$TMP/repl.in"
echo "arg = { '$RUNS', 'stoprepl', 'long', '100000' }" >&3
echo "dofile('$TMP/fit.lua')" >&3
wait_for 60 logged stoprepl
RP=$(ls -d "$RUNS"/stoprepl-* | head -n 1)
"$DROVER" stop --wait 30 "$RP" >"$TMP/rp.out" 2>&1
check "life-15 stop of a fit in the REPL succeeds" [ $? -eq 0 ]
check "life-15 the REPL goes on" kill -0 "$rp"
step=$(ls "$RP/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
check "life-15 its fit checkpointed the step it was at (step $step)" [ -n "$step" ]
check "life-15 ls: interrupted" sh -c "'$DROVER' ls '$RUNS' | grep -q '^$(basename "$RP") *interrupted '"
"$DROVER" stop --wait 5 "$RP" >/dev/null 2>"$TMP/rp2.err"
check "life-15 the REPL between fits: not running" [ $? -eq 1 ]
check "life-15 it says the REPL is left alone" grep -q "is not running: its last fit ended, and the REPL that holds it (pid $rp) is left alone" "$TMP/rp2.err"
"$DROVER" rm "$RP" >/dev/null 2>"$TMP/rp3.err"
check "life-15 rm refuses it while the REPL holds it, saying so" \
  sh -c "grep -q 'is held by the REPL that ran it (pid $rp)' '$TMP/rp3.err' && [ -d '$RP' ]"
echo 'print("still " .. "here")' >&3
exec 3>&-
wait_for 30 gone "$rp"
check "life-15 the REPL ran its next line" grep -q "still here" "$TMP/repl.out"

# a cluster the REPL hosts (its input a pipe): the run is the cluster.
# stop checkpoints its fit, interrupts the line (c:fit) and shuts the
# cluster down; the REPL goes on, saying so, and frees the run directory
mkfifo "$TMP/replc.in"
"$DROVER" repl <"$TMP/replc.in" >"$TMP/replc.out" 2>&1 &
rcl=$!
PIDS="$PIDS $rcl"
exec 3>"$TMP/replc.in"
cat >&3 <<LUA
exp = drover.experiment { name = "stopcl", model = drover.nn.Sequential { drover.nn.Linear(8, 2) }, loss = drover.nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.01 }, train = { data = drover.data.synthetic { n = 512, features = 8, classes = 2, seed = 1 }, batch = 8, epochs = 100000 }, verbose = false, runs = "$RUNS", checkpoint = { every = 1000000 }, progress = function() io.popen("sleep 0.01"):close() end }
c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "stopcl" }
r = c:fit(exp)
LUA
wait_for 60 sh -c "grep -q 'fit: ' '$RUNS'/stopcl-*/events.log 2>/dev/null"
CL=$(ls -d "$RUNS"/stopcl-* | head -n 1)
remember_nodes "$CL"
CLNODES=$(nodes "$CL")
sleep 1
"$DROVER" stop --wait 60 "$CL" >"$TMP/cl.out" 2>&1
check "life-16 stop of a cluster in the REPL succeeds" [ $? -eq 0 ]
check "life-16 it says the cluster shuts down and the REPL goes on" \
  grep -q "then its cluster shuts down (the REPL that hosts it goes on)" "$TMP/cl.out"
check "life-16 the REPL goes on" kill -0 "$rcl"
step=$(ls "$CL/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
check "life-16 the fit checkpointed first (step $step)" \
  sh -c "[ -n '$step' ] && sed -n '/stop requested/,\$p' '$CL/events.log' | grep -q 'checkpoint step $step:'"
check "life-16 the cluster was shut down" grep -q "shutdown complete" "$CL/events.log"
alive=0
for p in $CLNODES; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
check "life-16 its nodes ($(echo $CLNODES)) are gone" [ -n "$CLNODES" -a "$alive" -eq 0 ]
check "life-16 the REPL says so" wait_for 10 grep -q "drover stop: the run in $CL was stopped: its cluster is shut down" "$TMP/replc.out"
check "life-16 ls: interrupted, no exit status" \
  sh -c "'$DROVER' ls '$RUNS' | grep -q '^$(basename "$CL") *interrupted .* step-$step *- *\$'"
echo 'print("refit", pcall(c.fit, c, exp))' >&3
check "life-16 the stopped cluster refuses a fit" wait_for 20 grep -q "refit.*false.*it was shut down" "$TMP/replc.out"
"$DROVER" rm "$CL" >/dev/null 2>&1
check "life-16 the REPL let the run directory go: rm removes it" [ ! -e "$CL" ]
exec 3>&-
wait_for 30 gone "$rcl"

# ------------------------------------------------ drover rm
"$DROVER" rm --runs "$RUNS" nameso "$FG" >"$TMP/rm.out" 2>&1
check "life-12 rm removes finished runs" [ $? -eq 0 -a ! -e "$ONE" -a ! -e "$FG" ]
check "life-12 saying which" [ "$(grep -c '^removed ' "$TMP/rm.out")" -eq 2 ]
mkdir -p "$TMP/notarun"
"$DROVER" rm "$TMP/notarun" >/dev/null 2>"$TMP/rm2.err"
check "life-12 a directory that is not a run's is refused" [ $? -eq 1 -a -d "$TMP/notarun" ]
check "life-12 saying why" grep -q "not a run directory" "$TMP/rm2.err"
