# test_dash_live.sh - the dashboard over real clusters, through tmux:
# `drover run --dash` (nodes and states, a SIGKILLed worker lost then
# restarting then busy, q leaving it while the run goes on with plain
# progress lines), dash() in the REPL (q back to the prompt), and attach
# from a second window to a detached run (the same step count as --print;
# a node's log tail in the detail view, sent by the coordinator). Then the
# end of a run under --dash (the last frame kept until q, the held-back
# output printed after it), in-process training's dashboard, a script with
# nothing to show, and attach to finished runs: one, and two compared.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-live-$$
LIMIT=200 # tenths of a second
TMUX_CASE=live-00
. tests/cli/tmux.sh
export RUNS="$TMP/runs"
SCRIPT="$PWD/tests/cli/dash_train.lua"

# ------------------------------------------------ drover run --dash
tm new-session -d -s run -x 140 -y 45 \
  "cd '$TMP' && LANG=C.UTF-8 '$DROVER' run --dash '$SCRIPT' 25; echo \$? >'$TMP/run.status'; sleep 60"
# The dashboard draws where the script writes: its progress is held back
# and its print() lines go to the events pane until q.
expect run "live-01 the dashboard shows the cluster" wait_re run "worker:1 .* (busy|ready) "
note_coords
expect run "live-01 ps:0 is there" wait_re run "ps:0 .* ready "
expect run "live-01 the header says it trains" wait_re run "training"
pid=$(screen run | awk '{ for (i = 1; i < NF; i++) if ($i == "worker:1") { for (j = i + 1; j <= NF; j++) if ($j ~ /^[0-9]+$/) { print $j; exit } } }')
check "live-02 the table shows worker:1's pid" [ -n "$pid" ]
[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
# The table's lost/restarting can last less than a poll on a loaded
# machine (the restart is that quick); the events pane keeps the loss.
expect run "live-02 a killed worker shows as lost or restarting" \
  wait_re run "worker:1 .* (lost|restarting) |node lost worker:1: killed by signal 9"
expect run "live-02 then busy again, one restart" wait_re run "worker:1 .* busy +1 "
check "live-02 the script's print() went to the events (events.log)" grep -q "print training for 25 s" "$RUNS"/live-*/events.log
key run q
expect run "live-03 after q the run goes on with plain progress" wait_re run "^step [0-9]+/"
n=$((LIMIT * 3))
until [ -f "$TMP/run.status" ] || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
expect run "live-03 the script finishes, printing again" wait_re run "^SCRIPT DONE"
check "live-03 with exit status 0" [ "$(cat "$TMP/run.status" 2>/dev/null)" = 0 ]

# ------------------------------------------------ dash() in the REPL
tm new-session -d -s repl -x 140 -y 45 "cd '$TMP' && DROVER_HISTORY= LANG=C.UTF-8 '$DROVER'; sleep 60"
expect repl "live-04 the REPL starts" wait_re repl "^>"
key repl "c = drover.cluster { ps = 1, worker = 2, runs = '$RUNS', name = 'repl' }" Enter
expect repl "live-04 a cluster starts" wait_re repl "^> *$"
note_coords
key repl "dash()" Enter
expect repl "live-04 dash() shows its nodes" wait_re repl "worker:1 .* ready "
key repl q
expect repl "live-04 q returns to the prompt" wait_re repl "^> dash\(\)"
key repl "print(#c:nodes())" Enter
expect repl "live-04 the REPL works after it" wait_re repl "^3$"
key repl "c:shutdown()" Enter
sleep 1

# ------------------------------------------------ attach to a detached run
( cd "$TMP" && "$DROVER" run --detach "$SCRIPT" 3 20 >"$TMP/detach.out" 2>&1 )
check "live-05 --detach prints the run directory" grep -q "run directory:" "$TMP/detach.out"
dir=$(sed -n 's/^run directory: *//p' "$TMP/detach.out")
note_coords
n=$LIMIT
until grep -q "FIT DONE" "$dir/logs/script.log" 2>/dev/null || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "live-05 the detached fit finishes" grep -q "FIT DONE" "$dir/logs/script.log"
tm new-window -d -t repl -n att "LANG=C.UTF-8 '$DROVER' attach '$dir'; sleep 60"
expect repl:att "live-05 attach from a second window shows the nodes" wait_re repl:att "worker:0 .* ready "
steps=$(sed -n 's/^FIT DONE \([0-9]*\) steps.*/\1/p' "$dir/logs/script.log")
expect repl:att "live-05 it shows the run's step count ($steps)" wait_re repl:att "step $steps/"
printed=$("$DROVER" attach "$dir" --print | sed -n 's/.* step \([0-9]*\)\/.*/\1/p' | head -n 1)
check "live-05 --print agrees ($printed)" [ "$printed" = "$steps" ]
send repl:att '/worker:0' Enter
key repl:att Enter
expect repl:att "live-05 Enter opens worker:0's detail" wait_re repl:att "node worker:0"
expect repl:att "live-05 with its log tail, sent by the coordinator" wait_text repl:att "worker:0 I registered"
key repl:att Escape
key repl:att Escape
key repl:att q
n=$((LIMIT * 2))
until grep -q "SCRIPT DONE" "$dir/logs/script.log" 2>/dev/null || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "live-05 detaching did not stop the run; it ends by itself" grep -q "SCRIPT DONE" "$dir/logs/script.log"

# ------------------------------------------------ the end of a run under --dash
tm new-session -d -s end -x 140 -y 45 \
  "cd '$TMP' && LANG=C.UTF-8 '$DROVER' run --dash '$SCRIPT' 3; echo \$? >'$TMP/end.status'; sleep 60"
expect end "live-06 the dashboard shows the run" wait_re end "worker:1 .* (busy|ready) "
note_coords
expect end "live-06 when it ends, the last frame stays" wait_re end "run finished . q to leave"
expect end "live-06 with the run's nodes" wait_re end "worker:1 .* [0-9]"
expect end "live-06 and its last print() in the events" wait_text end "SCRIPT DONE"
check "live-06 the script has not exited yet" [ ! -f "$TMP/end.status" ]
key end q
expect end "live-06 after q, the output held back is printed" wait_line end "SCRIPT DONE"
in_order() { screen end | grep -A1 '^training for 3 s$' | grep -q '^FIT DONE'; }
expect end "live-06 all of it, in order" in_order
n=$LIMIT
until [ -f "$TMP/end.status" ] || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "live-06 with exit status 0" [ "$(cat "$TMP/end.status" 2>/dev/null)" = 0 ]

# ------------------------------------------------ in-process training under --dash
cat >"$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local d = data.csv("$PWD/examples/data/digits.csv", { label = -1 }):standardize()
local t0 = drover.clock()
local exp = drover.experiment {
  name = "inproc", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = d, batch = 32, epochs = 100000 }, seed = 1,
  progress = function() drover.sleep(0.002) return drover.clock() - t0 < 4 end,
}
local r = exp:fit()
print(string.format("RESULT %d steps", r.steps))
LUA
tm new-session -d -s inp -x 140 -y 45 \
  "cd '$TMP' && LANG=C.UTF-8 '$DROVER' run --dash '$TMP/fit.lua'; echo \$? >'$TMP/inp.status'; sleep 60"
