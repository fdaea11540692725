# test_dash_live.sh - the dashboard over real clusters, through tmux:
# `drover run --dash` (nodes and states, a SIGKILLed worker lost then
# restarting then busy, q leaving it while the run goes on with plain
# progress lines), dash() in the REPL (q back to the prompt), and attach
# from a second window to a detached run (the same step count as --print;
# a node's log tail in the detail view, sent by the coordinator).
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-live-$$
LIMIT=200 # tenths of a second
TMUX_CASE=live-00
. tests/cli/tmux.sh
COORDS=""
cleanup() {
  for p in $COORDS; do kill -9 "$p" 2>/dev/null; done
  tmux_cleanup
}
trap cleanup EXIT
export RUNS="$TMP/runs"
SCRIPT="$PWD/tests/cli/dash_train.lua"

# The coordinators we start, by pid, from their run directories.
note_coord() {
  for f in "$RUNS"/*/coordinator; do
    [ -f "$f" ] || continue
    p=$(awk '{ print $2; exit }' "$f") # "ADDRESS PID"
    [ -n "$p" ] && COORDS="$COORDS $p"
  done
}

# ------------------------------------------------ drover run --dash
tm new-session -d -s run -x 140 -y 45 \
  "cd '$TMP' && LANG=C.UTF-8 '$DROVER' run --dash '$SCRIPT' 25; echo \$? >'$TMP/run.status'; sleep 60"
# The dashboard draws where the script writes: its progress is held back
# and its print() lines go to the events pane until q.
expect run "live-01 the dashboard shows the cluster" wait_re run "worker:1 .* (busy|ready) "
note_coord
expect run "live-01 ps:0 is there" wait_re run "ps:0 .* ready "
expect run "live-01 the header says it trains" wait_re run "training"
pid=$(screen run | awk '{ for (i = 1; i < NF; i++) if ($i == "worker:1") { for (j = i + 1; j <= NF; j++) if ($j ~ /^[0-9]+$/) { print $j; exit } } }')
check "live-02 the table shows worker:1's pid" [ -n "$pid" ]
[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
expect run "live-02 a killed worker shows as lost or restarting" wait_re run "worker:1 .* (lost|restarting) "
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
note_coord
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
note_coord
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
