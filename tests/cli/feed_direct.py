"""feed_direct.py - direct feeders (FEED_OPEN.direct; src/cluster/coord/coord_feed_direct.c)
against a real local cluster (test_feed_direct.sh): a keyed feeder on the
workers' host feeds one of them directly, a feeder lost mid-way is taken
over once its worker says what it took (and one never taken over still
has its batches counted), a worker SIGKILLed mid-feed sends
its feeder back to the coordinator with what it had not acknowledged, and
the worker's feed port takes the feed key and FEED_BATCH alone.

usage: feed_direct.py RUN_DIR   prints PASS/FAIL lines
"""
import os
import signal
import sys
import time

import numpy as np
from drover_client import auth, client
from drover_client.conn import Closed, Conn, DroverError
from drover_client.feed import Feeder, feed_key

run = sys.argv[1]
host, port, path = client.resolve(run, control=True)
key = auth.load_secret(path)
fkey = feed_key(key)
d = np.loadtxt("examples/data/digits.csv", delimiter=",", dtype=np.float32, ndmin=2)
x, y = d[:, :-1] / 16.0, d[:, -1]
B = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 32 * 10, 32)]


def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))
    sys.stdout.flush()


def feeder(name, k="", window=0, direct=True):
    return Feeder(Conn(host, port, key, 30), name, window, 60, key=k,
                  direct_key=fkey if direct else None)


def node_pid(name):
    """The pid nodes.tsv gives node `name` ("worker:1")."""
    with open(os.path.join(run, "nodes.tsv")) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if cols[0] == name:
                return int(cols[1])
    return None


holder = feeder("holder", window=1, direct=False)
result("feed-direct-t01 the holder waits for the fit (train.epochs 2)", holder.wait_fit() == 2)

# t02: a keyed direct feeder on the workers' host: routed to one of them
a = feeder("a", "k1")
a.opened()
result("feed-direct-t02 the coordinator routes a direct feeder to a worker on its host",
       a.route is not None and a.route.startswith("worker:"), a.route)
for bx, by in B:
    a.send(bx, by, 1)
r = a.finish()
a.conn.close()
result("feed-direct-t02 its 10 batches went to that worker and were trained",
       tuple(r) == (10, 10) and a.direct_sent == 10, (r, a.direct_sent))
worker_port = None
if a.route:
    worker_port = int(a.route.rsplit(":", 1)[1].rstrip(")"))

# t03: the worker's feed port: the feed key only, FEED_BATCH only
try:
    Conn("127.0.0.1", worker_port, key, 10).close()  # the control key itself is not it
    result("feed-direct-t03 the worker's feed port refuses another key", False, "accepted")
except (DroverError, auth.AuthError, OSError) as e:
    result("feed-direct-t03 the worker's feed port refuses another key", True, e)
try:
    cn = Conn("127.0.0.1", worker_port, fkey, 10)
    cn.send("FEED_OPEN", {"name": "x", "window": 0, "key": "", "host": "", "direct": False})
    try:
        cn.recv(10)
        result("feed-direct-t03 and closes a feeder that sends anything but FEED_BATCH", False,
               "a frame came back")
    except (Closed, DroverError, OSError):
        result("feed-direct-t03 and closes a feeder that sends anything but FEED_BATCH", True)
    cn.close()
except (DroverError, OSError) as e:
    result("feed-direct-t03 and closes a feeder that sends anything but FEED_BATCH", False, e)

# t04: a direct feeder lost after 6 batches (no FEED_END, both connections
# dropped), and its retry: it waits until the worker says it took 6
b = feeder("b", "k2")
b.opened()
for bx, by in B[:6]:
    b.send(bx, by, 1)
b._close_direct()
b.conn.close()
b2 = feeder("b2", "k2")
result("feed-direct-t04 the retry of a lost direct feeder skips the 6 its worker took",
       b2.opened() == 6 and b2.route is not None, (b2.taken, b2.route))
for i, (bx, by) in enumerate(B):
    if i < b2.taken:
        b2.keep(i + 1, bx, by, 1)
    else:
        b2.send(bx, by, 1)
r = b2.finish()
b2.conn.close()
result("feed-direct-t04 and the key ends with its 10 batches trained once", tuple(r) == (10, 10), r)

# t05: the worker SIGKILLed mid-feed: back to the coordinator with every
# batch it had not acknowledged
c = feeder("c", "k3", window=4)
c.opened()
victim = c.route.split(" ")[0] if c.route else None
for bx, by in B[:5]:
    c.send(bx, by, 1)
pid = node_pid(victim) if victim else None
if pid:
    os.kill(pid, signal.SIGKILL)
for bx, by in B[5:]:
    c.send(bx, by, 1)
r = c.finish()
c.conn.close()
result("feed-direct-t05 a feeder whose worker (%s, pid %s) was SIGKILLed mid-feed falls back"
       % (victim, pid), pid is not None and c.route is None, c.route)
result("feed-direct-t05 and its 10 batches are trained once all the same", tuple(r) == (10, 10), r)

# t10: a direct feeder whose process dies with its worker (a Spark task
# killed with its executor): the feeder's end is seen first, its worker is
# lost a moment later, the slot falls back to the coordinator (said), and
# the feeder's retry sends what the worker had not acknowledged through it
g = feeder("g", "k5", window=4)
g.opened()
victim = g.route.split(" ")[0] if g.route else None
for bx, by in B[:5]:
    g.send(bx, by, 1)
g._close_direct()
g.conn.close()
pid = node_pid(victim) if victim else None
if pid:
    os.kill(pid, signal.SIGKILL)
time.sleep(1.5)  # the coordinator calls a node lost 1 s after its connection closed
g2 = feeder("g2", "k5")
taken = g2.opened()
for i, (bx, by) in enumerate(B):
    if i < taken:
        g2.keep(i + 1, bx, by, 1)
    else:
        g2.send(bx, by, 1)
r = g2.finish()
g2.conn.close()
result("feed-direct-t10 the retry of a feeder that died with its worker (%s, pid %s) feeds "
       "through the coordinator" % (victim, pid), pid is not None and g2.route is None, g2.route)
result("feed-direct-t10 and the key ends with its 10 batches trained once", tuple(r) == (10, 10), r)

# t07: a direct feeder lost after 5 batches and never retried: the
# feed is not over before its worker has acked what it took
e = feeder("e", "k4")
e.opened()
for bx, by in B[:5]:
    e.send(bx, by, 1)
e._close_direct()
e.conn.close()

r = holder.finish()
holder.conn.close()
result("feed-direct-t06 the holder is answered at the feed's end", tuple(r) == (0, 0), r)
