# test_scale_metrics.sh - every membership change of a fit is in its
# metrics (issue 28): a fit scaled 2 -> 3 -> 1 from its progress function
# has `workers` 2, 3, 1 in metrics.jsonl and TensorBoard's cluster/workers
# (read by TensorBoard's own EventAccumulator from the venv), at step 0 and
# at the steps events.log says each scale was done.
. tests/cli/lib.sh
PY=${VENV:+$VENV/bin/python}
PY=${PY:-/usr/bin/python3}

cat > "$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local c = drover.cluster { ps = 1, worker = { instances = 2, min = 1, max = 3 },
  runs = "$TMP/runs", name = "scm" }
-- each progress call held until the change before is done (a fit of small
-- steps ended before the new worker was up on a loaded machine)
local log = {}
local progress = dofile("tests/lua/scaler.lua")(c, { { 100, 3 }, { 600, 1 } }, { log = log })
local exp = drover.experiment { name = "scm",
  model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 }, verbose = false,
  train = { data = digits, batch = 16, epochs = 100, max_steps = 2000 }, progress = progress }
local r = c:fit(exp)
io.stdout:write(r.steps, " ", #log, "\n")
c:shutdown { grace = 5 }
LUA
out=$(timeout 240 "$DROVER" run "$TMP/fit.lua" 2>"$TMP/err")
check "scale-metrics-01 the fit ran its steps and both scales" [ "$out" = "2000 2" ]
dir=$(ls -d "$TMP"/runs/scm-* 2>/dev/null | head -n 1)
# "step:workers" of events.log: the fit's start (0) and each scale done
want=$(sed -n 's/.*fit: 2000 steps on \([0-9]*\) workers.*/0:\1/p;
  s/.*scale: worker [0-9]* -> \([0-9]*\) done (during the fit, at step \([0-9]*\)).*/\2:\1/p' \
  "$dir/events.log" | tr '\n' ' ')
check "scale-metrics-01 events.log has the start and both scales done during the fit" \
  sh -c "echo '$want' | grep -Eq '^0:2 [0-9]+:3 [0-9]+:1 \$'"
got=$("$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    m = json.loads(l)
    if "workers" in m: print("%d:%d" % (m["step"], m["workers"]), end=" ")
' "$dir/metrics.jsonl")
check "scale-metrics-02 metrics.jsonl: workers 2, 3, 1 at those steps ($got vs $want)" \
  [ "$got" = "$want" ]
if ! "$PY" -c "import tensorboard" 2>/dev/null; then
  echo "SKIP scale-metrics-03: $PY has no tensorboard package (make venv installs it)"
  exit 0
fi
tb=$("$PY" -c '
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
a = EventAccumulator(sys.argv[1] + "/events/coordinator"); a.Reload()
print(" ".join("%d:%g" % (e.step, e.value) for e in a.Scalars("cluster/workers")), end=" ")
' "$dir" 2>&1)
check "scale-metrics-03 TensorBoard reads cluster/workers 2, 3, 1 at those steps ($tb)" \
  [ "$tb" = "$want" ]
