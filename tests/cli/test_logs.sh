# test_logs.sh - `drover logs`: a run's node logs merged in time order with
# each node's name, one node's alone, run names and their prefixes, and -f
# following a live local cluster until it ends. Every wait is bounded;
# processes this test started are ended by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"

# A cluster that waits for $TMP/go, then trains (sync, so each ps logs its
# mode), then shuts down.
cat >"$TMP/cl.lua" <<LUA
local nn = drover.nn
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "logme" }
local f = assert(io.open("$TMP/ready", "w")); f:close()
local t0 = drover.clock()
while not io.open("$TMP/go") and drover.clock() - t0 < 60 do drover.sleep(0.1) end
c:fit(drover.experiment { verbose = false, mode = "sync",
  model = nn.Linear(4, 2), loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8 } })
drover.sleep(0.5)
c:shutdown()
LUA
"$DROVER" run "$TMP/cl.lua" >"$TMP/cl.out" 2>&1 &
run=$!
wait_for 60 test -e "$TMP/ready"
RUN=$(ls -d "$RUNS"/logme-* 2>/dev/null)
(cd "$TMP" && exec "$DROVER" logs logme -f) >"$TMP/f.out" 2>&1 &
fpid=$!
(cd "$TMP" && exec "$DROVER" logs "$RUN" ps:0 --follow) >"$TMP/f1.out" 2>&1 &
f1pid=$!
wait_for 10 grep -q "^worker:1 *| .*registered" "$TMP/f.out"
check "logs-01 -f prints what is there, each line after its node" grep -q "^worker:1 *| .*registered" "$TMP/f.out"
touch "$TMP/go"
wait_for 60 sh -c "! kill -0 $run 2>/dev/null"
check "logs-02 -f ends by itself when the run ends" wait_for 20 sh -c "! kill -0 $fpid 2>/dev/null && ! kill -0 $f1pid 2>/dev/null"
kill -9 $run $fpid $f1pid 2>/dev/null
wait $fpid; frc=$?
check "logs-02 with status 0" [ $frc -eq 0 ]
check "logs-03 -f printed what was logged after it started" grep -q "^ps:0 *| .*sync training: 2 gradients per update" "$TMP/f.out"
check "logs-03 up to the nodes' exit" grep -q "^coordinator *| .*ps:0 exited with status 0" "$TMP/f.out"
check "logs-04 one node -f: its lines, unprefixed" sh -c "grep -q '^20[0-9-]*T.* ps:0 I sync training' '$TMP/f1.out' && ! grep -qv ' ps:0 ' '$TMP/f1.out'"
check "logs-04 one node's log whole" cmp -s "$TMP/f1.out" "$RUN/logs/ps-0.log"

"$DROVER" logs "$RUN" >"$TMP/all.out" 2>&1
check "logs-05 all nodes merged: every line of every log" [ "$(wc -l <"$TMP/all.out")" -eq "$(cat "$RUN"/logs/*.log | wc -l)" ]
sed 's/^[^|]*| //' "$TMP/all.out" | cut -c1-24 | grep '^20' >"$TMP/stamps"
check "logs-05 in time order" sh -c "sort -c '$TMP/stamps'"
check "logs-05 all the nodes" sh -c "for n in coordinator ps:0 worker:0 worker:1; do grep -q \"^\$n *| \" '$TMP/all.out' || exit 1; done"
(cd "$TMP" && "$DROVER" logs "$(basename "$RUN")" worker-1) >"$TMP/w1.out" 2>&1
check "logs-06 a name as ls prints it, worker-1 as worker:1" cmp -s "$TMP/w1.out" "$RUN/logs/worker-1.log"
"$DROVER" logs "$RUN" ps:3 >/dev/null 2>"$TMP/nonode.err"
check "logs-07 no such node: status 1" [ $? -eq 1 ]
check "logs-07 naming the nodes it has" grep -q "has no node 'ps:3' (its logs: coordinator, ps:0, worker:0, worker:1)" "$TMP/nonode.err"
"$DROVER" logs nosuch --runs "$RUNS" >/dev/null 2>"$TMP/norun.err"
check "logs-08 no such run: status 1, said" sh -c "[ $? -eq 1 ] && grep -q \"no run 'nosuch'\" '$TMP/norun.err'"
"$DROVER" logs >/dev/null 2>&1
check "logs-08 no run: a usage error" [ $? -eq 2 ]

# A prefix names the one run that starts so; an in-process run shows its events.
cat >"$TMP/ip.lua" <<LUA
local nn = drover.nn
drover.experiment { name = "logip", runs = "$RUNS", verbose = false, model = nn.Linear(4, 2),
  loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 16, features = 4, classes = 2 }, batch = 8 } }:fit()
LUA
"$DROVER" run "$TMP/ip.lua" >/dev/null 2>&1
"$DROVER" logs logi --runs "$RUNS" >"$TMP/ip.out" 2>&1
check "logs-09 a unique prefix: its run; in process: its events" grep -q "^events | .*in-process run: pid" "$TMP/ip.out"

