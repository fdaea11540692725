# test_slurm.sh - the Slurm launcher against a real single-machine Slurm
# started by tests/slurm/start.sh (and stopped by stop.sh on exit): nodes
# as job steps inside `salloc` and `sbatch`, training, a cancelled step
# restarted, a failed start that cancels its steps; outside an allocation
# a job of drover's own (training, per-role resources on the steps, jobs
# that cannot be scheduled or stay pending, the coordinator's SIGKILL);
# and that no drover step or job is left behind.
# Skipped, with the reason, where Slurm cannot be installed or started
# (start.sh exits 77); DROVER_SLURM_REQUIRED=1 (CI) makes that a failure.
. tests/cli/lib.sh
RUNS=$TMP/runs
# A Slurm of this run's own: its state under $TMP and its own pair of ports,
# so two test runs on one machine never stop each other's daemons (set
# DROVER_SLURM_DIR/DROVER_SLURM_PORT to reuse a long-lived one instead).
: "${DROVER_SLURM_DIR:=$TMP/slurm}" "${DROVER_SLURM_PORT:=$((20000 + ($$ % 5000) * 2))}"
export DROVER_SLURM_DIR DROVER_SLURM_PORT
SLURM_DIR=$DROVER_SLURM_DIR

engine_start slurm "slurm-t00 tests/slurm/start.sh starts Slurm"
. "$SLURM_DIR/env"
export SLURM_CONF RUNS

# drover steps of every job ("JOB.STEP NAME" lines), for the leftover checks.
drover_steps() { squeue -h -s -o '%i %j' | grep ' drover-' ; }

# A Lua helper shared by the scripts: the steps of our allocation; with
# `settled`, once no drover step is listed or 10 s passed: slurmctld drops
# an ended step's record a moment after its srun exits (CI listed one right
# after a shutdown, and right after a failed start's cancel).
cat > "$TMP/steps.lua" <<'LUA'
local function steps()
  local p = io.popen("squeue -h -s -j " .. os.getenv("SLURM_JOB_ID") .. " -o '%i %j'")
  local s = p:read("a")
  p:close()
  return s
end
return function(settled)
  local left = steps()
  for _ = 1, settled and 100 or 0 do
    if not left:find("drover-", 1, true) then break end
    os.execute("sleep 0.1")
    left = steps()
  end
  return left
end
LUA

# The digits experiment, shared by t01 and t04.
cat > "$TMP/exp.lua" <<'LUA'
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
drover.seed(1)
return drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  train = { data = train_std, batch = 32, epochs = 10 },
  eval = { data = test_ds:standardize(stats), every = 100 }, seed = 1, verbose = false,
}
LUA

# slurm-t01: 1 ps + 2 workers as job steps inside salloc learn digits
cat > "$TMP/fit.lua" <<LUA
local steps = dofile("$TMP/steps.lua")
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "slurm", ps = 1, worker = 2, runs = "$RUNS", name = "fit" }
io.stdout:write("steps during the run:\n", steps())
local r = c:fit(exp)
io.stdout:write(string.format("eval_accuracy %.4f\n", r.eval_accuracy))
c:shutdown() -- raises if a node failed
io.stdout:write("steps after shutdown:\n", steps(true), "end\n")
LUA
timeout 180 salloc -N1 -n3 "$DROVER" run "$TMP/fit.lua" >"$TMP/fit.out" 2>&1
check "slurm-t01 a salloc run with launcher = \"slurm\" succeeds" [ $? -eq 0 ]
acc=$(sed -n 's/^eval_accuracy //p' "$TMP/fit.out")
check "slurm-t01 it learns digits to >= 0.95 (got '$acc')" \
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
for n in ps-0 worker-0 worker-1; do
  check "slurm-t01 drover-$n ran as a job step" grep -Eq "^[0-9]+\.[0-9]+ drover-$n\$" "$TMP/fit.out"
done
check "slurm-t01 the run printed the steps after shutdown" grep -q "^steps after shutdown:" "$TMP/fit.out"
check "slurm-t01 no drover step is left after shutdown, inside the allocation" \
  sh -c "! sed -n '/^steps after shutdown:/,/^end/p' '$TMP/fit.out' | grep -q drover-"

# slurm-t02: scancel of a worker's step: the node is restarted as a new step
cat > "$TMP/restart.lua" <<LUA
local steps = dofile("$TMP/steps.lua")
local c = drover.cluster { launcher = "slurm", ps = 1, worker = 2, runs = "$RUNS", name = "restart" }
local old = steps():match("(%d+%.%d+) drover%-worker%-1")
io.stdout:write("old step ", tostring(old), "\n")
os.execute("scancel " .. old)
local t0, w = drover.clock()
repeat
  drover.sleep(0.1)
  for _, n in ipairs(c:nodes()) do if n.role == "worker" and n.index == 1 then w = n end end
