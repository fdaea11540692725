# test_scale_feed_direct.sh - c:scale during a fed fit whose external
# feeders feed workers directly (src/cluster/coord/coord_scale.c,
# coord_feed_direct.c), on a real local 1 ps + 2 worker cluster from
# Python: a shrink that would remove a worker a direct feeder still feeds
# is refused naming it (its unacked batches are not the queue's to hand
# back); once that feeder ended the same shrink is accepted, and the fit
# still trains every batch once.
. tests/cli/lib.sh
python_client scale-feed-direct
feed_fit_start sfd
timeout 150 "$PY" - "$RUN" "$DROVER" >"$TMP/sfd.py.out" 2>&1 <<'PY'
import subprocess, sys
import numpy as np
from drover_client import auth, client
from drover_client.conn import Conn
from drover_client.feed import Feeder, feed_key
run, drover = sys.argv[1], sys.argv[2]
host, port, path = client.resolve(run, control=True)
key = auth.load_secret(path)
fkey = feed_key(key)
d = np.loadtxt("examples/data/digits.csv", delimiter=",", dtype=np.float32, ndmin=2)
x, y = d[:, :-1] / 16.0, d[:, -1]
holder = Feeder(Conn(host, port, key, 30), "holder", 1, 60)
print("epochs %d" % holder.wait_fit())
fs = [Feeder(Conn(host, port, key, 30), n, 0, 60, key=n, direct_key=fkey) for n in ("a", "b")]
for f in fs:
    f.opened()
    f.wait_fit()
    print("route %s" % f.route)
def scale(n):
    p = subprocess.run([drover, "scale", "--timeout", "30", run, "worker=%d" % n],
                       capture_output=True, text=True, timeout=60)
    print("scale %d exit %d: %s" % (n, p.returncode, (p.stdout + p.stderr).replace("\n", " ")))
scale(1)  # a direct feeder feeds worker:1
for f in fs:
    for i in range(0, 32 * 5, 32):
        f.send(x[i:i + 32], y[i:i + 32], 1)
    print("finished %s" % (tuple(f.finish()),))
scale(1)  # both ended, every batch acknowledged
for i in range(0, 32 * 3, 32):
    holder.send(x[i:i + 32], y[i:i + 32], 1)
print("holder %s" % (tuple(holder.finish()),))
PY
check "scale-feed-direct-01 the feeders were routed to both workers" \
  sh -c "grep -q '^route worker:0 ' '$TMP/sfd.py.out' && grep -q '^route worker:1 ' '$TMP/sfd.py.out'"
check "scale-feed-direct-01 the shrink is refused, naming worker:1 and the direct feeder" \
  grep -q "^scale 1 exit 1: .*c:scale: worker 2 -> 1 would remove worker:1, which an external feeder feeds directly" "$TMP/sfd.py.out"
check "scale-feed-direct-02 accepted once the direct feeders ended" grep -q "^scale 1 exit 0" "$TMP/sfd.py.out"
check "scale-feed-direct-02 the fit ended" wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "scale-feed-direct-02 the script exited 0" test $? -eq 0
check "scale-feed-direct-02 each batch trained once: 13 fed, 13 trained" grep -q "^FED 13 TRAINED 13$" "$TMP/sfd.out"
check "scale-feed-direct-02 events.log: worker:1 removed" grep -q "node removed worker:1" "$RUN/events.log"
