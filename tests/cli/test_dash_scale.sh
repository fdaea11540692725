# test_dash_scale.sh - the dashboard's + and - on a worker row (issue 28),
# through tmux: attached with --control to a detached run, + grows its
# cluster by one worker (the node table shows worker:2 ready), - shrinks
# it again (worker:2 removed), + on a worker at max is refused in the
# status line naming max; attached read-only, + is refused in the status
# line and nothing changes; `drover scale RUN worker=+1` (the same text)
# and evaluator=1 refused saying why. Every process started is ended by pid (the
# coordinator's, note_coords); every wait is bounded.
. tests/cli/lib.sh

SOCK=drover-dscale-$$
LIMIT=300 # tenths of a second
TMUX_CASE=dscale-00
. tests/cli/tmux.sh
RUNS="$TMP/runs"
mkdir -p "$RUNS"

# A cluster of 2 workers (up to 3) that waits (up to 120 s) for arg[2].
cat >"$TMP/dscale.lua" <<'LUA'
local c = drover.cluster { ps = 1, worker = { instances = 2, min = 1, max = 3 }, runs = arg[1],
  name = "dscale" }
print("UP")
io.stdout:flush()
for _ = 1, 1200 do if io.open(arg[2]) then break end drover.sleep(0.1) end
c:shutdown()
LUA

( cd "$TMP" && "$DROVER" run --detach "$TMP/dscale.lua" "$RUNS" "$TMP/go" >"$TMP/det.out" 2>&1 )
dir=$(sed -n 's/^run directory: *//p' "$TMP/det.out")
check "dscale-01 the run started detached" [ -n "$dir" ]
note_coords
at_exit "touch '$TMP/go'"

tm new-session -d -s ro -x 160 -y 45 "LANG=C.UTF-8 '$DROVER' attach '$dir'; sleep 60"
expect ro "dscale-02 read-only: the nodes" wait_re ro "worker:1 .* ready "
send ro '/worker' Enter
send ro '+'
expect ro "dscale-02 read-only: + refused in the status line" \
  wait_text ro "read-only: attach with --control to add or remove workers"
key ro q

tm new-session -d -s ctl -x 160 -y 45 "LANG=C.UTF-8 '$DROVER' attach --control '$dir'; sleep 60"
expect ctl "dscale-03 control: the nodes" wait_re ctl "worker:1 .* ready "
check "dscale-03 read-only changed nothing" sh -c "! grep -q 'scale: worker' '$dir/events.log'"
send ctl '/worker' Enter
send ctl '+'
expect ctl "dscale-03 + : scaling 2 -> 3" wait_text ctl "scaling: worker 2 -> 3"
expect ctl "dscale-03 the table shows worker:2 ready" wait_re ctl "worker:2 .* ready "
check "dscale-03 events.log: requested by the dashboard" \
  grep -q "scale: worker 2 -> 3 (requested by drover scale from " "$dir/events.log"
send ctl '+'
expect ctl "dscale-04 + at max: refused naming max" wait_text ctl "worker = 4 is above max = 3"
send ctl '-'
expect ctl "dscale-05 - : scaling 3 -> 2" wait_text ctl "scaling: worker 3 -> 2"
expect ctl "dscale-05 the table shows worker:2 removed" wait_re ctl "worker:2 .* removed "
key ctl q

# the same text from the command line: relative counts, other roles refused
"$DROVER" scale "$dir" worker=+1 >"$TMP/rel.out" 2>&1
check "dscale-06 drover scale worker=+1: 2 -> 3" grep -q "scaling: worker 2 -> 3" "$TMP/rel.out"
"$DROVER" scale "$dir" evaluator=1 >"$TMP/ev.out" 2>&1
check "dscale-06 drover scale evaluator=1 refused, saying why" \
  grep -q "evaluator cannot be scaled: a cluster has 0 or 1 evaluator" "$TMP/ev.out"

touch "$TMP/go"
n=$LIMIT
until grep -q "shutdown complete" "$dir/events.log" 2>/dev/null || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "dscale-07 the run ended cleanly" grep -q "shutdown complete: 0 node failures" "$dir/events.log"
