# test_sparse_replicas.sh - sparse tables on ps with replicas (issue 26,
# ps_replicas = 1): a primary forwards SPARSE_INIT, SPARSE_LOAD and each
# SPARSE_PUSH (with its sender's PUSH) to its replica, which applies them
# as the primary does. 2 ps (+ 2 replicas), a wide & deep model with lazy
# Adam on a generated Criteo-format file:
#  srep-01 sync, 1 worker: c:save's model equals the in-process fit bit for
#          bit (rows compared by id); then both primaries are SIGKILLed and
#          c:save again reads the promoted replicas: the same file, so every
#          row, its optimizer's use of it and every dense value were on them;
#  srep-02 sync, 1 worker, ps:0 (a primary) SIGKILLed mid-fit: its replica
#          takes over, the fit ends, and the model equals the uninterrupted
#          one bit for bit; no rollback;
#  srep-03 the same, and the killed ps:0, back as ps:2's replica, takes
#          its state with the tables' rows (REPL_SYNC, rows cut in pieces
#          of 4 KiB: DROVER_REPL_PIECE); then ps:2 is SIGKILLed in turn and
#          ps:0 is promoted: the model still equals the uninterrupted one;
#  srep-05 srep-02 with checkpoints every 10 steps: the promoted replica
#          writes group 0's ps-0.safetensors from then on, with the tables'
#          ids, rows, Adam's slots and counts, and the model is the same;
#  srep-07 srep-05 with ps:0 and its replica SIGKILLed together: the fit
#          rolls back to the last checkpoint (RESTORE of every primary,
#          forwarded to its replica with the tables' rows); then ps:1 is
#          SIGKILLed and its replica ps:3, restored with it, is promoted:
#          the model still equals the uninterrupted one;
#  srep-04 async, 2 workers: the fit ends with every step, and the rows held
#          on each primary and its replica are equal (as srep-01's check);
#  srep-06 async, 2 workers, ps:0 SIGKILLed mid-fit: ps:2 is promoted, the
#          workers send it their kept SPARSE_PUSH + PUSH frames again, and the
#          fit ends with exactly its steps.
# run.sh timeout: 600
. tests/cli/lib.sh
. tests/cli/sparse_lib.sh
RUNS=$TMP/runs
PY=$VENV/bin/python
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 3000 1 >"$TMP/gen.out" 2>&1
check "srep-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

# arg: data, mode (inproc | cluster), sync | async, workers, c:save's file,
# kill (none | mid: ps:0 at step 15 | twice: mid, then ps:2 once ps:0 is its
# replica in sync (steps slowed down till then) | after: both primaries
# after the fit, then c:save to FILE.after).
cat >"$TMP/fit.lua" <<'LUA'
local nn = drover.nn
local path, mode, sync, nw, out, kill = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5], arg[6]
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = 1048576 })
local train = d:standardize()
drover.seed(4)
local deep = nn.Sequential { nn.Concat { nn.Identity(), nn.EmbeddingBag(1048576, 4) },
  nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) }
local c
local function node(role, index)
  for _, n in ipairs(c:nodes()) do if n.role == role and n.index == index then return n end end
end
local function read(p) local f = io.open(p) if not f then return "" end local s = f:read("a") f:close() return s end
local killed, killed2
-- both: group 0 whole (ps:0 and its replica ps:2) at step 15: the fit rolls
-- back to a checkpoint; then, once restored, ps:1 at step 25 or later, whose
-- replica ps:3 took the RESTORE forwarded.
local function both(p)
  if not killed and p.step >= 15 then
    killed = node("ps", 0).pid .. " " .. node("ps", 2).pid
    os.execute("kill -9 " .. killed)
  elseif killed and not killed2 and p.step >= 25 then
    if not read(c.run_dir .. "/events.log"):find("restored from step", 1, true) or
      node("ps", 3).state ~= "replica" then os.execute("sleep 0.1") return end
    killed2 = node("ps", 1).pid
    os.execute("kill -9 " .. killed2)
  end
