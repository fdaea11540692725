# test_spark.sh - the spark launcher against a real standalone Spark (a
# master and one worker on loopback, from the pyspark of `make spark`)
# started by tests/spark/start.sh and stopped by stop.sh on exit: 1 ps + 2
# workers, each the task of a Spark application of its own, learn digits;
# a worker's node SIGKILLed mid-fit is relaunched as a new application
# while the others run on; a reservation Spark cannot serve names the
# missing nodes with what Spark says; options drover does not honour are
# refused; a closure's print() and io.stderr on an executor reach the
# worker's log (--log-forward); and nothing is left running in Spark (the
# master's JSON).
# Skipped, with the reason, where Spark cannot start (no `make spark` venv,
# no Java: start.sh exits 77); DROVER_SPARK_REQUIRED=1 (CI) makes that a
# failure. Under `make asan` (SANITIZED=1) only the refusals run: the JVMs
# take most of a minute per cluster on a loaded machine, and the C paths
# the runs drive (the task base, spawn, exits; LOG) are the ones the local
# launcher's tests and test_logfwd.sh run under ASan; DROVER_SPARK_ASAN=1
# runs everything there too.
# run.sh timeout: 600
. tests/cli/lib.sh
RUNS=$TMP/runs
# spark-t00: options drover does not honour are refused before anything runs
refused() { # NAME SPEC PATTERN
  cat >"$TMP/$1.lua" <<LUA
local ok, err = pcall(drover.cluster, { runs = "$RUNS", name = "$1", $2 })
assert(not ok, "accepted")
io.stdout:write("error: ", err, "\n")
LUA
  timeout 30 "$DROVER" run "$TMP/$1.lua" >"$TMP/$1.out" 2>&1
  check "spark-t00 $1 is refused, saying why" grep -q "$3" "$TMP/$1.out"
}
refused conf_reserved 'launcher = "spark", spark = { master = "spark://127.0.0.1:1", conf = { ["spark.task.maxFailures"] = "4" } }' \
  "conf 'spark.task.maxFailures' is set by drover"
refused conf_key 'launcher = "spark", spark = { master = "spark://127.0.0.1:1", conf = { ["executor.memory"] = "1g" } }' \
  "conf key 'executor.memory' is not a Spark property"
refused gpus_conf 'launcher = "spark", worker = { instances = 1, gpus = 1 }, spark = { master = "spark://127.0.0.1:1", conf = { ["spark.task.resource.gpu.amount"] = "2" } }' \
  "conf 'spark.task.resource.gpu.amount' and a role's gpus both set"
refused no_master 'launcher = "spark", spark = { }' 'needs spark = { master'
refused not_spark 'spark = { master = "spark://127.0.0.1:1" }' 'spark = {...} is for launcher = "spark"'
refused unknown_key 'launcher = "spark", spark = { master = "spark://127.0.0.1:1", queue = "x" }' 'queue'

if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark: the runs on Spark under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs them)"
  exit 0
fi

# A Spark of this run's own: its state under $TMP and its own ports, so two
# test runs on one machine never stop each other's daemons.
: "${DROVER_SPARK_DIR:=$TMP/spark}" # ports: start.sh picks free ones
export DROVER_SPARK_DIR
engine_start spark "spark-t00 tests/spark/start.sh starts Spark"
. "$DROVER_SPARK_DIR/env"

# master FIELD: what the master's JSON says (python3 of the system).
master() {
  python3 - "$DROVER_SPARK_UI" "$1" <<'PY'
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1] + "/json/", timeout=5))
if sys.argv[2] == "active":
    print(" ".join("%s:%s:%s" % (a["id"], a["name"], a["state"]) for a in m["activeapps"]))
else:
    print(" ".join("%s:%s:%s" % (a["id"], a["name"], a["state"]) for a in m["completedapps"]))
PY
}
no_active_app() { [ -z "$(master active)" ]; }

# The cluster's Spark options, shared: small, quick-starting JVMs.
cat > "$TMP/spark.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
return { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
  conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
           ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } }
LUA

# spark-t01/t02: one cluster, two fits: the first as it is, the second with
# worker:1's node SIGKILLed mid-fit.
cat > "$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local function exp(progress)
  drover.seed(1)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train_std, batch = 32, epochs = 10 },
    eval = { data = test_ds:standardize(stats), every = 1000 }, seed = 1, verbose = false,
    progress = progress,
  }
end
local node = dofile("$PWD/tests/lua/t.lua").node
local c = drover.cluster { launcher = "spark", ps = 1, worker = 2, runs = "$RUNS", name = "fit",
  bind = "127.0.0.1", reservation_timeout = 240, spark = dofile("$TMP/spark.lua") }