until (w.restarts == 1 and w.state == "ready") or drover.clock() - t0 > 30
io.stdout:write("worker:1 ", w.state, " restarts ", w.restarts, "\n")
io.stdout:write("new step ", tostring(steps():match("(%d+%.%d+) drover%-worker%-1")), "\n")
c:shutdown() -- raises if a node failed
LUA
timeout 120 salloc -N1 -n3 "$DROVER" run "$TMP/restart.lua" >"$TMP/restart.out" 2>&1
check "slurm-t02 the run succeeds" [ $? -eq 0 ]
check "slurm-t02 the cancelled worker is restarted and registers" \
  grep -q "^worker:1 ready restarts 1" "$TMP/restart.out"
old=$(sed -n 's/^old step //p' "$TMP/restart.out")
new=$(sed -n 's/^new step //p' "$TMP/restart.out")
check "slurm-t02 as a new step ($old -> $new)" \
  sh -c "[ -n '$old' ] && [ '$old' != nil ] && [ '$new' != nil ] && [ '$old' != '$new' ]"

# slurm-t03: a failed start (reservation timeout) cancels the steps it began
cat > "$TMP/hang.lua" <<LUA
local steps = dofile("$TMP/steps.lua")
local ok, err = pcall(drover.cluster, { launcher = "slurm", ps = 1, worker = 2,
                      reservation_timeout = 2, runs = "$RUNS", name = "hang" })
assert(not ok)
io.stdout:write(err, "\nsteps after the failed start:\n", steps(true), "end\n")
LUA
DROVER_FAULT=hang:worker:1 timeout 120 salloc -N1 -n3 "$DROVER" run "$TMP/hang.lua" \
  >"$TMP/hang.out" 2>&1
check "slurm-t03 the script runs" [ $? -eq 0 ]
check "slurm-t03 the timeout names the missing node" grep -q "missing worker:1" "$TMP/hang.out"
check "slurm-t03 the script printed the steps after the failure" \
  grep -q "^steps after the failed start:" "$TMP/hang.out"
check "slurm-t03 no drover step is left inside the allocation" \
  sh -c "! sed -n '/^steps after the failed start:/,/^end/p' '$TMP/hang.out' | grep -q drover-"

# no_jobs: squeue lists no job at all. wait_no_jobs SECONDS: until it does
# (a cancelled job shows as COMPLETING for a moment), bounded.
no_jobs() { [ -z "$(squeue -h -o %A)" ]; }
wait_no_jobs() {
  local i=0
  while [ $i -lt $(($1 * 10)) ] && ! no_jobs; do sleep 0.1; i=$((i + 1)); done
  no_jobs
}
outside() { env -u SLURM_JOB_ID -u SLURM_JOBID "$@"; }
wait_no_jobs 15 # t01-t03's allocations

# slurm-t04: outside an allocation drover submits its own job: 1 ps + 2
# workers, with per-role resources that reach the steps, learn digits, and
# shutdown leaves nothing in squeue
cat > "$TMP/own.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "slurm", runs = "$RUNS", name = "own", ps = 1,
  worker = { instances = 2, cpus = 2, memory = "300M" }, slurm = { time = "00:10:00" } }
local p = io.popen("scontrol show step -o; scontrol show job -o")
io.stdout:write("slurm view:\n", p:read("a"), "end\n")
p:close()
drover.sleep(1.5) -- the launcher looks the steps up a moment after they start
local r = c:fit(exp)
io.stdout:write(string.format("eval_accuracy %.4f\n", r.eval_accuracy))
c:shutdown() -- raises if a node failed
LUA
outside timeout 180 "$DROVER" run "$TMP/own.lua" >"$TMP/own.out" 2>"$TMP/own.err"
rc=$?
check "slurm-t04 a run outside an allocation succeeds (status $rc)" [ $rc -eq 0 ]
acc=$(sed -n 's/^eval_accuracy //p' "$TMP/own.out")
check "slurm-t04 it learns digits to >= 0.95 (got '$acc')" \
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
check "slurm-t04 it said which job it submitted" grep -q "^drover: submitted Slurm job [0-9]" "$TMP/own.err"
view=$(sed -n '/^slurm view:/,/^end/p' "$TMP/own.out")
job_line=$(echo "$view" | grep '^JobId=.* JobName=drover-own-')
check "slurm-t04 the job is named after the run and sized for 3 nodes of 2 CPUs" \
  sh -c "echo '$job_line' | grep -q 'NumTasks=3 .*CPUs/Task=2 '"
