# test_sparse_predict.sh - c:predict of a model with sparse tables
# (nn.EmbeddingBag, nn.SparseLinear) over data with ids, on a cluster of
# real processes: each worker gets the tables' held rows (PREDICT_ROWS)
# and reads its batches' ids from the file (files mode).
#  sp-01 after an async fit over 2 ps and 2 workers, c:predict on the
#        held-out split equals in-process exp:predict with the rows the fit
#        pulled back, row for row, bit for bit; a worker SIGKILLed at its
#        second predict batch is restarted and gets the rows again.
#  sp-02 the saved model (c:save, read back by nn.load, so no ps has its
#        rows) predicts on the cluster what it predicts in process, and
#        what the fit's model predicted.
#  sp-03 refusal: a tensor without ids for a model with tables (c:serve
#        of such a model: test_sparse_serve.sh).
. tests/cli/lib.sh
RUNS=$TMP/runs
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 2000 1 >"$TMP/gen.out" 2>&1
check "sp-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

cat >"$TMP/pred.lua" <<'LUA'
local nn = drover.nn
local path, dir = arg[1], arg[2]
local rows = 1048576
local ctr = dofile("tests/cli/ctr_setup.lua")
local train, test = ctr.split(path, rows)
assert(test.files, "the held-out split is read by the workers (files mode)")
print("test rows " .. #test)
local function experiment(model)
  return drover.experiment { name = "sp", model = model, loss = nn.BCEWithLogits(),
    optimizer = drover.optim.Adagrad { lr = 0.05 }, train = { data = train, batch = 100, epochs = 1 },
    verbose = false, seed = 7, mode = "async" }
end
local exp = experiment(ctr.wide_deep(rows))
local function write(name, y)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  for i = 1, #test do f:write(string.format("%.9g\n", y[i][1])) end
  f:close()
end
local function try(name, fn)
  local ok, err = pcall(fn)
  print(name .. ": " .. (ok and "ok" or tostring(err)))
end
local c = drover.cluster { ps = 2, worker = 2, runs = os.getenv("RUNS") }
c:fit(exp)
c:save(dir .. "/model.st")
write("cluster.txt", c:predict(exp, test, { batch = 64 }))
write("inproc.txt", exp:predict(test, { batch = 64 })) -- the same GEMM shapes: bit for bit
local loaded = experiment(nn.load(dir .. "/model.st"))
for _, t in ipairs(loaded.model:tables()) do print(("table %s held %d"):format(t.name, t.held)) end
write("loaded_cluster.txt", c:predict(loaded, test, { batch = 64 }))
write("loaded_inproc.txt", loaded:predict(test, { batch = 64 }))
try("tensor", function() c:predict(exp, test.x) end)
print("run " .. c.run_dir)
c:shutdown()
LUA

DROVER_FAULT=die:worker:1:predict:2 DROVER_FAULT_ONCE=$TMP/died RUNS=$RUNS \
  timeout 300 "$DROVER" run "$TMP/pred.lua" "$TMP/ctr.tsv" "$TMP" >"$TMP/pred.out" 2>&1
RUN=$(sed -n 's/^run //p' "$TMP/pred.out")
check "sp-01 the script ran to its end" [ -n "$RUN" ]
check "sp-01 one prediction per held-out row" \
  test "$(wc -l <"$TMP/cluster.txt")" -eq "$(sed -n 's/^test rows //p' "$TMP/pred.out")"
check "sp-01 c:predict equals in-process exp:predict, bit for bit" \
  sh -c "[ -s '$TMP/cluster.txt' ] && cmp -s '$TMP/cluster.txt' '$TMP/inproc.txt'"
check "sp-01 worker:1 was killed in the middle of the predict and its batches ran again" \
  sh -c "[ -f '$TMP/died' ] && grep -q 'retry [0-9]* predict batch.* of worker:1' '$RUN/events.log'"
check "sp-02 the loaded model's two tables hold the trained rows" \
  test "$(grep -c '^table .* held [1-9]' "$TMP/pred.out")" -eq 2
check "sp-02 the loaded model on the cluster equals it in process" \
  sh -c "[ -s '$TMP/loaded_cluster.txt' ] && cmp -s '$TMP/loaded_cluster.txt' '$TMP/loaded_inproc.txt'"
check "sp-02 and the fit's model's predictions" cmp -s "$TMP/loaded_cluster.txt" "$TMP/cluster.txt"
check "sp-03 a tensor without ids is refused, naming the table" \
  grep -q "^tensor: .*predict: the model reads ids (sparse table .*) but the data has none" "$TMP/pred.out"
