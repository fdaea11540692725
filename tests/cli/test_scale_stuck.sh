# test_scale_stuck.sh - membership changes a fit did not ask for (issue 28):
# a worker c:scale starts that never registers (DROVER_FAULT=hang: stuck
# before it dials, as on a dead host) is lost after reservation_timeout
# and, with min, the cluster shrinks: the sync fit's global steps exact,
# the change over without it; and an async fit's worker SIGKILLed past its
# restarts shrinks the cluster with a `workers` line in metrics.jsonl.
. tests/cli/lib.sh
RUNS=$TMP/runs

cat >"$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local mode = arg[1]
local c = drover.cluster { ps = 1, worker = { instances = 2, min = 1, max = 3 }, runs = "$RUNS",
  name = mode, max_restarts = 0, reservation_timeout = 2 }
-- once the change is asked, each progress call is held 20 ms, blocking,
-- until events.log says what it waits for: the fit outlasts the 2 s the
-- stuck worker is given (a sync fit of small steps would end first)
local asked
local function over()
  local f = io.open(c.run_dir .. "/events.log")
  local ev = f:read("a")
  f:close()
  return ev:find(mode == "sync" and "scale: worker 2 -> 3 done" or "cluster shrinks", 1, true)
end
local function progress(p)
  if asked and not over() then return io.popen("sleep 0.02"):close() end
  if asked or p.step < 40 then return end
  asked = true
  if mode == "sync" then
    assert(c:scale { worker = 3 })
  else
    for _, x in ipairs(c:nodes()) do
      if x.role == "worker" and x.index == 1 then os.execute("kill -9 " .. x.pid) end
    end
  end
end
local exp = drover.experiment { name = mode, mode = mode, verbose = false,
  model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, progress = progress,
  train = { data = digits, batch = 16, epochs = 100, max_steps = 1600 } }
local r = c:fit(exp)
local live = 0
for _, x in ipairs(c:nodes()) do
  if x.role == "worker" and x.state ~= "removed" then live = live + 1 end
end
io.stdout:write("run_dir ", c.run_dir, "\n")
io.stdout:write(string.format("%s steps %d global %d live %d\n", mode, r.steps, r.global_steps or -1, live))
c:shutdown()
LUA

# stuck-01..03: sync, worker:2 (new) never registers
DROVER_FAULT=hang:worker:2 timeout 120 "$DROVER" run "$TMP/fit.lua" sync \
  >"$TMP/sync.out" 2>&1
rc=$?
DIR=$(sed -n 's/^run_dir //p' "$TMP/sync.out")
check "stuck-01 the sync fit ends cleanly (status $rc)" [ $rc -eq 0 ]
check "stuck-01 its 800 global steps, 2 gradients each, 2 workers left" \
  grep -q '^sync steps 1600 global 800 live 2$' "$TMP/sync.out"
check "stuck-02 the new worker is lost: it did not register within 2 s of its start" \
  grep -q 'node removed worker:2: did not register within 2 s of its start' "$DIR/events.log"
check "stuck-02 the cluster shrinks instead of failing" \
  grep -q 'worker:2 lost past its restarts: cluster shrinks to 2 workers (min 1)' "$DIR/events.log"
check "stuck-03 the change is over, the quorum unchanged" \
  sh -c "grep -q 'scale: worker 2 -> 3 done' '$DIR/events.log' && ! grep -q 'gradients per global step from' '$DIR/events.log'"

# stuck-04: async, worker:1 SIGKILLed with no restarts left: 1 worker,
# its line in metrics.jsonl, the steps exact
timeout 120 "$DROVER" run "$TMP/fit.lua" async >"$TMP/async.out" 2>&1
rc=$?
DIR=$(sed -n 's/^run_dir //p' "$TMP/async.out")
check "stuck-04 the async fit ends cleanly (status $rc)" [ $rc -eq 0 ]
check "stuck-04 its 1600 steps, 1 worker left" grep -q '^async steps 1600 global -1 live 1$' "$TMP/async.out"
got=$(grep -o '"workers": *[0-9]*' "$DIR/metrics.jsonl" | tr -d ' ' | tr '\n' ' ')
check "stuck-04 metrics.jsonl: workers 2 (the start), then 1 ($got)" [ "$got" = '"workers":2 "workers":1 ' ]