check "slurm-t04 its memory per CPU holds the largest node (300M over 2 CPUs)" \
  sh -c "echo '$job_line' | grep -q 'MinMemoryCPU=150M'"
for w in 0 1; do
  check "slurm-t04 worker-$w's step has 2 CPUs and 300M" \
    sh -c "echo \"\$1\" | grep -q 'Name=drover-worker-$w .*TRES=cpu=2,mem=300M,'" _ "$view"
done
check "slurm-t04 ps-0 (no memory given) has 1 CPU and its CPU's share, 150M" \
  sh -c "echo \"\$1\" | grep -q 'Name=drover-ps-0 .*TRES=cpu=1,mem=150M,'" _ "$view"
own_dir=$(ls -d "$RUNS"/own-* | head -n 1)
check "slurm-t04 each node's log names its step" grep -q "runs as Slurm step [0-9]*\.[0-9]" "$own_dir/logs/worker-1.log"
check "slurm-t04 and how it ended" grep -Eq "step [0-9]+\.[0-9]+ \(drover-worker-1\) ended: the task exited with status 0" "$own_dir/logs/worker-1.log"
check "slurm-t04 the job's output is in the run's logs" test -f "$own_dir/logs/slurm-job.log"
# What every node reported of where it runs: nodes.tsv (node pid host address
# cpus_asked threads cpus memory_asked memory gpus_asked gpus slurm_job
# slurm_step slurm_node restarts) and events.log.
job=$(sed -n 's/^drover: submitted Slurm job \([0-9]*\).*/\1/p' "$TMP/own.err" | head -n 1)
me=$(hostname -s)
for n in ps:0 worker:0 worker:1; do
  check "slurm-t04 nodes.tsv: $n reports job $job, a step and Slurm node $me" \
    awk -F'\t' -v n="$n" -v j="$job" -v h="$me" \
      '$1 == n && $12 == j && $13 ~ /^[0-9]+$/ && $14 == h { ok = 1 } END { exit !ok }' "$own_dir/nodes.tsv"
done
check "slurm-t04 nodes.tsv: the workers got 2 threads and Slurm's 300M" \
  sh -c "[ \$(awk -F'\t' '\$1 ~ /^worker/ && \$6 == 2 && \$9 == 300 * 1048576' '$own_dir/nodes.tsv' | wc -l) -eq 2 ]"
check "slurm-t04 events.log: what worker:1 got, with its Slurm job and node" \
  grep -Eq "node got worker:1 on .*: 2 threads, .*slurm $job\.[0-9]+ on $me" "$own_dir/events.log"
check "slurm-t04 squeue is empty after the run" wait_no_jobs 15

# slurm-t05: a job Slurm cannot schedule fails at once with Slurm's reason
unsched() { # NAME SPEC: a drover.cluster that must fail fast
  cat >"$TMP/$1.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "slurm", ps = 1, runs = "$RUNS", name = "$1", $2 })
assert(not ok)
io.stdout:write("error: ", err, "\n")
LUA
  local t0=$(date +%s)
  outside timeout 60 "$DROVER" run "$TMP/$1.lua" >"$TMP/$1.out" 2>&1
  echo $(($(date +%s) - t0))
}
secs=$(unsched bigmem 'worker = { instances = 2, memory = "100000G" }')
check "slurm-t05 memory above the node's fails within 10 s (${secs}s)" [ "$secs" -lt 10 ]
check "slurm-t05 with sbatch's reason" grep -q "^error: .*Slurm rejected the job: Memory specification can not be satisfied" "$TMP/bigmem.out"
secs=$(unsched feature 'worker = 2, slurm = { constraint = "nosuch" }')
check "slurm-t05 a constraint no node has fails within 10 s (${secs}s)" [ "$secs" -lt 10 ]
check "slurm-t05 with sbatch's reason" grep -q "^error: .*Invalid feature specification" "$TMP/feature.out"
# a pending reason that can never clear: a dependency on a job that failed
dep=$(sbatch --parsable -o /dev/null --wrap 'exit 1')
i=0; while [ $i -lt 100 ] && [ "$(squeue -h -t all -j "$dep" -o %T)" != FAILED ]; do sleep 0.1; i=$((i + 1)); done
secs=$(unsched never "worker = 2, slurm = { options = { \"--dependency=afterok:$dep\" }, pending_timeout = 60 }")
check "slurm-t05 DependencyNeverSatisfied fails at once, not after pending_timeout (${secs}s)" [ "$secs" -lt 10 ]
check "slurm-t05 naming the reason" grep -q "^error: .*cannot start: DependencyNeverSatisfied" "$TMP/never.out"

