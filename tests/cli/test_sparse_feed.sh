# test_sparse_feed.sh - feed mode with ids (issue 26): FEED_BATCH carries a
# batch's ids, and a fed job of a model with sparse tables routes them
# before its pull and computes with them.
#  sf-01 a wide & deep model (EmbeddingBag per field + SparseLinear) on a
#        generated Criteo-format file, fed by the coordinator from the
#        dataset (shuffled, 2 epochs) to 2 ps + 1 worker (a feed trains
#        async; one worker applies its batches in order): c:save's model is
#        the in-process fit's bit for bit (tables' rows compared by id).
#  sf-02 the same fed from data.stream of the file (categorical columns
#        hashed as data.csv hashes them), against the in-process fit on
#        data.csv in file order.
#  sf-03 a Python external feeder sends ids and weights (libsvm-style
#        rows) to a SparseLinear model, directly to the worker on its host:
#        the in-process fit on the same rows read with
#        data.libsvm { sparse = true }, bit for bit.
#  sf-04 a feeder's FEED_BATCH with malformed ids: the coordinator closes
#        that connection (events.log and the log say why) and the fit goes
#        on with the next feeder.
#  sf-05 refusal: a fed batch without ids for a model with tables fails
#        the fit naming it (c:feed's input queues carry ids:
#        test_sparse_queue.sh).
. tests/cli/lib.sh
. tests/cli/sparse_lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"
PY=$VENV/bin/python
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 2000 1 >"$TMP/gen.out" 2>&1
check "sf-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

# arg: how (inproc | feed | stream), out file, data file, shuffle (1 | 0), epochs
cat >"$TMP/fit.lua" <<'LUA'
local nn = drover.nn
local how, out, path, shuffle, epochs = arg[1], arg[2], arg[3], arg[4] == "1", tonumber(arg[5])
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local opts = { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 }
drover.seed(4)
local model = nn.Sum { nn.SparseLinear(2 ^ 20, 1), nn.Sequential {
  nn.Concat { nn.Identity(), nn.EmbeddingBag(2 ^ 20, 4) },
  nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) } }
local t = { batch = 100, epochs = epochs, shuffle = shuffle }
if how == "inproc" then t.data = drover.data.csv(path, opts)
elseif how == "feed" then t.feed = drover.data.csv(path, opts)
else
  t.feed = drover.data.stream(path, { delimiter = "\t", label = 1, categorical = cat,
                                      buckets = 2 ^ 20 })
  t.shuffle = nil
end
local exp = drover.experiment { name = "sf", model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.Adagrad { lr = 0.05 }, train = t, verbose = false, seed = 7 }
if how == "inproc" then
  exp:fit()
  model:save(out)
else
  local c = drover.cluster { ps = 2, worker = 1, runs = os.getenv("RUNS") }
  local r = c:fit(exp)
  print(("fed %d trained %d"):format(r.fed, r.batches))
  c:save(out)
  print("run " .. c.run_dir)
  c:shutdown()
end
for _, tb in ipairs(model:tables()) do print(("table %s held %d"):format(tb.name, tb.held)) end
LUA
fit() { RUNS=$RUNS timeout 300 "$DROVER" run "$TMP/fit.lua" "$@"; }

# sf-01
fit inproc "$TMP/ref.st" "$TMP/ctr.tsv" 1 2 >"$TMP/ref.out" 2>&1
fit feed "$TMP/f1.st" "$TMP/ctr.tsv" 1 2 >"$TMP/f1.out" 2>&1
check "sf-01 the fed fit trained every batch once (2 x 20)" grep -q '^fed 40 trained 40$' "$TMP/f1.out"
check "sf-01 its model is the in-process one, bit for bit (rows by id)" \
  same_models "$TMP/ref.st" "$TMP/f1.st" 100
check "sf-01 the coordinator's copy holds the rows training touched" \
  test "$(grep '^table' "$TMP/ref.out")" = "$(grep '^table' "$TMP/f1.out")"

# sf-02
fit inproc "$TMP/ref2.st" "$TMP/ctr.tsv" 0 1 >"$TMP/ref2.out" 2>&1
fit stream "$TMP/f2.st" "$TMP/ctr.tsv" 0 1 >"$TMP/f2.out" 2>&1
check "sf-02 the stream fed 20 batches" grep -q '^fed 20 trained 20$' "$TMP/f2.out"
check "sf-02 its model is the in-process fit's on data.csv in file order (rows by id)" \
  same_models "$TMP/ref2.st" "$TMP/f2.st" 100

# sf-03, sf-04: Python feeders (the client from this tree)
python_client sparse-feed
"$PY" - "$TMP/rows.svm" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
with open(sys.argv[1], "w") as f:
    for i in range(600):
        k = int(rng.integers(1, 6))
        ids = np.sort(rng.choice(5000, k, replace=False))
        vals = rng.normal(size=k).round(3)
        y = int(vals.sum() > 0)
        f.write("%d %s\n" % (y, " ".join("%d:%g" % (j + 1, v) for j, v in zip(ids, vals))))
PY
cat >"$TMP/svm.lua" <<'LUA'
local nn = drover.nn
local how, out, path = arg[1], arg[2], arg[3]
drover.seed(5)
local model = nn.SparseLinear(5000, 1)
local t = { batch = 50, epochs = 1 }
if how == "inproc" then
  t.data, t.shuffle = drover.data.libsvm(path, { sparse = true, features = 5000 }), false
