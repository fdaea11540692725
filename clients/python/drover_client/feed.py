"""feed.py - an external feeder: batches from a Python program to a fit
that runs with `train = { feed = "external" }` (src/proto/wire_msgs.h, "Feed").

On its own connection to the coordinator's control port the feeder
authenticates as an attach client does, then:

  F -> C  FEED_OPEN   { name, window, key }
  C -> F  FEED_CREDIT { credits, sent, trained, epochs }   may send `credits` more
  F -> C  FEED_BATCH  { task 0, seq 1.., epoch, mode TRAIN, x, y, sparse }
  F -> C  FEED_END    { status 0, batches }        no more from this feeder
  C -> F  FEED_END    { status, batches trained, message }, then it closes

A batch may carry ids for a model with sparse tables (nn.EmbeddingBag,
nn.SparseLinear): send(x, y, ids=...) with ids an integer array [n, fields]
(one id per field per example: hashed categorical columns, which the
caller hashes as data.csv does) or a list of n sequences of ids (any
number per example, as sparse libsvm rows) with vals the weights
alike; bound the ids' range (0: one above the largest). They travel as
the FEED_BATCH's sparse bytes (data_sparse_batch_encode's layout).

A batch is never sent beyond the credit granted: the coordinator's queue
decides how many batches are in flight (backpressure), so a slow cluster
slows the feeder rather than filling memory.

A feeder with a key (a Spark partition of one pass: spark.py) that opens
after an earlier feeder of the same key in the same fit carries on from
it: the first FEED_CREDIT's `sent` is how many of its batches the
coordinator took already, and the feeder skips that many (opened()).

Direct (direct=True, a keyed feeder; src/cluster/coord/coord_feed_direct.c): FEED_OPEN
carries this host's name, and when a worker of the fit runs here the
coordinator answers FEED_ROUTE { node, host, port, slot } before the
first credit. The batches then go to that worker on a connection of
their own, authenticated with the feed key (HMAC-SHA-256 of the control
key and "drover feed"), task = slot; the worker acknowledges each to the
coordinator, whose FEED_CREDIT names it (acked). Batches not acknowledged
are kept: when the worker is lost the coordinator says FEED_ROUTE port 0,
and they go through the coordinator again, each trained once.
"""
import collections
import hashlib
import hmac
import socket
import struct
import time

import numpy as np

from . import _wire
from .conn import Closed, Conn, DroverError, wait_ready

FeedResult = collections.namedtuple("FeedResult", "sent trained")

_NEEDED = ("FEED_OPEN", "FEED_CREDIT", "FEED_BATCH", "FEED_END")


def supported():
    """Whether this drover's messages include the feed messages."""
    names = {row[0] for row in _wire.MESSAGES.values()}
    return all(n in names for n in _NEEDED)


def feed_key(control_key):
    """The key a direct feeder proves to a worker (src/proto/auth.c, auth_feed_key)."""
    return hmac.new(control_key, b"drover feed", hashlib.sha256).digest()


MAX_BOUND = 1 << 40  # data.h DATA_MAX_BUCKETS


def _id_rows(ids, vals, n, seq):
    """ids and vals as per-example arrays, and the fields (0: any count)."""
    if isinstance(ids, np.ndarray) and ids.ndim == 2:
        fields, rows = ids.shape[1], list(ids)
        if fields < 1:
            raise ValueError("batch %d: ids of shape %s have no field" % (seq, ids.shape))
    else:
        fields, rows = 0, [np.asarray(r).reshape(-1) for r in ids]
    if len(rows) != n:
        raise ValueError("batch %d: ids for %d examples, x has %d" % (seq, len(rows), n))
    for r in rows:
        if r.size and (r.dtype.kind not in "iu" or r.min() < 0):
            raise ValueError("batch %d: ids must be integers >= 0" % seq)
    vrows = None
    if vals is not None:
        vrows = [np.asarray(v, dtype=np.float32).reshape(-1) for v in vals]
        if [v.size for v in vrows] != [r.size for r in rows]:
            raise ValueError("batch %d: vals do not match ids entry for entry" % seq)
    return rows, vrows, fields


