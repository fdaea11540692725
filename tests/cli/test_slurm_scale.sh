# test_slurm_scale.sh - c:scale on the Slurm launcher against a real
# single-machine Slurm (tests/slurm/start.sh): inside `salloc -n5`, 1 ps
# and 2 workers grown 2 -> 4 and shrunk 4 -> 1 during an async fit and a
# sync fit (tests/cli/scale_engine.lua), each added worker a new job step,
# each removed one's step ending with status 0 and no loss, the step
# counts exact; worker = 5 refused naming the allocation's 5 CPUs; outside
# an allocation drover's own job sized for `max` and grown within it; a
# sync fit scaled 1 -> 2 -> 1 bit for bit fits between the same steps,
# a worker SIGKILLed during a sync scale, closures while it grows and
# shrinks (the issue's engine tests).
# Skipped, with the reason, where Slurm cannot be started here.
. tests/cli/lib.sh
RUNS=$TMP/runs
: "${DROVER_SLURM_DIR:=$TMP/slurm}" "${DROVER_SLURM_PORT:=$((20000 + ($$ % 5000) * 2))}"
export DROVER_SLURM_DIR DROVER_SLURM_PORT
engine_start slurm "slurm-sc-00 tests/slurm/start.sh starts Slurm"
. "$DROVER_SLURM_DIR/env"
export SLURM_CONF RUNS
no_jobs() { [ -z "$(squeue -h -o %A)" ]; }

# slurm-sc-01..05: inside an allocation of 5 CPUs (1 ps + at most 4 workers)
echo 'return { cluster = { launcher = "slurm" }, max = 5, over = 5, exact = true }' >"$TMP/spec.lua"
timeout 200 salloc -N1 -n5 "$DROVER" run tests/cli/scale_engine.lua "$TMP/spec.lua" "$RUNS" sc \
  >"$TMP/sc.out" 2>&1
rc=$?
check "slurm-sc-01 the run ends cleanly (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done' '$TMP/sc.out'"
DIR=$(sed -n 's/^run_dir //p' "$TMP/sc.out")
check "slurm-sc-02 async 2 -> 4 -> 1: 3000 steps, each counted once, 1 worker left, the new ones trained" \
  sh -c "grep -Eq '^async steps 3000 sum 3000 live 1 new [1-9][0-9]* [1-9][0-9]*$' '$TMP/sc.out'"
check "slurm-sc-02 workers 2 and 3 were new job steps" \
  sh -c "grep -Eq 'runs as Slurm step [0-9]+\.[0-9]+' '$DIR/logs/worker-2.log' && grep -Eq 'runs as Slurm step [0-9]+\.[0-9]+' '$DIR/logs/worker-3.log'"
check "slurm-sc-02 a removed worker's step ended with status 0" \
  grep -Eq "step [0-9]+\.[0-9]+ \(drover-worker-3\) ended: the task exited with status 0" "$DIR/logs/worker-3.log"
check "slurm-sc-03 1 -> 2 between fits: worker:1 back as a new step" grep -q '^between live 2 up 2$' "$TMP/sc.out"
check "slurm-sc-04 sync 2 -> 4 -> 1: 800 global steps, the gradients of the workers each had" \
  sh -c "grep -Eq '^sync global 800 steps ([0-9]+) want \1 changes 2 live 1$' '$TMP/sc.out'"
check "slurm-sc-04 removed workers are no loss (the one loss: the SIGKILL of sc-09)" \
  sh -c "grep -q 'node removed worker:3' '$DIR/events.log' && [ \"\$(grep 'node lost' '$DIR/events.log' | cut -c26-)\" = 'node lost worker:0: killed by signal 9' ]"
check "slurm-sc-08 sync 1 -> 2 -> 1 during a fit equals fits on 1, 2, 1 workers between the same steps" \
  grep -q '^equal global 800 changes 2 differ 0$' "$TMP/sc.out"
check "slurm-sc-09 a worker SIGKILLed as a sync fit grows 1 -> 3: restarted as a new step, the change done, 600 global steps" \
  grep -q '^kill global 600 live 3 restarted true done true$' "$TMP/sc.out"
check "slurm-sc-10 closures while the cluster grows 1 -> 3 and shrinks to 1: all 140 resolve, new steps ran some" \
  grep -q '^closures 140 added true live 1$' "$TMP/sc.out"
check "slurm-sc-05 worker = 5 refused naming the allocation's CPUs" \
  grep -Eq "^over refused .*c:scale: launcher 'slurm': allocation [0-9]+ holds 5 CPUs and drover's 2 steps take 2: 4 more workers \(1 CPU each\) do not fit" "$TMP/sc.out"

# slurm-sc-06: outside an allocation, drover's own job holds `max` workers:
# grown 1 -> 2 between fits within it; max refuses beyond
cat >"$TMP/own.lua" <<LUA
local c = drover.cluster { launcher = "slurm", ps = 1, worker = { instances = 1, max = 2 },
  runs = "$RUNS", name = "own", slurm = { time = "00:10:00" } }
local p = io.popen("scontrol show job -o")
io.stdout:write(p:read("a"))
p:close()
c:scale { worker = 2 }
local up = 0
for _, n in ipairs(c:nodes()) do if n.role == "worker" and n.state == "ready" then up = up + 1 end end
io.stdout:write("up ", up, "\n")
local ok, err = pcall(c.scale, c, { worker = 3 })
io.stdout:write("three ", tostring(ok), " ", tostring(err), "\n")
c:shutdown()
LUA
env -u SLURM_JOB_ID -u SLURM_JOBID timeout 120 "$DROVER" run "$TMP/own.lua" >"$TMP/own.out" 2>&1
rc=$?
check "slurm-sc-06 the run outside an allocation ends cleanly (status $rc)" [ $rc -eq 0 ]
check "slurm-sc-06 its job is sized for ps + max workers: 3 tasks" \
  grep -q "^JobId=.* JobName=drover-own-.* NumTasks=3 " "$TMP/own.out"
check "slurm-sc-06 grown to 2 workers within it" grep -q "^up 2$" "$TMP/own.out"
check "slurm-sc-06 worker = 3 refused by max" grep -q "^three false .*worker = 3 is above max = 2" "$TMP/own.out"
check "slurm-sc-07 no job is left" wait_for 15 no_jobs
