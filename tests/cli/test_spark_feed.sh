# test_spark_feed.sh - a PySpark program feeds an RDD to a drover run
# (drover_client.spark.feed) on a real standalone Spark (a master and one
# worker on loopback, from the pyspark of `make spark`, started by
# tests/spark/start.sh and stopped by pid by stop.sh on exit): 1 ps + 2
# workers launched by Spark (launcher = "spark": each node the task of a
# Spark application of its own, on an executor) fit digits with train = {
# feed = "external", epochs = 3 } from an RDD of 4 partitions. The tasks
# run on the workers' host, so each feeds a worker directly (FEED_ROUTE:
# the batches do not cross the coordinator; the coordinator's and the
# worker's records say so). Partition 1's first attempt SIGKILLs its
# executor's JVM mid-feed and Spark runs it again on a new executor;
# partition 3's task SIGKILLs, mid-feed, the worker node its feeder feeds
# directly and that node's executor, so that feeder goes back through the
# coordinator with what the worker had not acknowledged and the worker
# comes back as a new application; the fit still trains each batch
# exactly once (3 x 48 batches) and learns digits; nothing is left running
# in Spark afterwards. Skipped with the reason where Spark cannot start
# (start.sh exits 77); DROVER_SPARK_REQUIRED=1 (CI) makes that a failure.
# Under `make asan` it is skipped unless DROVER_SPARK_ASAN=1 (the C paths
# it drives, keyed and direct feeders, run under ASan in test_feed_keys.sh
# and test_feed_direct.sh).
# run.sh timeout: 600
. tests/cli/lib.sh
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark_feed: Spark under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs it)"
  exit 0
fi
: "${DROVER_SPARK_DIR:=$TMP/spark}" # ports: start.sh picks free ones
export DROVER_SPARK_DIR
engine_start spark "spark-feed-t00 tests/spark/start.sh starts Spark"
trainer=
at_exit '[ -n "$trainer" ] && kill -9 $trainer 2>/dev/null'
. "$DROVER_SPARK_DIR/env"
PY=$PYSPARK_PYTHON
export PYTHONPATH="$PWD/clients/python"

# digits, shuffled, 1437 rows to train and 360 to test, standardized with
# the training rows' statistics (the RDD's rows and the Lua eval's)
"$PY" - "$TMP" <<'PY'
import sys
import numpy as np
d = np.loadtxt("examples/data/digits.csv", delimiter=",", dtype=np.float64, ndmin=2)
d = d[np.random.default_rng(1).permutation(len(d))]
tr, te = d[:1437], d[1437:]
mu, sd = tr[:, :-1].mean(0), np.maximum(tr[:, :-1].std(0), 1e-6)
for name, part in (("train", tr), ("test", te)):
    np.savetxt("%s/%s.csv" % (sys.argv[1], name),
               np.hstack([(part[:, :-1] - mu) / sd, part[:, -1:]]), delimiter=",", fmt="%.6g")
PY

RUNS=$TMP/runs
mkdir -p "$RUNS"
cat > "$TMP/fed.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local test = data.csv("$TMP/test.csv", { label = -1 })
drover.seed(1)
local exp = drover.experiment {
  name = "sparkfed", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 3e-3 },
  model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  train = { feed = "external", epochs = 3, feed_timeout = 240 },
  eval = { data = test }, seed = 1, verbose = false,
}
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
local c = drover.cluster { launcher = "spark", ps = 1, worker = 2, runs = "$RUNS", name = "fed",
  bind = "127.0.0.1", reservation_timeout = 240,
  spark = { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
             ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } } }
local f = io.open("$RUNS/current", "w"); f:write(c.run_dir, "\n"); f:close()
local r = c:fit(exp)
print(string.format("FED %d TRAINED %d ACC %.4f", r.fed, r.batches, r.eval_accuracy))
io.stdout:flush()
if c.serve then -- predict from a client (Run.predict) is there
  data.write_csv("$TMP/lua_pred.csv", c:predict(exp, test))
  local sv = c:serve { predict = exp, idle = 20 }
  print(string.format("SERVED %d REQUESTS %d ROWS", sv.requests, sv.rows))