expect inp "live-07 in-process training shows the dashboard: one local node" wait_re inp "local .* busy "
expect inp "live-07 with the loss panel" wait_text inp "train/loss"
expect inp "live-07 the last frame stays" wait_re inp "run finished . q to leave"
expect inp "live-07 the node is done" wait_re inp "local .* done "
key inp q
expect inp "live-07 after q, the result is printed" wait_re inp "^RESULT [0-9]+ steps"
n=$LIMIT
until [ -f "$TMP/inp.status" ] || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "live-07 with exit status 0" [ "$(cat "$TMP/inp.status" 2>/dev/null)" = 0 ]

# ------------------------------------------------ a script with nothing to show
echo 'print("hello")' >"$TMP/plain.lua"
"$DROVER" run --dash "$TMP/plain.lua" >"$TMP/plain.out" 2>"$TMP/plain.err"
check "live-08 a script without a cluster or a fit runs as usual" grep -qx hello "$TMP/plain.out"
check "live-08 and --dash says in one line that there was nothing to show" \
  sh -c "[ \$(wc -l <'$TMP/plain.err') -eq 1 ] && grep -q 'nothing to show' '$TMP/plain.err'"

# ------------------------------------------------ attach to finished runs
first=$(ls "$RUNS" | grep '^live-' | head -n 1)
second=$(ls "$RUNS" | grep '^live-' | sed -n 2p)
tm new-session -d -s post -x 140 -y 45 "cd '$TMP' && LANG=C.UTF-8 '$DROVER' attach '$first'; sleep 60"
expect post "live-09 attach to a finished run opens its records" wait_re post "finished at .* \(exit 0\)"
expect post "live-09 its nodes" wait_re post "worker:1 .* done "
expect post "live-09 its loss" wait_text post "train/loss"
expect post "live-09 its events" wait_text post "shutdown complete: 0 node failures"
key post q
expect post "live-09 q leaves" gone post "finished at"
tm new-session -d -s cmp -x 140 -y 45 "cd '$TMP' && LANG=C.UTF-8 '$DROVER' attach '$first' '$second'; sleep 60"
expect cmp "live-10 two runs compared: both named" wait_text cmp "$first vs $second"
expect cmp "live-10 their loss panels overlaid" wait_text cmp "train/loss  bright 1st, dim 2nd"
expect cmp "live-10 the status line says which is which" wait_re cmp "comparing .* \(bright\) with .* \(dim\)"
key cmp q
