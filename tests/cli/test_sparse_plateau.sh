# test_sparse_plateau.sh - a plateau schedule with sparse tables on a
# cluster: the coordinator's LR_SCALE reaches every ps's tables as well as
# its dense shards.
#  spl-01 sync, 2 ps + 1 worker, a wide & deep model (EmbeddingBag +
#         SparseLinear) with SGD and a plateau schedule watching eval_auc
#         that reduces the rate at its second eval whatever the values
#         (threshold 2: nothing is ever better; min_lr stops it at one
#         reduction). events.log has the reduction; each ps's log says
#         after which global step (version) it took it, on both tables.
#         Both ps take it after the same step (sync: the coordinator names
#         a step none has reached, LR_SCALE's `after`). The cluster's model
#         is bit for bit the in-process fit with a multistep schedule whose
#         milestone is that step, and not the one a step later.
#  spl-03 ps:0 SIGKILLed once a checkpoint holds the reduction: restored,
#         every ps takes the checkpoint's scale again on its tables, and
#         the model is the in-process one reduced after min(K, C) (C the
#         checkpoint's step: the steps after it ran again, reduced).
#  spl-04 the coordinator SIGKILLed once a checkpoint holds the reduction,
#         `drover run --resume`: the same, from the resumed checkpoint.
#  spl-02 a watched metric the evals do not compute is refused when the
#         experiment is made, before any fit (eval_logloss, the evals
#         computing auc only).
. tests/cli/lib.sh
. tests/cli/sparse_lib.sh
RUNS=$TMP/runs
PY=$VENV/bin/python
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 3000 1 >"$TMP/gen.out" 2>&1
check "spl-00 the generator wrote the data" [ -s "$TMP/ctr.tsv" ]

# arg: inproc | cluster, the schedule ("plateau", "multistep K" or
# "refused"), out file, data
cat >"$TMP/fit.lua" <<'LUA'
local nn, S = drover.nn, drover.optim.schedule
local mode, sched, out, path = arg[1], arg[2], arg[3], arg[4]
local rows = 2^20
local ctr = dofile("tests/cli/ctr_setup.lua")
local train, test = ctr.split(path, rows)
local model = ctr.wide_deep(rows)
local k = tonumber(sched:match("^multistep (%d+)$"))
local s = k and S.multistep { milestones = { k }, gamma = 0.5 }
  or S.plateau { metric = sched == "refused" and "eval_logloss" or "eval_auc", patience = 0,
    threshold = 2, factor = 0.5, min_lr = 0.025 }
-- spl-03: ps:0 SIGKILLed once a checkpoint has the reduction; spl-04
-- (SPL_KILL=coord): this process, once (the file SPL_ONCE says it was)
local once = os.getenv("SPL_ONCE")
local kill, c = os.getenv("SPL_KILL") ~= nil and not (once and io.open(once)), nil
local function progress()
  if not kill then return end
  local f = io.open(c.run_dir .. "/events.log")
  local ev = f and f:read("a") or ""
  if f then f:close() end
  local at = ev:find("plateau: learning rate scaled by", 1, true)
  if not (at and ev:find("checkpoint step %d+: ", at)) then os.execute("sleep 0.05") return end
  kill = false
  if once then
    io.open(once, "w"):close()
    os.execute("kill -9 $PPID")
  end
  for _, n in ipairs(c:nodes()) do
    if n.role == "ps" and n.index == 0 then os.execute("kill -9 " .. n.pid) end
  end
end
local exp = drover.experiment { name = "spl", model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.SGD { lr = 0.05, schedule = s },
  train = { data = train, batch = 100, epochs = 2 },
  eval = { data = test, every = 8, metrics = sched == "refused" and { "auc" } or { "auc", "logloss" } },
  verbose = false, seed = 7, mode = "sync",
  checkpoint = os.getenv("SPL_KILL") and { every = 8 } or nil, progress = progress }
if mode == "inproc" then
  exp:fit()
  model:save(out)
  return
end
c = drover.cluster { ps = 2, worker = 1, runs = os.getenv("RUNS") }
print("run " .. c.run_dir)
local ok, err = pcall(function() return c:fit(exp) end)
if not ok then
  print("error: " .. tostring(err))
  c:shutdown()
  return
end
c:save(out)
c:shutdown()
LUA
differ() { ! same_models "$@" 2>/dev/null; }
fit() { RUNS=$RUNS timeout 300 "$DROVER" run "$TMP/fit.lua" "$@" "$TMP/ctr.tsv"; }

