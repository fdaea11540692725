# test_sparse_resume.sh - a fit of a model with sparse tables (wide & deep
# on hashed categorical columns, lazy Adam) SIGKILLed after a checkpoint
# and resumed with `drover run --resume` ends with the model an
# uninterrupted fit ends with, bit for bit: the tables' held rows, Adam's
# per-row moments and counts come back from the checkpoint. Then `drover
# export` writes the tables dense under PyTorch's names when they fit, and
# refuses with the size when they do not. The script kills itself (kill -9
# $PPID from its progress function) once the checkpoint of step 20 is
# committed: no race with a poll.
. tests/cli/lib.sh
RUNS=$TMP/runs
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 3000 1 >"$TMP/gen.out" 2>&1
check "sparse-resume-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

# arg[1] data, arg[2] runs, arg[3] where the predictions go, arg[4] rows of
# the tables, arg[5] a file: killed once (the resume runs the script again
# with the same arguments; the file says the kill happened).
cat >"$TMP/sp.lua" <<'LUA'
local nn = drover.nn
local path, runs, out, rows, once = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5]
local function died() local f = io.open(once or "") if f then f:close() end return f ~= nil end
local die = once and not died()
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = rows })
local train = d:standardize()
drover.seed(4)
local deep = nn.Sequential { nn.Concat { nn.Identity(), nn.EmbeddingBag(rows, 4) },
  nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) }
local exp
exp = drover.experiment { name = "sp", model = nn.Sum { nn.SparseLinear(rows, 1), deep },
  loss = nn.BCEWithLogits(), optimizer = drover.optim.Adam { lr = 0.01 },
  train = { data = train, batch = 100, epochs = 2 }, verbose = false, seed = 7, runs = runs,
  checkpoint = { every = 10 },
  progress = function(p)
    if not die or p.step < 21 then return end
    local f = io.open(exp:run_dir() .. "/checkpoints/step-20/manifest.json")
    if not f then return end
    f:close()
    io.open(once, "w"):close()
    os.execute("kill -9 $PPID")
  end }
exp:fit()
local y = exp:predict(train)
local f = assert(io.open(out, "w"))
for i = 1, #train do f:write(string.format("%.9g\n", y[i][1])) end
f:close()
print("run " .. exp:run_dir())
LUA

"$DROVER" run "$TMP/sp.lua" "$TMP/ctr.tsv" "$RUNS/ref" "$TMP/ref.txt" 1048576 >"$TMP/ref.out" 2>&1
check "sparse-resume-01 the uninterrupted fit ends" [ -s "$TMP/ref.txt" ]
timeout 120 "$DROVER" run "$TMP/sp.lua" "$TMP/ctr.tsv" "$RUNS/kill" "$TMP/res.txt" 1048576 "$TMP/died" \
  >"$TMP/kill.out" 2>&1
RUN=$(ls -d "$RUNS/kill"/sp-* 2>/dev/null | head -n 1)
check "sparse-resume-02 killed mid-fit, after the checkpoint of step 20" \
  sh -c "[ -n '$RUN' ] && [ -f '$TMP/died' ] && [ ! -s '$TMP/res.txt' ]"
check "sparse-resume-02 the checkpoint holds the tables' rows by id" \
  sh -c "grep -aq '\"0.weight.ids\"' '$RUN/checkpoints/step-20/model.safetensors' &&
         grep -aq '\"optim.0.weight.count\"' '$RUN/checkpoints/step-20/state.safetensors'"
timeout 120 "$DROVER" run --resume "$RUN" >"$TMP/res.out" 2>&1
check "sparse-resume-03 the resume starts from step 20" grep -q "resuming from step 20" "$RUN/events.log"
check "sparse-resume-03 the resumed fit's predictions equal the uninterrupted one's, bit for bit" \
  cmp -s "$TMP/ref.txt" "$TMP/res.txt"

# ---- drover export: tables dense under PyTorch's names, or refused
"$DROVER" export --runs "$RUNS/ref" sp -o "$TMP/dense.safetensors" >"$TMP/export.out" 2>&1
check "sparse-resume-04 drover export writes a model with 2^20-row tables" [ -s "$TMP/dense.safetensors" ]
LAST=$(ls -d "$RUNS/ref"/sp-*/checkpoints/step-* | sort -t- -k3 -n | tail -n 1)
PY=$VENV/bin/python
cat >"$TMP/dense.py" <<'PY'
import sys
import numpy as np
import torch
from safetensors.numpy import load_file
dense, ck = load_file(sys.argv[1]), load_file(sys.argv[2])
for name in ("0.weight", "1.0.1.weight"):
    w, ids, rows = dense[name], ck[name + ".ids"], ck[name + ".rows"]
    assert w.shape == (1048576, rows.shape[1]), (name, w.shape)
    assert ids.dtype == np.int64 and (w[ids] == rows).all(), name + ": held rows differ"
    if name == "1.0.1.weight":  # untouched rows are the table's N(0, 1) start
        rest = np.delete(w, ids, axis=0)
        assert abs(rest.std() - 1.0) < 0.01 and abs(rest.mean()) < 0.01, (rest.mean(), rest.std())
        bag = torch.nn.EmbeddingBag(1048576, 4, mode="sum")
        bag.load_state_dict({"weight": torch.from_numpy(w)})
        x = torch.tensor([int(ids[0]), int(ids[1])])
        out = bag(x, torch.tensor([0]))
        assert torch.allclose(out[0], torch.from_numpy(rows[0] + rows[1])), out
print("ok")
PY
check "sparse-resume-04 PyTorch reads it: held rows as the checkpoint's, the rest at their start, an nn.EmbeddingBag loads it" \
  sh -c "'$PY' '$TMP/dense.py' '$TMP/dense.safetensors' '$LAST/model.safetensors' | grep -qx ok"
cat >"$TMP/back.lua" <<'LUA'
local m = drover.nn.load(arg[1])
print(m:tables()[2].held)
LUA
check "sparse-resume-04 drover.nn.load reads the dense form back (every row held)" \
  sh -c "'$DROVER' run '$TMP/back.lua' '$TMP/dense.safetensors' | grep -qx 1048576"
"$DROVER" run "$TMP/sp.lua" "$TMP/ctr.tsv" "$RUNS/big" "$TMP/big.txt" 8589934592 >"$TMP/big.out" 2>&1
check "sparse-resume-05 a model with 2^33-row tables trains and checkpoints" [ -s "$TMP/big.txt" ]
if "$DROVER" export --runs "$RUNS/big" sp -o "$TMP/big.safetensors" >"$TMP/bigx.out" 2>&1; then
  fail "sparse-resume-05 drover export refuses a table too large to write dense" "it exported"
else
  check "sparse-resume-05 drover export refuses a table too large to write dense, with its size" \
    grep -q "table '0.weight' is 8589934592 rows of 1: 32.0 GiB dense" "$TMP/bigx.out"
fi
check "sparse-resume-05 and writes nothing" [ ! -e "$TMP/big.safetensors" ]
