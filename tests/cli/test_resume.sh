# test_resume.sh - `drover run --resume` of a cluster run whose coordinator
# was SIGKILLed mid-fit (issue 12), with real processes on loopback: no
# node outlives the coordinator by 10 s, `drover ls` says "crashed
# (resumable from step N)", and the resumed run (the first fit skipped, the
# second continued from its newest checkpoint: parameters, optimizer
# slots, step, the worker's data position and Dropout generator) ends
# bit-identical to a run never interrupted: one worker, sync.
. tests/cli/lib.sh
RUNS=$TMP/runs

# arg[1] = the final model, arg[2] = "slow" to be killed, arg[3] = runs.
cat >"$TMP/cluster.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local out, slow, runs = arg[1], arg[2] == "slow", arg[3]
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4) }
local fit_no, slept = 0, -1
local exp = drover.experiment { name = "cr", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 2 },
  verbose = false, seed = 5, mode = "sync", checkpoint = { every = 16 },
  progress = function(p)
    if slow and fit_no == 2 and p.step % 4 == 0 and p.step ~= slept then
      slept = p.step
      os.execute("sleep 0.05")
    end
  end }
local c = drover.cluster { ps = 1, worker = 1, runs = runs, name = "cr" }
fit_no = 1
local r1 = c:fit(exp)
fit_no = 2
local r2 = c:fit(exp)
print("fits " .. r1.global_steps .. " " .. tostring(r1.skipped) .. " " .. r2.global_steps .. " run " .. c.run_dir)
c:save(out)
c:shutdown()
EOF
sha() { sha256sum "$1" | cut -d' ' -f1; }
# A process that is gone (or a zombie nobody reaped yet).
gone() { [ ! -d "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
all_gone() { for p in "$@"; do gone "$p" || return 1; done; }

# resume-01: the reference, never interrupted.
"$DROVER" run "$TMP/cluster.lua" "$TMP/ref.st" fast "$RUNS/ref" >"$TMP/ref.out" 2>&1
check "resume-01 the reference run trained both fits" grep -q "^fits 128 nil 128 run " "$TMP/ref.out"

# resume-02: the coordinator SIGKILLed in the second fit; its nodes go.
# A checkpoint committed in the second fit (events.log says so).
fit2_ckpt() {
  RUN=$(ls -d "$RUNS"/kill/cr-* 2>/dev/null)
  [ -n "$RUN" ] && awk '/ fit: sync/ { n++ } n == 2 && / checkpoint step [0-9]+: / { f = 1 }
    END { exit !f }' "$RUN/events.log"
}
"$DROVER" run "$TMP/cluster.lua" "$TMP/res.st" slow "$RUNS/kill" >"$TMP/kill.out" 2>&1 &
pid=$!
wait_for 60 fit2_ckpt
kill -9 $pid; wait $pid 2>/dev/null
PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log")
check "resume-02 the run had started its nodes" [ -n "$PIDS" ]
check "resume-02 no node outlives the coordinator by 10 s" wait_for 10 all_gone $PIDS
check "resume-02 killed mid-fit" [ ! -f "$TMP/res.st" ]
"$DROVER" ls "$RUNS/kill" >"$TMP/ls1" 2>&1
check "resume-02 drover ls: crashed (resumable from step N)" grep -q "crashed (resumable from step [0-9]*)" "$TMP/ls1"

# resume-03: --resume runs the script again in the same directory.
"$DROVER" run --resume "$RUN" >"$TMP/resume.out" 2>&1
check "resume-03 the resumed run finished, the first fit skipped" grep -q "^fits 0 true 128 run $RUN\$" "$TMP/resume.out"
check "resume-03 it continued the second fit from a checkpoint" grep -q "resuming fit 2 from step [1-9][0-9]* " "$RUN/events.log"
check "resume-03 the worker was rolled back" sh -c "! grep -q 'data goes on where it is' '$RUN/events.log'"
# The second fit's step directories are numbered after the first fit's
# steps (128 or 129: a task in flight when the last global step is applied
# runs too): its step N is step-(first + N), so the newest directory is
# newest.
FROM=$(sed -n 's/.*resuming fit 2 from step \([0-9]*\) (.*\/step-\([0-9]*\))$/\1 \2/p' "$RUN/events.log")
FIRST=$(awk '$2 == "fit" && $3 == "done:" { print $4; exit }' "$RUN/events.log")
check "resume-03 the second fit's checkpoints come after the first's" [ -n "$FIRST" -a "$(echo "$FROM" | awk '{ print $2 - $1 }')" = "$FIRST" ]
check "resume-03 bit-identical to the uninterrupted run" [ "$(sha "$TMP/res.st")" = "$(sha "$TMP/ref.st")" ]
"$DROVER" ls "$RUNS/kill" >"$TMP/ls2" 2>&1
check "resume-03 drover ls: done after the resume" grep -q "^$(basename "$RUN") *done " "$TMP/ls2"

# resume-04: a run directory without its script is refused, saying why.
mkdir -p "$TMP/bare"
"$DROVER" run --resume "$TMP/bare" >"$TMP/bare.out" 2>&1
check "resume-04 no run.json: refused" grep -q "cannot resume .*run.json is missing" "$TMP/bare.out"

# resume-05: ps:0 dies when the coordinator's PULL of the trained values
# arrives at the end of the first fit (DROVER_FAULT, once): the
# coordinator notices the loss only while it waits for that reply. It used
# to wait for ever; now ps:0 is restored from the checkpoint, the steps
# since run again, and the run ends bit-identical to the reference.
DROVER_FAULT=die:ps:0:coord-pull DROVER_FAULT_ONCE="$TMP/die-once" \
  timeout 240 "$DROVER" run "$TMP/cluster.lua" "$TMP/pull.st" fast "$RUNS/pull" >"$TMP/pull.out" 2>&1
PRUN=$(ls -d "$RUNS"/pull/cr-* 2>/dev/null)
check "resume-05 ps:0 died at the coordinator's PULL" [ -f "$TMP/die-once" ]
check "resume-05 the fit went on after the restore" grep -q "was lost before it sent PULL_REPLY as the fit ended" "$PRUN/events.log"
check "resume-05 both fits trained in full" grep -q "^fits 128 nil 128 run " "$TMP/pull.out"
check "resume-05 bit-identical to the uninterrupted run" [ "$(sha "$TMP/pull.st")" = "$(sha "$TMP/ref.st")" ]

# resume-06: a plateau schedule's state (scale, best, bad evals) is in the
# cluster checkpoints; --resume takes it back and tells the ps the scale.
cat >"$TMP/plateau.lua" <<'LUA'
local nn, optim = drover.nn, drover.optim
local runs, slow = arg[1], arg[2] == "slow"
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local train, held = data:split(0.8, { seed = 1 })
local exp = drover.experiment { name = "pl", model = nn.Sequential { nn.Linear(16, 4) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 1e-6, schedule =
    optim.schedule.plateau { patience = 1, factor = 0.5, threshold = 0.01 } },
  train = { data = train, batch = 16, epochs = 2 }, eval = { data = held, every = 4 },
  verbose = false, seed = 5, checkpoint = { every = 4 },
  progress = function() if slow then os.execute("sleep 0.02") end end }
local c = drover.cluster { ps = 1, worker = 1, runs = runs, name = "pl" }
local r = c:fit(exp)
print("done " .. r.steps .. " " .. c.run_dir)
c:shutdown()
LUA
# A checkpoint committed after a reduction (its manifest has scale < 1).
reduced_ckpt() {
  PRUN=$(ls -d "$RUNS"/plateau/pl-* 2>/dev/null)
  [ -n "$PRUN" ] && awk '/plateau: learning rate scaled by/ { r = 1 } r && / checkpoint step [0-9]+: / { f = 1 }
    END { exit !f }' "$PRUN/events.log"
}
"$DROVER" run "$TMP/plateau.lua" "$RUNS/plateau" slow >"$TMP/plateau.out" 2>&1 &
pid=$!
wait_for 60 reduced_ckpt
kill -9 $pid; wait $pid 2>/dev/null
check "resume-06 killed after a reduction was checkpointed" reduced_ckpt
timeout 120 "$DROVER" run --resume "$PRUN" >"$TMP/plateau-resume.out" 2>&1
FROM=$(sed -n 's/.*resuming fit 1 from step \([0-9]*\) .*/\1/p' "$PRUN/events.log")
check "resume-06 the resumed run finished" grep -q "^done 104 " "$TMP/plateau-resume.out"
check "resume-06 the checkpoint has the plateau state" \
  grep -q '"optim_plateau": *"0x1p-[0-9]* ' "$PRUN/checkpoints/step-$FROM/manifest.json"
check "resume-06 --resume took it back (a reduced scale)" \
  grep -q "plateau state from step $FROM: rate scale 0\.[0-9]*, best" "$PRUN/events.log"
