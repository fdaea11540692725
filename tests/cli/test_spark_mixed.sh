# test_spark_mixed.sh - mixed placement on Spark (TensorFlowOnSpark's
# driver_ps_nodes): ps = { launcher = "local" } beside launcher = "spark"
# workers (a standalone Spark from tests/spark/start.sh, stopped on exit):
# digits learnt, the ps a child of the coordinator and the workers Spark
# tasks (where: "spark app-... exec N @ host" in c:nodes(), nodes.tsv and
# the dashboard), the local ps SIGKILLed mid-fit restarted locally and the
# fit completed (mixed_checks.sh); the coordinator listens as for Spark
# alone, and the local ps dials and advertises the same routable address
# (not loopback) where this machine has one. Refusals: an unknown launcher
# on a role, a role on Spark without spark = { master }, spark = {...}
# that no role uses. Skipped as test_spark.sh is, without Spark.
# run.sh timeout: 600
. tests/cli/lib.sh
. tests/cli/mixed_checks.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"
refused() { # CASE SPEC PATTERN
  printf 'local ok, err = pcall(drover.cluster, { runs = "%s", %s })\nassert(not ok, "accepted")\nprint("error: " .. err)\n' \
    "$RUNS" "$2" >"$TMP/r.lua"
  timeout 30 "$DROVER" run "$TMP/r.lua" >"$TMP/r.out" 2>&1
  check "$1 is refused, saying why" grep -qF "$3" "$TMP/r.out"
}
refused "mixed-s00 an unknown launcher on a role" 'launcher = "spark", ps = { launcher = "locl" }' \
  "cluster: ps.launcher: launcher 'locl' is not available"
refused "mixed-s00 a role on spark without its options" 'worker = { instances = 2, launcher = "spark" }' \
  'cluster: worker.launcher = "spark" needs spark = { master'
refused "mixed-s00 spark = {...} no role uses" \
  'launcher = "spark", ps = { launcher = "local" }, worker = { launcher = "local" }, spark = { master = "spark://127.0.0.1:1" }' \
  'spark = {...} is for launcher = "spark" (the cluster'"'"'s or a role'"'"'s: no role runs on it)'
[ -z "$(ls "$RUNS")" ]
check "mixed-s00 a refused cluster leaves no run directory" [ $? -eq 0 ]

if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark_mixed: the runs on Spark under ASan (SANITIZED=1)"
  exit 0
fi
: "${DROVER_SPARK_DIR:=$TMP/spark}"
export DROVER_SPARK_DIR # start.sh picks four free ports below the ephemeral range
engine_start spark "mixed-s00 tests/spark/start.sh starts Spark"
. "$DROVER_SPARK_DIR/env"
cat > "$TMP/spark.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
return { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
  conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
           ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } }
LUA
# Without a routable address here, loopback for all (the address rule is then moot).
routable=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep '\.' | head -n 1)
bind=; [ -n "$routable" ] || bind=127.0.0.1
DROVER="$DROVER" timeout 400 "$DROVER" run tests/cli/mixed_fit.lua "$RUNS" m1 spark "$TMP/spark.lua" "$bind" \
  >"$TMP/m1.out" 2>&1
rc=$?
check "mixed-s01 a run with a local ps and Spark workers succeeds (status $rc)" [ $rc -eq 0 ]
mixed_checks mixed-s01 "$TMP/m1.out" spark 'app-[0-9-]+ exec [0-9]+ @ ' m1
dir=$(sed -n 's/^run_dir //p' "$TMP/m1.out")
if [ -n "$routable" ]; then
  check "mixed-s02 the local ps dials the coordinator at the Spark nodes' address, not loopback" \
    grep -q "local nodes dial [0-9.]*:[0-9]* and listen on 0.0.0.0 (routable from the spark nodes)" \
    "$dir/events.log"
  check "mixed-s02 and advertises a routable address to the workers" \
    sh -c "grep '^node ps:0 ' '$TMP/m1.out' | grep -qv ' host 127\\.'"
fi
check "mixed-s03 the workers ran as Spark applications" \
  sh -c "grep -q '^drover-spark: worker-0 is application app-' '$dir/logs/worker-0.log' &&
         ! grep -q '^drover-spark:' '$dir/logs/ps-0.log'"
grep -q "^eval_accuracy" "$TMP/m1.out" || tail -n 30 "$TMP/m1.out"