end
local exp = drover.experiment { name = "srep", model = nn.Sum { nn.SparseLinear(1048576, 1), deep },
  loss = nn.BCEWithLogits(), optimizer = drover.optim.Adam { lr = 0.01 },
  train = { data = train, batch = 100, epochs = 2 }, verbose = false, seed = 7, mode = sync,
  checkpoint = os.getenv("SREP_CKPT") and { every = 10 } or nil,
  progress = function(p)
    if kill == "both" then return both(p) end
    if kill ~= "mid" and kill ~= "twice" or p.step < 15 then return end
    if not killed then
      killed = node("ps", 0).pid
      os.execute("kill -9 " .. killed)
      return
    end
    if kill ~= "twice" or killed2 then return end
    if node("ps", 0).state ~= "replica" then os.execute("sleep 0.1") return end
    killed2 = node("ps", 2).pid
    os.execute("kill -9 " .. killed2)
  end }
if mode == "inproc" then
  local r = exp:fit()
  exp.model:save(out)
  print("steps " .. r.steps)
  return
end
c = drover.cluster { ps = 2, worker = nw, runs = os.getenv("RUNS"), name = "srep", ps_replicas = 1 }
local r = c:fit(exp)
c:save(out)
print("steps " .. r.steps .. " killed " .. tostring(killed) .. " then " .. tostring(killed2))
if kill == "after" then -- the replicas take over: what they hold is what c:save reads now
  local p0, p1 = node("ps", 0).pid, node("ps", 1).pid
  os.execute("kill -9 " .. p0 .. " " .. p1)
  local ok = false
  for _ = 1, 300 do
    local n2, n3 = node("ps", 2), node("ps", 3)
    if n2.state == "ready" and n3.state == "ready" then ok = true break end
    drover.sleep(0.05)
  end
  print("promoted " .. tostring(ok))
  c:save(out .. ".after")