io.stdout:write("run_dir ", c.run_dir, "\n")
-- a worker's own stdout and stderr reach its log too (--log-forward)
c:schedule(function()
  print("spark print from a closure")
  io.stderr:write("spark stderr from a closure\n")
  return true
end):fetch()
local r = c:fit(exp())
io.stdout:write(string.format("eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
local victim, killed = node(c, "worker", 1)
r = c:fit(exp(function(p)
  if killed or p.step < 60 then return end
  killed = p.step
  io.stdout:write("killing worker:1 node pid ", victim.pid, " at step ", p.step, "\n")
  os.execute("kill -9 " .. victim.pid)
end))
io.stdout:write(string.format("second fit: eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
local t0, w = drover.clock()
repeat
  drover.sleep(0.2)
  w = node(c, "worker", 1)
until (w.restarts == 1 and w.state == "ready") or drover.clock() - t0 > 120
io.stdout:write("worker:1 ", w.state, " restarts ", w.restarts, "\n")
for _, n in ipairs(c:nodes()) do
  if n.role ~= "worker" or n.index ~= 1 then io.stdout:write(n.role, ":", n.index, " restarts ", n.restarts, "\n") end
end
c:shutdown() -- raises if a node failed
io.stdout:write("shut down\n")
LUA
timeout 280 "$DROVER" run "$TMP/fit.lua" >"$TMP/fit.out" 2>&1
rc=$?
check "spark-t01 a run with launcher = \"spark\" succeeds (status $rc)" [ $rc -eq 0 ]
acc=$(sed -n 's/^eval_accuracy \([0-9.]*\) .*/\1/p' "$TMP/fit.out")
check "spark-t01 1 ps + 2 workers on Spark learn digits to >= 0.95 (got '$acc')" \
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
dir=$(sed -n 's/^run_dir //p' "$TMP/fit.out")
completed=$(master completed | tr ' ' '\n')
check "spark-t01 the log forwarded by worker-1's node is in its log after the driver's lines" \
  awk '/^drover-spark: task running/ { run = 1 } run && / worker:1 I connected to the coordinator/ { ok = 1 }
       END { exit !ok }' "$dir/logs/worker-1.log"
check "spark-t01 a closure's print() on a worker on an executor reached its log" \
  sh -c "cat '$dir'/logs/worker-*.log | grep -q '^[0-9T:.-]*Z worker:[01] stdout spark print from a closure\$'"
check "spark-t01 and so did what it wrote to io.stderr" \
  sh -c "cat '$dir'/logs/worker-*.log | grep -q '^[0-9T:.-]*Z worker:[01] stderr spark stderr from a closure\$'"
check "spark-t01 the driver names where the node's raw output is" \
  grep -q "^drover-spark: worker-0 ended with status 0; its raw output is in the executor's stderr on .* in /" "$dir/logs/worker-0.log"
for n in ps-0 worker-0 worker-1; do
  app=$(sed -n "s/^drover-spark: $n is application \(app-[0-9-]*\)\$/\1/p" "$dir/logs/$n.log" | head -n 1)
  check "spark-t01 $n ran as the Spark application drover-$n ('$app'), now completed" \
    sh -c "[ -n '$app' ] && echo \"\$1\" | grep -q '^$app:drover-$n:'" _ "$completed"
  check "spark-t01 $n's log has the node's own lines (it registered)" \
    grep -q "I registered" "$dir/logs/$n.log"
done
check "spark-t02 worker:1's node was SIGKILLed mid-fit" grep -q "^killing worker:1 node pid [0-9]" "$TMP/fit.out"
steps1=$(sed -n 's/^eval_accuracy .* steps //p' "$TMP/fit.out")
acc2=$(sed -n 's/^second fit: eval_accuracy \([0-9.]*\) .*/\1/p' "$TMP/fit.out")
steps2=$(sed -n 's/^second fit: eval_accuracy .* steps //p' "$TMP/fit.out")
check "spark-t02 the fit finished all its steps ($steps2 of $steps1)" \
  sh -c "[ -n '$steps1' ] && [ '$steps1' = '$steps2' ]"
check "spark-t02 and learned digits all the same (got '$acc2')" \
  awk -v a="$acc2" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
check "spark-t02 worker:1 was relaunched and registered again" grep -q "^worker:1 ready restarts 1" "$TMP/fit.out"
apps=$(grep -c "^drover-spark: worker-1 is application app-" "$dir/logs/worker-1.log")
check "spark-t02 as a new Spark application (worker-1.log names $apps)" [ "$apps" -eq 2 ]
check "spark-t02 without restarting the others" \
  sh -c "grep -q '^ps:0 restarts 0' '$TMP/fit.out' && grep -q '^worker:0 restarts 0' '$TMP/fit.out'"
for n in ps-0 worker-0; do
  check "spark-t02 $n stayed one application" \
    [ "$(grep -c "^drover-spark: $n is application app-" "$dir/logs/$n.log")" -eq 1 ]
done
check "spark-t02 the run shut down cleanly" grep -q "^shut down" "$TMP/fit.out"
check "spark-t01 no application is left active in Spark after shutdown" wait_for 20 no_active_app

# spark-t03: a node Spark cannot place (more cores than the worker has):
# the reservation timeout names it with what Spark says, and the failed
# start ends every application it submitted
cat > "$TMP/wait.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "spark", ps = 1,
  worker = { instances = 1, cpus = 64 }, runs = "$RUNS", name = "wait", bind = "127.0.0.1",
  reservation_timeout = 40, spark = dofile("$TMP/spark.lua") })
assert(not ok, "the cluster started")
io.stdout:write("error: ", err, "\n")
LUA
timeout 120 "$DROVER" run "$TMP/wait.lua" >"$TMP/wait.out" 2>&1
check "spark-t03 the script runs" [ $? -eq 0 ]
check "spark-t03 the timeout names the missing node" grep -q "missing.* worker:0$" "$TMP/wait.out"
check "spark-t03 with what Spark's master says about its application" \
  grep -q "^drover-spark: waiting: 0 executors; master ALIVE: app-[0-9-]* WAITING (asks 64 cores 512m; granted 0); 1 worker(s) alive" "$TMP/wait.out"
check "spark-t03 no application is left active after the failed start" wait_for 20 no_active_app

# Nothing of drover is left on this machine: no node, no driver.
left=$(ps -eo pid=,args= | grep -F "$RUNS" | grep -v grep)
check "spark-t04 no drover node or Spark driver of these runs is left ($left)" [ -z "$left" ]
