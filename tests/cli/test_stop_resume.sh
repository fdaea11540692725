# test_stop_resume.sh - early stopping's state (best eval, its step, the
# evals without improvement) is in checkpoints, in process and on a
# cluster: a run SIGKILLed after some bad evals and resumed with
# `drover run --resume` stops at the step an uninterrupted run stops at,
# not `patience` evals later. The script kills itself (kill -9 $PPID from
# its progress hook, the shell's parent being drover) once the checkpoint
# of step 16 is committed: deterministic, no race with a poll.
. tests/cli/lib.sh
RUNS=$TMP/runs

# arg[1] = "local" | "cluster", arg[2] = runs, arg[3] = a file: killed once
# (--resume runs the script again with the same arguments; the file says
# the kill happened).
# min_delta = 1e9: only the first eval (step 4) is ever "better"; evals at
# 8..20 are bad 1..4, the one at 24 is the 5th > patience 4: stop at 24.
cat >"$TMP/stop.lua" <<'LUA'
local nn, optim = drover.nn, drover.optim
local mode, runs, once = arg[1], arg[2], arg[3]
local function died() local f = io.open(once or "") if f then f:close() end return f ~= nil end
local die = once and not died()
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local train, held = data:split(0.8, { seed = 1 })
local dir, exp
exp = drover.experiment { name = "st", model = nn.Sequential { nn.Linear(16, 4) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 },
  train = { data = train, batch = 16, epochs = 4 }, eval = { data = held, every = 4 },
  stop = { metric = "eval_loss", patience = 4, min_delta = 1e9 },
  verbose = false, seed = 5, runs = runs, checkpoint = { every = 4 },
  progress = function(p)
    if mode == "local" then dir = dir or exp:run_dir() end
    if not (die and dir) then return end
    if mode == "local" then
      if p.step < 17 then return end
      local f = io.open(dir .. "/checkpoints/step-16/manifest.json")
      if not f then return end
      f:close()
    else -- a cluster's checkpoints come when the ps answer: slow down, and
         -- die once one holds two bad evals or more
      os.execute("sleep 0.05")
      local h = io.popen("cat " .. dir .. "/checkpoints/step-*/manifest.json 2>/dev/null")
      local s, bad = h:read("a"), -1
      h:close()
      for b in s:gmatch('"train_stop": *"[^ "]+ %d+ (%d+) 1"') do bad = math.max(bad, tonumber(b)) end
      if bad < 2 then return end
    end
    io.open(once, "w"):close()
    os.execute("kill -9 $PPID")
  end }
local r
if mode == "cluster" then
  local c = drover.cluster { ps = 1, worker = 1, runs = runs, name = "st" }
  dir = c.run_dir
  r = c:fit(exp)
  c:shutdown()
else
  dir = exp:run_dir()
  r = exp:fit()
  dir = exp:run_dir()
end
print(string.format("stopped %s best %d run %s", tostring(r.stopped_early), r.best_step, dir))
LUA

for mode in local cluster; do
  "$DROVER" run "$TMP/stop.lua" $mode "$RUNS/$mode-ref" >"$TMP/$mode-ref.out" 2>&1
  check "stop-resume-$mode the uninterrupted run stops early, best at step 4" \
    grep -q "^stopped true best 4 " "$TMP/$mode-ref.out"
  REF=$(sed -n 's/.* run //p' "$TMP/$mode-ref.out")
  AT=$(sed -n 's/.*stopping early at step .*the eval of step \([0-9]*\).*/\1/p' "$REF/events.log" 2>/dev/null | head -n 1)
  [ "$mode" = local ] && AT=$(ls "$REF/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
  timeout 60 "$DROVER" run "$TMP/stop.lua" $mode "$RUNS/$mode-kill" "$TMP/$mode-died" >"$TMP/$mode-kill.out" 2>&1
  RUN=$(ls -d "$RUNS/$mode-kill"/st-* 2>/dev/null | head -n 1)
  check "stop-resume-$mode killed mid-fit, after a checkpoint" \
    sh -c "[ -n '$RUN' ] && [ -f '$TMP/$mode-died' ] && ! grep -q '^stopped' '$TMP/$mode-kill.out'"
  N0=$(grep -c '"eval_loss"' "$RUN/metrics.jsonl" 2>/dev/null)
  timeout 60 "$DROVER" run --resume "$RUN" >"$TMP/$mode-res.out" 2>&1
  EV=$(( $(grep -c '"eval_loss"' "$RUN/metrics.jsonl" 2>/dev/null) - ${N0:-0} ))
  FROM=$(sed -n 's/.*resuming .*from step \([0-9]*\).*/\1/p' "$RUN/events.log" | head -n 1)
  # in process the state file's header holds it, on a cluster the manifest
  f=$RUN/checkpoints/step-$FROM/manifest.json
  [ "$mode" = local ] && f=$RUN/checkpoints/step-$FROM/state.safetensors
  check "stop-resume-$mode the checkpoint resumed from (step $FROM) holds 2+ bad evals since step 4" \
    grep -aq '"train_stop": *"[^"]* 4 [2-9] 1"' "$f"
  # a fresh count would make the first eval after the resume the best
  check "stop-resume-$mode the resumed run stops early, best still at step 4" \
    grep -q "^stopped true best 4 " "$TMP/$mode-res.out"
  GOT=$(sed -n 's/.*stopping early at step .*the eval of step \([0-9]*\).*/\1/p' "$RUN/events.log" 2>/dev/null | tail -n 1)
  [ "$mode" = local ] && GOT=$(ls "$RUN/checkpoints" 2>/dev/null | sed -n 's/^step-//p' | sort -n | tail -n 1)
  if [ "$mode" = local ]; then
    check "stop-resume-local it stops where the uninterrupted run did (step $AT, got $GOT)" \
      sh -c "[ -n '$AT' ] && [ '$AT' = '$GOT' ]"
  else
    # A cluster's coordinator evaluates when it gets to it: a busy one skips
    # an eval that a newer step made stale, so the deciding eval's step
    # varies from run to run (under ASan by 30 steps). What is certain: a
    # count started afresh at the resume needs patience + 1 = 5 evals; the
    # carried one, 2 or more bad evals already, at most 3 (and the fit's
    # final eval may follow): the resumed run's evals in metrics.jsonl.
    check "stop-resume-cluster the resumed run stops sooner than a fresh count could ($EV evals after step $FROM; deciding eval $GOT, uninterrupted $AT)" \
      sh -c "[ -n '$GOT' ] && [ '$EV' -ge 1 ] && [ '$EV' -le 4 ]"
  fi
done
