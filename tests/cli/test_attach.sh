# test_attach.sh - `drover attach`, `drover ls` and `drover run --detach`
# against real runs on loopback: a cluster training while clients attach
# from this shell, commands refused or obeyed, a wrong secret, runs that are
# not running, the listing of runs, and a detached run that outlives the
# command that started it. Every wait is bounded; processes this test
# started are ended by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"

# field NODE COLUMN FILE: a column of NODE's row in a --print table
# (2 state, 5 restarts, 6 steps).
field() { awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$3"; }

# A cluster that trains (throttled) until $RUNS/stop-train exists (lib.sh).
trainer_start train
check "attach-t00 the training run started" test -n "$RUN" -a -d "$RUN"
steps_positive() {
  [ "$(field worker:0 6 "$TMP/p1.txt")" -gt 0 ] 2>/dev/null &&
    [ "$(field worker:1 6 "$TMP/p1.txt")" -gt 0 ] 2>/dev/null
}
# A worker waiting for its next task shows "ready" for a moment (the
# script throttles the coordinator): take a snapshot with both at work.
training() {
  "$DROVER" attach "$RUN" --print >"$TMP/p1.txt" 2>&1 && steps_positive &&
    [ "$(field worker:0 2 "$TMP/p1.txt")" = busy ] && [ "$(field worker:1 2 "$TMP/p1.txt")" = busy ]
}
wait_for 30 training

# attach-t01: --print shows every node with its state and steps
check "attach-t01 --print shows the run" grep -q "^run $(basename "$RUN")  local  training  async" "$TMP/p1.txt"
check "attach-t01 ps:0 is ready" [ "$(field ps:0 2 "$TMP/p1.txt")" = ready ]
check "attach-t01 worker:0 is busy" [ "$(field worker:0 2 "$TMP/p1.txt")" = busy ]
check "attach-t01 worker:1 is busy" [ "$(field worker:1 2 "$TMP/p1.txt")" = busy ]
check "attach-t01 the workers have steps" steps_positive
check "attach-t01 the queue is shown" grep -q "^queue: .* running, [1-9][0-9]* done" "$TMP/p1.txt"
check "attach-t01 the loss is shown" grep -q "train/loss" "$TMP/p1.txt"
# --print shows the newest 10 events; under load "cluster ready" may already
# have scrolled out, so check the events are there and are the run's own.
check "attach-t01 events are shown" grep -q "^events (last [1-9][0-9]* of [1-9][0-9]*):" "$TMP/p1.txt"
last_event=$(tail -n 1 "$TMP/p1.txt" | sed -E 's/^ *[0-9.]+s  //')
check "attach-t01 they are the run's events ($last_event)" grep -qF -- "$last_event" "$RUN/events.log"

# attach-t02: two clients at once
"$DROVER" attach "$RUN" --print >"$TMP/a.txt" 2>&1 & a=$!
"$DROVER" attach "$RUN" --print >"$TMP/b.txt" 2>&1 & b=$!
wait $a; ra=$?
wait $b; rb=$?
check "attach-t02 both clients succeed" test $ra -eq 0 -a $rb -eq 0
check "attach-t02 the first sees the three nodes" test "$(grep -c '^\(ps\|worker\):' "$TMP/a.txt")" -eq 3
check "attach-t02 the second too" test "$(grep -c '^\(ps\|worker\):' "$TMP/b.txt")" -eq 3
check "attach-t02 the run is still training" grep -q "^run .*  training  " "$TMP/b.txt"

# attach-t03: a read-only client's command is refused, with a reply
"$DROVER" attach "$RUN" --command "return 1" >"$TMP/ro.out" 2>"$TMP/ro.err"
check "attach-t03 a read-only command fails" [ $? -eq 1 ]
check "attach-t03 it says why" grep -q "read-only" "$TMP/ro.err"
"$DROVER" attach "$RUN" --stop worker:1 >/dev/null 2>"$TMP/ro2.err"
check "attach-t03 a read-only stop fails" [ $? -eq 1 ]
check "attach-t03 it says why too" grep -q "read-only" "$TMP/ro2.err"
check "attach-t03 no node was stopped" sh -c "! grep -q 'node stop' '$RUN/events.log'"

# attach-t04: --control --stop worker:1: lost, then restarted, then busy
"$DROVER" attach "$RUN" --control --stop worker:1 >"$TMP/stop.out" 2>&1
check "attach-t04 stop succeeds" [ $? -eq 0 ]
check "attach-t04 it names the node" grep -q "stopping worker:1 (pid [0-9]*)" "$TMP/stop.out"
check "attach-t04 worker:1 is lost" wait_for 10 grep -q "node lost worker:1: killed by signal 15" "$RUN/events.log"
check "attach-t04 then restarted" wait_for 15 grep -q "node restart worker:1 (1 of 3)" "$RUN/events.log"
back() {
  "$DROVER" attach "$RUN" --print >"$TMP/p2.txt" 2>&1 &&
    [ "$(field worker:1 2 "$TMP/p2.txt")" = busy ] && [ "$(field worker:1 5 "$TMP/p2.txt")" = 1 ]
}
# (busy at some moment: the same flicker as above)
check "attach-t04 and busy again with one restart" wait_for 20 back
"$DROVER" attach "$RUN" --control --stop worker:9 >/dev/null 2>"$TMP/stop9.err"
check "attach-t04 an unknown node is refused" [ $? -eq 1 ]
check "attach-t04 with the reason" grep -q "no node 'worker:9'" "$TMP/stop9.err"

# attach-t05: a wrong secret is refused
printf '%064d\n' 7 >"$TMP/wrong.secret"; chmod 600 "$TMP/wrong.secret"
addr=$(cut -d' ' -f1 "$RUN/coordinator")
"$DROVER" attach "$addr" --secret-file "$TMP/wrong.secret" --print >"$TMP/w.out" 2>"$TMP/w.err"
check "attach-t05 a wrong secret fails" [ $? -eq 1 ]
check "attach-t05 it says so" grep -q "wrong secret" "$TMP/w.err"
"$DROVER" attach "$addr" --key "$RUN/view.key" --print >"$TMP/r.out" 2>&1
check "attach-t05 HOST:PORT with the run's view key works" [ $? -eq 0 ]
check "attach-t05 and shows the nodes" grep -q "^worker:1 " "$TMP/r.out"
"$DROVER" attach "$addr" --print >/dev/null 2>"$TMP/nosecret.err"
check "attach-t05 HOST:PORT needs --key" [ $? -eq 1 ]
check "attach-t05 and says so" grep -q -- "--key FILE" "$TMP/nosecret.err"

# ls-t01 (part 1): the running run
"$DROVER" ls "$RUNS" >"$TMP/ls1.txt" 2>&1
check "ls-t01 the training run is running" grep -q "^$(basename "$RUN") *running *3 .*$addr" "$TMP/ls1.txt"

# The training run ends; the clients never stopped it.
touch "$RUNS/stop-train"
wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
kill -9 $trainer 2>/dev/null
wait $trainer; rc=$?
check "attach-t06 the attached run finished cleanly" [ $rc -eq 0 ]
check "attach-t06 its script ran to the end" grep -q trained "$TMP/train.out"
check "attach-t06 the clients came and went" [ "$(grep -c ' detach \(127.0.0.1\|local pid\)' "$RUN/events.log")" -ge 6 ]

# attach-t07: runs that are not running: their records, read-only
"$DROVER" attach "$RUN" --print >"$TMP/ended.out" 2>"$TMP/ended.err"
check "attach-t07 an ended run shows its records" [ $? -eq 0 ]
check "attach-t07 finished at ... (exit 0)" grep -q "^finished at [0-9-]* [0-9:]* (exit 0)" "$TMP/ended.out"
check "attach-t07 with its nodes" [ "$(grep -c '^\(ps\|worker\):[0-9] *done ' "$TMP/ended.out")" -eq 3 ]
check "attach-t07 and its loss" grep -q "^  train/loss .* at step [1-9]" "$TMP/ended.out"
"$DROVER" attach "$RUN" --command "return 1" >/dev/null 2>"$TMP/ended.err"
check "attach-t07 a command to an ended run is an error" [ $? -eq 1 ]
check "attach-t07 it names the run directory" grep -q "run '$RUN' is not running" "$TMP/ended.err"
# attach-t08: a run by the name drover ls prints, or by a prefix (the newest)
( cd "$TMP" && "$DROVER" attach "$(basename "$RUN")" --print >"$TMP/byname.out" 2>&1 )
check "attach-t08 a run's name is looked up in ./runs" grep -q "^run $(basename "$RUN")  " "$TMP/byname.out"
"$DROVER" attach --runs "$RUNS" train --print >"$TMP/byprefix.out" 2>&1
check "attach-t08 a name prefix finds the run" grep -q "^run $(basename "$RUN")  " "$TMP/byprefix.out"
"$DROVER" attach --runs "$RUNS" nosuchrun --print >/dev/null 2>"$TMP/noname.err"
check "attach-t08 an unknown name is an error" [ $? -eq 1 ]
check "attach-t08 that says where it looked" grep -q "no run 'nosuchrun'.*drover ls" "$TMP/noname.err"
"$DROVER" attach "$RUN" "$RUN" --print >"$TMP/cmp.out" 2>&1
check "attach-t08 two runs compared: both named" grep -q "^run $(basename "$RUN") vs $(basename "$RUN")  " "$TMP/cmp.out"
check "attach-t08 with the second run's metrics" \
  sh -c "grep -A1 '^metrics of $(basename "$RUN"):' '$TMP/cmp.out' | grep -q '^  train/loss '"
"$DROVER" attach "$RUN" "$RUN" --control >/dev/null 2>"$TMP/cmpctl.err"
check "attach-t08 a comparison is read-only" [ $? -eq 2 ]
mkdir -p "$TMP/fake"; cp "$RUN/view.key" "$TMP/fake/view.key"
echo "127.0.0.1:1 $$" >"$TMP/fake/coordinator"
"$DROVER" attach "$TMP/fake" --print >/dev/null 2>"$TMP/refused.err"
check "attach-t07 a refused connection is an error" [ $? -eq 1 ]
check "attach-t07 it names the run and the reason" grep -q "cannot attach to run '$TMP/fake'.*refused" "$TMP/refused.err"
"$DROVER" attach "$TMP/nowhere" --print >/dev/null 2>"$TMP/nowhere.err"
check "attach-t07 a missing directory is an error" [ $? -eq 1 ]
check "attach-t07 naming it" grep -q "nowhere" "$TMP/nowhere.err"

# ls-t01 (part 2): a finished run is done, a failed one failed
cat > "$TMP/fail.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "broken", max_restarts = 0 }
for _, n in ipairs(c:nodes()) do
  if n.role == "worker" then os.execute("kill -9 " .. n.pid) end
end
drover.sleep(1.5)
c:shutdown()
LUA
timeout 60 "$DROVER" run "$TMP/fail.lua" >/dev/null 2>&1
"$DROVER" ls "$RUNS" >"$TMP/ls2.txt" 2>&1
check "ls-t01 exit status 0" [ $? -eq 0 ]
check "ls-t01 the finished run is done" grep -q "^$(basename "$RUN") *done *3 " "$TMP/ls2.txt"
check "ls-t01 the broken run failed" grep -q "^broken-[0-9-]* *failed *2 " "$TMP/ls2.txt"
check "ls-t01 oldest first" [ "$(awk 'NR == 2 { print $1 }' "$TMP/ls2.txt")" = "$(basename "$RUN")" ]
"$DROVER" ls "$TMP/none" >/dev/null 2>"$TMP/ls3.err"
check "ls-t02 a missing runs directory is an error" [ $? -eq 1 ]
check "ls-t02 naming it" grep -q "cannot list runs in '$TMP/none'" "$TMP/ls3.err"

# detach-t01: a detached run outlives the command, and is attachable
cat > "$TMP/small.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("$PWD/examples/data/digits.csv", { label = -1 }):standardize()
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "detached" }
print("cluster up at " .. c.address)
io.stdout:flush()
local r = c:fit(drover.experiment {
  name = "d", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = digits, batch = 32, epochs = 3 }, seed = 1, verbose = false })
