# test_pyclient_feed.sh - feeding a fit from Python (clients/python,
# drover_client.Run.feed) on the feed messages of src/proto/wire_msgs.h:
# against a coordinator this test plays (credit discipline, order, the end,
# a source that fails), then a real 1 ps + 2 worker cluster whose fit runs
# with train = { feed = "external" } and trains exactly the batches Python
# sent. Skipped while this drover has no feed messages.
. tests/cli/lib.sh
python_client pyclient-feed

timeout 60 "$PY" tests/cli/pyclient_fake_feed.py
if ! "$PY" -c "import sys, drover_client as dc; sys.exit(0 if dc.feed.supported() else 1)"; then
  echo "SKIP pyclient-feed a C cluster: no FEED messages in this drover"
  exit 0
fi

RUNS=$TMP/runs
mkdir -p "$RUNS"
cat > "$TMP/fed.lua" <<LUA
local nn, optim = drover.nn, drover.optim
local exp = drover.experiment {
  name = "fed", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { feed = "external", feeders = 1, batch = 32, feed_timeout = 60 }, seed = 1,
  verbose = false,
}
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "fed" }
local f = io.open("$RUNS/current", "w"); f:write(c.run_dir, "\n"); f:close()
local r = c:fit(exp)
print(string.format("FED %d TRAINED %d", r.fed, r.batches))
io.stdout:flush()
local ok, err = pcall(c.fit, c, exp) -- its feeder gives up
print("SECOND " .. tostring(ok) .. " " .. tostring(err))
c:shutdown()
LUA
"$DROVER" run "$TMP/fed.lua" >"$TMP/fed.out" 2>&1 &
trainer=$!
trap 'kill -9 $trainer 2>/dev/null; rm -rf "$TMP"' EXIT
wait_for 60 test -s "$RUNS/current"
RUN=$(cat "$RUNS/current" 2>/dev/null)
wait_for 30 test -s "$RUN/coordinator"

cat > "$TMP/feed.py" <<'PY'
import sys, time
import numpy as np
import drover_client as dc

d = np.loadtxt("examples/data/digits.csv", delimiter=",", dtype=np.float32, ndmin=2)
x, y = d[:, :-1], d[:, -1]
x = (x - x.mean(0)) / np.maximum(x.std(0), 1e-6)
batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 32 * 25, 32)]
def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))

with dc.connect(sys.argv[1], timeout=30) as run:
    r = run.feed(batches, name="pytest", stall=60)
    result("pyclient-feed-t10 the cluster trained the 25 batches Python sent",
           r == dc.FeedResult(25, 25), r)
    # the run's snapshots were read while feeding: the losses are there
    # (under load the last steps' points may come a snapshot or two later:
    # a bounded wait for them)
    deadline = time.monotonic() + 15
    run.snapshot()
    while not run.series.get("train/loss") and time.monotonic() < deadline:
        run.snapshot(timeout=max(deadline - time.monotonic(), 0.1))
    steps = [m.step for m in run.series.get("train/loss", [])]
    result("pyclient-feed-t10 the metric stream kept up while feeding",
           len(steps) > 0 and max(steps) <= 25, steps[-5:])

    # t12: the second fit's feeder fails: the fit fails saying why
    def broken():
        for b in batches[:3]:
            yield b
        raise RuntimeError("disk gone")
    try:
        run.feed(broken(), name="pybroken", stall=60)
        result("pyclient-feed-t12 a failing source raises", False, "no error")
    except RuntimeError as e:
        result("pyclient-feed-t12 a failing source raises", "disk gone" in str(e), e)
PY
timeout 120 "$PY" "$TMP/feed.py" "$RUN"
check "pyclient-feed-t11 the fit ended" wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "pyclient-feed-t11 the script exited 0" test $? -eq 0
check "pyclient-feed-t11 its fit took the 25 batches" grep -q "^FED 25 TRAINED 25$" "$TMP/fed.out"
check "pyclient-feed-t11 metrics.jsonl has them" test "$(grep -c '"step"' "$RUN/metrics.jsonl")" -ge 25
check "pyclient-feed-t12 the second fit failed, naming the feeder and why" \
  grep -q "^SECOND false .*feeder pybroken gave up: its source failed after 3 batches: RuntimeError: disk gone" "$TMP/fed.out"
check "pyclient-feed-t11 events.log names the feeder" grep -q "feeder pytest connected" "$RUN/events.log"
