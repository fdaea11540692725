# test_sparse_cluster_ckpt.sh - checkpoints of sparse tables on a cluster
# (issue 26): each ps writes the rows of its shard of every table (ids,
# values, lazy Adam's moments and per-row counts) in its ps-K.safetensors.
# Sync, 2 ps + 1 worker, a wide & deep model on a generated Criteo-format
# file, checkpoints every 10 steps:
#  scc-01 ps:0 SIGKILLed after a checkpoint (of step 12 or later) is restarted and restored
#         (every ps rolls back to it), and the fit ends with c:save's model
#         equal to an uninterrupted fit's bit for bit (tables' rows compared
#         by id: the coordinator gathers them from the ps in no set order);
#  scc-02 the coordinator SIGKILLed after a checkpoint (by its own progress
#         function: no race with a poll), `drover run --resume`: the same;
#  scc-03 `drover export` of the cluster checkpoint: PyTorch's safetensors
#         reads each table dense under nn.EmbeddingBag's name, its rows those
#         of the model, an nn.EmbeddingBag loads it;
#  scc-04 a resume on another number of ps is refused with the reason.
# run.sh timeout: 600
. tests/cli/lib.sh
. tests/cli/sparse_lib.sh
RUNS=$TMP/runs
PY=$VENV/bin/python
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 3000 1 >"$TMP/gen.out" 2>&1
check "scc-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

# arg: data, runs, c:save's file, kill (none | ps | coord), a file that says
# the kill happened (a resume runs the script again with its arguments).
# SCC_PS: the number of ps (2).
cat >"$TMP/fit.lua" <<'LUA'
local nn = drover.nn
local path, runs, out, kill, once = arg[1], arg[2], arg[3], arg[4], arg[5]
local function died() local f = io.open(once) if f then f:close() end return f ~= nil end
local armed = kill ~= "none" and not died()
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = 1048576 })
local train = d:standardize()
drover.seed(4)
local deep = nn.Sequential { nn.Concat { nn.Identity(), nn.EmbeddingBag(1048576, 4) },
  nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) }
local c = drover.cluster { ps = tonumber(os.getenv("SCC_PS") or "2"), worker = 1, runs = runs,
  name = "scc" }
local function read(p) local f = io.open(p) if not f then return "" end local s = f:read("a") f:close() return s end
local victim
for _, n in ipairs(c:nodes()) do if n.role == "ps" and n.index == 0 then victim = n.pid end end
local exp = drover.experiment { name = "scc", model = nn.Sum { nn.SparseLinear(1048576, 1), deep },
  loss = nn.BCEWithLogits(), optimizer = drover.optim.Adam { lr = 0.01 },
  train = { data = train, batch = 100, epochs = 2 }, verbose = false, seed = 7, mode = "sync",
  checkpoint = { every = 10 },
  progress = function(p)
    if not armed or p.step < 13 then return end
    -- at step 20 or later, once a checkpoint of step 12 or later is
    -- committed (slowed down till then: a loaded machine commits it later)
    local ck = read(c.run_dir .. "/events.log"):match(".*checkpoint step (%d+): ")
    if not ck or tonumber(ck) < 12 then os.execute("sleep 0.1") return end
    if p.step < 20 then return end
    armed = false
    io.open(once, "w"):close()
    os.execute(kill == "ps" and "kill -9 " .. victim or "kill -9 $PPID")
  end }
local r = c:fit(exp)
c:save(out)
local ev = read(c.run_dir .. "/events.log")
print("restored " .. (ev:match("restored from step (%d+)") or "none"))
for _, n in ipairs(c:nodes()) do
  if n.role == "ps" and n.index == 0 then print("ps0 restarts " .. n.restarts) end
