# test_spark_gpus.sh - a role's gpus on launcher = "spark": the standalone
# Spark of tests/spark/start.sh offers 2 GPUs (DROVER_SPARK_GPUS=2: the
# worker's spark.worker.resource.gpu.* with a discovery script that prints
# {"name":"gpu","addresses":["0","1"]}; no real GPU is needed to schedule
# them); `worker = { instances = 2, gpus = 1 }` makes each worker's
# application ask for one (spark.executor.resource.gpu.amount and
# spark.task.resource.gpu.amount), and each node must see the address
# Spark gave its task in CUDA_VISIBLE_DEVICES (reported in REGISTER:
# c:nodes().gpus, nodes.tsv): two workers, two different addresses, the
# ps none. Nothing is left running in Spark. Skipped like test_spark.sh
# where Spark cannot start (DROVER_SPARK_REQUIRED=1 makes that a
# failure), and under ASan unless DROVER_SPARK_ASAN=1 (the C path is
# launch_spark.c's argument list, which test_spark.sh's refusals run).
# run.sh timeout: 600
. tests/cli/lib.sh
RUNS=$TMP/runs
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark_gpus: the run on Spark under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs it)"
  exit 0
fi
: "${DROVER_SPARK_DIR:=$TMP/spark}" # ports: start.sh picks free ones
DROVER_SPARK_GPUS=2
export DROVER_SPARK_DIR DROVER_SPARK_GPUS
engine_start spark "spark-gpus-00 tests/spark/start.sh starts Spark with 2 GPUs"
. "$DROVER_SPARK_DIR/env"
no_active_app() {
  python3 - "$DROVER_SPARK_UI" <<'PY'
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1] + "/json/", timeout=5))
sys.exit(1 if m["activeapps"] else 0)
PY
}

cat > "$TMP/gpus.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
local c = drover.cluster { launcher = "spark", ps = 1, worker = { instances = 2, gpus = 1 },
  runs = "$RUNS", name = "gpus", bind = "127.0.0.1", reservation_timeout = 240,
  spark = { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
             ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } } }
io.stdout:write("run_dir ", c.run_dir, "\n")
for _, n in ipairs(c:nodes()) do
  io.stdout:write("node ", n.role, ":", n.index, " gpus '", n.gpus or "", "'\n")
end
c:shutdown()
io.stdout:write("shut down\n")
LUA
timeout 280 "$DROVER" run "$TMP/gpus.lua" >"$TMP/gpus.out" 2>&1
rc=$?
check "spark-gpus-01 a cluster with worker = { gpus = 1 } on Spark starts and shuts down (status $rc)" \
  sh -c "[ $rc -eq 0 ] && grep -q '^shut down' '$TMP/gpus.out'"
g0=$(sed -n "s/^node worker:0 gpus '\(.*\)'\$/\1/p" "$TMP/gpus.out")
g1=$(sed -n "s/^node worker:1 gpus '\(.*\)'\$/\1/p" "$TMP/gpus.out")
gp=$(sed -n "s/^node ps:0 gpus '\(.*\)'\$/\1/p" "$TMP/gpus.out")
check "spark-gpus-01 each worker's node sees one GPU address Spark assigned ('$g0', '$g1')" \
  sh -c "case '$g0' in 0|1) ;; *) exit 1 ;; esac; case '$g1' in 0|1) ;; *) exit 1 ;; esac"
check "spark-gpus-01 two different addresses for the two workers" [ "$g0" != "$g1" ]
check "spark-gpus-01 the ps asked for none and sees none ('$gp')" [ -z "$gp" ]
dir=$(sed -n 's/^run_dir //p' "$TMP/gpus.out")
check "spark-gpus-01 events.log records the GPU each worker's node got" \
  sh -c "grep -q 'node got worker:0 on .*gpus $g0' '$dir/events.log' && grep -q 'node got worker:1 on .*gpus $g1' '$dir/events.log'"
tsv=$(awk -F'\t' '$1 ~ /^(ps|worker):/ { printf "%s %s %s;", $1, $10, $11 }' "$dir/nodes.tsv")
check "spark-gpus-01 nodes.tsv has each node's gpus asked and got ($tsv)" \
  [ "$tsv" = "ps:0 0 -;worker:0 1 $g0;worker:1 1 $g1;" ]
check "spark-gpus-02 no application is left active in Spark after shutdown" wait_for 20 no_active_app

# spark-gpus-03: more GPUs than the worker has: Spark does not place the
# node, and the reservation timeout says what it asks
cat > "$TMP/wait.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "spark", ps = 1,
  worker = { instances = 1, gpus = 3 }, runs = "$RUNS", name = "wait", bind = "127.0.0.1",
  reservation_timeout = 30, spark = { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false" } } })
assert(not ok, "the cluster started")
io.stdout:write("error: ", err, "\n")
LUA
timeout 120 "$DROVER" run "$TMP/wait.lua" >"$TMP/wait.out" 2>&1
check "spark-gpus-03 a node asking 3 of 2 GPUs is not placed: the timeout names it" \
  grep -q "missing.* worker:0$" "$TMP/wait.out"
check "spark-gpus-03 with what its application asks (3 gpu) and the master's WAITING" \
  grep -q "^drover-spark: waiting: 0 executors; master ALIVE: app-[0-9-]* WAITING (asks 1 cores 512m 3 gpu; granted 0)" "$TMP/wait.out"
check "spark-gpus-03 no application is left active after the failed start" wait_for 20 no_active_app
left=$(ps -eo pid=,args= | grep -F "$RUNS" | grep -v grep)
check "spark-gpus-02 no drover node or Spark driver of this run is left ($left)" [ -z "$left" ]
