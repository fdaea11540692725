# test_caps.sh - capability keys and per-peer frame limits, with real
# processes: a hand-made peer (rawpeer.py) authenticates with a key and an
# identity, sends a frame it may not send, and is closed at the header;
# a thief of a node's key file (a worker's, a ps's) poses as nobody else;
# the coordinator and the ps live on and the run completes. Every wait is
# bounded; only processes this test started are signalled, by pid.
. tests/cli/lib.sh
RUNS=$TMP/runs
PY=python3
[ -x "${VENV:-}/bin/python" ] && PY=$VENV/bin/python
raw() { timeout 20 "$PY" tests/cli/rawpeer.py "$@" 2>&1; }

cat > "$TMP/caps.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local c = drover.cluster { ps = 2, worker = 1, runs = "$RUNS", name = "caps" }
local f = io.open("$TMP/info.tmp", "w")
f:write(c.address, " ", c.run_dir, "\n")
for _, n in ipairs(c:nodes()) do
  if n.role == "ps" then f:write("ps ", n.index, " ", n.port, " ", n.pid, "\n") end
end
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
# Nodes remove their key files once read: the thief copies each one as the
# node starts (a $DROVER_LAUNCH_EXE wrapper), before the node has read it.
mkdir -p "$TMP/stolen"
cat > "$TMP/node.sh" <<SH
#!/bin/sh
prev=
for a do case \$prev in --role) role=\$a ;; --index) index=\$a ;; esac; prev=\$a; done
echo "\$DROVER_SECRET_FILE" > "$TMP/stolen/\$role-\$index.path"
cp -p "\$DROVER_SECRET_FILE" "$TMP/stolen/\$role-\$index.key"
exec "$DROVER" "\$@"
SH
chmod +x "$TMP/node.sh"
DROVER_LAUNCH_EXE="$TMP/node.sh" timeout 90 "$DROVER" run "$TMP/caps.lua" >"$TMP/out" 2>"$TMP/err" &
coord=$!
wait_for 30 test -s "$TMP/info"
read addr RUN <"$TMP/info"
ps_port=$(awk '$1 == "ps" && $2 == 0 { print $3 }' "$TMP/info")
ps_pid=$(awk '$1 == "ps" && $2 == 0 { print $4 }' "$TMP/info")
ps1_port=$(awk '$1 == "ps" && $2 == 1 { print $3 }' "$TMP/info")
ps_addr=127.0.0.1:$ps_port
ps1_addr=127.0.0.1:$ps1_port
W=$TMP/stolen/worker-0.key
# The file ps:0 was given, wherever the launcher put it (its environment
# says), as a thief of that ps found it before the node read it.
P0F=$(tr '\0' '\n' < "/proc/$ps_pid/environ" | sed -n 's/^DROVER_SECRET_FILE=//p')
P0=$TMP/stolen/ps-0.key

# caps-01: one 0600 file per key; a node's is gone once the node read it
for k in secret control.key view.key; do
  check "caps-01 $k is 0600" [ "$(stat -c %a "$RUN/$k")" = 600 ]
done
for k in worker-0 ps-0 ps-1; do
  check "caps-01 keys/$k.key was 0600" [ "$(stat -c %a "$TMP/stolen/$k.key")" = 600 ]
  check "caps-01 $k read keys/$k.key" [ "$(cat "$TMP/stolen/$k.path")" = "$RUN/keys/$k.key" ]
  check "caps-01 and removed it once read" [ ! -e "$RUN/keys/$k.key" ]