end
print("steps " .. r.steps .. " run " .. c.run_dir)
c:shutdown()
LUA
fit() { timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/ctr.tsv" "$@"; }

fit "$RUNS/ref" "$TMP/ref.st" none "$TMP/x" >"$TMP/ref.out" 2>&1
REF=$(sed -n 's/^steps .* run //p' "$TMP/ref.out")
check "scc-00 the uninterrupted cluster fit ended" [ -n "$REF" -a -s "$TMP/ref.st" ]
LAST=$(ls -d "$REF"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -n 1)
check "scc-00 each ps file holds its shard of both tables: ids, rows, Adam's slots and counts" \
  "$PY" - "$LAST" <<'PY'
import sys, json
from safetensors import safe_open
M = (1 << 64) - 1
def fmix(k):
    k ^= k >> 33; k = (k * 0xff51afd7ed558ccd) & M; k ^= k >> 33
    k = (k * 0xc4ceb9fe1a85ec53) & M; k ^= k >> 33
    return k
for p in (0, 1):
    with safe_open(f"{sys.argv[1]}/ps-{p}.safetensors", "np") as f:
        keys, meta = set(f.keys()), f.metadata()
        for t in ("0.weight", "1.0.1.weight"):
            for s in (".ids", ".rows"):
                assert t + s in keys, (t + s, keys)
            for s in (".0", ".1", ".count"):
                assert "optim." + t + s in keys, ("optim." + t + s, keys)
            assert meta[t + ".shard"] == f"{p}/2", meta
            ids = f.get_tensor(t + ".ids")
            assert len(ids) > 100 and all(fmix(int(i)) % 2 == p for i in ids), t
            assert f.get_tensor("optim." + t + ".count").min() >= 1
man = json.load(open(sys.argv[1] + "/manifest.json"))
assert "sparse_tables" in json.dumps(man), man
PY

# scc-01: ps:0 SIGKILLed after the checkpoint of step 20
fit "$RUNS/ps" "$TMP/ps.st" ps "$TMP/ps.once" >"$TMP/ps.out" 2>&1
check "scc-01 the fit with ps:0 killed ended" grep -q "^steps .* run " "$TMP/ps.out"
check "scc-01 ps:0 was killed and restarted once" grep -qx "ps0 restarts 1" "$TMP/ps.out"
check "scc-01 the ps rolled back to a checkpoint (step 12 or later)" \
  awk '/^restored / { exit !($2 >= 12) }' "$TMP/ps.out"
check "scc-01 the final model equals the uninterrupted fit's, bit for bit" \
  same_models "$TMP/ref.st" "$TMP/ps.st"

# scc-02: the coordinator SIGKILLed after a checkpoint
fit "$RUNS/coord" "$TMP/co.st" coord "$TMP/co.once" >"$TMP/co.out" 2>&1
RUN=$(ls -d "$RUNS/coord"/scc-* 2>/dev/null | head -n 1)
check "scc-02 the coordinator was killed mid-fit" \
  sh -c "[ -n '$RUN' ] && [ -f '$TMP/co.once' ] && [ ! -s '$TMP/co.st' ]"
PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log" 2>/dev/null)
gone() { [ ! -d "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
all_gone() { for p in "$@"; do gone "$p" || return 1; done; }
check "scc-02 its nodes are gone within 10 s" wait_for 10 all_gone $PIDS
kill_at_exit $PIDS
cp -r "$RUNS/coord" "$RUNS/other" # for scc-04

# scc-04 first, on a copy: 3 ps cannot take 2 ps files' rows
SCC_PS=3 timeout 300 "$DROVER" run --resume "$(ls -d "$RUNS/other"/scc-*)" >"$TMP/other.out" 2>&1
rc=$?
check "scc-04 a resume on 3 ps of a checkpoint written by 2 is refused" [ $rc -ne 0 ]
check "scc-04 the message says why" grep -q "cannot resume from the checkpoint of step [0-9]*: it was written by 2 ps and this cluster has 3; a model with sparse tables resumes on as many ps as wrote its checkpoint" "$TMP/other.out"
check "scc-04 and no model was saved" [ ! -s "$TMP/co.st" ]

timeout 300 "$DROVER" run --resume "$RUN" >"$TMP/res.out" 2>&1
check "scc-02 the resume starts from a checkpoint of step 12 or later" \
  awk '/resuming fit 1 from step/ { sub(/.*from step /, ""); f = ($1 + 0 >= 12) }
    END { exit !f }' "$RUN/events.log"
check "scc-02 the resumed fit's model equals the uninterrupted fit's, bit for bit" \
  same_models "$TMP/ref.st" "$TMP/co.st"

# scc-03: drover export of the uninterrupted run's last checkpoint
"$DROVER" export --runs "$RUNS/ref" scc -o "$TMP/dense.safetensors" >"$TMP/export.out" 2>&1
check "scc-03 drover export writes the cluster checkpoint's model" [ -s "$TMP/dense.safetensors" ]
cat >"$TMP/dense.py" <<'PY'
import sys
import numpy as np
import torch
from safetensors.torch import load_file
dense, model = load_file(sys.argv[1]), load_file(sys.argv[2])
for name in ("0.weight", "1.0.1.weight"):
    w, ids, rows = dense[name], model[name + ".ids"], model[name + ".rows"]
    assert w.dtype == torch.float32 and w.shape == (1048576, rows.shape[1]), (name, w.shape)
    assert ids.dtype == torch.int64 and torch.equal(w[ids], rows), name + ": rows differ"
for k, v in model.items():  # the dense parameters too
    if not (k.endswith(".ids") or k.endswith(".rows")):
        assert torch.equal(dense[k], v), k
bag = torch.nn.EmbeddingBag(1048576, 4, mode="sum")
bag.load_state_dict({"weight": dense["1.0.1.weight"]})
ids = model["1.0.1.weight.ids"][:2]
out = bag(ids, torch.tensor([0]))
assert torch.allclose(out[0], model["1.0.1.weight.rows"][:2].sum(0)), out
print("ok")
PY
check "scc-03 PyTorch reads the tables dense, equal to the model's rows; an nn.EmbeddingBag loads one" \
  sh -c "'$PY' '$TMP/dense.py' '$TMP/dense.safetensors' '$TMP/ref.st' 2>'$TMP/dense.err' | grep -qx ok"
