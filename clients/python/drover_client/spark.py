"""spark.py - RDDs into and out of a drover run, from a PySpark program
(what TensorFlowOnSpark's TFCluster.train and .inference did).

    from drover_client import spark as dspark
    r = dspark.feed(rdd, "runs/fed-20261126-0812", epochs=3, batch=32)
    out = dspark.predict(rdd.map(lambda row: row[0]), run_dir).collect()

feed(rdd, run): every partition of the RDD (of (features, label) rows) is
a Spark task that opens a feeder of its own on the run's control port
(feed.py: FEED_OPEN, batches under the coordinator's credit, FEED_END) and
streams the partition as batches of `batch` rows; the task ends once the
coordinator has taken them all (they train while the next task feeds).
The driver holds one
more feeder open, sending nothing, from before the job until after it:
the fit (train = { feed = "external" }) ends once every feeder that opened
has ended, so it ends when the Spark job is over, not when the first
partition is. epochs=n is one Spark job whose tasks each feed their
partition n times over (as TFoS's union of n copies did: the passes of
different partitions overlap); batches carry their pass's number. With
n > 1 a task keeps its partition's batches (float32) in memory between
passes: give a large RDD enough partitions.

A Spark task retried (a lost executor, a Python worker killed) feeds the
same partition again. Each feeder opens with a key, the job's token and
the partition, and the coordinator keeps what it took per key for the
fit: the retried task's feeder learns how many batches of its partition
(all passes in order) the coordinator already took (its first
FEED_CREDIT) and skips that many, and the coordinator credits the ones
still queued to it. So every batch of every partition trains exactly
once, provided the
partition gives the same rows in the same order when Spark computes it
again (true for files, parallelize, map/filter; not after a
non-deterministic shuffle, which Spark itself then calls indeterminate).

The executors get the run's address and its control key inside the
task's closure (a _Secret: its repr and str never show the bytes, so
Spark's logs and tracebacks do not carry it); on a network you do not
trust, turn on spark.authenticate and spark.network.crypto.enabled. The
drover_client package itself reaches the executors through addPyFile;
they need numpy.

Where the batches go: with direct=True (the default), a task on a host
where a worker of the fit runs sends its batches to that worker (the
coordinator routes it: FEED_ROUTE; feed.py, "Direct"), which trains them
and acknowledges each to the coordinator; the coordinator still counts
them per key, so a retried task skips what that worker took, and when the
worker is lost the task sends what it had not acknowledged through the
coordinator. Elsewhere, and with direct=False, batches go to the
coordinator, whose queue hands them to the least busy worker (a lost
worker's batches go to another, each trained once).

predict(rdd, run): each task sends its partition's rows to Run.predict
(the run's script in c:serve { predict = exp }) and yields the outputs in
order; Spark keeps one attempt's output per partition, so a retried
partition still gives exactly one output per input.
"""
import collections
import os
import socket
import tempfile
import time
import uuid
import zipfile

from . import auth
from .client import Run, resolve, run_key
from .conn import Conn, DroverError, split_hostport
from .feed import Feeder, feed_key

SparkFeedResult = collections.namedtuple("SparkFeedResult",
                                         "partitions batches trained skipped direct")
SparkFeedResult.__doc__ = """What feed() did: partitions fed (each for every pass),
batches the coordinator took, batches trained, batches a retried
task did not send again (its partition's earlier attempt had), and
batches the tasks sent directly to the worker on their host."""


class _Secret:
    """Key bytes that travel in a closure but never print."""
    __slots__ = ("_b",)

    def __init__(self, b):
        self._b = b

    def get(self):
        return self._b

    def __repr__(self):
        return "<drover key>"

    __str__ = __repr__

    def __getstate__(self):
        return self._b

    def __setstate__(self, b):
        self._b = b


def target(run, address=None, secret_file=None):
    """(host, port, _Secret) a feeder dials for run: a Run, a run
    directory (its control.key) or HOST:PORT with secret_file. address:
    "HOST:PORT" the executors dial instead (the coordinator as seen from
    them, when the run directory's host is not)."""
    if isinstance(run, Run):
        host, port = run._addr
        key = run._key
        if os.path.isdir(run.target):
            key = auth.load_secret(run_key(run.target, True))
    else:
        host, port, path = resolve(run, secret_file, control=True)
        key = auth.load_secret(path)
    if address:
        hp = split_hostport(address)
        if not hp:
            raise DroverError("address '%s' is not HOST:PORT" % address)
        host, port = hp
    return host, port, _Secret(key)


