# test_replica.sh - stopping a ps says first what will happen, in the
# dashboard (k, through tmux, answered n) and in `drover attach --stop`:
# "no checkpoint: updates since the start are lost", "restore from step N
# (checkpoint)", "promote replica ps:1", or, for a replica, that its
# primary serves alone. Real clusters on loopback, throttled until a file
# says stop (at most 90 s). Run from the repository root by tests/run.sh.
. tests/cli/lib.sh

SOCK=drover-replica-$$
LIMIT=200 # tenths of a second
TMUX_CASE=replica-t00
. tests/cli/tmux.sh
RUNS="$TMP/runs"
mkdir -p "$RUNS"

# The runs: tests/cli/train_until.lua RUNS NAME REPLICAS, a cluster of 1 ps
# (+ its replicas) and 2 workers training until $RUNS/stop-NAME exists;
# $RUNS/ckpt-NAME asks a checkpoint.
TRAIN=$PWD/tests/cli/train_until.lua

# ask S NODE: opens NODE's detail in session S and presses k.
ask() {
  key "$1" Escape Escape
  send "$1" "/$2" Enter
  key "$1" Enter
  wait_re "$1" "node $2" || return 1
  key "$1" k
}

# finish S NAME CASE: the run stops, q leaves its dashboard, its status is 0.
finish() {
  touch "$RUNS/stop-$2"
  n=$((LIMIT * 3))
  until [ -f "$TMP/$2.status" ] || [ "$n" -le 0 ]; do
    n=$((n - 1))
    [ $((n % 10)) -eq 0 ] && key "$1" Escape Escape q # the last frame stays until q
    sleep 0.1
  done
  check "$3 the run finished cleanly" [ "$(cat "$TMP/$2.status" 2>/dev/null)" = 0 ]
}

# ------------------------------------------------ no replica
tm new-session -d -s a -x 200 -y 45 \
  "LANG=C.UTF-8 '$DROVER' run --dash '$TRAIN' '$RUNS' plain 0; echo \$? >'$TMP/plain.status'; sleep 60"
expect a "replica-t01 the dashboard shows ps:0 training" wait_re a "ps:0 .* ready "
note_coords
# the fit has begun (ps:0 shows ready from its registration on; before the
# fit, k says "no fit is running")
wait_for 30 test -s "$RUNS/plain"
wait_for 30 grep -q " fit: " "$(cat "$RUNS/plain")/events.log"
ask a ps:0
expect a "replica-t01 k on a ps before any checkpoint: the updates are lost" \
  wait_re a "stop ps:0\? no checkpoint: updates since the start are lost .*\(y/n\)"
key a n
expect a "replica-t01 n stops nothing" wait_text a "not stopped"
touch "$RUNS/ckpt-plain"
RUN=$(cat "$RUNS/plain")
wait_for 30 grep -q "checkpoint step [0-9]*:" "$RUN/events.log"
step=$(sed -n 's/.*checkpoint step \([0-9]*\):.*/\1/p' "$RUN/events.log" | head -n 1)
check "replica-t02 a checkpoint was taken" [ -n "$step" ]
ask a ps:0
expect a "replica-t02 k on a ps after it: restore from that step" \
  wait_re a "stop ps:0\? restore from step $step \(checkpoint\): the steps since then run again \(y/n\)"
key a n
check "replica-t02 nothing was stopped" sh -c "! grep -q 'node stop' '$RUN/events.log'"
finish a plain replica-t02

# ------------------------------------------------ a replica
tm new-session -d -s b -x 200 -y 45 \
  "LANG=C.UTF-8 '$DROVER' run --dash '$TRAIN' '$RUNS' repl 1; echo \$? >'$TMP/repl.status'; sleep 60"
expect b "replica-t03 ps:1 is ps:0's replica" wait_re b "ps:1 .* replica "
note_coords
RUN=$(cat "$RUNS/repl")
ask b ps:1
expect b "replica-t03 k on the replica: its primary serves alone" \
  wait_re b "stop ps:1\? a replica: ps:0 serves alone until it is back, nothing is lost \(y/n\)"
key b n
ask b ps:0
expect b "replica-t04 k on the primary: its replica is promoted" \
  wait_re b "stop ps:0\? promote replica ps:1: no update is lost \(y/n\)"
key b y
expect b "replica-t04 y stops it, saying so" wait_re b "stopping ps:0 \(pid [0-9]+\): promote replica ps:1"
check "replica-t04 ps:1 was promoted" \
  wait_for 20 grep -q "replica ps:1 promoted in place of ps:0: no update lost" "$RUN/events.log"
check "replica-t04 ps:0 came back as the replica, in sync" \
  wait_for 30 grep -q "node synced ps:0" "$RUN/events.log"
"$DROVER" attach "$RUN" --control --stop ps:1 >"$TMP/stop.out" 2>"$TMP/stop.err"
check "replica-t05 attach --stop of the new primary succeeds" [ $? -eq 0 ]
check "replica-t05 it says first what happens" \
  grep -q "drover: stopping ps:1: promote replica ps:0: no update is lost" "$TMP/stop.err"
check "replica-t05 and it happens" \
  wait_for 20 grep -q "replica ps:0 promoted in place of ps:1: no update lost" "$RUN/events.log"
finish b repl replica-t05
