# test_feed_direct.sh - direct feeders (src/cluster/coord/coord_feed_direct.c,
# src/cluster/worker/worker_direct.c): keyed external feeders on the workers' host send
# their batches to a worker, not through the coordinator, against a real
# local 1 ps + 2 worker cluster from Python (tests/cli/feed_direct.py): the
# route, the worker's feed port (the feed key and FEED_BATCH only), a
# feeder lost mid-way and its retry, a worker SIGKILLed mid-feed, a feeder
# that dies with its worker; the fit trains every batch once (45, also
# those of a feeder lost and never retried), and the records say which
# went directly.
. tests/cli/lib.sh
python_client feed-direct
feed_fit_start direct
timeout 150 "$PY" tests/cli/feed_direct.py "$RUN"
check "feed-direct-t06 the fit ended" wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "feed-direct-t06 the script exited 0" test $? -eq 0
check "feed-direct-t06 each batch trained once: 45 fed, 45 trained (t07's 5 counted too)" \
  grep -q "^FED 45 TRAINED 45$" "$TMP/direct.out"
check "feed-direct-t02 events.log: the coordinator routed feeder a to a worker" \
  grep -q "feeder a on .* feeds worker:[01] directly (127.0.0.1:[0-9]*, slot [0-9]*, from batch 1)" "$RUN/events.log"
w=$(sed -n 's/.*feeder a on .* feeds \(worker\):\([01]\) directly.*/\1-\2/p' "$RUN/events.log" | head -n 1)
check "feed-direct-t02 the worker's own log: the slot's connection took 10 batches ($w)" \
  grep -q "direct feeder of slot [0-9]* closed after batch 10 (10 taken)" "$RUN/logs/$w.log"
check "feed-direct-t04 events.log: the retry waited for what the worker took" \
  grep -q "feeder b2: the worker took batches up to 6 of key k2 .*: it skips those" "$RUN/events.log"
check "feed-direct-t05 events.log: the lost worker's feeder went back to the coordinator" \
  grep -q "feeder c: worker:[01], which it fed directly, was lost; its batches after [0-9]* go through the coordinator" "$RUN/events.log"
check "feed-direct-t10 events.log: so did the slot of the feeder that died with its worker" \
  grep -q "feeder g: worker:[01], which it fed directly, was lost; its batches after [0-9]* go through the coordinator" "$RUN/events.log"
n=$(sed -n 's/.*feed: \([0-9]*\) batches trained by the worker their feeder sent them to directly/\1/p' "$RUN/events.log")
check "feed-direct-t06 events.log counts the batches trained directly ($n: a's 10, b's and b2's 10, c's and g's before the kills, e's 5)" \
  sh -c "[ -n '$n' ] && [ '$n' -ge 25 ] && [ '$n' -lt 45 ]"

# feed-direct-t08: a worker fed directly that stops acknowledging (SIGSTOPped):
# feed_timeout fails the fit naming it, the feeder and the batch waited for;
# t09: that feeder opened before the fit began (no credit then), and is
# routed to the worker once the fit runs
cat > "$TMP/stall.lua" <<LUA
local nn, optim = drover.nn, drover.optim
local exp = drover.experiment {
  name = "stall", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
  train = { feed = "external", epochs = 1, feed_timeout = 8 }, seed = 1, verbose = false,
}
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "stall", heartbeat_timeout = 120 }
local f = io.open("$RUNS/stall", "w"); f:write(c.run_dir, "\n"); f:close()
local t0 = drover.clock() -- the feeder opens before the fit begins (t09)
while not io.open("$TMP/go") and drover.clock() - t0 < 60 do drover.sleep(0.1) end
local ok, err = pcall(c.fit, c, exp)
print("FIT", ok, err)
c:shutdown()
LUA
"$DROVER" run "$TMP/stall.lua" >"$TMP/stall.out" 2>&1 &
trainer=$!
wait_for 60 test -s "$RUNS/stall"
RUN2=$(cat "$RUNS/stall" 2>/dev/null)
wait_for 30 test -s "$RUN2/coordinator"
timeout 60 "$PY" - "$RUN2" "$TMP/go" >"$TMP/stall.py.out" 2>&1 <<'PY'
import os, signal, sys
import numpy as np
from drover_client import auth, client
from drover_client.conn import Conn, DroverError
from drover_client.feed import Feeder, feed_key
run = sys.argv[1]
host, port, path = client.resolve(run, control=True)
key = auth.load_secret(path)
f = Feeder(Conn(host, port, key, 30), "s", 0, 60, key="k", direct_key=feed_key(key))
f.opened()  # no fit yet: credit 0
open(sys.argv[2], "w").close()  # the script's fit begins now
f.wait_fit()
print("route before the first batch: %s" % f.route)
pid = [int(l.split("\t")[1]) for l in open(os.path.join(run, "nodes.tsv")) if l.startswith("worker:0\t")][0]
os.kill(pid, signal.SIGSTOP)
try:
    x = np.zeros((4, 64), np.float32)
    f.send(x, np.zeros(4, np.float32), 1)
    f.send(x, np.zeros(4, np.float32), 1)
    f.finish()
    print("finished")
except DroverError as e:
    print("feeder: %s" % e)
finally:
    os.kill(pid, signal.SIGCONT)
PY
check "feed-direct-t09 a direct feeder that opened before the fit is routed once it runs" \
  grep -q "^route before the first batch: worker:0 (127.0.0.1:[0-9]*)" "$TMP/stall.py.out"
check "feed-direct-t08 the fit ended" wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
trainer=
check "feed-direct-t08 feed_timeout names the worker fed directly, the feeder and the batch" \
  grep -q "FIT.*false.*feed_timeout: no progress for 8 s.*waited for worker:0, fed directly by feeder s, to acknowledge its batch 1" "$TMP/stall.out"
check "feed-direct-t08 and the feeder is told the feed ended" grep -q "^feeder: the feed ended: .*feed_timeout" "$TMP/stall.py.out"