def ship(sc):
    """Makes drover_client importable on sc's executors (addPyFile of a
    zip of this package), once per SparkContext."""
    if getattr(sc, "_drover_client_shipped", False):
        return
    pkg = os.path.dirname(os.path.abspath(__file__))
    where = getattr(sc, "_temp_dir", None) or tempfile.gettempdir()
    path = os.path.join(tempfile.mkdtemp(prefix="drover-client-", dir=where), "drover_client.zip")
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                z.write(os.path.join(pkg, name), "drover_client/" + name)
    sc.addPyFile(path)
    sc._drover_client_shipped = True


def block_batches(blocks, batch):
    """(x, y) float32 batches of `batch` rows of (X [k, ...], Y [k]) blocks
    (the last one shorter); a block of exactly `batch` rows is not copied."""
    import numpy as np
    xs, ys, have = [], [], 0
    for blk in blocks:
        try:
            bx, by = blk
        except (TypeError, ValueError):
            raise ValueError("an RDD block must be (X, Y), not %s" % type(blk).__name__) from None
        bx, by = np.asarray(bx, dtype=np.float32), np.asarray(by, dtype=np.float32)
        if bx.ndim < 2 or by.ndim not in (1, 2) or by.shape[0] != bx.shape[0]:
            raise ValueError("an RDD block must be X [k, ...] and Y [k] or [k, m], not %s and %s"
                             % (bx.shape, by.shape))
        i = 0
        while i < bx.shape[0]:
            take = min(batch - have, bx.shape[0] - i)
            xs.append(bx[i:i + take])
            ys.append(by[i:i + take])
            have, i = have + take, i + take
            if have == batch:
                yield _cat(xs), _cat(ys)
                xs, ys, have = [], [], 0
    if have:
        yield _cat(xs), _cat(ys)


def _cat(parts):
    import numpy as np
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def batches(rows, batch):
    """(x, y) float32 batches of `batch` rows of (features, label) rows
    (the last one shorter)."""
    import numpy as np
    xs, ys = [], []
    for row in rows:
        try:
            x, y = row
        except (TypeError, ValueError):
            raise ValueError("an RDD row must be (features, label), not %s"
                             % type(row).__name__) from None
        xs.append(x)
        ys.append(y)
        if len(xs) == batch:
            yield np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.float32)
            xs, ys = [], []
    if xs:
        yield np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.float32)


class _FeedPartition:
    """The task: feeds one partition of one pass (runs on an executor)."""

    def __init__(self, host, port, secret, token, epochs, batch, blocks, window, stall, timeout,
                 direct):
        self.host, self.port, self.secret = host, port, secret
        self.cut = block_batches if blocks else batches
        self.token, self.epochs, self.batch = token, epochs, batch
        self.window, self.stall, self.timeout, self.direct = window, stall, timeout, direct

    def __call__(self, part, rows):
        name = "spark-p%d@%s" % (part, socket.gethostname())
        conn = Conn(self.host, self.port, self.secret.get(), self.timeout)
        f = None
        try:
            f = Feeder(conn, name, self.window, self.stall, key="%s:%d" % (self.token, part),
                       direct_key=feed_key(self.secret.get()) if self.direct else None,
                       timeout=self.timeout)
            skip = f.opened()  # of the sequence pass 1, pass 2, ... an earlier attempt sent
            kept, n = [], 0
            for epoch in range(1, self.epochs + 1):
                source = self.cut(rows, self.batch) if epoch == 1 else kept
                for x, y in source:
                    if epoch == 1 and self.epochs > 1:
                        kept.append((x, y))
                    n += 1
                    if n > skip:
                        f.send(x, y, epoch)
                    else:  # taken by an earlier attempt; kept while its worker may lose it
                        f.keep(n, x, y, epoch)
            r = f.finish(trained=False)  # once taken: the next task starts meanwhile
        finally:
            if f is not None:
                f._close_direct()
            conn.close()
        yield (part, r.sent, r.trained, min(skip, n), f.direct_sent)


