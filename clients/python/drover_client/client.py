"""client.py - a Python program attached to a drover run, as `drover
attach` is (src/ui/attach.c): find the coordinator, authenticate, send
ATTACH, then read SNAPSHOTs and turn their series into a stream of metric
points; with control=True, send Lua lines as COMMANDs."""
import collections
import os
import time

from . import _wire, auth
from . import feed as _feed
from . import predict as _predict
from .conn import Closed, Conn, DroverError, split_hostport

Metric = collections.namedtuple("Metric", "tag step wall value")
Event = collections.namedtuple("Event", "wall text")

# The SNAPSHOT fields that are whole in every frame (the header and the
# queue); series and events are deltas (runsnap.c).
_DELTAS = ("nodes", "series", "events")


def run_key(run_dir, control):
    """The key file a run directory offers: control.key to control (or
    feed), else view.key (read-only, safe to share), else the other one."""
    order = ["control.key", "view.key"] if control else ["view.key", "control.key"]
    for name in order:
        path = os.path.join(run_dir, name)
        if os.access(path, os.R_OK):
            return path
    return os.path.join(run_dir, order[0])


def resolve(target, secret_file=None, control=False):
    """(host, port, key path) of a run directory (its `coordinator`
    file: "HOST:PORT PID" while the run lives) or of HOST:PORT, which
    needs secret_file (the run's control.key or view.key)."""
    if os.path.isdir(target):
        path = os.path.join(target, "coordinator")
        try:
            with open(path) as f:
                line = f.readline()
        except OSError:
            raise DroverError("run '%s' is not running (no coordinator file: it ended or never "
                              "started; see %s/events.log)" % (target, target)) from None
        addr, _, pid = line.strip().partition(" ")
        hp = split_hostport(addr)
        if not hp:
            raise DroverError("run '%s': cannot read its coordinator file '%s'" % (target, path))
        if pid.isdigit() and not _alive(int(pid)):
            raise DroverError("run '%s' is not running (its coordinator, pid %s, is gone)"
                              % (target, pid))
        return hp[0], hp[1], secret_file or run_key(target, control)
    hp = split_hostport(target)
    if not hp:
        raise DroverError("'%s' is neither a run directory nor HOST:PORT" % target)
    if not secret_file:
        raise DroverError("%s needs secret_file (the run's secret)" % target)
    return hp[0], hp[1], secret_file


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class Run:
    """A run, attached. `state` is the newest SNAPSHOT's header (state,
    step, total_steps, examples_per_sec, queue counts...), `nodes` its
    nodes (dicts of snap_node's fields and "name": "worker:1"; "links" the
    transport of each of its connections, "coord=shm,ps:0=shm"), `series` every metric's points so far (tag -> list of Metric)
    and `events` the run's events. The run ending closes the stream:
    metrics() and events() then stop, and `ended` is True."""

    def __init__(self, target, secret_file=None, hz=10.0, control=False, timeout=10.0, key=None):
        if key is not None:  # the key's bytes (a Spark task's: spark.py), target HOST:PORT
            hp = split_hostport(target)
            if not hp:
                raise DroverError("key= needs HOST:PORT, not '%s'" % target)
            host, port = hp
        else:
            host, port, secret = resolve(target, secret_file, control)
            key = auth.load_secret(secret)
        self.target = target
        self._addr, self._key = (host, port), key
        self.conn = Conn(host, port, self._key, timeout)
        self.timeout = timeout
        self.control = control
        self.state, self.nodes, self.series, self.events = {}, [], {}, []
        self.snapshots = 0
        self.ended = False
        self._points = collections.deque()  # new points, not yet yielded
        self._events = collections.deque()
        self._last = {}  # tag -> (step, wall) of the newest point seen
        self._replies = {}
        self._req = 0
        self._predictor = None  # its predict connection, once predict() ran
        self.conn.send("ATTACH", {"control": control, "hz": float(hz)})

    # ---- reading the stream --------------------------------------------------

    def _apply(self, snap):
        self.state = {k: v for k, v in snap.items() if k not in _DELTAS}
        before = {(n["role"], n["index"]): n for n in self.nodes}
        self.nodes = snap["nodes"]
        for n in self.nodes:  # "worker:1", as drover names nodes
            n["name"] = "%s:%d" % (_wire.ROLES[n["role"]], n["index"])
            old = before.get((n["role"], n["index"]))
            for k in ("got", "links"):  # "": unchanged since the last snapshot
                if not n[k] and old:
                    n[k] = old[k]
        for s in snap["series"]:
            tag = s["tag"]
            pts = [Metric(tag, p["step"], p["wall"], p["value"]) for p in s["points"]]
            last = self._last.get(tag)
            if s["reset"]:  # the whole series again: only what is newer is new
                self.series[tag] = pts
                pts = [p for p in pts if last is None or (p.step, p.wall) > last]
            else:
                self.series.setdefault(tag, []).extend(pts)
            if pts:
                newest = max((p.step, p.wall) for p in pts)
                self._last[tag] = newest if last is None else max(last, newest)
            self._points.extend(pts)
        for e in snap["events"]:
            ev = Event(e["wall"], e["text"])
            self.events.append(ev)
            self._events.append(ev)
        self.snapshots += 1

    def poll(self, timeout=None):
        """Reads one frame (waiting at most timeout seconds, None: the
        run's timeout); False once the run has ended."""
        if self.ended:
            return False
        try:
            name, req, f = self.conn.recv(self.timeout if timeout is None else timeout)
        except Closed:
            self.ended = True
            self.conn.close()
            return False
        if name == "SNAPSHOT":
            self._apply(f)
        elif name == "COMMAND_REPLY":
            self._replies[req] = (f["status"], f["text"])
        else:
            raise DroverError("unexpected %s from the coordinator" % name)
        return True

    def snapshot(self, timeout=None):
        """Waits for the next SNAPSHOT; returns the header (self.state)."""
        n = self.snapshots
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while self.snapshots == n:
            if not self.poll(max(deadline - time.monotonic(), 0.001)):
                raise Closed("the run ended")
        return self.state

    def metrics(self, timeout=None):
        """Yields every new metric point (Metric: tag, step, wall, value)
        as SNAPSHOTs bring them, until the run ends. TimeoutError when
        nothing at all arrives for timeout seconds (None: the run's)."""
        while True:
            while self._points:
                yield self._points.popleft()
            if not self.poll(timeout):
                return

    def next_events(self, timeout=None):
        """Yields the run's events (Event: wall, text) as they come."""
        while True:
            while self._events:
                yield self._events.popleft()
            if not self.poll(timeout):
                return

    # ---- commands --------------------------------------------------------------

    def command(self, line, kind="LUA", timeout=None):
        """Sends a COMMAND (a Lua line; "STOP_NODE" or "LOG_TAIL" with a
        node name) and returns its reply's text; DroverError when the
        coordinator answers with an error status."""
        self._req = self._req % 0xFFFFFFFF + 1
        req = self._req
        self.conn.send("COMMAND", {"kind": _wire.COMMAND_KINDS[kind], "text": line}, req)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while req not in self._replies:
            if not self.poll(max(deadline - time.monotonic(), 0.001)):
                raise Closed("the run ended before replying")
        status, text = self._replies.pop(req)
        if status != 0:
            raise DroverError(text, status)
        return text

    # ---- data --------------------------------------------------------------------

    def feed(self, batches, name="python", window=0, stall=60.0):
        """Feeds (x, y) or (x, y, ids) batches to the run's fit (train = { feed =
        "external" }) on a connection of its own, under the coordinator's
        credit; returns FeedResult(sent, trained) once all are trained.
        The run's snapshots are read meanwhile (metrics() has them after).
        See feed.py."""
        key = self._key  # a feeder proves the control key: a run directory has it
        if os.path.isdir(self.target):
            key = auth.load_secret(run_key(self.target, True))
        conn = Conn(self._addr[0], self._addr[1], key, self.timeout)
        try:
            return _feed.feed(conn, batches, name, window, stall, beside=self)
        finally:
            conn.close()

    def predict(self, rows, batch=None, ids=None, vals=None, bound=0):
        """Predictions of the model the run serves, for rows.

        rows: a list of lists of floats (one list per row, all the same
        length) or a numpy array [n, features] (float32 on the wire).
        batch: rows per worker batch (None: the batch of the script's
        c:serve, else its experiment's train.batch). Returns a list of
        output rows (lists of floats), exactly one per input row, in input
        order; [] for no rows. ids: each row's ids for a model with
        sparse tables (nn.EmbeddingBag, nn.SparseLinear), as
        Feeder.send(x, y, ids=...) takes them: an integer array [n, fields]
        (hashed categorical columns, as data.csv hashes them) or n sequences
        of ids with vals their weights; bound the ids' range (0: one above
        the largest). The work is spread over the cluster's
        workers; a worker lost meanwhile has its batches run again, each
        row answered once.

        The run's script must be inside c:serve { predict = exp }
        (DroverError naming it otherwise), and this client must hold the
        run's control key: a run directory's control.key, or secret_file
        for HOST:PORT (the view key is refused). The predict connection is
        opened on the first call and kept for the next ones; many rows go
        in several requests, answered in order."""
        rows = _predict.as_rows(rows)
        if rows.shape[0] == 0:
            if ids is not None and len(ids):
                raise ValueError("predict: ids for %d rows, x has none" % len(ids))
            return []
        if self._predictor is None:
            key = self._key
            if os.path.isdir(self.target):
                path = os.path.join(self.target, "control.key")
                if not os.access(path, os.R_OK):
                    raise DroverError("predict needs the run's control key: %s is not readable "
                                      "(the view key only watches)" % path)
                key = auth.load_secret(path)
            conn = Conn(self._addr[0], self._addr[1], key, self.timeout)
            try:
                self._predictor = _predict.Predictor(conn, "python", max(self.timeout, 600.0),
                                                     beside=self)
            except BaseException:
                conn.close()
                raise
        return self._predictor.predict(rows, batch, ids, vals, bound)

    def close(self):
        if self._predictor is not None:
            self._predictor.conn.close()
            self._predictor = None
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(target, secret_file=None, **kw):
    """A Run attached to target: a run directory, or HOST:PORT with
    secret_file. Keywords: hz (snapshots per second, at most 10 come),
    control (may send commands), timeout (seconds per wait), key (the
    secret's bytes instead of secret_file, with HOST:PORT)."""
    return Run(target, secret_file, **kw)