done
check "caps-01 no key appears twice in the run's files" \
  [ -z "$(cat "$RUN/secret" "$RUN/control.key" "$RUN/view.key" "$TMP"/stolen/*.key | grep -o '[0-9a-f]\{64\}' | sort | uniq -d)" ]

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
check "caps-03 a worker's keys do not attach" [ "$(raw "$addr" "$W#all" 1 0 0)" = auth-failed ]
check "caps-03 nor does the secret" [ "$(raw "$addr" "$RUN/secret" 1 0 0)" = auth-failed ]
check "caps-03 a worker's keys are not worker:1's" [ "$(raw "$addr" "$W#all" 0 2 1)" = auth-failed ]
check "caps-03 nor the coordinator's at the ps" [ "$(raw "$ps_addr" "$W#all" 0 4 0)" = auth-failed ]
check "caps-03 the control key is no node key" [ "$(raw "$addr" "$RUN/control.key" 0 2 0)" = auth-failed ]

# caps-06: a ps holds no root but its own. Its key file is not the secret;
# a thief of it (every key in it, as it is and as a root to derive from)
# is the coordinator at that ps alone, and ps:0 alone at the coordinator
check "caps-06 ps:0's key file is its own file" [ "$P0F" = "$RUN/keys/ps-0.key" ]
check "caps-06 ps:0's key file does not hold the run's secret" \
  sh -c "! grep -qF '$(cat "$RUN/secret")' '$P0'"
check "caps-06 ps:0's keys are the coordinator at ps:0 (its own)" \
  [ "$(raw "$ps_addr" "$P0#all" 0 4 0)" = authenticated ]
check "caps-06 ps:0's keys are not the coordinator at ps:1" \
  [ "$(raw "$ps1_addr" "$P0#all" 0 4 0)" = auth-failed ]
check "caps-06 nor worker:0 at ps:1" [ "$(raw "$ps1_addr" "$P0#all" 0 2 0)" = auth-failed ]
check "caps-06 nor ps:0 at ps:1" [ "$(raw "$ps1_addr" "$P0#all" 0 0 0)" = auth-failed ]
check "caps-06 nor worker:0 at the coordinator" [ "$(raw "$addr" "$P0#all" 0 2 0)" = auth-failed ]
check "caps-06 nor ps:1 at the coordinator" [ "$(raw "$addr" "$P0#all" 0 0 1)" = auth-failed ]
check "caps-06 nor a control client" [ "$(raw "$addr" "$P0#all" 1 0 0)" = auth-failed ]
check "caps-06 ps:0's coordinator key is ps:0's (no frame sent: it stays registered)" \
  [ "$(raw "$addr" "$P0#coord" 0 0 0)" = authenticated ]

# caps-07: a worker's key for ps 0 is not its key at ps 1, and neither is
# the coordinator's
check "caps-07 worker:0's key for ps 0 works at ps:0" [ "$(raw "$ps_addr" "$W#ps.0" 0 2 0)" = authenticated ]
check "caps-07 but not at ps:1" [ "$(raw "$ps1_addr" "$W#ps.0" 0 2 0)" = auth-failed ]
check "caps-07 worker:0's key for ps 1 works at ps:1" [ "$(raw "$ps1_addr" "$W#ps.1" 0 2 0)" = authenticated ]
check "caps-07 worker:0's key at the coordinator is no key at a ps" \
  [ "$(raw "$ps_addr" "$W#coord" 0 2 0)" = auth-failed ]

# caps-04: what a peer may send, at the header
check "caps-04 a worker's key sending VAR_INIT to the ps is closed" \
  [ "$(raw "$ps_addr" "$W#ps.0" 0 2 0 20 100000)" = closed ]
check "caps-04 RESTORE too" [ "$(raw "$ps_addr" "$W#ps.0" 0 2 0 46 100)" = closed ]
check "caps-04 the ps logs the refusal" grep -q "refused VAR_INIT from .*(a worker, chief or evaluator)" "$RUN/logs/ps-0.log"
check "caps-04 before REGISTER, a 200 MiB REGISTER is closed at its header" \
  [ "$(raw "$addr" "$W#coord" 0 2 0 10 209715200)" = closed ]
check "caps-04 before REGISTER, a 200 MiB PUSH is closed at its header" \
  [ "$(raw "$addr" "$W#coord" 0 2 0 42 209715200)" = closed ]
check "caps-04 a node's key sending ATTACH is closed" [ "$(raw "$addr" "$W#coord" 0 2 0 50 9)" = closed ]
check "caps-04 a view client sending RESULT is closed" [ "$(raw "$addr" "$RUN/view.key" 1 0 0 31 8)" = closed ]
check "caps-04 the coordinator logs them" grep -q "refused PUSH from .*(a node before REGISTER)" "$RUN/logs/coordinator.log"

# caps-05: everyone lives on; the run completes
check "caps-05 the ps live on" kill -0 "$ps_pid"
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
