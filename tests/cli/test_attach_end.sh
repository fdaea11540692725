# test_attach_end.sh - `drover attach` when the run it watches ends, through
# tmux: a run that finishes, and one whose coordinator is SIGKILLed. Within
# 2 s the frame says "run finished" (or "coordinator lost"), the attach
# process then idles (its CPU time over 5 s, from /proc/PID/stat, is under
# 5% of a core) and q leaves with status 0. A status message shown after the
# end (a key's) comes after the banner, not over it. The other end of a
# run: `drover stop` of a cluster the interactive REPL hosts shuts it down
# at the prompt, and the REPL says so and gives back the line being typed;
# an attach client's ':' line is answered at that prompt too.
# Every process this test starts is ended by pid; every wait is bounded.
. tests/cli/lib.sh

SOCK=drover-attend-$$
LIMIT=200 # tenths of a second
TMUX_CASE=attend-00
. tests/cli/tmux.sh
export RUNS="$TMP/runs"
SCRIPT="$PWD/tests/cli/dash_train.lua"
END=20 # tenths of a second from the run's end to the banner
[ -n "${SANITIZED:-}" ] && END=60

# cpu_ticks PID: its user + system time so far, in clock ticks. The
# command name (field 2) may hold spaces: count from after its ')'.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }

# detached SECONDS: starts dash_train.lua detached for SECONDS of training;
# sets DIR and CPID (its coordinator, the detached process).
detached() {
  ( cd "$TMP" && "$DROVER" run --detach "$SCRIPT" "$1" >"$TMP/detach.out" 2>&1 )
  DIR=$(sed -n 's/^run directory: *//p' "$TMP/detach.out")
  CPID=$(sed -n 's/^pid: *//p' "$TMP/detach.out")
  kill_at_exit $CPID
}

# attach_in SESSION: `drover attach $DIR` in a tmux session whose shell
# writes attach's exit status to $TMP/SESSION.status; sets APID.
attach_in() {
  tm new-session -d -s "$1" -x 140 -y 45 \
    "cd '$TMP' && LANG=C.UTF-8 '$DROVER' attach '$DIR'; echo \$? >'$TMP/$1.status'; sleep 60"
  APID=""
  n=50
  while [ -z "$APID" ] && [ "$n" -gt 0 ]; do
    sh_pid=$(tm display-message -p -t "$1" '#{pane_pid}' 2>/dev/null)
    APID=$(ps -o pid= --ppid "$sh_pid" 2>/dev/null | tr -d ' ' | head -n 1)
    n=$((n - 1))
    [ -z "$APID" ] && sleep 0.1
  done
  kill_at_exit $APID
}

# banner SESSION TEXT: within END tenths of a second, TEXT on the screen.
banner() { LIMIT=$END wait_text "$1" "$2"; }

# idles CASE: attach's CPU time over 5 s stays under 5% of a core.
idles() {
  hz=$(getconf CLK_TCK)
  t0=$(cpu_ticks "$APID")
  sleep 5
  t1=$(cpu_ticks "$APID")
  used=$(( ${t1:-999999} - ${t0:-0} ))
  check "$1 then idles: $used ticks of CPU in 5 s (under $((hz / 4)))" \
    [ -n "$t0" -a -n "$t1" -a "$used" -lt $((hz / 4)) ]
}

# leaves SESSION CASE: q ends attach with status 0.
leaves() {
  key "$1" q
  n=$LIMIT
  until [ -f "$TMP/$1.status" ] || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
  check "$2 q leaves with status 0" [ "$(cat "$TMP/$1.status" 2>/dev/null)" = 0 ]
}

