"""feed.py - an external feeder: batches from a Python program to a fit
that runs with `train = { feed = "external" }` (src/wire_msgs.h, "Feed").

On its own connection to the coordinator's control port the feeder
authenticates as an attach client does, then:

  F -> C  FEED_OPEN   { name, window, key }
  C -> F  FEED_CREDIT { credits, sent, trained, epochs }   may send `credits` more
  F -> C  FEED_BATCH  { task 0, seq 1.., epoch, mode TRAIN, x, y }
  F -> C  FEED_END    { status 0, batches }        no more from this feeder
  C -> F  FEED_END    { status, batches trained, message }, then it closes

A batch is never sent beyond the credit granted: the coordinator's queue
decides how many batches are in flight (backpressure), so a slow cluster
slows the feeder rather than filling memory.

A feeder with a key (a Spark partition of one pass: spark.py) that opens
after an earlier feeder of the same key in the same fit carries on from
it: the first FEED_CREDIT's `sent` is how many of its batches the
coordinator took already, and the feeder skips that many (opened()).
"""
import collections
import time

import numpy as np

from . import _wire
from .conn import Closed, DroverError, wait_ready

FeedResult = collections.namedtuple("FeedResult", "sent trained")

_NEEDED = ("FEED_OPEN", "FEED_CREDIT", "FEED_BATCH", "FEED_END")


def supported():
    """Whether this drover's messages include the feed messages."""
    names = {row[0] for row in _wire.MESSAGES.values()}
    return all(n in names for n in _NEEDED)


def _batch(x, y, seq):
    """x as float32 [n, ...] and y as float32 [n] or [n, k], checked."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError("batch %d: x has no rows (shape %s)" % (seq, x.shape))
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError("batch %d: y of shape %s does not match x of shape %s (want [%d] or "
                         "[%d, k])" % (seq, y.shape, x.shape, x.shape[0], x.shape[0]))
    return x, y


class Feeder:
    """Sends batches on conn (authenticated, nothing sent yet) under the
    coordinator's credit. stall: seconds without any frame from the
    coordinator while waiting for credit or for the end (TimeoutError)."""

    def __init__(self, conn, name="python", window=0, stall=60.0, beside=None, key=""):
        if not supported():
            raise DroverError("this drover has no feed messages (FEED_OPEN, FEED_CREDIT, "
                              "FEED_BATCH, FEED_END are not in its src/wire_msgs.h)")
        self.conn, self.stall = conn, stall
        self.beside = beside  # a Run whose snapshots are read while we wait
        self.credits = self.sent = self.trained = 0
        self.ended = None  # the coordinator's FEED_END fields, once it came
        self.taken = None  # batches of this key taken before we opened (first frame)
        self.acked = 0     # batches the coordinator says it took (FEED_CREDIT's sent)
        self.epochs = 0    # the running fit's train.epochs (0: none runs yet)
        conn.send("FEED_OPEN", {"name": name, "window": window, "key": key})

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
            self.acked = max(self.acked, f["sent"])
            self.credits += f["credits"]
            self.trained = max(self.trained, f["trained"])
            self.epochs = f.get("epochs", 0) or self.epochs
        elif name == "FEED_END":
            if self.taken is None:
                self.taken = 0
            self.ended = f
            self.trained = f["batches"]
        # SNAPSHOTs and the like are not sent to a feeder: anything else is ignored

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

    def send(self, x, y, epoch=0):
        """Sends one batch, first waiting for credit."""
        while self.credits == 0 and self.ended is None:
            self._wait()
        self._check_ended()
        if self.ended is not None:
            raise DroverError("the coordinator ended the feed after %d batches" % self.sent)
        x, y = _batch(x, y, self.sent + 1)
        self.conn.send("FEED_BATCH", {"task": 0, "seq": self.sent + 1, "epoch": epoch,
                                      "mode": _wire.FEED_MODES["TRAIN"], "x": x, "y": y})
        self.sent += 1
        self.credits -= 1

    def finish(self, status=0, message="", trained=True):
        """Says no more batches come (status != 0: the feeder gives up, the
        fit fails with message) and waits for the coordinator's FEED_END.
        Returns FeedResult(sent, trained). trained=False: only until the
        coordinator has taken every batch (a FEED_CREDIT's sent covers
        them; they are then trained once without us), then leaves: what a
        Spark task does, so the next task starts while they train."""
        if not trained and status == 0:
            while self.ended is None and self.acked < self.sent:
                self._wait()
            self._check_ended()
            self.conn.send("FEED_END", {"status": 0, "batches": self.sent, "message": ""})
            self._drain()
            return FeedResult(self.sent, self.trained)
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
    """Feeds every (x, y) of batches; FeedResult(sent, trained) once the
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
            x, y = item
            f.send(x, y, epoch)
        except ValueError as e:
            f.abort(str(e))
            raise
    return f.finish()
