# test_yarn_mixed.sh - mixed placement on YARN: ps = { launcher = "local" }
# beside launcher = "yarn" workers (the MiniYARNCluster of
# tests/yarn/start.sh, stopped on exit): digits learnt, the ps a child of
# the coordinator and the workers YARN containers (where: "yarn
# container_... @ host" in c:nodes(), nodes.tsv and the dashboard), the
# YARN application sized for the workers alone, the local ps SIGKILLed
# mid-fit restarted locally and the fit completed (mixed_checks.sh), and
# nothing left in the RM. Refusals: a role on YARN without a
# ResourceManager, yarn = {...} that no role uses. Skipped as
# test_yarn.sh is, without Java or the built jars.
# run.sh timeout: 600
. tests/cli/lib.sh
# Under `make asan` (SANITIZED=1) the launcher's C paths run in test_yarn.sh;
# this file's JVM-bound cases would only double CI's time.
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_YARN_ASAN:-0}" != 1 ]; then
  echo "SKIP test_yarn_mixed: the YARN runs under ASan (SANITIZED=1; DROVER_YARN_ASAN=1 runs them)"
  exit 0
fi
. tests/cli/mixed_checks.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"
cat > "$TMP/r.lua" <<LUA
local ok1, e1 = pcall(drover.cluster, { runs = "$RUNS", worker = { instances = 1, launcher = "yarn" } })
local ok2, e2 = pcall(drover.cluster, { runs = "$RUNS", launcher = "yarn", ps = { launcher = "local" },
  worker = { launcher = "local" }, yarn = { queue = "q" } })
print(ok1, e1) print(ok2, e2)
LUA
env -u DROVER_YARN_RM timeout 30 "$DROVER" run "$TMP/r.lua" >"$TMP/r.out" 2>&1
check "mixed-y00 a role on YARN without a ResourceManager is refused" \
  grep -qF 'cluster: worker.launcher = "yarn" needs yarn = { rm = "host:port" } (or $DROVER_YARN_RM)' "$TMP/r.out"
check "mixed-y00 yarn = {...} that no role uses is refused" \
  grep -qF 'cluster: yarn is for launcher = "yarn" (the cluster'"'"'s or a role'"'"'s: no role runs on it)' "$TMP/r.out"

yarn_start "mixed-y00 tests/yarn/start.sh starts the test YARN"
cat > "$TMP/yarn.lua" <<LUA
return { queue = "default", name = "drover-mixed", max_attempts = 1 }
LUA
routable=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep '\.' | head -n 1)
bind=; [ -n "$routable" ] || bind=127.0.0.1
DROVER="$DROVER" timeout 400 "$DROVER" run tests/cli/mixed_fit.lua "$RUNS" y1 yarn "$TMP/yarn.lua" "$bind" \
  >"$TMP/y1.out" 2>&1
rc=$?
check "mixed-y01 a run with a local ps and YARN workers succeeds (status $rc)" [ $rc -eq 0 ]
mixed_checks mixed-y01 "$TMP/y1.out" yarn 'container_[0-9_]+ @ ' y1
dir=$(sed -n 's/^run_dir //p' "$TMP/y1.out")
check "mixed-y02 the workers ran in YARN containers, the ps did not" \
  sh -c "grep -q 'YARN container of worker-0 ended' '$dir/logs/worker-0.log' &&
         ! grep -q 'YARN container' '$dir/logs/ps-0.log'"
if [ -n "$routable" ]; then
  check "mixed-y02 the local ps dials and advertises the YARN nodes' address, not loopback" \
    sh -c "grep -q 'local nodes dial [0-9.]*:[0-9]* and listen on 0.0.0.0 (routable from the yarn nodes)' \
      '$dir/events.log' && grep '^node ps:0 ' '$TMP/y1.out' | grep -qv ' host 127\\.'"
fi
check "mixed-y03 nothing is left in the RM" wait_for 30 nothing_left
grep -q "^eval_accuracy" "$TMP/y1.out" || tail -n 30 "$TMP/y1.out"