def sparse_bytes(ids, vals=None, bound=0, n=None, seq=0):
    """A batch's ids as FEED_BATCH.sparse: 4 fields, 1 weighted, 8 bound,
    8 nnz, then ptr (n + 1 int64), ids (uint64) and, weighted, vals
    (float32), little-endian (src/data/data.h data_sparse_batch_encode).
    b"" when ids is None."""
    if ids is None:
        if vals is not None:
            raise ValueError("batch %d: vals without ids" % seq)
        return b""
    n = len(ids) if n is None else n
    rows, vrows, fields = _id_rows(ids, vals, n, seq)
    counts = [r.size for r in rows]
    ptr = np.zeros(n + 1, dtype="<i8")
    ptr[1:] = np.cumsum(counts, dtype=np.int64)
    flat = np.concatenate(rows).astype("<u8") if ptr[-1] else np.zeros(0, "<u8")
    top = int(flat.max()) if flat.size else 0
    bound = int(bound) or top + 1
    if top >= bound or bound > MAX_BOUND:
        raise ValueError("batch %d: id %d is not below the bound %d (at most 2^40)"
                         % (seq, top, bound))
    out = struct.pack("<IBQQ", fields, vrows is not None, bound, flat.size)
    out += ptr.tobytes() + flat.tobytes()
    if vrows is not None:
        out += (np.concatenate(vrows) if flat.size else np.zeros(0)).astype("<f4").tobytes()
    return out


