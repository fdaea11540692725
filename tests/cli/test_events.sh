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
