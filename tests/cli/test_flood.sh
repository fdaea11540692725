# test_flood.sh - fault 2: connections that never authenticate, at the
# coordinator's and a ps's port, with a low descriptor limit, while a
# worker is SIGKILLed: the worker is relaunched (its log opened, its
# process started), reconnects to the ps, and the run completes.
# The flood (flood.py) ends by itself; only processes this test started
# are signalled, by pid.
. tests/cli/lib.sh
# The issue's own numbers (1,500 at ulimit -n 1024) pass too: FLOOD_COUNT=1500
# FLOOD_NOFILE=1024 sh tests/cli/test_flood.sh (slower, so not the default).
COUNT=${FLOOD_COUNT:-400}
NOFILE=${FLOOD_NOFILE:-256}
RUNS=$TMP/runs
PY=python3
[ -x "${VENV:-}/bin/python" ] && PY=$VENV/bin/python

cat > "$TMP/flood.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "flood" }
local ps_port, victim
for _, n in ipairs(c:nodes()) do
  if n.role == "ps" then ps_port = n.port end
  if n.role == "worker" and n.index == 1 then victim = n.pid end
end
assert(ps_port and victim, "ps port and worker:1 pid")
os.execute(string.format("$PY $PWD/tests/cli/flood.py 14 $COUNT %s 127.0.0.1:%d >$TMP/flood.out 2>$TMP/flood.err & echo $! >$TMP/flood.pid",
                         c.address, ps_port))
local t0 = drover.clock()
while drover.clock() - t0 < 10 do
  local f = io.open("$TMP/flood.out")
  local s = f and f:read("a") or ""
  if f then f:close() end
  if s:match("flooding") then break end
  drover.sleep(0.1)
end
drover.sleep(1) -- the flood is at its bound on both ports
os.execute("kill -9 " .. victim)
local back = false
t0 = drover.clock()
while drover.clock() - t0 < 45 and not back do
  for _, n in ipairs(c:nodes()) do
    if n.role == "worker" and n.index == 1 and n.restarts >= 1 and n.state == "ready" then back = true end
  end
  drover.sleep(0.1)
end
print("worker back " .. tostring(back))
local digits = data.csv("$PWD/examples/data/digits.csv", { label = -1 }):standardize()
local r = c:fit(drover.experiment {
  name = "f", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
  model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
  train = { data = digits, batch = 64, epochs = 2 }, seed = 1, verbose = false })
print("steps " .. r.steps)
for _, n in ipairs(c:nodes()) do
  if n.role == "worker" then print(n.role .. ":" .. n.index .. " steps " .. (n.steps or 0)) end
end
c:shutdown()
print("run done")
LUA
(ulimit -Sn $NOFILE; exec timeout 60 "$DROVER" run "$TMP/flood.lua") >"$TMP/out" 2>"$TMP/err"
rc=$?
[ -s "$TMP/flood.pid" ] && kill "$(cat "$TMP/flood.pid")" 2>/dev/null
check "flood-01 the run completes under the flood (exit 0)" [ $rc -eq 0 ]
check "flood-01 the flood ran" grep -q flooding "$TMP/flood.out"
check "flood-01 the killed worker came back" grep -q "worker back true" "$TMP/out"
check "flood-01 the fit ran every step" grep -q "^steps " "$TMP/out"
check "flood-01 the restarted worker trained" grep -q "^worker:1 steps [1-9]" "$TMP/out"
dir=$(ls -d "$RUNS"/flood-* | head -n 1)
check "flood-02 the coordinator logged drops at a bounded rate" \
  sh -c "[ \$(grep -c 'dropped before they authenticated' '$dir/logs/coordinator.log') -le 30 ]"
check "flood-02 and the ps too" \
  sh -c "[ \$(grep -c 'dropped before they authenticated' '$dir/logs/ps-0.log') -le 30 ]"
check "flood-02 the flood was logged at all" grep -q 'dropped before they authenticated' "$dir/logs/ps-0.log"
grep -q flooding "$TMP/flood.out" && [ $rc -eq 0 ] || { tail -5 "$TMP/err"; tail -5 "$TMP/out"; cat "$TMP/flood.err"; }
