# test_yarn_scale.sh - c:scale on the YARN launcher against a real YARN
# (tests/yarn/start.sh: MiniYARNCluster): 1 ps and 2 workers of 256 MB, 1
# vcore, grown 2 -> 4 and shrunk 4 -> 1 during an async fit and a sync fit
# (tests/cli/scale_engine.lua): each added worker a container the AM asked
# the RM for, each removed one's container released (the RM's count falls
# back to the AM, the ps and one worker), the step counts exact; a count
# YARN's nodes have no room for refused, saying how many fit; nothing left
# in the RM after the run; a sync fit scaled 1 -> 2 -> 1 bit for bit fits
# between the same steps, a worker SIGKILLed during a sync scale, closures
# while it grows and shrinks.
# Skipped, with the reason, where Java or the built jars are missing.
. tests/cli/lib.sh
RUNS=$TMP/runs
yarn_start "yarn-sc-00 tests/yarn/start.sh starts the test YARN"

cat >"$TMP/spec.lua" <<LUA
return {
  cluster = { launcher = "yarn", bind = "127.0.0.1", ps = { instances = 1, memory = "256M" },
              yarn = { name = "drover-scale", max_attempts = 1 } },
  worker = { memory = "256M", cpus = 1 }, max = 12, over = 12, exact = true,
  -- the RM's allocated containers once the removed workers' are released
  probe = function()
    local n
    for _ = 1, 300 do
      local p = io.popen("curl -s -m 5 $RM/ws/v1/cluster/metrics")
      n = tonumber(p:read("a"):match('"containersAllocated":(%d+)'))
      p:close()
      if n and n <= 3 then break end
      drover.sleep(0.1)
    end
    return "containers " .. tostring(n)
  end,
}
LUA
timeout 200 "$DROVER" run tests/cli/scale_engine.lua "$TMP/spec.lua" "$RUNS" sc >"$TMP/sc.out" 2>&1
rc=$?
check "yarn-sc-01 the run ends cleanly (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done' '$TMP/sc.out'"
DIR=$(sed -n 's/^run_dir //p' "$TMP/sc.out")
check "yarn-sc-02 async 2 -> 4 -> 1: 3000 steps, each counted once, 1 worker left, the new ones trained" \
  sh -c "grep -Eq '^async steps 3000 sum 3000 live 1 new [1-9][0-9]* [1-9][0-9]*$' '$TMP/sc.out'"
check "yarn-sc-02 workers 2 and 3 ran in containers" \
  sh -c "grep -Eq 'node got worker:2 on .*container_' '$DIR/events.log' && grep -Eq 'node got worker:3 on .*container_' '$DIR/events.log'"
check "yarn-sc-03 1 -> 2 between fits" grep -q '^between live 2 up 2$' "$TMP/sc.out"
check "yarn-sc-04 sync 2 -> 4 -> 1: 800 global steps, the gradients of the workers each had" \
  sh -c "grep -Eq '^sync global 800 steps ([0-9]+) want \1 changes 2 live 1$' '$TMP/sc.out'"
check "yarn-sc-04 removed workers are no loss (the one loss: the SIGKILL of sc-09)" \
  sh -c "grep -q 'node removed worker:3' '$DIR/events.log' && [ \"\$(grep 'node lost' '$DIR/events.log' | cut -c26-)\" = 'node lost worker:0: killed by signal 9' ]"
# at most the AM, the ps and 1 worker: CI once saw 2 (the RM's count of a
# node's container lagging, not understood), never more once released
if grep -Eq '^probe containers [1-3]$' "$TMP/sc.out"; then
  pass "yarn-sc-05 the removed workers' containers are released: at most the AM, the ps and 1 worker left"
else
  fail "yarn-sc-05 the removed workers' containers are released: at most the AM, the ps and 1 worker left" \
    "the RM's count: $(grep '^probe' "$TMP/sc.out")"
fi
check "yarn-sc-08 sync 1 -> 2 -> 1 during a fit equals fits on 1, 2, 1 workers between the same steps" \
  grep -q '^equal global 800 changes 2 differ 0$' "$TMP/sc.out"
check "yarn-sc-09 a worker SIGKILLed as a sync fit grows 1 -> 3: restarted in a new container, the change done, 600 global steps" \
  grep -q '^kill global 600 live 3 restarted true done true$' "$TMP/sc.out"
check "yarn-sc-10 closures while the cluster grows 1 -> 3 and shrinks to 1: all 140 resolve, new containers ran some" \
  grep -q '^closures 140 added true live 1$' "$TMP/sc.out"
check "yarn-sc-06 worker = 12 refused: YARN's nodes have no room" \
  grep -Eq "^over refused .*c:scale: launcher 'yarn': 11 more workers of <memory:256, vCores:1> do not fit: YARN's nodes have room for [0-9] now" "$TMP/sc.out"
check "yarn-sc-07 nothing left in the RM" wait_for 30 nothing_left