# slurm-t06: a job that stays pending fails after pending_timeout with the
# reason, and is cancelled
secs=$(unsched pend 'worker = 2, slurm = { options = { "--begin=now+3600" }, pending_timeout = 3 }')
check "slurm-t06 a pending job fails after pending_timeout = 3 (${secs}s)" sh -c "[ $secs -ge 3 ] && [ $secs -lt 15 ]"
check "slurm-t06 with the reason in the error" grep -q "^error: .*still pending after 3 s (reason: BeginTime); cancelled" "$TMP/pend.out"
check "slurm-t06 the pending reason was shown while waiting" grep -q "^drover: job [0-9]* pending: BeginTime" "$TMP/pend.out"
pend_dir=$(ls -d "$RUNS"/pend-* | head -n 1)
check "slurm-t06 and logged to events.log" grep -q "launcher: job [0-9]* pending: BeginTime" "$pend_dir/events.log"
check "slurm-t06 the job is cancelled: squeue is empty" wait_no_jobs 15

# slurm-t06: Ctrl-C while the job pends: the start fails at once and the
# job is cancelled
cat >"$TMP/intr.lua" <<LUA
drover.cluster { launcher = "slurm", ps = 1, worker = 1, runs = "$RUNS", name = "intr",
                 slurm = { options = { "--begin=now+3600" }, pending_timeout = 60 } }
LUA
env -u SLURM_JOB_ID -u SLURM_JOBID "$DROVER" run "$TMP/intr.lua" >"$TMP/intr.out" 2>&1 &
ipid=$!
i=0; while [ $i -lt 100 ] && ! grep -q "pending: BeginTime" "$TMP/intr.out"; do sleep 0.1; i=$((i + 1)); done
# The coordinator keeps serving attach clients while its job pends.
intr_dir=$(ls -d "$RUNS"/intr-* | head -n 1)
timeout 10 "$DROVER" attach "$intr_dir" --print >"$TMP/intr.attach" 2>&1
check "slurm-t06 drover attach --print answers while the job pends, with the reason" \
  grep -q "launcher: job [0-9]* pending: BeginTime" "$TMP/intr.attach"
kill -INT $ipid
i=0; while [ $i -lt 100 ] && kill -0 $ipid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
check "slurm-t06 Ctrl-C ends a start whose job pends within 10 s" sh -c "! kill -0 $ipid 2>/dev/null"
kill -KILL $ipid 2>/dev/null
wait $ipid 2>/dev/null
check "slurm-t06 saying so" grep -q "interrupted while Slurm job [0-9]* was pending; cancelled" "$intr_dir/events.log"
check "slurm-t06 and the job is cancelled" wait_no_jobs 15

# slurm-t07: SIGKILL of a coordinator that submitted its own job: the job
# does not outlive it
cat >"$TMP/kill.lua" <<LUA
local c = drover.cluster { launcher = "slurm", ps = 1, worker = 2, runs = "$RUNS", name = "kill" }
io.stdout:write("up\n") io.stdout:flush()
drover.sleep(120)
LUA
env -u SLURM_JOB_ID -u SLURM_JOBID "$DROVER" run "$TMP/kill.lua" >"$TMP/kill.out" 2>&1 &
pid=$! # env execs drover: this is the coordinator's pid
# never leave it behind, whatever fails below
at_exit 'kill -KILL $pid 2>/dev/null'
i=0; while [ $i -lt 300 ] && ! grep -q '^up' "$TMP/kill.out"; do sleep 0.1; i=$((i + 1)); done
check "slurm-t07 the cluster came up in its own job" sh -c "grep -q '^up' '$TMP/kill.out' && [ -n \"\$(squeue -h -o %A)\" ]"
kill -KILL $pid
wait $pid 2>/dev/null
check "slurm-t07 no job is left 15 s after the coordinator's SIGKILL" wait_no_jobs 15
kill_dir=$(ls -d "$RUNS"/kill-* | head -n 1)
check "slurm-t07 the watchdog said why it cancelled" grep -q "coordinator is gone; cancelling job" "$kill_dir/logs/slurm-job.log"