def feed(rdd, run, epochs=None, batch=32, blocks=False, window=0, stall=120.0, address=None,
         secret_file=None, timeout=30.0, direct=True):
    """Feeds rdd's (features, label) rows to run's fit (train = { feed =
    "external" }) in batches of `batch`, epochs times (None: the fit's
    train.epochs); blocks=True: rdd's elements are blocks of rows
    (X [k, ...], Y [k]: much cheaper to move through Spark than rows,
    cut and joined to `batch`). One feeder per partition, under the
    coordinator's credit (at most `window` batches in flight, 0: its
    choice) and failing after `stall` seconds without a word from it.
    With epochs given the job starts at once (its tasks wait, `stall` at
    most, for a fit to take their batches); with None it starts once the
    fit runs. Returns SparkFeedResult once every batch is trained; the
    fit ends then. A failed Spark job fails the fit too (the driver's feeder
    gives up saying why) and is raised. run: a Run, a run directory, or
    HOST:PORT with secret_file. direct: a task on the host of a worker of
    the fit feeds that worker directly (the module's top says how)."""
    if not isinstance(batch, int) or batch < 1:
        raise ValueError("batch must be a positive integer, not %r" % (batch,))
    if epochs is not None and (not isinstance(epochs, int) or epochs < 1):
        raise ValueError("epochs must be a positive integer or None, not %r" % (epochs,))
    host, port, secret = target(run, address, secret_file)
    sc = rdd.context
    ship(sc)
    conn = Conn(host, port, secret.get(), timeout)
    try:
        holder = Feeder(conn, "spark-driver", 1, stall)
        # epochs=None: the fit's, known once it runs; else the job starts at
        # once and its tasks wait for the fit's credit (a feeder opening as
        # an earlier fit's feed closes waits for the next one)
        task = _FeedPartition(host, port, secret, uuid.uuid4().hex, epochs or holder.wait_fit(),
                              batch, blocks, window, stall, timeout, direct)
        try:
            stats = rdd.mapPartitionsWithIndex(task).collect()
        except BaseException as e:
            holder.abort("the Spark job failed: %s: %s" % (type(e).__name__, str(e)[:300]))
            raise
        # answered when the fit's feed is over: every batch taken is trained
        holder.finish()
    finally:
        conn.close()
    taken = sum(s[1] for s in stats)
    return SparkFeedResult(len(stats), taken, taken, sum(s[3] for s in stats),
                           sum(s[4] for s in stats))


class _PredictPartition:
    """The task: one partition's outputs, in its rows' order (runs on an
    executor). Rows go to the run `chunk` at a time (bounded memory)."""

    def __init__(self, host, port, secret, batch, chunk, wait, timeout):
        self.host, self.port, self.secret = host, port, secret
        self.batch, self.chunk, self.wait, self.timeout = batch, chunk, wait, timeout

    def __call__(self, rows):
        self.run = None
        try:
            part = []
            for row in rows:
                part.append(row)
                if len(part) == self.chunk:
                    yield from self._predict(part)
                    part = []
            if part:
                yield from self._predict(part)
        finally:
            if self.run:
                self.run.close()

    def _predict(self, rows):
        deadline = time.monotonic() + self.wait
        while True:
            if self.run is None:
                self.run = Run("%s:%d" % (self.host, self.port), hz=1.0, control=True,
                               timeout=self.timeout, key=self.secret.get())
            try:
                out = self.run.predict(rows, batch=self.batch)
                break
            except DroverError as e:
                # not serving yet (the script still trains): ask again, `wait` at most
                if e.code_name != "DRV_EAGAIN" or time.monotonic() > deadline:
                    raise
                self.run.close()
                self.run = None
                time.sleep(0.5)
        if len(out) != len(rows):  # one output per input, or the task fails
            raise DroverError("predict gave %d outputs for %d rows" % (len(out), len(rows)))
        return out


def predict(rdd, run, batch=None, chunk=4096, wait=120.0, address=None, secret_file=None,
            timeout=60.0):
    """An RDD of run's outputs for rdd's rows (features), one per row in
    the rows' order: partition i of the result is partition i of rdd
    predicted by Run.predict, `chunk` rows per request (batch: the
    request's batch, None: the run's choice). Lazy, as Spark's
    transformations are: run an action (collect, saveAsTextFile) while
    the run lives. A task Spark retries predicts its whole partition
    again and only the attempt Spark keeps makes the output, so every
    input has exactly one output, in order, provided the model does not
    change meanwhile (predict after the fit, or between fits). A task
    whose run does not serve yet (its script still trains: DRV_EAGAIN)
    asks again every 0.5 s, `wait` seconds at most."""
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError("chunk must be a positive integer, not %r" % (chunk,))
    host, port, secret = target(run, address, secret_file)
    ship(rdd.context)
    return rdd.mapPartitions(_PredictPartition(host, port, secret, batch, chunk, wait, timeout),
                             preservesPartitioning=True)