else
  t.feed, t.feeders, t.feed_timeout = "external", 2, 60
end
local exp = drover.experiment { name = "svm", model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.SGD { lr = 0.1 }, train = t, verbose = false, seed = 7 }
if how == "inproc" then
  exp:fit()
  model:save(out)
  return
end
local c = drover.cluster { ps = 1, worker = 1, runs = os.getenv("RUNS"), name = "svm" }
local f = io.open(os.getenv("RUNS") .. "/current", "w"); f:write(c.run_dir, "\n"); f:close()
local r = c:fit(exp)
print(("fed %d trained %d"):format(r.fed, r.batches))
c:save(out)
c:shutdown()
LUA
RUNS=$RUNS timeout 60 "$DROVER" run "$TMP/svm.lua" inproc "$TMP/svm_ref.st" "$TMP/rows.svm" \
  >"$TMP/svm_ref.out" 2>&1
RUNS=$RUNS timeout 120 "$DROVER" run "$TMP/svm.lua" cluster "$TMP/svm_c.st" "$TMP/rows.svm" \
  >"$TMP/svm_c.out" 2>&1 &
trainer=$!
kill_at_exit $trainer
wait_for 60 test -s "$RUNS/current"
RUN=$(cat "$RUNS/current" 2>/dev/null)
wait_for 30 test -s "$RUN/coordinator"
note_coords
timeout 90 "$PY" - "$RUN" "$TMP/rows.svm" >"$TMP/feeders.out" 2>&1 <<'PY'
import sys, numpy as np
import drover_client as dc
from drover_client import _wire, auth, feed as dfeed
from drover_client.client import run_key
from drover_client.conn import Closed, Conn

run, path = sys.argv[1], sys.argv[2]
ys, ids, vals = [], [], []
for line in open(path):
    t = line.split()
    ys.append(float(t[0]))
    ids.append([int(p.split(":")[0]) - 1 for p in t[1:]])
    vals.append([float(p.split(":")[1]) for p in t[1:]])
r = dc.connect(run, timeout=30)
def conn():
    return Conn(r._addr[0], r._addr[1], auth.load_secret(run_key(run, True)), 30)

# sf-04: offsets that go back (row 0 claims 2 entries, row 1 ends at 1)
bad = dfeed.sparse_bytes([[1, 2], [3]], n=2)
bad = bad[:21] + np.array([0, 2, 1], "<i8").tobytes() + bad[21 + 24:]
f = dfeed.Feeder(conn(), name="bad", stall=30)
f.wait_fit()
f.conn.send("FEED_BATCH", {"task": 0, "seq": 1, "epoch": 0, "mode": _wire.FEED_MODES["TRAIN"],
                           "x": np.zeros((2, 0), np.float32), "y": np.zeros(2, np.float32),
                           "sparse": bad})
try:
    while True:
        f._wait()
except (Closed, OSError) as e:
    print("BAD closed: %s" % e)

# sf-03: the rows in order, 50 a batch, ids and weights per example; the
# feeder runs on the worker's host, so they go to the worker directly
key = auth.load_secret(run_key(run, True))
g = dfeed.Feeder(conn(), name="ids", stall=60, key="part-0",
                 direct_key=dfeed.feed_key(key))
g.opened()
for i in range(0, len(ys), 50):
    g.send(np.zeros((len(ys[i:i + 50]), 0), np.float32), np.array(ys[i:i + 50], np.float32),
           ids=ids[i:i + 50], vals=vals[i:i + 50], bound=5000)
print("GOOD %s direct %d route %s" % (g.finish(), g.direct_sent, g.route))
PY
wait $trainer
cat "$TMP/feeders.out" >&2
check "sf-03 the Python feeder's 12 batches trained" grep -q '^fed 12 trained 12$' "$TMP/svm_c.out"
check "sf-03 they went to the worker directly (worker_direct.c took their ids)" \
  grep -q '^GOOD .* direct 12 ' "$TMP/feeders.out"
check "sf-03 the model is the in-process fit's on data.libsvm { sparse = true } (rows by id)" \
  same_models "$TMP/svm_ref.st" "$TMP/svm_c.st" 100
check "sf-04 the feeder with malformed ids was closed" grep -q '^BAD closed' "$TMP/feeders.out"
check "sf-04 the coordinator said why" \
  grep -rq "FEED_BATCH 1's ids: the sparse part's offsets or ids are inconsistent" "$RUN"

# sf-05: refusals
cat >"$TMP/refuse.lua" <<'LUA'
local nn = drover.nn
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(arg[1], { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
local c = drover.cluster { ps = 1, worker = 1, runs = os.getenv("RUNS") }
local model = nn.Sum { nn.SparseLinear(2 ^ 20, 1), nn.Linear(13, 1) }
local it = 0
local exp = drover.experiment { model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.SGD { lr = 0.1 }, verbose = false,
  train = { feed = function() -- x and y only: no ids
    it = it + 1
    if it > 3 then return nil end
    return drover.tensor.zeros(10, 13), drover.tensor.zeros(10)
  end, batch = 10 } }
print("noids: " .. select(2, pcall(c.fit, c, exp)))
c:shutdown()
LUA
RUNS=$RUNS timeout 120 "$DROVER" run "$TMP/refuse.lua" "$TMP/ctr.tsv" >"$TMP/refuse.out" 2>&1
check "sf-05 a fed batch without ids fails a fit with tables, naming it" \
  grep -q "^noids: .*a fed batch without ids: the model reads ids" "$TMP/refuse.out"