# slurm-t07: the watchdog killed too (as when the submit host dies): the
# batch script ends the job once the heartbeat file stops changing (30 s)
env -u SLURM_JOB_ID -u SLURM_JOBID "$DROVER" run "$TMP/kill.lua" >"$TMP/kill2.out" 2>&1 &
pid=$!
i=0; while [ $i -lt 300 ] && ! grep -q '^up' "$TMP/kill2.out"; do sleep 0.1; i=$((i + 1)); done
kill2_dir=$(ls -td "$RUNS"/kill-* | head -n 1)
wd=$(sed -n 's/^drover watchdog: pid \([0-9]*\),.*/\1/p' "$kill2_dir/logs/slurm-job.log" | head -n 1)
check "slurm-t07 the watchdog logged its pid ($wd)" sh -c "[ -n '$wd' ] && kill -0 '$wd'"
[ -n "$wd" ] && kill -KILL "$wd"
kill -KILL $pid
wait $pid 2>/dev/null
check "slurm-t07 without the watchdog no job is left 50 s after the SIGKILL" wait_no_jobs 50
check "slurm-t07 the batch script said why it ended" grep -q "no heartbeat in .* for 30 s" "$kill2_dir/logs/slurm-job.log"

# slurm-t08: drover run inside an sbatch script (not salloc): the nodes are
# steps of that batch job, and the script ends cleanly
cat >"$TMP/batch.lua" <<LUA
local c = drover.cluster { launcher = "slurm", ps = 1, worker = 2, runs = "$RUNS", name = "batch" }
local p = io.popen("squeue -h -s -j " .. os.getenv("SLURM_JOB_ID") .. " -o '%i %j'")
io.stdout:write(p:read("a"))
p:close()
c:shutdown()
io.stdout:write("batch run done\n")
LUA
bj=$(sbatch --parsable -n3 -o "$TMP/batch.out" --wrap "exec '$DROVER' run '$TMP/batch.lua'")
i=0; while [ $i -lt 600 ] && [ -n "$(squeue -h -j "$bj" -o %T 2>/dev/null)" ]; do sleep 0.1; i=$((i + 1)); done
check "slurm-t08 the sbatch script ran drover to the end" grep -q "^batch run done" "$TMP/batch.out"
check "slurm-t08 its nodes were steps of the batch job" grep -Eq "^$bj\.[0-9]+ drover-worker-1\$" "$TMP/batch.out"

# slurm-t02 (continued): the cancelled step's log says Slurm cancelled it
restart_dir=$(ls -d "$RUNS"/restart-* | head -n 1)
check "slurm-t02 the worker's log says its step was cancelled by Slurm, not a crash" \
  grep -Eq "ended: cancelled by Slurm or a user's scancel: (STEP [0-9]+\.[0-9]+ ON .* CANCELLED AT|srun: Job step aborted)" \
  "$restart_dir/logs/worker-1.log"

# slurm-t10: a node's key file (keys/ROLE-I.key, on the file system the
# steps share) is gone once the node read it; worker:1 SIGKILLed by its
# pid comes back as a new step with a fresh file, gone as well
mkdir -p "$TMP/k"
echo 'return { launcher = "slurm", reservation_timeout = 60 }' > "$TMP/k/spec.lua"
timeout 150 salloc -N1 -n3 "$DROVER" run tests/cli/keyfiles.lua "$TMP/k/spec.lua" "$RUNS" keys "$TMP/k" \
  >"$TMP/k/out" 2>&1 &
kc=$!
kill_at_exit $kc
wait_for 90 test -s "$TMP/k/victim"
read vpid parent vcwd <"$TMP/k/victim"
check "slurm-t10 every node's key file is gone once it registered" \
  [ "$(grep -c '^up	[a-z]*:[0-9]	[0-9]*	gone	/.*/keys/[a-z]*-[0-9].key$' "$TMP/k/out")" -eq 3 ]
check "slurm-t10 the run's keys/ is empty" grep -q '^up	keys \[\]$' "$TMP/k/out"
kill -9 "${vpid:-0}"
touch "$TMP/k/killed"
wait $kc
check "slurm-t10 the run ends after worker:1's SIGKILL" grep -q '^finished' "$TMP/k/out"
check "slurm-t10 worker:1 came back with a fresh key file, gone too" \
  grep -q '^again	worker:1	[0-9]*	gone	/.*/keys/worker-1.key$' "$TMP/k/out"

# slurm-t09: nothing of ours is left in Slurm
wait_no_jobs 15
check "slurm-t09 squeue shows no drover step" [ -z "$(drover_steps)" ]
check "slurm-t09 squeue shows no job" no_jobs