end
c:shutdown()
LUA
"$DROVER" run "$TMP/fed.lua" >"$TMP/fed.out" 2>&1 &
trainer=$!
wait_for 240 test -s "$RUNS/current"
RUN=$(cat "$RUNS/current" 2>/dev/null)
wait_for 30 test -s "$RUN/coordinator"


predict=
if "$PY" -c "import sys, drover_client.predict as p; sys.exit(0 if p.supported() else 1)" 2>/dev/null; then
  # no --serving: the predict job starts as the feed ends, and its tasks
  # ask again until the script serves (spark.predict's wait)
  predict="--predict $TMP/test.csv $TMP/py_pred.csv --kill-predict-in 2"
fi
# shellcheck disable=SC2086 # $predict: options
timeout 400 "$PY" tests/cli/spark_feed_job.py "$RUN" "$TMP/train.csv" --parts 4 \
  --kill-executor-in 1 --kill-worker-of 3 $predict >"$TMP/job.out" 2>"$TMP/job.err"
rc=$?
check "spark-feed-t01 the PySpark job succeeds (status $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 20 "$TMP/job.err" | grep -v "Stage " | sed 's/^/  job: /'
check "spark-feed-t01 the fit ended" wait_for 120 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "spark-feed-t01 the drover script exited 0" test $? -eq 0
trainer=
# 4 partitions of ~360 rows: 12 batches of 32 each, 3 passes (the fit's epochs)
check "spark-feed-t01 4 partitions fed 3 times (the fit's epochs), 144 batches taken and trained" \
  grep -q "^RESULT feed partitions 4 batches 144 trained 144 skipped" "$TMP/job.out"
check "spark-feed-t01 the fit trained exactly those 144 batches" grep -q "^FED 144 TRAINED 144 " "$TMP/fed.out"
acc=$(sed -n 's/^FED .* ACC \([0-9.]*\)$/\1/p' "$TMP/fed.out")
check "spark-feed-t01 and learned digits (eval accuracy '$acc' >= 0.9)" \
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
check "spark-feed-t02 partition 1's executor was SIGKILLed mid-feed" test -s "$TMP/killed"
check "spark-feed-t02 its feeder left without FEED_END" \
  grep -q "feeder spark-p1@[^ ]* left without FEED_END" "$RUN/events.log"
check "spark-feed-t02 the retried task took over its key" \
  grep -q "feeder spark-p1@[^ ]* takes over key [0-9a-f]*:1 from " "$RUN/events.log"