print("steps " .. r.steps)
drover.sleep(4) -- time to attach
c:shutdown()
print("detached run done")
LUA
(cd "$TMP" && "$DROVER" run --detach small.lua) >"$TMP/detach.out" 2>"$TMP/detach.err"
check "detach-t01 the command succeeds at once" [ $? -eq 0 ]
DRUN=$(sed -n 's/^run directory: *//p' "$TMP/detach.out")
check "detach-t01 it prints the run directory" [ -d "$DRUN" ]
check "detach-t01 and how to attach" grep -q "drover attach $DRUN" "$TMP/detach.out"
dpid=$(sed -n 's/^pid: *//p' "$TMP/detach.out")
cpid=$(cut -d' ' -f2 "$DRUN/coordinator" 2>/dev/null)
check "detach-t01 the run goes on after the command exited" kill -0 "$cpid"
check "detach-t01 its coordinator is the detached process" [ "$cpid" = "$dpid" ]
check "detach-t01 in a session of its own" [ "$(ps -o sid= -p "$dpid" | tr -d ' ')" = "$dpid" ]
"$DROVER" attach "$DRUN" --print >"$TMP/d.txt" 2>&1
check "detach-t01 attach sees it" [ $? -eq 0 ]
check "detach-t01 with its three nodes" test "$(grep -c '^\(ps\|worker\):' "$TMP/d.txt")" -eq 3
check "detach-t01 its output is in the run directory" wait_for 10 grep -q "cluster up at" "$DRUN/logs/script.log"
check "detach-t01 it finishes" wait_for 60 sh -c "! kill -0 $dpid 2>/dev/null"
kill -9 "$dpid" 2>/dev/null
check "detach-t01 it shut down cleanly" grep -q "shutdown complete: 0 node failures" "$DRUN/events.log"
check "detach-t01 its output is complete" grep -q "detached run done" "$DRUN/logs/script.log"
check "detach-t01 no log left behind in ./runs" [ -z "$(ls "$TMP/runs" | grep '^detached-.*\.log$')" ]

# detach-t02: a script that fails before its cluster starts
echo 'error("no cluster today")' >"$TMP/bad.lua"
(cd "$TMP" && DROVER_DETACH_TIMEOUT=30 "$DROVER" run --detach bad.lua) >"$TMP/bad.out" 2>"$TMP/bad.err"
check "detach-t02 fails" [ $? -eq 1 ]
check "detach-t02 shows the end of its log" grep -q "no cluster today" "$TMP/bad.err"
check "detach-t02 and its exit status" grep -q "exit status 1" "$TMP/bad.err"
