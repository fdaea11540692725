# test_eval_metrics.sh - eval.metrics = { "auc", "logloss" } against a
# reference written in Python from the definitions (every positive/negative
# pair compared, a tie counting half; -[y log p + (1-y) log(1-p)] with p
# clamped to [eps, 1-eps] as scikit-learn's log_loss does), on fixed scores
# with many ties and saturated logits, through drover's real evaluation
# (a Linear layer set to the identity: its outputs are the scores). Then an in-process
# run: metrics.jsonl's eval_auc/eval_logloss are what TensorBoard's own
# reader finds under eval/auc and eval/logloss, and the final AUC is the
# reference's on the model's predictions. Needs $VENV (numpy, tensorboard).
. tests/cli/lib.sh
PY=${VENV:+$VENV/bin/python}
if [ -z "$PY" ] || ! "$PY" -c "import numpy, tensorboard" 2>/dev/null; then
  echo "SKIP evalm: VENV is not set or lacks numpy/tensorboard (make venv)"
  exit 0
fi
mkdir -p "$TMP/m"
cat > "$TMP/m/ref.py" <<'PY'
import sys
import numpy as np
def auc(s, y):
    pos, neg = s[y == 1], s[y == 0]
    gt = (pos[:, None] > neg[None, :]).sum()
    eq = (pos[:, None] == neg[None, :]).sum()
    return (gt + 0.5 * eq) / (len(pos) * len(neg))
def logloss(s, y):
    eps = np.finfo(np.float64).eps
    p = np.clip(1 / (1 + np.exp(-s)), eps, 1 - eps)
    return float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
PY

# The scores: ties on a grid of quarters, a block of saturated logits
# (|s| up to 60, where the clamp decides), continuous ones; two classes
# (out[1] - out[0]) too.
cat > "$TMP/m/gen.py" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(11)
n = 3000
y = (rng.random(n) < 0.3).astype(np.float32)
s = np.concatenate([np.round(rng.normal(0, 1.5, 1500) * 4) / 4,     # ties
                    rng.choice([-60.0, -45.0, 38.0, 60.0], 300),    # saturated
                    rng.normal(0.8, 2.0, 1200)]).astype(np.float32)
s[:1500] += y[:1500] * 0.75                                         # some signal
np.save(d + "/s1.npy", s.reshape(n, 1))
np.save(d + "/y.npy", y)
two = np.stack([rng.normal(0, 1, n), rng.normal(0, 1, n)], 1).astype(np.float32)
two[:, 1] += y * 0.5
two[:500] = np.round(two[:500] * 2) / 2                             # ties again
np.save(d + "/s2.npy", two)
PY
"$PY" "$TMP/m/gen.py" "$TMP/m"
cat > "$TMP/m/eval.lua" <<'LUA'
local nn, data, optim = drover.nn, drover.data, drover.optim
local dir = arg[1]
-- a Linear(k, k) that returns its input, exactly
local function identity(k)
  local l = nn.Linear(k, k)
  local w, b = l:parameters()[1].value, l:parameters()[2].value
  w:fill(0); b:fill(0)
  for i = 1, k do w[i][i] = 1 end
  return l
end
for _, case in ipairs { { "s1", nn.BCEWithLogits(), 1 }, { "s2", nn.CrossEntropy(), 2 } } do
  local d = data.npy(dir .. "/" .. case[1] .. ".npy", dir .. "/y.npy")
  local exp = drover.experiment { model = identity(case[3]), loss = case[2],
    optimizer = optim.SGD { lr = 0.1 }, train = { data = d, batch = 100 },
    eval = { data = d, batch = 128, metrics = { "logloss", "auc" } }, verbose = false }
  local e = exp:evaluate()
  print(string.format("%s %.17g %.17g", case[1], e.auc, e.logloss))
end
LUA
"$DROVER" run "$TMP/m/eval.lua" "$TMP/m" > "$TMP/m/got" 2> "$TMP/m/err"
cat > "$TMP/m/cmp.py" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ref import auc, logloss
d = sys.argv[1]
y = np.load(d + "/y.npy").astype(np.float64)
got = {l.split()[0]: (float(l.split()[1]), float(l.split()[2])) for l in open(d + "/got")}
s1 = np.load(d + "/s1.npy")[:, 0].astype(np.float64)
two = np.load(d + "/s2.npy").astype(np.float64)
s2 = two[:, 1] - two[:, 0]
for name, s in (("s1", s1), ("s2", s2)):
    a, l = auc(s, y), logloss(s, y)
    ga, gl = got[name]
    assert abs(ga - a) < 1e-12 and abs(gl - l) < 1e-10, (name, ga, a, gl, l)
