"""feed_keys.py - keyed feeders (FEED_OPEN.key) against a real cluster
(test_feed_keys.sh): what a retried Spark task does, without Spark.

usage: feed_keys.py RUN_DIR   prints PASS/FAIL lines
"""
import sys

import numpy as np
from drover_client import auth, client
from drover_client.conn import Closed, Conn, DroverError
from drover_client.feed import Feeder

run = sys.argv[1]
host, port, path = client.resolve(run, control=True)
key = auth.load_secret(path)
d = np.loadtxt("examples/data/digits.csv", delimiter=",", dtype=np.float32, ndmin=2)
x, y = d[:, :-1] / 16.0, d[:, -1]
B = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 32 * 10, 32)]


def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))
    sys.stdout.flush()


def feeder(name, k="", window=0):
    return Feeder(Conn(host, port, key, 30), name, window, 60, key=k)


def until_trained(f, n):
    while f.trained < n:
        f._wait()


holder = feeder("holder", window=1)
result("feed-keys-t01 FEED_CREDIT carries the fit's train.epochs", holder.wait_fit() == 2,
       holder.epochs)

# a task lost after 5 batches (its connection gone, no FEED_END) ...
a = feeder("a", "k1")
result("feed-keys-t02 a new key: nothing taken before", a.opened() == 0, a.taken)
for bx, by in B[:5]:
    a.send(bx, by, 1)
until_trained(a, 5)
a.conn.close()
# ... and its retry, which skips what was taken
b = feeder("b", "k1")
result("feed-keys-t02 the retry of a lost feeder learns 5 of its batches were taken",
       b.opened() == 5, b.taken)
for bx, by in B[b.taken:]:
    b.send(bx, by, 1)
r = b.finish()
b.conn.close()
result("feed-keys-t02 and ends with the key's 10 batches trained", tuple(r) == (10, 10), r)

# a holder still connected (a hung executor): the newest wins
c = feeder("c", "k2")
c.opened()
for bx, by in B[:3]:
    c.send(bx, by, 1)
until_trained(c, 3)
e = feeder("e", "k2")
result("feed-keys-t03 a second feeder of a live key takes over its 3 batches",
       e.opened() == 3, e.taken)
try:
    for _ in range(50):
        c._wait()
    result("feed-keys-t03 the older feeder is closed", False, "still open")
except (Closed, DroverError):
    result("feed-keys-t03 the older feeder is closed", True)
c.conn.close()
for bx, by in B[3:6]:
    e.send(bx, by, 1)
r = e.finish()
e.conn.close()
result("feed-keys-t03 the newest ends with the key's 6 batches", tuple(r) == (6, 6), r)

# a retry of a partition that was fed whole sends nothing
g = feeder("g", "k2")
result("feed-keys-t04 a key fed whole: all 6 taken", g.opened() == 6, g.taken)
r = g.finish()
g.conn.close()
result("feed-keys-t04 nothing is sent again", tuple(r) == (6, 6), r)

# a feeder that leaves once its batches are taken (a Spark task does)
h = feeder("h", "k3")
h.opened()
for bx, by in B[:4]:
    h.send(bx, by, 1)
r = h.finish(trained=False)
h.conn.close()
result("feed-keys-t06 a feeder leaves once the coordinator took its 4 batches",
       r.sent == 4 and h.acked == 4, (r, h.acked))

# the holder, which sent nothing, is answered when the fit's feed is over
r = holder.finish()
holder.conn.close()
result("feed-keys-t06 an empty feeder's FEED_END is answered at the feed's end, status 0",
       tuple(r) == (0, 0) and holder.ended["status"] == 0, (r, holder.ended))

# drover_client.spark's pieces that need no Spark: the key never prints,
# rows and blocks cut into the same batches, in order
import pickle  # noqa: E402
from drover_client import spark as dspark  # noqa: E402

s = dspark._Secret(b"\x01secret")
result("feed-keys-t07 the key shipped to executors prints as <drover key>",
       repr(s) == str(s) == "<drover key>" and "secret" not in repr([s]), repr(s))
result("feed-keys-t07 and pickles with its bytes", pickle.loads(pickle.dumps(s)).get() == b"\x01secret")
rows = [(x[i], y[i]) for i in range(100)]
a = list(dspark.batches(rows, 32))
blocks = [(x[0:50], y[0:50]), (x[50:80], y[50:80]), (x[80:100], y[80:100])]
b = list(dspark.block_batches(blocks, 32))
result("feed-keys-t07 100 rows make batches of 32, 32, 32, 4",
       [len(t[1]) for t in a] == [32, 32, 32, 4], [len(t[1]) for t in a])
result("feed-keys-t07 blocks of 50, 30, 20 make the same batches, in order",
       len(a) == len(b) and all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1])
                                for p, q in zip(a, b)))
