# test_caps.sh - capability keys and per-peer frame limits, with real
# processes: a hand-made peer (rawpeer.py) authenticates with a key and an
# identity, sends a frame it may not send, and is closed at the header;
# the coordinator and the ps live on and the run completes. Every wait is
# bounded; only processes this test started are signalled, by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
PY=python3
[ -x "${VENV:-}/bin/python" ] && PY=$VENV/bin/python
raw() { timeout 20 "$PY" tests/cli/rawpeer.py "$@" 2>&1; }

cat > "$TMP/caps.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "caps" }
local f = io.open("$TMP/info.tmp", "w")
f:write(c.address, " ", c.run_dir)
for _, n in ipairs(c:nodes()) do
  if n.role == "ps" then f:write(" ", n.port, " ", n.pid) end
end
f:write("\n")
f:close()
os.rename("$TMP/info.tmp", "$TMP/info")
local t0 = drover.clock()
while drover.clock() - t0 < 60 and not io.open("$TMP/go") do drover.sleep(0.1) end
for _, n in ipairs(c:nodes()) do print(n.role .. ":" .. n.index .. " " .. n.state .. " restarts " .. n.restarts) end
local digits = data.csv("$PWD/examples/data/digits.csv", { label = -1 }):standardize()
local r = c:fit(drover.experiment {
  name = "f", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
  model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
  train = { data = digits, batch = 64, epochs = 1 }, seed = 1, verbose = false })
print("steps " .. r.steps)
c:shutdown()
LUA
timeout 90 "$DROVER" run "$TMP/caps.lua" >"$TMP/out" 2>"$TMP/err" &
coord=$!
wait_for 30 test -s "$TMP/info"
read addr RUN ps_port ps_pid <"$TMP/info"
ps_addr=127.0.0.1:$ps_port
W=$RUN/keys/worker-0.key

# caps-01: one 0600 file per key
for k in secret control.key view.key keys/worker-0.key; do
  check "caps-01 $k is 0600" [ "$(stat -c %a "$RUN/$k")" = 600 ]
done
check "caps-01 the ps gets no file of its own (it holds the secret)" [ ! -e "$RUN/keys/ps-0.key" ]
check "caps-01 every key differs" [ "$(cat "$RUN/secret" "$RUN/control.key" "$RUN/view.key" "$W" | sort -u | wc -l)" = 4 ]

# caps-02: the view key attaches read-only, never controls
"$DROVER" attach "$RUN" --key "$RUN/view.key" --print >"$TMP/v.out" 2>&1
check "caps-02 the view key attaches" [ $? -eq 0 ]
check "caps-02 and sees the nodes" grep -q "^worker:0 " "$TMP/v.out"
"$DROVER" attach "$RUN" --key "$RUN/view.key" --control --command "return 1" >"$TMP/vc.out" 2>&1
check "caps-02 a command with the view key fails" [ $? -eq 1 ]
check "caps-02 saying it needs the control key" grep -q "control key" "$TMP/vc.out"
check "caps-02 raw: ATTACH --control with the view key is closed" \
  [ "$(raw "$addr" "$RUN/view.key" 1 0 0 50 9 01000000000000d03f)" = closed ]
"$DROVER" attach "$RUN" --control --command "return 6 * 7" >"$TMP/cc.out" 2>&1
check "caps-02 the control key (picked by attach) runs a command" grep -q "^42$" "$TMP/cc.out"

# caps-03: a node's key is no client key, and no other node's
check "caps-03 a worker's key does not attach" [ "$(raw "$addr" "$W" 1 0 0)" = auth-failed ]
check "caps-03 nor does the secret" [ "$(raw "$addr" "$RUN/secret" 1 0 0)" = auth-failed ]
check "caps-03 a worker's key is not worker:1's" [ "$(raw "$addr" "$W" 0 2 1)" = auth-failed ]
check "caps-03 nor the coordinator's at the ps" [ "$(raw "$ps_addr" "$W" 0 4 0)" = auth-failed ]
check "caps-03 the control key is no node key" [ "$(raw "$addr" "$RUN/control.key" 0 2 0)" = auth-failed ]

# caps-04: what a peer may send, at the header
check "caps-04 a worker's key sending VAR_INIT to the ps is closed" \
  [ "$(raw "$ps_addr" "$W" 0 2 0 20 100000)" = closed ]
check "caps-04 RESTORE too" [ "$(raw "$ps_addr" "$W" 0 2 0 46 100)" = closed ]
check "caps-04 the ps logs the refusal" grep -q "refused VAR_INIT from .*(a worker, chief or evaluator)" "$RUN/logs/ps-0.log"
check "caps-04 before REGISTER, a 200 MiB REGISTER is closed at its header" \
  [ "$(raw "$addr" "$W" 0 2 0 10 209715200)" = closed ]
check "caps-04 before REGISTER, a 200 MiB PUSH is closed at its header" \
  [ "$(raw "$addr" "$W" 0 2 0 42 209715200)" = closed ]
check "caps-04 a node's key sending ATTACH is closed" [ "$(raw "$addr" "$W" 0 2 0 50 9)" = closed ]
check "caps-04 a view client sending RESULT is closed" [ "$(raw "$addr" "$RUN/view.key" 1 0 0 31 8)" = closed ]
check "caps-04 the coordinator logs them" grep -q "refused PUSH from .*(a node before REGISTER)" "$RUN/logs/coordinator.log"

# caps-05: everyone lives on; the run completes
check "caps-05 the ps lives on" kill -0 "$ps_pid"
check "caps-05 the coordinator lives on" kill -0 "$coord"
touch "$TMP/go"
wait $coord
rc=$?
check "caps-05 the run completes (exit 0)" [ $rc -eq 0 ]
check "caps-05 no node was restarted" sh -c "! grep -q 'restarts [1-9]' '$TMP/out'"
check "caps-05 the fit ran" grep -q "^steps [1-9]" "$TMP/out"
[ $rc -eq 0 ] || tail -5 "$TMP/err"
[ -n "${CAPS_DEBUG:-}" ] && { cat "$TMP/vc.out" "$TMP/cc.out"; grep "W " "$RUN/logs/ps-0.log" "$RUN/logs/coordinator.log"; }
true
