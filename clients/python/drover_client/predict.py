"""predict.py - predictions from a running cluster (src/proto/wire_msgs.h,
"Predict from a client"): the run's script serves a model with
c:serve { predict = exp }, and a client holding the run's control key asks
it for outputs.

On its own connection to the coordinator's control port the client
authenticates as an attach client does, then:

  P -> C  PREDICT_OPEN    { name }
  C -> P  PREDICT_REPLY   { req 0, status, message }   0: go on; else refused
                                                       (a view key) and closed
  P -> C  PREDICT_REQUEST { req 1.., batch, x [n, ...], sparse }
  C -> P  PREDICT_REPLY   { req, status, y [n, k], message }

A model with sparse tables (nn.EmbeddingBag, nn.SparseLinear) reads each
row's ids: predict(x, ids=...) takes them in Feeder.send's forms (an
integer array [n, fields], or n sequences of ids with vals their
weights), sent as the request's sparse bytes (feed.sparse_bytes).

One request is in flight at a time; rows beyond REQUEST_BYTES go in
several requests, answered in order, so the outputs are one row per input
row in input order whatever the size.
"""
import numbers
import time

import numpy as np

from . import _wire
from .conn import Closed, DroverError, wait_ready
from .feed import sparse_bytes

_NEEDED = ("PREDICT_OPEN", "PREDICT_REQUEST", "PREDICT_REPLY")
REQUEST_BYTES = 8 << 20  # x bytes per request at most (a frame; the coordinator holds one)


def supported():
    """Whether this drover's messages include the predict-client messages."""
    names = {row[0] for row in _wire.MESSAGES.values()}
    return all(n in names for n in _NEEDED)


def as_rows(rows):
    """rows (a list of lists of numbers, or an array [n, ...]) as a
    contiguous float32 array [n, ...]; ValueError saying what is wrong."""
    try:
        x = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    except (TypeError, ValueError) as e:
        raise ValueError("predict: rows must be a list of equal-length lists of numbers or a "
                         "numeric array (%s)" % e) from None
    if x.ndim == 1 and x.shape[0] == 0:
        return x.reshape(0, 0)  # no rows: no outputs
    if x.ndim < 2:
        raise ValueError("predict: rows must be [n, features] (a list of rows), got shape %s"
                         % (x.shape,))
    if x.ndim > 4:
        raise ValueError("predict: rows have %d dimensions, at most 4 travel" % x.ndim)
    return x


class Predictor:
    """Predict requests on conn (authenticated, nothing sent yet). stall:
    seconds to wait for an answer. beside: a Run whose snapshots are read
    while waiting (the coordinator drops an attach client that does not
    read)."""

    def __init__(self, conn, name="python", stall=600.0, beside=None):
        if not supported():
            raise DroverError("this drover has no predict-client messages (PREDICT_OPEN, "
                              "PREDICT_REQUEST, PREDICT_REPLY are not in its src/proto/wire_msgs.h)")
        self.conn, self.stall, self.beside = conn, stall, beside
        self.req = 0
        self.requests = self.rows = 0
        conn.send("PREDICT_OPEN", {"name": name})
        f = self._reply(0)
        if f["status"] != 0:
            raise DroverError(f["message"], f["status"])

    def _ready(self, deadline):
        wait_ready(self.conn, self.beside, deadline, None)

    def _reply(self, req):
        deadline = time.monotonic() + self.stall
        while True:
            try:
                self._ready(deadline)
                name, _, f = self.conn.recv(deadline=deadline)
            except TimeoutError:
                raise TimeoutError("no predict answer from the coordinator in %g s" % self.stall) \
                    from None
            except Closed:
                raise Closed("the coordinator closed the predict connection (the run ended, or "
                             "the key is not the run's control key)") from None
            if name == "PREDICT_REPLY" and f["req"] == req:
                return f
            if name == "PREDICT_REPLY":
                raise DroverError("a predict answer for request %d, waiting for %d" % (f["req"], req))

    def request(self, x, batch=0, sparse=b""):
        """One request: x float32 [n, ...] (n >= 1, under a frame) and its
        rows' ids as sparse bytes (b"": none); its outputs as an array
        [n, k]."""
        self.req += 1
        self.conn.send("PREDICT_REQUEST", {"req": self.req, "batch": batch, "x": x,
                                           "sparse": sparse})
        f = self._reply(self.req)
        if f["status"] != 0:
            raise DroverError(f["message"], f["status"])
        y = f["y"]
        if y.shape[0] != x.shape[0]:
            raise DroverError("predict: %d outputs for %d rows" % (y.shape[0], x.shape[0]))
        self.requests += 1
        self.rows += x.shape[0]
        return y.reshape(x.shape[0], -1)

    def predict(self, rows, batch=None, ids=None, vals=None, bound=0):
        """Outputs of rows, one list of floats per input row, in order;
        ids (vals, bound): the rows' ids, as Feeder.send takes them."""
        x = as_rows(rows)
        n = x.shape[0]
        if batch is not None and (not isinstance(batch, numbers.Integral)
                                  or isinstance(batch, bool) or batch < 1):
            raise ValueError("predict: batch must be a positive integer (or None)")
        if ids is not None and len(ids) != n:
            raise ValueError("predict: ids for %d rows, x has %d" % (len(ids), n))
        row_bytes = max(x[0].nbytes if n else 4, 4)
        per = max(1, REQUEST_BYTES // row_bytes)
        out = []
        for i in range(0, n, per):
            sp = _ids_bytes(ids, vals, bound, i, min(n, i + per))
            out.extend(self.request(x[i:i + per], int(batch or 0), sp).tolist())
        return out


def _ids_bytes(ids, vals, bound, lo, hi):
    """Rows [lo, hi)'s ids as a request's sparse bytes (b"" without ids)."""
    if ids is None and vals is None:
        return b""
    try:
        return sparse_bytes(None if ids is None else ids[lo:hi],
                            None if vals is None else vals[lo:hi], bound, hi - lo, lo)
    except ValueError as e:
        raise ValueError("predict: %s" % str(e).split(": ", 1)[-1]) from None