end
print("run " .. c.run_dir)
c:shutdown()
LUA
fit() { RUNS=$RUNS timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/ctr.tsv" "$@"; }

# srep-01
fit inproc sync 1 "$TMP/ref.st" none >"$TMP/ref.out" 2>&1
check "srep-00 the in-process fit ended" [ -s "$TMP/ref.st" ]
fit cluster sync 1 "$TMP/c1.st" after >"$TMP/c1.out" 2>&1
RUN1=$(sed -n 's/^run //p' "$TMP/c1.out")
check "srep-01 the fit with replicas ended" [ -n "$RUN1" ]
check "srep-01 c:save's model is the in-process one (rows by id)" same_models "$TMP/ref.st" "$TMP/c1.st" 100
check "srep-01 both replicas were promoted" grep -q "^promoted true" "$TMP/c1.out"
check "srep-01 the promoted replicas hold the same model, bit for bit (rows by id)" \
  same_models "$TMP/c1.st" "$TMP/c1.st.after" 100

# srep-02, srep-03
fit cluster sync 1 "$TMP/c2.st" mid >"$TMP/c2.out" 2>&1
RUN2=$(sed -n 's/^run //p' "$TMP/c2.out")
check "srep-02 the fit with ps:0 killed ended" [ -n "$RUN2" ]
check "srep-02 ps:0 was killed" grep -q "killed [0-9]" "$TMP/c2.out"
check "srep-02 its replica ps:2 was promoted" \
  grep -q "ps group 0: replica ps:2 promoted in place of ps:0" "$RUN2/events.log"
check "srep-02 no rollback" sh -c "! grep -q 'restoring from step' '$RUN2/events.log'"
check "srep-02 the model equals the uninterrupted one bit for bit" \
  same_models "$TMP/ref.st" "$TMP/c2.st" 100
check "srep-02 the same number of steps" \
  test "$(sed -n 's/^steps \([0-9]*\).*/\1/p' "$TMP/c2.out")" = "$(sed -n 's/^steps //p' "$TMP/ref.out")"

DROVER_REPL_PIECE=4096 fit cluster sync 1 "$TMP/c3.st" twice >"$TMP/c3.out" 2>&1
RUN3=$(sed -n 's/^run //p' "$TMP/c3.out")
check "srep-03 the fit with two failovers ended" [ -n "$RUN3" ]
check "srep-03 ps:0 then ps:2 were killed" grep -q "killed [0-9]* then [0-9]" "$TMP/c3.out"
check "srep-03 the restarted ps:0 took ps:2's state with the tables' rows" \
  grep -q "ps:0 I replica of .*sparse tables" "$RUN3/logs/ps-0.log"
check "srep-03 ps:0 was promoted in place of ps:2" \
  grep -q "ps group 0: replica ps:0 promoted in place of ps:2" "$RUN3/events.log"
check "srep-03 no rollback" sh -c "! grep -q 'restoring from step' '$RUN3/events.log'"
check "srep-03 the model equals the uninterrupted one bit for bit" \
  same_models "$TMP/ref.st" "$TMP/c3.st" 100

# srep-05
SREP_CKPT=1 fit cluster sync 1 "$TMP/c5.st" mid >"$TMP/c5.out" 2>&1
RUN5=$(sed -n 's/^run //p' "$TMP/c5.out")
check "srep-05 the fit with checkpoints and ps:0 killed ended" [ -n "$RUN5" ]
check "srep-05 ps:2 was promoted, no rollback" sh -c "grep -q 'replica ps:2 promoted in place of ps:0' \
  '$RUN5/events.log' && ! grep -q 'restoring from step' '$RUN5/events.log'"
check "srep-05 the model equals the uninterrupted one bit for bit" \
  same_models "$TMP/ref.st" "$TMP/c5.st" 100
LAST5=$(ls -d "$RUN5"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -n 1)
STEP5=${LAST5##*-}
check "srep-05 a checkpoint after the failover (step 20 or later)" [ "${STEP5:-0}" -ge 20 ]
check "srep-05 its ps-0 file (the promoted ps:2's) holds both tables' rows, slots and counts" \
  "$PY" - "$LAST5/ps-0.safetensors" <<'PY'
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    keys = list(f.keys())
    ids = [k for k in keys if k.endswith(".ids") and not k.startswith("optim.")]
    assert len(ids) == 2, keys
    for k in ids:
        n = f.get_tensor(k).shape[0]
        name = k[:-4]
        assert n > 50, (k, n)
        assert f.get_tensor(name + ".rows").shape[0] == n, name
        assert f.get_tensor("optim." + name + ".count").shape[0] == n, name
        assert sum(1 for x in keys if x.startswith("optim." + name + ".")) == 3, keys
PY

# srep-04
fit cluster async 2 "$TMP/c4.st" after >"$TMP/c4.out" 2>&1
RUN4=$(sed -n 's/^run //p' "$TMP/c4.out")
check "srep-04 the async fit with replicas ended" [ -n "$RUN4" ]
check "srep-04 every step" test "$(sed -n 's/^steps \([0-9]*\).*/\1/p' "$TMP/c4.out")" = 60
check "srep-04 both replicas were promoted" grep -q "^promoted true" "$TMP/c4.out"
check "srep-04 the replicas held the primaries' rows and values, bit for bit (rows by id)" \
  same_models "$TMP/c4.st" "$TMP/c4.st.after" 100

# srep-06
fit cluster async 2 "$TMP/c6.st" mid >"$TMP/c6.out" 2>&1
RUN6=$(sed -n 's/^run //p' "$TMP/c6.out")
check "srep-06 the async fit with ps:0 killed ended" [ -n "$RUN6" ]
check "srep-06 ps:0 was killed and ps:2 promoted" sh -c "grep -q 'killed [0-9]' '$TMP/c6.out' &&
  grep -q 'replica ps:2 promoted in place of ps:0' '$RUN6/events.log'"
check "srep-06 exactly its steps" test "$(sed -n 's/^steps \([0-9]*\).*/\1/p' "$TMP/c6.out")" = 60
check "srep-06 the tables hold rows" "$PY" -c "
import sys
from safetensors.numpy import load_file
m = load_file(sys.argv[1])
assert sum(1 for k in m if k.endswith('.ids') and len(m[k]) > 100) == 2, sorted(m)" "$TMP/c6.st"

# srep-07
SREP_CKPT=1 fit cluster sync 1 "$TMP/c7.st" both >"$TMP/c7.out" 2>&1
RUN7=$(sed -n 's/^run //p' "$TMP/c7.out")
check "srep-07 the fit ended" [ -n "$RUN7" ]
check "srep-07 group 0 lost whole: rolled back to a checkpoint" \
  grep -q "restored from step" "$RUN7/events.log"
check "srep-07 then ps:1 killed and ps:3 promoted" sh -c "grep -q 'then [0-9]' '$TMP/c7.out' &&
  grep -q 'replica ps:3 promoted in place of ps:1' '$RUN7/events.log'"
check "srep-07 the model equals the uninterrupted one bit for bit" \
  same_models "$TMP/ref.st" "$TMP/c7.st" 100