# export-metrics: the scalars in one table, TensorBoard's CSV with the tag
# (and node) beside each value; wall times in Unix seconds across fits.
cat >"$TMP/two.lua" <<LUA
local nn = drover.nn
local ds = drover.data.synthetic { n = 16, features = 4, classes = 2 }
local exp = drover.experiment { name = "two", runs = "$RUNS", verbose = false, model = nn.Linear(4, 2),
  loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = ds, batch = 8 }, eval = { data = ds } }
exp:fit()
drover.sleep(1.1)
exp:fit()
LUA
t0=$(date +%s)
"$DROVER" run "$TMP/two.lua" >/dev/null 2>&1
t1=$(( $(date +%s) + 1 ))
"$DROVER" export-metrics two --runs "$RUNS" >"$TMP/two.csv" 2>&1
check "metrics-01 CSV with a header" [ "$(head -1 "$TMP/two.csv")" = "wall_time,tag,step,value,node" ]
TWO=$(ls -d "$RUNS"/two-*)
check "metrics-01 every scalar: each number of metrics.jsonl but time, step, epoch, examples" [ "$(tail -n +2 "$TMP/two.csv" | wc -l)" -eq "$(python3 -c "
import json
print(sum(1 for l in open('$TWO/metrics.jsonl') for k, v in json.loads(l).items()
          if k not in ('time', 'step', 'epoch', 'examples') and (v is None or isinstance(v, (int, float)))))")" ]
check "metrics-01 the tags: loss, accuracy, eval_loss, eval_accuracy (2 fits x 2 steps, 2 evals)" sh -c "for t in loss:4 accuracy:4 eval_loss:2 eval_accuracy:2; do [ \$(cut -d, -f2 '$TMP/two.csv' | grep -cx \${t%:*}) -eq \${t#*:} ] || exit 1; done"
check "metrics-02 wall times in Unix seconds, within the run" awk -F, -v a="$t0" -v b="$t1" 'NR > 1 && ($1 < a || $1 > b) { bad = 1 } END { exit bad }' "$TMP/two.csv"
check "metrics-02 the second fit a second later than the first" awk -F, 'NR == 2 { first = $1 } NR > 1 { last = $1 } END { exit !(last - first >= 1) }' "$TMP/two.csv"
"$DROVER" export-metrics "$RUN" --jsonl -o "$TMP/cl.jsonl" >"$TMP/cl.out" 2>&1
check "metrics-03 --jsonl -o FILE: nothing on stdout" [ ! -s "$TMP/cl.out" ]
check "metrics-03 one JSON object per value, with the node" python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$TMP/cl.jsonl')]
assert rows and all(set(r) >= {'wall_time', 'tag', 'step', 'value'} for r in rows)
assert any(r['tag'] == 'loss' and r['node'].startswith('worker:') for r in rows)
"
check "metrics-03 as many as metrics.jsonl has values" [ "$(wc -l <"$TMP/cl.jsonl")" -eq "$(grep -o '"loss"\|"accuracy"\|"eval_loss"\|"eval_accuracy"' "$RUN/metrics.jsonl" | wc -l)" ]
# metrics-05: a cluster's fits begin at their own "fit: ..." line, not at
# the other "fit: ..." lines of the fit before (its progress function
# stopping it, a sync fit's end): the second fit, 1.1 s after the first,
# keeps that gap in its wall times.
cat >"$TMP/cl2.lua" <<LUA
local nn = drover.nn
local ds = drover.data.synthetic { n = 256, features = 4, classes = 2 }
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "cltwo" }
local function exp(stop)
  return drover.experiment { name = "cltwo", verbose = false, model = nn.Linear(4, 2), mode = "sync",
    loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.1 },
    train = { data = ds, batch = 8, max_steps = 20 },
    progress = function(p) if stop and p.step >= 6 then return false end end }
end
c:fit(exp(true))
drover.sleep(1.1)
c:fit(exp(false))
c:shutdown()
LUA
"$DROVER" run "$TMP/cl2.lua" >"$TMP/cl2.out" 2>&1
"$DROVER" export-metrics cltwo --runs "$RUNS" >"$TMP/cl2.csv" 2>&1
check "metrics-05 a cluster's second fit keeps its 1.1 s after the first (not counted from the first's last lines)" \
  python3 - "$TMP/cl2.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["tag"] == "loss"]
cut = next(i for i in range(1, len(rows)) if int(rows[i]["step"]) < int(rows[i - 1]["step"]))
gap = float(rows[cut]["wall_time"]) - float(rows[cut - 1]["wall_time"])
assert gap >= 1.0, (gap, rows[cut - 1], rows[cut])
PY
"$DROVER" export-metrics nosuch --runs "$RUNS" >/dev/null 2>"$TMP/m.err"
check "metrics-04 no such run: status 1, said" sh -c "[ $? -eq 1 ] && grep -q \"no run 'nosuch'\" '$TMP/m.err'"
"$DROVER" export-metrics "$RUN" --xml >/dev/null 2>&1
check "metrics-04 an unknown option is a usage error" [ $? -eq 2 ]
