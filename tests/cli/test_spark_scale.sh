# test_spark_scale.sh - c:scale on the spark launcher against a real
# standalone Spark (tests/spark/start.sh: a master and one worker of 8
# cores): 1 ps and 2 workers grown 2 -> 4 and shrunk 4 -> 1 during an
# async fit and a sync fit (tests/cli/scale_engine.lua), each added worker
# a Spark application of its own, each removed one's application ending
# (FINISHED, no loss), the step counts exact; worker = 9 refused: the
# master has 6 free cores for 8; without master_ui adding is refused,
# saying why. Nothing is left running in Spark.
# Skipped, with the reason, where Spark cannot start here.
# run.sh timeout: 600
. tests/cli/lib.sh
RUNS=$TMP/runs
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark_scale: the runs on Spark under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs them)"
  exit 0
fi
: "${DROVER_SPARK_DIR:=$TMP/spark}"
export DROVER_SPARK_DIR
engine_start spark "spark-sc-00 tests/spark/start.sh starts Spark"
. "$DROVER_SPARK_DIR/env"
# the master's applications: "NAME:STATE" of the active ones, or the completed
active_apps() {
  python3 - "$DROVER_SPARK_UI" "$1" <<'PY'
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1] + "/json/", timeout=5))
print(" ".join("%s:%s" % (a["name"], a["state"]) for a in m[sys.argv[2]]))
PY
}
no_active_app() { [ -z "$(active_apps activeapps)" ]; }

cat >"$TMP/spec.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
return { cluster = { launcher = "spark", bind = "127.0.0.1", reservation_timeout = 240,
  spark = { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
             ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } } },
  max = 9, over = 9, hold = 0.3 }
LUA
timeout 400 "$DROVER" run tests/cli/scale_engine.lua "$TMP/spec.lua" "$RUNS" sc >"$TMP/sc.out" 2>&1
rc=$?
check "spark-sc-01 the run ends cleanly (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done' '$TMP/sc.out'"
DIR=$(sed -n 's/^run_dir //p' "$TMP/sc.out")
check "spark-sc-02 async 2 -> 4 -> 1: 3000 steps, each counted once, 1 worker left, the new ones trained" \
  sh -c "grep -Eq '^async steps 3000 sum 3000 live 1 new [1-9][0-9]* [1-9][0-9]*$' '$TMP/sc.out'"
check "spark-sc-02 workers 2 and 3 ran as Spark applications of their own" \
  sh -c 'echo "$1" | grep -q drover-worker-2:FINISHED && echo "$1" | grep -q drover-worker-3:FINISHED' \
  _ "$(active_apps completedapps)"
check "spark-sc-03 1 -> 2 between fits" grep -q '^between live 2 up 2$' "$TMP/sc.out"
check "spark-sc-04 sync 2 -> 4 -> 1: 800 global steps, the gradients of the workers each had" \
  sh -c "grep -Eq '^sync global 800 steps ([0-9]+) want \1 changes 2 live 1$' '$TMP/sc.out'"
check "spark-sc-04 removed workers are no loss" \
  sh -c "grep -q 'node removed worker:3' '$DIR/events.log' && ! grep -q 'node lost' '$DIR/events.log'"
check "spark-sc-05 worker = 9 refused: the master's free cores" \
  grep -q "^over refused .*c:scale: launcher 'spark': 8 more workers (1 core each) do not fit: the master has 6 free cores of 8" "$TMP/sc.out"
check "spark-sc-06 nothing is left running in Spark" wait_for 30 no_active_app

# spark-sc-07: without master_ui, adding is refused, naming what it needs
cat >"$TMP/noui.lua" <<LUA
local c = drover.cluster { launcher = "spark", bind = "127.0.0.1", reservation_timeout = 240,
  ps = 1, worker = { instances = 1, max = 2 }, runs = "$RUNS", name = "noui",
  spark = { master = "$DROVER_SPARK_MASTER", conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false" } } }
local ok, err = pcall(c.scale, c, { worker = 2 })
io.stdout:write("grow ", tostring(ok), " ", tostring(err), "\n")
c:shutdown()
LUA
timeout 150 "$DROVER" run "$TMP/noui.lua" >"$TMP/noui.out" 2>&1
check "spark-sc-07 without master_ui: refused, saying why" \
  grep -q "^grow false .*c:scale: launcher 'spark': adding nodes needs spark = { master_ui" "$TMP/noui.out"
check "spark-sc-07 nothing is left running in Spark" wait_for 30 no_active_app