# spl-01: the version each ps took the scale after ("" unless both agree)
took() {
  a=$(sed -n 's/.*learning rate scaled by 0.5 (plateau) after version \([0-9]*\), 2 sparse tables.*/\1/p' "$1/logs/ps-0.log")
  b=$(sed -n 's/.*learning rate scaled by 0.5 (plateau) after version \([0-9]*\), 2 sparse tables.*/\1/p' "$1/logs/ps-1.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "$a"
}
fit cluster plateau "$TMP/c.st" >"$TMP/c.out" 2>&1
RUN=$(sed -n 's/^run //p' "$TMP/c.out")
K=$(took "$RUN")
check "spl-01 the cluster fit ended" test -n "$RUN" -a -s "$TMP/c.st"
check "spl-01 events.log: the plateau fired (once)" \
  test "$(grep -c 'plateau: learning rate scaled by 0.5$' "$RUN/events.log")" -eq 1
# what each ps logged, in the check's name: a failure says which differed
said=$(for k in 0 1; do printf 'ps:%s: %s; ' $k "$(grep -h 'scaled by' "$RUN/logs/ps-$k.log" 2>/dev/null |
  sed 's/.*\(scaled by\)/\1/' | tr '\n' ' ')"; done)
check "spl-01 both ps took the scale on their 2 tables after the same step ($said)" [ -n "$K" ]
if [ -n "$K" ]; then
  fit inproc "multistep $K" "$TMP/ref.st" >"$TMP/ref.out" 2>&1
  check "spl-01 the cluster's model is the in-process one reduced after step $K (rows by id)" \
    same_models "$TMP/ref.st" "$TMP/c.st" 100
  fit inproc "multistep $((K + 1))" "$TMP/ref1.st" >"$TMP/ref1.out" 2>&1
  check "spl-01 and not the one reduced a step later" \
    differ "$TMP/ref1.st" "$TMP/c.st"
fi

# spl-03: ps:0 killed after a checkpoint with the reduction: every ps
# rolls back to it and takes its scale again (LR_SCALE after SPARSE_INIT
# and RESTORE), tables included. Steps after the checkpoint (of step C)
# run reduced, so the model is the in-process one reduced after min(K, C).
SPL_KILL=1 fit cluster plateau "$TMP/k.st" >"$TMP/k.out" 2>&1
RUNK=$(sed -n 's/^run //p' "$TMP/k.out")
C=$(sed -n 's/.*restoring from step \([0-9]*\).*/\1/p' "$RUNK/events.log" | head -n 1)
check "spl-03 ps:0 was restored from a checkpoint with the reduced scale" \
  grep -q "plateau state from step $C: rate scale 0.5" "$RUNK/events.log"
check "spl-03 both ps took the scale again on their 2 tables after the checkpoint's step" \
  test "$(grep -c "learning rate scaled by 0.5 (plateau) after version $C, 2 sparse tables" \
    "$RUNK/logs/ps-0.log" "$RUNK/logs/ps-1.log" | awk -F: '{ n += ($2 > 0) } END { print n }')" -eq 2
K3=$(sed -n 's/.*scaled by 0.5 (plateau) after version \([0-9]*\), 2 sparse tables.*/\1/p' "$RUNK/logs/ps-1.log" | head -n 1)
check "spl-03 the fit ended" test -s "$TMP/k.st" -a -n "$C" -a -n "$K3"
if [ -n "$C" ] && [ -n "$K3" ]; then
  M=$K3; [ "$C" -lt "$M" ] && M=$C
  fit inproc "multistep $M" "$TMP/refk.st" >"$TMP/refk.out" 2>&1
  check "spl-03 the model is the in-process one reduced after step $M (K $K3, C $C)" \
    same_models "$TMP/refk.st" "$TMP/k.st" 100
fi

# spl-04: the coordinator SIGKILLed once a checkpoint holds the reduction,
# then `drover run --resume`: the ps start afresh and take the checkpoint's
# scale again on their tables; the model is again the in-process one
# reduced after min(K, C).
SPL_KILL=coord SPL_ONCE=$TMP/once fit cluster plateau "$TMP/r.st" >"$TMP/r.out" 2>&1
RUNR=$(sed -n 's/^run //p' "$TMP/r.out")
PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUNR/events.log" 2>/dev/null)
kill_at_exit $PIDS
check "spl-04 the coordinator was killed after the reduction" \
  test -f "$TMP/once" -a ! -s "$TMP/r.st" -a -n "$RUNR"
KR=$(sed -n 's/.*scaled by 0.5 (plateau) after version \([0-9]*\), 2 sparse tables.*/\1/p' "$RUNR/logs/ps-1.log" | head -n 1)
RUNS=$RUNS SPL_KILL=coord SPL_ONCE=$TMP/once timeout 300 "$DROVER" run --resume "$RUNR" >"$TMP/res.out" 2>&1
CR=$(sed -n 's/.*resuming fit 1 from step \([0-9]*\).*/\1/p' "$RUNR/events.log" | head -n 1)
check "spl-04 the resume took the checkpoint's scale" \
  grep -q "plateau state from step $CR: rate scale 0.5" "$RUNR/events.log"
check "spl-04 both resumed ps took it on their 2 tables after the checkpoint's step" \
  test "$(grep -c "learning rate scaled by 0.5 (plateau) after version $CR, 2 sparse tables" \
    "$RUNR/logs/ps-0.log" "$RUNR/logs/ps-1.log" | awk -F: '{ n += ($2 > 0) } END { print n }')" -eq 2
if [ -n "$CR" ] && [ -n "$KR" ]; then
  M=$KR; [ "$CR" -lt "$M" ] && M=$CR
  fit inproc "multistep $M" "$TMP/refr.st" >"$TMP/refr.out" 2>&1
  check "spl-04 the resumed model is the in-process one reduced after step $M (K $KR, C $CR)" \
    same_models "$TMP/refr.st" "$TMP/r.st" 100
else
  fail "spl-04 the resumed model" "no step: K '$KR', C '$CR'"
fi

# spl-02
fit cluster refused "$TMP/x.st" >"$TMP/x.out" 2>&1
check "spl-02 a plateau on a metric the evals do not compute is refused" \
  grep -q 'optim.schedule.plateau: metric = "eval_logloss" needs the evals to compute it' "$TMP/x.out"
