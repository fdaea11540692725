# test_spark_keys.sh - on a real standalone Spark (tests/spark/start.sh):
# a node's key file is gone on the executor's side once the node
# registered (its own copy, Spark's copy in the executor's directory, the
# driver's, the coordinator's served one); worker:1's task, SIGKILLed (the
# Python worker that runs it, found by pid as a descendant of the Spark
# worker this test started), leaves its node's directory behind, which the
# next task on that executor (worker:1 started again) removes, while the
# live nodes' directories stay; the new worker:1's key file is gone too.
# Skipped, with the reason, where Spark cannot start. Only processes this
# test started are signalled, by pid; every wait is bounded.
. tests/cli/lib.sh
RUNS=$TMP/runs
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_spark_keys: the runs on Spark under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs them)"
  exit 0
fi
: "${DROVER_SPARK_DIR:=$TMP/spark}" # ports: start.sh picks free ones
export DROVER_SPARK_DIR
engine_start spark "sparkkeys-t00 tests/spark/start.sh starts Spark"
. "$DROVER_SPARK_DIR/env"
spark_worker=$(cat "$DROVER_SPARK_DIR/pids/worker.pid")

cat > "$TMP/spec.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
return { launcher = "spark", bind = "127.0.0.1", reservation_timeout = 240,
  spark = { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
             ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } } }
LUA

# under PID ANCESTOR: ANCESTOR is PID's parent, or its parent's, ...
under() {
  p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    p=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)
    [ "$p" = "$2" ] && return 0
  done
  return 1
}

timeout 400 "$DROVER" run tests/cli/keyfiles.lua "$TMP/spec.lua" "$RUNS" sk "$TMP" >"$TMP/out" 2>"$TMP/err" &
coord=$!
kill_at_exit $coord
wait_for 300 test -s "$TMP/victim"
read vpid parent vcwd <"$TMP/victim"
check "sparkkeys-t01 every node registered; each one's key file is gone on its side" \
  [ "$(grep -c '^up	[a-z]*:[0-9]	[0-9]*	gone	/.*/drover-node-[^/]*/.secret$' "$TMP/out")" -eq 3 ]
check "sparkkeys-t01 the run's keys/ is empty (the served files went at REGISTER)" grep -q '^up	keys \[\]$' "$TMP/out"
wdir=$DROVER_SPARK_DIR/work
check "sparkkeys-t01 no key file is left in the executors' directories" \
  sh -c "! find '$wdir' -name '*.key' | grep -q ."
check "sparkkeys-t01 the node's directory is locked, named drover-node-* ('$vcwd')" \
  sh -c "case '$vcwd' in */drover-node-*) [ -f '$vcwd/.lock' ] ;; *) false ;; esac"
check "sparkkeys-t02 worker:1's parent ($parent) is under the Spark worker ($spark_worker)" \
  under "${parent:-0}" "$spark_worker"
if under "${parent:-0}" "$spark_worker"; then kill -9 "$parent"; fi
wait_for 20 sh -c "! kill -0 ${vpid:-0} 2>/dev/null"
check "sparkkeys-t02 the node died with its task, leaving its directory" [ -d "$vcwd" ]
touch "$TMP/killed"
wait $coord
rc=$?
check "sparkkeys-t02 the run ends (status $rc) after the kill" [ $rc -eq 0 ]
check "sparkkeys-t02 worker:1 came back" grep -q '^back	[0-9]*	restarts	1$' "$TMP/out"
check "sparkkeys-t02 its new key file is gone on its side" \
  grep -q '^again	worker:1	[0-9]*	gone	/.*/drover-node-[^/]*/.secret$' "$TMP/out"
check "sparkkeys-t02 the dead node's directory was removed by the next task" [ ! -e "$vcwd" ]
check "sparkkeys-t02 the sweeping task said so on its executor's stderr" \
  sh -c "cat '$wdir'/app-*/*/stderr | grep -q 'drover-spark: removed $vcwd, left by a node whose task died'"
n=$(grep -c '^cwd	\(ps:0\|worker:0\)	/.*/drover-node-[^/ ]*$' "$TMP/out")
check "sparkkeys-t02 the live nodes kept their directories (while they ran: $n of 2)" [ $n -eq 2 ]