assert len(np.unique(s1)) < 0.7 * len(s1)   # the ties are there
assert logloss(s1, y) > 1                    # and the clamp mattered
print("ok")
PY
check "evalm-01 AUC and log loss are the Python reference's (ties, saturated logits, 2 classes)" \
  sh -c "'$PY' '$TMP/m/cmp.py' '$TMP/m' 2>&1 | grep -qx ok"
[ -s "$TMP/m/err" ] && head -5 "$TMP/m/err"
"$PY" "$TMP/m/cmp.py" "$TMP/m" 2>&1 | tail -2

# evalm-02: an in-process run writes them to metrics.jsonl and TensorBoard
cat > "$TMP/m/fit.lua" <<LUA
local nn, data, optim = drover.nn, drover.data, drover.optim
local d = data.synthetic { n = 3000, features = 20, classes = 2, seed = 5 }
local tr, te = d:split(0.8, { seed = 1 })
local exp = drover.experiment { name = "auc", runs = "$TMP/runs",
  model = nn.Sequential { nn.Linear(20, 8), nn.ReLU(), nn.Linear(8, 1) },
  loss = nn.BCEWithLogits(), optimizer = optim.Adam { lr = 0.01 },
  train = { data = tr, batch = 50, epochs = 2 },
  eval = { data = te, every = 16, metrics = { "auc", "logloss" } }, verbose = false }
local r = exp:fit()
local out = exp:predict(te)
local f = assert(io.open("$TMP/m/pred", "w"))
for i = 1, #te do f:write(string.format("%.9g %d\n", out[i][1], te.y[i])) end
f:close()
print(string.format("%d %.17g %.17g %d", r.steps, r.eval_auc, r.eval_logloss, #r.evals))
LUA
res=$(timeout 120 "$DROVER" run "$TMP/m/fit.lua" 2> "$TMP/m/fit.err")
check "evalm-02 the run trained with evals" [ -n "$res" ]
[ -n "$res" ] || head -5 "$TMP/m/fit.err"
run=$(ls -d "$TMP"/runs/auc-* | head -n 1)
cat > "$TMP/m/tb.py" <<'PY'
import json, math, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ref import auc, logloss
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
d, run = sys.argv[1], sys.argv[2]
steps, r_auc, r_ll, nevals = sys.argv[3].split()
ev = EventAccumulator(run + "/events/train"); ev.Reload()
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
evals = [l for l in lines if "eval_loss" in l]
assert len(evals) == int(nevals) >= 5, len(evals)
for key, tag in (("eval_auc", "eval/auc"), ("eval_logloss", "eval/logloss")):
    tb = {e.step: e.value for e in ev.Scalars(tag)}
    assert sorted(tb) == [l["step"] for l in evals], (tag, sorted(tb))
    for l in evals:
        assert math.isclose(tb[l["step"]], l[key], rel_tol=1e-6), (tag, l, tb[l["step"]])
assert evals[-1]["step"] == int(steps)
assert evals[-1]["eval_auc"] > 0.9 and evals[-1]["eval_auc"] > evals[0]["eval_auc"] - 0.05
assert math.isclose(evals[-1]["eval_auc"], float(r_auc), rel_tol=1e-9)
# the final AUC and log loss are the reference's on the model's own outputs
p = np.loadtxt(d + "/pred")
assert abs(auc(p[:, 0], p[:, 1]) - float(r_auc)) < 1e-9, (auc(p[:, 0], p[:, 1]), r_auc)
assert abs(logloss(p[:, 0], p[:, 1]) - float(r_ll)) < 1e-6
print("ok")
PY
check "evalm-02 metrics.jsonl, TensorBoard's reader and the predictions agree on AUC and log loss" \
  sh -c "'$PY' '$TMP/m/tb.py' '$TMP/m' '$run' '$res' 2>&1 | grep -qx ok"
"$PY" "$TMP/m/tb.py" "$TMP/m" "$run" "$res" 2>&1 | tail -2
