# test_slurm.sh - the Slurm launcher against a real single-machine Slurm
# started by tests/slurm/start.sh (and stopped by stop.sh on exit): nodes
# as job steps inside `salloc`, training, a cancelled step restarted, a
# failed start that cancels its steps, the error outside an allocation, and
# that no drover step is left behind.
# Skipped, with the reason, where Slurm cannot be installed or started
# (start.sh exits 77); DROVER_SLURM_REQUIRED=1 (CI) makes that a failure.
. tests/cli/lib.sh
RUNS=$TMP/runs
SLURM_DIR=${DROVER_SLURM_DIR:-/tmp/drover-slurm}

why=$(bash tests/slurm/start.sh 2>"$TMP/start.err")
rc=$?
if [ $rc -eq 77 ]; then
  echo "SKIP test_slurm: ${why#SKIP }"
  exit 0
fi
if [ $rc -ne 0 ]; then
  fail "slurm-t00 tests/slurm/start.sh starts Slurm" "exit $rc: $why $(tail -n 5 "$TMP/start.err")"
  exit 1
fi
trap 'bash tests/slurm/stop.sh; rm -rf "$TMP"' EXIT
. "$SLURM_DIR/env"
export SLURM_CONF RUNS

# drover steps of every job ("JOB.STEP NAME" lines), for the leftover checks.
drover_steps() { squeue -h -s -o '%i %j' | grep ' drover-' ; }

# A Lua helper shared by the scripts: the steps of our allocation.
cat > "$TMP/steps.lua" <<'LUA'
return function()
  local p = io.popen("squeue -h -s -j " .. os.getenv("SLURM_JOB_ID") .. " -o '%i %j'")
  local s = p:read("a")
  p:close()
  return s
end
LUA

# slurm-t01: 1 ps + 2 workers as job steps inside salloc learn digits
cat > "$TMP/fit.lua" <<LUA
local steps = dofile("$TMP/steps.lua")
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
drover.seed(1)
local exp = drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  train = { data = train_std, batch = 32, epochs = 10 },
  eval = { data = test_ds:standardize(stats), every = 100 }, seed = 1, verbose = false,
}
local c = drover.cluster { launcher = "slurm", ps = 1, worker = 2, runs = "$RUNS", name = "fit" }
io.stdout:write("steps during the run:\n", steps())
local r = c:fit(exp)
io.stdout:write(string.format("eval_accuracy %.4f\n", r.eval_accuracy))
c:shutdown() -- raises if a node failed
io.stdout:write("steps after shutdown:\n", steps(), "end\n")
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
io.stdout:write(err, "\nsteps after the failed start:\n", steps(), "end\n")
LUA
DROVER_FAULT=hang:worker:1 timeout 120 salloc -N1 -n3 "$DROVER" run "$TMP/hang.lua" \
  >"$TMP/hang.out" 2>&1
check "slurm-t03 the script runs" [ $? -eq 0 ]
check "slurm-t03 the timeout names the missing node" grep -q "missing worker:1" "$TMP/hang.out"
check "slurm-t03 the script printed the steps after the failure" \
  grep -q "^steps after the failed start:" "$TMP/hang.out"
check "slurm-t03 no drover step is left inside the allocation" \
  sh -c "! sed -n '/^steps after the failed start:/,/^end/p' '$TMP/hang.out' | grep -q drover-"

# slurm-t04: outside an allocation, a clear error (for now)
cat > "$TMP/outside.lua" <<LUA
drover.cluster { launcher = "slurm", ps = 1, worker = 1, runs = "$RUNS", name = "outside" }
LUA
env -u SLURM_JOB_ID -u SLURM_JOBID timeout 60 "$DROVER" run "$TMP/outside.lua" >"$TMP/outside.out" 2>&1
rc=$?
check "slurm-t04 outside an allocation the run fails (status $rc)" sh -c "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
check "slurm-t04 saying why" grep -q "not inside a Slurm allocation" "$TMP/outside.out"

# slurm-t05: nothing of ours is left in Slurm (a job ending its allocation
# may show as COMPLETING for a moment: wait up to 15 s)
no_jobs() { [ -z "$(squeue -h -o %A)" ]; }
i=0; while [ $i -lt 150 ] && ! no_jobs; do sleep 0.1; i=$((i + 1)); done
check "slurm-t05 squeue shows no drover step" [ -z "$(drover_steps)" ]
check "slurm-t05 squeue shows no job" no_jobs