# every task that died with the executor (partition 1's and any other it
# ran) was taken over by its retry, which skipped what was taken: what the
# coordinator had (takes over ... N batches taken already), or for a key
# fed directly, what its worker said it took once the old connection was
# closed (the worker took batches up to N of key K)
skipped=$(sed -n 's/^RESULT feed .* skipped \([0-9]*\) direct [0-9]*$/\1/p' "$TMP/job.out")
taken=$(awk '
  / takes over key / { k = $0; sub(/.* takes over key /, "", k); sub(/ .*/, "", k)
                       n = $0; sub(/.*: /, "", n); sub(/ batches taken already.*/, "", n); t[k] = n }
  /: the worker took batches up to / { k = $0; sub(/.* of key /, "", k); sub(/ .*/, "", k)
                       n = $0; sub(/.* up to /, "", n); sub(/ .*/, "", n); t[k] = n }
  END { for (k in t) s += t[k]; print s + 0 }' "$RUN/events.log")
check "spark-feed-t02 and the retries sent none of the batches taken before (skipped '$skipped' = $taken)" \
  [ "$skipped" = "$taken" ]
# the tasks on the workers' host fed them directly
direct=$(sed -n 's/^RESULT feed .* direct \([0-9]*\)$/\1/p' "$TMP/job.out")
check "spark-feed-t05 the coordinator routed the tasks' feeders to the workers on their host" \
  grep -q "feeder spark-p[0-3]@[^ ]* on [^ ]* feeds worker:[01] directly (127.0.0.1:[0-9]*, slot" "$RUN/events.log"
check "spark-feed-t05 the tasks sent batches to the workers directly (job: '$direct')" \
  sh -c "[ -n '$direct' ] && [ '$direct' -gt 0 ]"
ndirect=$(sed -n 's/.*feed: \([0-9]*\) batches trained by the worker their feeder sent them to directly/\1/p' "$RUN/events.log")
check "spark-feed-t05 the coordinator counted batches trained by the worker fed directly ('$ndirect' of 144)" \
  sh -c "[ -n '$ndirect' ] && [ '$ndirect' -gt 0 ] && [ '$ndirect' -le 144 ]"
check "spark-feed-t05 worker-0's own log: direct feeders' connections and what each took" \
  grep -q "direct feeder of slot [0-9]* closed after batch [0-9]* ([0-9]* taken)" "$RUN/logs/worker-0.log"
vw=$(sed -n 's/^\(worker:[01]\) node .*/\1/p' "$TMP/killed_worker" 2>/dev/null)
check "spark-feed-t06 partition 3's task SIGKILLed the worker it fed directly and its executor ('$vw')" \
  test -n "$vw"
check "spark-feed-t06 the coordinator saw $vw lost" grep -q "node lost $vw" "$RUN/events.log"
check "spark-feed-t06 and sent partition 3's feeder back through the coordinator mid-feed" \
  grep -q "feeder spark-p3@[^ ]*: $vw, which it fed directly, was lost; its batches after [0-9]* go through the coordinator" "$RUN/events.log"
check "spark-feed-t06 $vw came back as a new Spark application" \
  sh -c "[ \$(grep -c '^drover-spark: ${vw%%:*}-${vw#*:} is application app-' '$RUN/logs/${vw%%:*}-${vw#*:}.log') -ge 2 ]"
if [ -n "$predict" ]; then
  check "spark-feed-t04 spark.predict gave 360 outputs for the 360 test rows" \
    grep -q "^RESULT predicted 360 rows in 4 partitions" "$TMP/job.out"
  check "spark-feed-t04 partition 2's executor was SIGKILLed mid-predict" test -s "$TMP/killed_predict"
  # a request per partition and its retry: 4 partitions of ~90 rows, one run again
  check "spark-feed-t04 the run answered the retried partition again (more than 4 requests)" \
    awk '/^SERVED/ { exit !($2 > 4 && $4 > 360) } END { if (NR == 0) exit 1 }' "$TMP/fed.out"
  check "spark-feed-t04 every output is the script's own c:predict of that row, in order" \
    python3 - "$TMP/lua_pred.csv" "$TMP/py_pred.csv" <<'PY'
import sys
a = [[float(v) for v in l.split(",")] for l in open(sys.argv[1]) if l.strip()]
b = [[float(v) for v in l.split(",")] for l in open(sys.argv[2]) if l.strip()]
ok = len(a) == len(b) == 360 and all(
    len(r) == len(s) and all(abs(u - v) <= 1e-4 * max(1, abs(u)) for u, v in zip(r, s))
    for r, s in zip(a, b))
sys.exit(0 if ok else 1)
PY
else
  echo "SKIP spark-feed-t04 predict: this drover's Python client has no Run.predict"
fi
check "spark-feed-t03 the Spark context stopped" grep -q "^RESULT stopped" "$TMP/job.out"

# Nothing left in Spark: no active application, no executor of ours.
no_active_app() {
  python3 - "$DROVER_SPARK_UI" <<'PY'
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1] + "/json/", timeout=5))
sys.exit(1 if m["activeapps"] else 0)
PY
}
check "spark-feed-t03 no application is left active in Spark" wait_for 30 no_active_app
left=$(ps -eo pid=,args= | grep -F "$RUNS" | grep -v grep)
check "spark-feed-t03 no drover node of the run is left ($left)" [ -z "$left" ]