def _batch(x, y, seq, ids=None, vals=None, bound=0):
    """x as float32 [n, ...] and y as float32 [n] or [n, k], checked."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError("batch %d: x has no rows (shape %s)" % (seq, x.shape))
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError("batch %d: y of shape %s does not match x of shape %s (want [%d] or "
                         "[%d, k])" % (seq, y.shape, x.shape, x.shape[0], x.shape[0]))
    return x, y, sparse_bytes(ids, vals, bound, x.shape[0], seq)


class Feeder:
    """Sends batches on conn (authenticated, nothing sent yet) under the
    coordinator's credit. stall: seconds without any frame from the
    coordinator while waiting for credit or for the end (TimeoutError)."""

    def __init__(self, conn, name="python", window=0, stall=60.0, beside=None, key="",
                 direct_key=None, timeout=30.0):
        if not supported():
            raise DroverError("this drover has no feed messages (FEED_OPEN, FEED_CREDIT, "
                              "FEED_BATCH, FEED_END are not in its src/proto/wire_msgs.h)")
        self.conn, self.stall, self.timeout = conn, stall, timeout
        self.beside = beside  # a Run whose snapshots are read while we wait
        self.credits = self.sent = self.trained = 0
        self.ended = None  # the coordinator's FEED_END fields, once it came
        self.taken = None  # batches of this key taken before we opened (first frame)
        self.acked = 0     # batches the coordinator says it took (FEED_CREDIT's sent)
        self.epochs = 0    # the running fit's train.epochs (0: none runs yet)
        # direct: the feed key (None: never direct), the worker's connection,
        # our slot, the last seq the coordinator says the worker acknowledged
        # before we opened, and the batches sent to it and not acknowledged
        self.direct_key = direct_key if key and direct_key else None
        self.direct = self.slot = self.route = None
        self.first_acked = 0
        self.unacked = collections.OrderedDict()  # seq -> (x, y, sparse, epoch)
        self.resend = []   # (seq, x, y, sparse, epoch) for the coordinator after a fallback
        self.direct_sent = 0  # batches this feeder sent to a worker
        host = socket.gethostname() if self.direct_key else ""
        conn.send("FEED_OPEN", {"name": name, "window": window, "key": key, "host": host,
                                "direct": bool(self.direct_key)})

    def _ready(self):
        """Waits until the feed connection has a frame to read (reading
        `beside`'s snapshots meanwhile)."""
        wait_ready(self.conn, self.beside, time.monotonic() + self.stall, self.stall)

    def _wait(self):
        """Reads one frame from the coordinator and applies it."""
        try:
            self._ready()
            name, _, f = self.conn.recv(self.stall)
        except TimeoutError:
            raise TimeoutError("no credit nor end from the coordinator in %g s (%d batches sent, "
                               "%d trained)" % (self.stall, self.sent, self.trained)) from None
        except Closed:
            raise Closed("the coordinator closed the feed after %d batches (%d trained)"
                         % (self.sent, self.trained)) from None
        if name == "FEED_CREDIT":
            if self.taken is None:  # a keyed feeder's predecessors' batches count as ours
                self.taken = self.sent = f["sent"]
                self.first_acked = f.get("acked", 0)
            elif f.get("acked", 0) and self.route is not None:
                for seq in [q for q in self.unacked if q <= f["acked"]]:
                    del self.unacked[seq]  # acknowledged by the worker: trained
            self.acked = max(self.acked, f["sent"])
            self.credits += f["credits"]
            self.trained = max(self.trained, f["trained"])
            self.epochs = f.get("epochs", 0) or self.epochs
        elif name == "FEED_ROUTE":
            self._route(f)
        elif name == "FEED_END":
            if self.taken is None:
                self.taken = 0
            self.ended = f
            self.trained = f["batches"]
        # SNAPSHOTs and the like are not sent to a feeder: anything else is ignored

    def _route(self, f):
        """FEED_ROUTE: to the worker on this host, or (port 0) back to the
        coordinator with every batch the worker did not acknowledge."""
        if f["port"]:
            if self.direct_key is None:
                raise DroverError("the coordinator routed a feeder that cannot feed directly")
            self.route, self.slot = "%s (%s:%d)" % (f["node"], f["host"], f["port"]), f["slot"]
            self.direct = Conn(f["host"], f["port"], self.direct_key, self.timeout)
            return
        self._close_direct()
        self.route = None
        self.credits = 0  # the coordinator grants a new window next
        self.resend = [(seq,) + b for seq, b in self.unacked.items()]
        self.unacked.clear()
        if self.resend:  # from the first not acknowledged, with their own seqs
            self.sent = self.resend[0][0] - 1

    def _close_direct(self):
        if self.direct is not None:
            try:
                self.direct.close()
            except OSError:
                pass
            self.direct = None

    def keep(self, seq, x, y, epoch=0, ids=None, vals=None, bound=0):
        """A batch a takeover skips (seq <= opened()): while the worker that
        took it has not acknowledged it, it is kept to be sent again if that
        worker is lost."""
        if self.route is not None and seq > self.first_acked:
            self.unacked[seq] = _batch(x, y, seq, ids, vals, bound) + (epoch,)

    def opened(self):
        """Waits for the coordinator's first answer; returns how many
        batches of this feeder's key it took before (0 without a key or
        for a key new to the fit): the caller skips that many."""
        while self.taken is None:
            self._wait()
        return self.taken

    def wait_fit(self):
        """Waits until a fit with feed = "external" runs (credit comes);
        returns its train.epochs. TimeoutError after `stall` seconds of
        silence."""
        while self.epochs == 0 and self.ended is None:
            self._wait()
        self._check_ended()
        return self.epochs

    def _check_ended(self):
        if self.ended is not None and self.ended["status"] != 0:
            raise DroverError("the feed ended: %s" % self.ended["message"], self.ended["status"])

    def send(self, x, y, epoch=0, ids=None, vals=None, bound=0):
        """Sends one batch (with its ids, if any: see above), first waiting
        for credit."""
        xy = _batch(x, y, self.sent + 1, ids, vals, bound)
        while True:
            self._flush()
            self._await_credit()
            if not self.resend:  # no fallback came while we waited
                break
        self._put(xy, epoch)

    def _await_credit(self):
        while self.credits == 0 and self.ended is None:
            self._wait()
        self._check_ended()
        if self.ended is not None:
            raise DroverError("the coordinator ended the feed after %d batches" % self.sent)

    def _put(self, xy, epoch):
        x, y, sp = xy
        seq = self.sent + 1
        frame = {"task": 0, "seq": seq, "epoch": epoch, "mode": _wire.FEED_MODES["TRAIN"],
                 "x": x, "y": y, "sparse": sp}
        if self.route is None:
            self.conn.send("FEED_BATCH", frame)
        else:
            self.unacked[seq] = (x, y, sp, epoch)
            if self.direct is not None:
                frame["task"] = self.slot
                try:
                    self.direct.send("FEED_BATCH", frame)
                    self.direct_sent += 1
                except (DroverError, OSError):
                    # the worker is gone: the coordinator says so (FEED_ROUTE
                    # port 0), and the batch goes to it then
                    self._close_direct()
        self.sent += 1
        self.credits -= 1

    def _flush(self):
        """After a fallback: the batches the worker did not acknowledge, in
        order, through the coordinator (their own seqs again)."""
        while self.resend:
            self._await_credit()
            seq, x, y, sp, epoch = self.resend.pop(0)
            if seq != self.sent + 1:
                raise DroverError("feeder: batch %d to send again after %d" % (seq, self.sent))
            self._put((x, y, sp), epoch)

    def finish(self, status=0, message="", trained=True):
        """Says no more batches come (status != 0: the feeder gives up, the
        fit fails with message) and waits for the coordinator's FEED_END.
        Returns FeedResult(sent, trained). trained=False: only until the
        coordinator has taken every batch (a FEED_CREDIT's sent covers
        them; they are then trained once without us), then leaves: what a
        Spark task does, so the next task starts while they train."""
        if status == 0 and (not trained or self.route is not None):
            # every batch taken (a direct one: acknowledged) before FEED_END;
            # a worker lost meanwhile sends us back to the coordinator
            while self.ended is None and (self.acked < self.sent or self.resend or self.unacked):
                if self.resend:
                    self._flush()
                else:
                    self._wait()
            self._check_ended()
            self._close_direct()
            if not trained:
                self.conn.send("FEED_END", {"status": 0, "batches": self.sent, "message": ""})
                self._drain()
                return FeedResult(self.sent, self.trained)
        self._close_direct()
        self.conn.send("FEED_END", {"status": status, "batches": self.sent, "message": message})
        while self.ended is None:
            self._wait()
        if status == 0:
            self._check_ended()
        return FeedResult(self.sent, self.trained)

    def _drain(self):
        """Reads what the coordinator sent and we did not read (credits), so
        that closing does not reset the connection under our FEED_END."""
        try:
            self.conn.sock.setblocking(False)
            while self.conn.sock.recv(65536):
                pass
        except OSError:
            pass

    def abort(self, why):
        """Gives up: FEED_END with DRV_ECANCELLED and why; the connection
        is closed without waiting for the coordinator."""
        try:
            self.conn.send("FEED_END", {"status": _wire.ERRORS["CANCELLED"],
                                        "batches": self.sent, "message": why[:_wire.MAX_STR]})
        except DroverError:
            pass


def feed(conn, batches, name="python", window=0, stall=60.0, epoch=0, beside=None):
    """Feeds every (x, y) or (x, y, ids) of batches; FeedResult(sent, trained) once the
    coordinator has trained them. An exception from batches ends the feed
    with DRV_ECANCELLED (the fit fails saying why) and is re-raised.
    beside: a Run kept reading while the feeder waits."""
    f = Feeder(conn, name, window, stall, beside)
    it = iter(batches)
    while True:
        try:
            item = next(it)
        except StopIteration:
            break
        except Exception as e:
            f.abort("its source failed after %d batches: %s: %s" % (f.sent, type(e).__name__, e))
            raise
        try:
            x, y, ids = item if len(item) == 3 else tuple(item) + (None,)
            f.send(x, y, epoch, ids)
        except ValueError as e:
            f.abort(str(e))
            raise
    return f.finish()
