# test_sparse_serve.sh - c:serve of a model with sparse tables (issue 26):
# a Python client's PREDICT_REQUEST carries its rows' ids
# (client.predict(x, ids=...)), the serving workers get the tables' rows
# (PREDICT_ROWS) as c:predict's do, on a cluster of real processes.
#  ss-01 a wide & deep CTR model (EmbeddingBag per field + SparseLinear)
#        trained async over 2 ps and 2 workers, served with c:serve: the
#        client's predictions of the held-out rows with their ids equal
#        in-process exp:predict, bit for bit, in batches of 64.
#  ss-02 refusals answered, the connection kept: rows without ids (naming
#        the table and ids=), ids of another field count (naming it), ids
#        for fewer rows than x (in the client; sent raw, at the
#        coordinator).
#  ss-03 a malformed request (ids that do not decode) closes that
#        connection only: the coordinator says why and a new client is
#        answered, bit for bit again.
. tests/cli/lib.sh
python_client sparse-serve
RUNS=$TMP/runs
mkdir -p "$RUNS"
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 2000 1 >"$TMP/gen.out" 2>&1
check "ss-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

cat >"$TMP/serve.lua" <<'LUA'
local nn = drover.nn
local path, dir = arg[1], arg[2]
local rows = 1048576
local ctr = dofile("tests/cli/ctr_setup.lua")
local train, test = ctr.split(path, rows)
local exp = drover.experiment { name = "ss", model = ctr.wide_deep(rows),
  loss = nn.BCEWithLogits(), optimizer = drover.optim.Adagrad { lr = 0.05 },
  train = { data = train, batch = 100, epochs = 1 }, verbose = false, seed = 7, mode = "async" }
local c = drover.cluster { ps = 2, worker = 2, runs = os.getenv("RUNS") }
c:fit(exp)
print("test rows " .. #test)
drover.data.write_npy(dir .. "/x.npy", test.x)
drover.data.write_npy(dir .. "/want.npy", exp:predict(test, { batch = 64 })) -- as served: bit for bit
local f = assert(io.open(dir .. "/ids.txt", "w"))
for i = 1, #test do f:write(table.concat(test:ids(i), " "), "\n") end
f:close()
f = assert(io.open(dir .. "/run", "w"))
f:write(c.run_dir, "\n")
f:close()
-- the answered requests: all rows, no ids, 20 fields, the new client's rows
local r = c:serve { predict = exp, batch = 64, requests = 4, idle = 120 }
print(("SERVED %d requests %d rows idle %s"):format(r.requests, r.rows, tostring(r.idle)))
io.stdout:flush()
c:shutdown()
LUA
RUNS=$RUNS timeout 300 "$DROVER" run "$TMP/serve.lua" "$TMP/ctr.tsv" "$TMP" >"$TMP/serve.out" 2>&1 &
server=$!
kill_at_exit $server
wait_for 180 test -s "$TMP/run"
RUN=$(cat "$TMP/run" 2>/dev/null)
check "ss-00 the cluster trained and wrote the held-out rows" [ -n "$RUN" ]

cat >"$TMP/client.py" <<'PY'
import sys, time
import numpy as np
import drover_client as dc

run_dir, tmp = sys.argv[1], sys.argv[2]
def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))
    sys.stdout.flush()

x = np.load(tmp + "/x.npy")
want = np.load(tmp + "/want.npy")
ids = np.loadtxt(tmp + "/ids.txt", dtype=np.int64, ndmin=2)
assert ids.shape == (len(x), 26), ids.shape
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if "serving predictions" in open(run_dir + "/events.log").read():
        break
    time.sleep(0.1)
with dc.connect(run_dir, timeout=30) as run:
    got = np.array(run.predict(x, ids=ids), dtype=np.float32)
    result("ss-01 the served predictions equal exp:predict, bit for bit",
           got.shape == want.shape and np.array_equal(got, want),
           "shape %s, max diff %s" % (got.shape, np.abs(got - want).max() if got.shape == want.shape else "-"))
    # a raw request whose ids are well formed for 4 rows, x has 5
    from drover_client.feed import sparse_bytes
    try:
        run._predictor.request(x[:5], 0, sparse_bytes(ids[:4]))
        result("ss-02 a request with ids for 4 rows of 5 is refused", False, "answered")
    except dc.DroverError as e:
        result("ss-02 a request with ids for 4 rows of 5 is refused, the connection kept",
               "ids for 4 rows, x has 5 rows" in str(e) and e.code_name == "DRV_ESHAPE", e)
    try:
        run.predict(x[:5])
        result("ss-02 rows without ids are refused", False, "answered")
    except dc.DroverError as e:
        result("ss-02 rows without ids are refused, naming the table and ids=",
               "reads ids (sparse table" in str(e) and "ids=" in str(e), e)
    try:
        run.predict(x[:5], ids=ids[:5, :20])
        result("ss-02 ids of 20 fields are refused", False, "answered")
    except dc.DroverError as e:
        result("ss-02 ids of 20 fields are refused, naming the count",
               "cannot read this request's ids (20 per row, one per field)" in str(e), e)
    try:
        run.predict(x[:5], ids=ids[:4])
        result("ss-02 ids for 4 rows of 5 are refused", False, "sent")
    except ValueError as e:
        result("ss-02 ids for 4 rows of 5 are refused by the client", "ids for 4 rows" in str(e), e)
    # ss-03: ids that do not decode (offsets past the ids): a protocol error
    bad = np.array([26, 0], "<u4").tobytes()[:5] + np.array([1 << 20, 1], "<u8").tobytes()
    bad += np.array([0, 5, 9], "<i8").tobytes() + np.zeros(1, "<u8").tobytes()
    conn = run._predictor.conn
    conn.send("PREDICT_REQUEST", {"req": 99, "batch": 0, "x": x[:2], "sparse": bad})
    try:
        while True:
            conn.recv(timeout=30)
        result("ss-03 the malformed request's connection was closed", False, "still open")
    except dc.Closed:
        result("ss-03 the malformed request's connection was closed", True)
    except Exception as e:
        result("ss-03 the malformed request's connection was closed", False, repr(e))
with dc.connect(run_dir, timeout=30) as run:
    # 5 whole batches of 64: the GEMM shapes of want's
    got = np.array(run.predict(x[:320], ids=ids[:320]), dtype=np.float32)
    result("ss-03 the server keeps serving: a new client's rows, bit for bit",
           np.array_equal(got, want[:320]), np.abs(got - want[:320]).max())
PY
timeout 200 "$PY" "$TMP/client.py" "$RUN" "$TMP"
check "ss-03 the coordinator said why it closed the connection" \
  grep -rq "PREDICT_REQUEST 99's ids" "$RUN"
if wait_for 60 grep -q '^SERVED' "$TMP/serve.out"; then
  n=$(sed -n 's/^test rows //p' "$TMP/serve.out")
  check "ss-01 c:serve answered its 4 requests" \
    grep -q "^SERVED 4 requests $((n + 330)) rows idle false" "$TMP/serve.out"
else
  fail "ss-01 c:serve answered its 4 requests" "$(tail -20 "$TMP/serve.out")"
fi
wait_for 60 sh -c "! kill -0 $server 2>/dev/null"
wait $server
check "ss-01 the run ended cleanly" test $? -eq 0
