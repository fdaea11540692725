# test_events.sh - TensorBoard itself reads the summaries a cluster run
# writes, with the `tensorboard` package `make venv` installs into the
# project's virtual environment ($VENV). Without a venv (a developer running
# the file by hand) it says why it skipped. The format is also checked
# without TensorBoard by tests/unit/test_events.c.
. tests/cli/lib.sh
PY=${VENV:+$VENV/bin/python}
PY=${PY:-/usr/bin/python3}

if ! "$PY" -c "import tensorboard" 2>/dev/null; then
  echo "SKIP events-t01: $PY has no tensorboard package (make venv installs it)"
  exit 0
fi

# events-t01: tensorboard's own reader finds every tag, at the right steps
cat > "$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local train, test = data.csv("examples/data/digits.csv", { label = -1 }):split(0.8, { seed = 1 })
local exp = drover.experiment {
  name = "tb", model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  train = { data = train, batch = 64, epochs = 1 }, eval = { data = test, every = 10 },
  verbose = false,
}
local c = drover.cluster { ps = 1, chief = 1, worker = 1, runs = "$TMP/runs", name = "tb" }
local r = c:fit(exp)
io.stdout:write(r.steps, "\n")
c:shutdown { grace = 5 }
LUA
steps=$(timeout 120 "$DROVER" run "$TMP/fit.lua")
check "events-t01 the run trained" [ -n "$steps" ]
dir=$(ls -d "$TMP"/runs/tb-* | head -n 1)
cat > "$TMP/read.py" <<'PY'
import math, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run, steps = sys.argv[1], int(sys.argv[2])
coord = EventAccumulator(run + "/events/coordinator"); coord.Reload()
chief = EventAccumulator(run + "/events/chief"); chief.Reload()
tags = set(coord.Tags()["scalars"])
want = {"train/loss", "train/accuracy", "train/examples_per_sec", "eval/loss", "eval/accuracy"}
assert want <= tags, tags
loss = coord.Scalars("train/loss")
assert [e.step for e in loss] == list(range(1, steps + 1)), [e.step for e in loss]
assert all(math.isfinite(e.value) and e.value > 0 for e in loss)
acc = coord.Scalars("eval/accuracy")
assert acc and all(0 <= e.value <= 1 for e in acc)
assert {"train/loss", "train/accuracy"} <= set(chief.Tags()["scalars"])
assert 0 < len(chief.Scalars("train/loss")) < steps
print("ok")
PY
check "events-t01 tensorboard reads every tag at every step" \
  sh -c "'$PY' '$TMP/read.py' '$dir' '$steps' 2>&1 | grep -qx ok"

# events-t02: in process and on a cluster, train/loss and train/accuracy
# are metrics.jsonl's loss and accuracy: each step's batch (issue 23)
cat > "$TMP/fit_here.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local train = data.csv("examples/data/digits.csv", { label = -1 }):split(0.8, { seed = 1 })
local exp = drover.experiment {
  name = "tbp", model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  train = { data = train, batch = 64, epochs = 2 }, verbose = false, runs = "$TMP/runs",
}
io.stdout:write(exp:fit().steps, "\n")
LUA
steps_here=$(timeout 120 "$DROVER" run "$TMP/fit_here.lua")
check "events-t02 the in-process run trained" [ -n "$steps_here" ]
here=$(ls -d "$TMP"/runs/tbp-* | head -n 1)
cat > "$TMP/same.py" <<'PY'
import json, math, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run, sub, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
ev = EventAccumulator(run + "/events/" + sub); ev.Reload()
tb = {tag: {e.step: e.value for e in ev.Scalars(tag)} for tag in ("train/loss", "train/accuracy")}
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
lines = [l for l in lines if "loss" in l]
assert [l["step"] for l in lines] == list(range(1, steps + 1)), [l["step"] for l in lines]
for l in lines:
    for key, tag in (("loss", "train/loss"), ("accuracy", "train/accuracy")):
        got = tb[tag].get(l["step"])
        assert got is not None and math.isclose(got, l[key], rel_tol=1e-6), (l, tag, got)
# a batch's values, not an epoch's running mean: the accuracy counts the
# batch's examples (a cluster's line says how many; in process 1438 rows
# are 22 batches of 64 and one of 30)
def batch(l): return l.get("examples") or (30 if l["step"] % 23 == 0 else 64)
bad = [l for l in lines if abs(l["accuracy"] * batch(l) - round(l["accuracy"] * batch(l))) > 1e-6]
assert not bad, bad[:3]
print("ok")
PY
check "events-t02 in process: TensorBoard's train/loss, train/accuracy are metrics.jsonl's" \
  sh -c "'$PY' '$TMP/same.py' '$here' train '$steps_here' 2>&1 | grep -qx ok"
check "events-t02 on a cluster: the coordinator's are its metrics.jsonl's" \
  sh -c "'$PY' '$TMP/same.py' '$dir' coordinator '$steps' 2>&1 | grep -qx ok"