# ------------------------------------------------ a run that finishes
detached 4
check "attend-01 the detached run started" [ -d "$DIR" -a -n "$CPID" ]
attach_in fin
check "attend-01 attach runs (pid $APID)" [ -n "$APID" ]
expect fin "attend-01 attach shows the nodes" wait_re fin "worker:1 .* (busy|ready) "
n=$((LIMIT * 3))
while kill -0 "$CPID" 2>/dev/null && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
check "attend-01 the run ended by itself" sh -c "! kill -0 $CPID 2>/dev/null"
expect fin "attend-01 within 2 s the frame says the run finished" banner fin "run finished"
idles attend-01
leaves fin attend-01

# ------------------------------------------------ a coordinator SIGKILLed
detached 120
attach_in lost
check "attend-02 attach runs (pid $APID)" [ -n "$APID" ]
expect lost "attend-02 attach shows the nodes" wait_re lost "worker:1 .* (busy|ready) "
NODES=$("$DROVER" attach "$DIR" --print 2>/dev/null | awk '$1 ~ /^(ps|worker):/ { print $3 }')
kill_at_exit $NODES
# the theme's name, on the status line for its first 3 s, would hide the banner
expect lost "attend-02 the key hints are back on the status line" wait_text lost "q quit"
kill -9 "$CPID"
expect lost "attend-02 within 2 s the frame says the coordinator was lost" banner lost "coordinator lost"
idles attend-02
# a message of the moment (s: "sort: ...", 2 s) follows the end banner on
# the status line: it does not hide it
both() { screen lost | grep "coordinator lost" | grep -q "sort:"; }
key lost s
expect lost "attend-03 a status message does not hide the end banner" wait_for 3 both
leaves lost attend-02

# ------------------------------------------------ drover stop of a cluster the REPL hosts
# At the prompt, with a line half typed: the cluster is shut down, the REPL
# says so above the prompt and gives the line back.
tm new-session -d -s repl -x 150 -y 40 \
  "cd '$TMP' && DROVER_HISTORY= LANG=C.UTF-8 '$DROVER' repl; sleep 60"
send repl 'c = drover.cluster { ps = 1, worker = 1, runs = os.getenv("RUNS"), name = "replstop" }' Enter
wait_for 60 sh -c "ls '$RUNS'/replstop-*/coordinator >/dev/null 2>&1"
RDIR=$(ls -d "$RUNS"/replstop-* 2>/dev/null | head -n 1)
wait_for 30 sh -c "[ \$(awk 'NR > 1 && \$2 > 0' '$RDIR/nodes.tsv' 2>/dev/null | wc -l) -ge 2 ]"
RNODES=$(awk -F'\t' 'NR > 1 && $2 > 0 { print $2 }' "$RDIR/nodes.tsv" 2>/dev/null)
kill_at_exit $RNODES $(ps -o pid= --ppid "$(tm display-message -p -t repl '#{pane_pid}')" 2>/dev/null)
send repl 'print("typed'
wait_text repl 'print("typed'
# attend-05: while the prompt waits (a line half typed), an attach
# client's ':' line runs, and the line being typed stays
timeout 20 "$DROVER" attach "$RDIR" --control --command "return 6 * 7" >"$TMP/rcmd.out" 2>&1
check "attend-05 a ':' line is answered while the REPL's prompt waits" grep -q "^42$" "$TMP/rcmd.out"
expect repl "attend-05 the line being typed stays" wait_re repl '^> print\("typed$'
"$DROVER" stop --wait 60 "$RDIR" >"$TMP/rstop.out" 2>&1
check "attend-04 drover stop of a cluster the REPL hosts, at its prompt, succeeds" [ $? -eq 0 ]
expect repl "attend-04 the REPL says its cluster was shut down" \
  wait_text repl "was stopped: its cluster is shut down"
expect repl "attend-04 the line being typed is given back" wait_re repl '^> print\("typed$'
alive=0
for p in $RNODES; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
check "attend-04 its nodes ($(echo $RNODES)) are gone" [ -n "$RNODES" -a "$alive" -eq 0 ]
send repl ' again")' Enter
expect repl "attend-04 the REPL goes on with that line" wait_line repl "typed again"
key repl C-d
