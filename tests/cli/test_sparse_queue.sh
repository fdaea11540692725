# test_sparse_queue.sh - c:feed's input queues with ids (issue 26,
# TensorFlowOnSpark's InputMode.SPARK): w:next_batch(n) gives x, y and the
# rows' ids, and w:train_step(x, y, ids) trains a model with sparse tables
# on them, on a cluster of real processes (2 ps + 1 worker).
#  sq-01 a wide & deep model (EmbeddingBag per field + SparseLinear) set up
#        with c:setup and trained by a worker loop on c:feed's batches of a
#        generated Criteo-format file (file order, next_batch of the fed
#        size): c:save's model is the in-process fit's on the same batches,
#        bit for bit (tables' rows compared by id).
#  sq-02 ids stay with their rows when w:next_batch splits and merges fed
#        batches (fed by 50, read by 37): each row's ids are the ones the
#        file gives that row (its first column is its number).
#  sq-03 w:train_step(x, y) without ids for a model with tables fails,
#        naming the missing ids; ids of another batch's size are refused.
. tests/cli/lib.sh
. tests/cli/sparse_lib.sh
python_client sparse-queue
RUNS=$TMP/runs
mkdir -p "$RUNS"
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 1500 1 >"$TMP/gen.out" 2>&1
check "sq-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]
# rows numbered in their first column, two categorical columns
awk 'BEGIN { for (i = 0; i < 403; i++) printf "%d,u%d,i%d,%d\n", i, i % 37, (i * 7) % 101, i % 2 }' \
  >"$TMP/rows.csv"

cat >"$TMP/q.lua" <<'LUA'
local nn = drover.nn
local how, out, path, rows_csv = arg[1], arg[2], arg[3], arg[4]
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
drover.seed(4)
local model = nn.Sum { nn.SparseLinear(2 ^ 20, 1), nn.Sequential {
  nn.Concat { nn.Identity(), nn.EmbeddingBag(2 ^ 20, 4) },
  nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) } }
local exp = drover.experiment { name = "sq", model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.Adagrad { lr = 0.05 }, verbose = false, seed = 7,
  train = { data = d, batch = 100, epochs = 1, shuffle = false } }
if how == "inproc" then
  exp:fit()
  model:save(out)
  return
end
local c = drover.cluster { ps = 2, worker = 1, runs = os.getenv("RUNS") }
c:setup(exp)
-- sq-01: the worker's own loop trains on what c:feed queues
local job = c:schedule(function(w)
  local steps = 0
  while not w:should_stop() do
    local x, y, ids = w:next_batch(100)
    if x then
      assert(ids and #ids == x:shape()[1] and ids.fields == 26, "ids with the batch")
      w:train_step(x, y, ids)
      steps = steps + 1
    end
  end
  return steps
end)
local r = c:feed(d, { batch = 100, shuffle = false })
print(("fed %d taken %d steps %d"):format(r.fed, r.taken, job:fetch()))
c:save(out)
-- sq-02: fed by 50, read by 37: each row's ids are its own
local job2 = c:schedule(function(w, file)
  local ref = drover.data.csv(file, { label = -1, header = false, categorical = { 2, 3 }, buckets = 1000 })
  local rows, bad, reads, merged = 0, 0, 0, 0
  while not w:should_stop() do
    local x, y, ids = w:next_batch(37)
    if x then
      reads = reads + 1
      if x:shape()[1] ~= 37 and x:shape()[1] ~= 50 then merged = merged + 1 end
      for i = 1, x:shape()[1] do
        local want = ref:ids(math.floor(x[i][1]) + 1)
        local got = ids:row(i)
        if #got ~= 2 or got[1] ~= want[1] or got[2] ~= want[2] then bad = bad + 1 end
        rows = rows + 1
      end
    end
  end
  return rows, bad, reads, merged
end, rows_csv)
local rd = drover.data.csv(rows_csv, { label = -1, header = false, categorical = { 2, 3 }, buckets = 1000 })
c:feed(rd, { batch = 50, shuffle = false })
print(("aligned rows %d mismatched %d (%d reads, %d of other sizes)"):format(job2:fetch()))
-- sq-03: refusals
local job3 = c:schedule(function(w)
  local x, y, ids = w:next_batch(100)
  local ok1, e1 = pcall(w.train_step, w, x, y)
  local ok2, e2 = pcall(w.train_step, w, x:narrow(1, 1, 10), y:narrow(1, 1, 10), ids)
  w:terminate()
  return tostring(ok1) .. " " .. tostring(e1), tostring(ok2) .. " " .. tostring(e2)
end)
c:feed(d, { batch = 100, shuffle = false })
local noids, wrong = job3:fetch()
print("noids: " .. noids)
print("wrong: " .. wrong)
c:shutdown()
LUA
RUNS=$RUNS timeout 120 "$DROVER" run "$TMP/q.lua" inproc "$TMP/ref.st" "$TMP/ctr.tsv" >"$TMP/ref.out" 2>&1
RUNS=$RUNS timeout 300 "$DROVER" run "$TMP/q.lua" cluster "$TMP/q.st" "$TMP/ctr.tsv" "$TMP/rows.csv" \
  >"$TMP/q.out" 2>&1
check "sq-01 the worker loop trained every fed batch once" grep -q '^fed 15 taken 15 steps 15$' "$TMP/q.out"
check "sq-01 its model is the in-process fit's, bit for bit (rows by id)" \
  same_models "$TMP/ref.st" "$TMP/q.st" 100
check "sq-02 every row read once, each with its own ids" \
  grep -q '^aligned rows 403 mismatched 0 ' "$TMP/q.out"
check "sq-03 w:train_step(x, y) without ids fails, naming them" \
  grep -q '^noids: false .*a fed batch without ids: the model reads ids' "$TMP/q.out"
check "sq-03 ids of another size are refused" \
  grep -q '^wrong: false .*w:train_step: ids of 100 rows for x of 10' "$TMP/q.out"
