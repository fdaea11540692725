# test_checkpoint.sh - in-process runs and their checkpoints, with real
# processes and files: keep and keep_best, exp:checkpoint(), unknown keys,
# SIGKILL and `drover run --resume` ending bit-identical to an uninterrupted
# run, a truncated, a bit-flipped and a manifest-less newest checkpoint
# (the previous one is used, the damaged one named), a full disk (a small
# tmpfs, root only) failing one checkpoint while training goes on, and
# `drover ls` saying "crashed (resumable from step N)".
. tests/cli/lib.sh
trap 'umount "$TMP/full" 2>/dev/null; rm -rf "$TMP"' EXIT
export TMP
RUNS=$TMP/runs

# The training script: arg[1] = final model, arg[2] = "slow" to be killed,
# arg[3] = runs directory, arg[4] = a progress hook file (dofile'd).
cat >"$TMP/train.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local out, slow, runs, hook = arg[1], arg[2] == "slow", arg[3], arg[4]
local h = hook and hook ~= "" and dofile(hook) or nil
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4) }
local exp = drover.experiment { name = "ck", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 3 },
  eval = { data = data, every = 8 }, verbose = false, seed = 5, runs = runs,
  checkpoint = { every = 8, keep = 3, keep_best = { metric = "eval_loss", mode = "max" } },
  progress = function(p)
    if slow and p.step % 8 == 0 then os.execute("sleep 0.05") end
    if h then h(p) end
  end }
local r = exp:fit()
print("steps " .. r.steps .. " run " .. exp:run_dir())
model:save(out)
EOF
sha() { sha256sum "$1" | cut -d' ' -f1; }

# ckpt-01: an uninterrupted run; keep = 3 and keep_best (the highest
# eval_loss, i.e. the first eval) leave exactly those four.
"$DROVER" run "$TMP/train.lua" "$TMP/ref.st" fast "$RUNS/ref" >"$TMP/ref.out" 2>&1
REF=$(ls -d "$RUNS"/ref/ck-*)
check "ckpt-01 the run trained 192 steps" grep -q "^steps 192 run $REF" "$TMP/ref.out"
check "ckpt-01 keep 3 + keep_best" [ "$(ls "$REF/checkpoints" | sort -t- -k2 -n | tr '\n' ' ')" = "step-8 step-176 step-184 step-192 " ]
for d in "$REF"/checkpoints/step-*; do
  [ -f "$d/manifest.json" ] && [ -f "$d/model.safetensors" ] && [ -f "$d/state.safetensors" ] || fail ckpt-01 "$d incomplete"
done
check "ckpt-01 run.lua is the script" cmp -s "$TMP/train.lua" "$REF/run.lua"
check "ckpt-01 metrics.jsonl and TensorBoard events" sh -c "[ \$(grep -c '\"step\"' '$REF/metrics.jsonl') -ge 192 ] && ls '$REF'/events/train/events.out.tfevents.* >/dev/null"
"$DROVER" ls "$RUNS/ref" >"$TMP/ls0" 2>&1
check "ckpt-01 drover ls: done, local, its last checkpoint" grep -q "^$(basename "$REF") *done *local .*step-192" "$TMP/ls0"

# ckpt-02: unknown keys in checkpoint = {} are refused, naming them.
cat >"$TMP/bad.lua" <<'EOF'
local nn = drover.nn
local function mk(ck)
  return drover.experiment { model = nn.Linear(2, 2), loss = nn.MSE(), optimizer = drover.optim.SGD {},
    train = { data = drover.data.synthetic { n = 8, features = 2, classes = 2 } }, checkpoint = ck }
end
for _, ck in ipairs { { evry = 5 }, { every = 5, keep_best = { metric = "loss", mod = "min" } },
                      { every = 5, keep_best = { metric = "loss", mode = "up" } } } do
  local ok, err = pcall(mk, ck)
  print(ok, err)
end
EOF
"$DROVER" run "$TMP/bad.lua" >"$TMP/bad.out" 2>&1
check "ckpt-02 an unknown checkpoint key is named" grep -q "false.*unknown field 'checkpoint.evry'" "$TMP/bad.out"
check "ckpt-02 an unknown keep_best key is named" grep -q "false.*unknown field 'checkpoint.keep_best.mod'" "$TMP/bad.out"
check "ckpt-02 a bad keep_best mode" grep -q 'false.*keep_best.mode must be "max" or "min"' "$TMP/bad.out"

# ckpt-03: exp:checkpoint() after a fit and during one (from progress).
cat >"$TMP/now.lua" <<'EOF'
local nn = drover.nn
local exp
exp = drover.experiment { name = "now", model = nn.Linear(4, 2), loss = nn.CrossEntropy(),
  optimizer = drover.optim.SGD { lr = 0.1 }, verbose = false, runs = arg[1],
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8 },
  progress = function(p) if p.step == 3 then assert(exp:checkpoint() == true) end end }
exp:fit()
print("path " .. exp:checkpoint())
EOF
"$DROVER" run "$TMP/now.lua" "$RUNS/now" >"$TMP/now.out" 2>&1
NOW=$(ls -d "$RUNS"/now/now-*)
check "ckpt-03 exp:checkpoint() returns the committed directory" grep -q "^path $NOW/checkpoints/step-8$" "$TMP/now.out"
check "ckpt-03 during a fit: taken at the end of that step" [ -f "$NOW/checkpoints/step-3/manifest.json" ] 

# ckpt-04: SIGKILL mid-fit, then --resume: bit-identical to the reference.
"$DROVER" run "$TMP/train.lua" "$TMP/res.st" slow "$RUNS/kill" >"$TMP/kill.out" 2>&1 &
pid=$!
KILL=
for _ in $(seq 100); do
  KILL=$(ls -d "$RUNS"/kill/ck-* 2>/dev/null)
  [ -n "$KILL" ] && [ -d "$KILL/checkpoints/step-40" ] && break
  sleep 0.1
done
kill -9 $pid; wait $pid 2>/dev/null
"$DROVER" ls "$RUNS/kill" >"$TMP/ls1" 2>&1
check "ckpt-04 drover ls: crashed (resumable from step N)" grep -q "crashed (resumable from step [0-9]*)" "$TMP/ls1"
check "ckpt-04 killed mid-fit" [ ! -f "$TMP/res.st" ]
"$DROVER" run --resume "$KILL" >"$TMP/resume.out" 2>&1
check "ckpt-04 the resumed run finished" grep -q "^steps 192 run $KILL" "$TMP/resume.out"
check "ckpt-04 resumed from a checkpoint" grep -q "fit 1: resuming from step" "$KILL/events.log"
check "ckpt-04 bit-identical to the uninterrupted run" [ "$(sha "$TMP/res.st")" = "$(sha "$TMP/ref.st")" ]
"$DROVER" ls "$RUNS/kill" >"$TMP/ls2" 2>&1
check "ckpt-04 drover ls: done after the resume" grep -q " done .*step-192" "$TMP/ls2"

# ckpt-05..07: the newest checkpoint damaged (truncated, one bit flipped,
# no manifest): --resume names it, uses the one before, ends bit-identical.
# The copy of the reference run is cut back to a run killed after its last
# checkpoint (events.log up to its fit's end): a finished run is not resumed.
damage() { # case how
  D=$TMP/$1; cp -r "$REF" "$D"; rm "$D"/checkpoints/step-8 -rf
  sed -i '/ fit done: /,$d' "$D/events.log"
  f=$D/checkpoints/step-192/model.safetensors
  case $2 in
    truncate) head -c 700 "$f" >"$f.x" && mv "$f.x" "$f" ;;
    flip) python3 -c "import sys;p=sys.argv[1];b=bytearray(open(p,'rb').read());b[-5]^=4;open(p,'wb').write(b)" "$f" ;;
    nomanifest) rm "$D/checkpoints/step-192/manifest.json" ;;
  esac
  "$DROVER" run --resume "$D" >"$TMP/$1.out" 2>&1
  check "$3 the resumed run finished" grep -q "^steps 192" "$TMP/$1.out"
  check "$3 resumed from step-184" grep -q "resuming from step 184" "$D/events.log"
  check "$3 bit-identical" [ "$(sha "$TMP/res.st")" = "$(sha "$TMP/ref.st")" ]
}
sed -i "s|^local out, slow|local out0, slow|; s|^local h = |local out = os.getenv('TMP') .. '/res.st'\nlocal h = |" "$TMP/train.lua" 2>/dev/null
cp "$TMP/train.lua" "$REF/run.lua"
rm -f "$TMP/res.st"
damage trunc truncate "ckpt-05 truncated:"
check "ckpt-05 the damaged checkpoint is named" grep -q "checkpoint step-192 is damaged.*truncated" "$TMP/trunc.out"
rm -f "$TMP/res.st"
damage flip flip "ckpt-06 bit-flipped:"
check "ckpt-06 the damaged checkpoint is named" grep -q "checkpoint step-192 is damaged.*sha256" "$TMP/flip.out"
rm -f "$TMP/res.st"
damage noman nomanifest "ckpt-07 manifest-less:"

# ckpt-08: a full disk (a small tmpfs, root only): the checkpoint at step
# 16 fails by name, step-8 stays, training goes on, step 24 succeeds once
# there is room again.
mkdir -p "$TMP/full"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=256k tmpfs "$TMP/full" 2>/dev/null; then
  echo "SKIP ckpt-08: mounting a tmpfs needs root"
else
  cat >"$TMP/hook.lua" <<'EOF'
local full = os.getenv("TMP") .. "/full"
return function(p)
  if p.step == 12 then -- leave about 12 KiB: room for the logs, not for a checkpoint
    os.execute("a=$(df -k --output=avail " .. full .. " | tail -n 1); " ..
      "dd if=/dev/zero of=" .. full .. "/filler bs=1k count=$((a - 12)) 2>/dev/null")
  elseif p.step == 20 then os.remove(full .. "/filler") end
end
EOF
  sed -i "s|^local out = os.getenv('TMP') .. '/res.st'|local out = arg[1]|" "$TMP/train.lua"
  "$DROVER" run "$TMP/train.lua" "$TMP/full.st" fast "$TMP/full/runs" "$TMP/hook.lua" >"$TMP/full.out" 2>&1
  FULL=$(ls -d "$TMP"/full/runs/ck-*)
  check "ckpt-08 training went on to the end" grep -q "^steps 192" "$TMP/full.out"
  check "ckpt-08 the failure names the file and the reason" grep -q "checkpoint at step 16 failed.*step-16.*No space left on device" "$TMP/full.out"
  check "ckpt-08 events.log says so" grep -q "checkpoint step-16 failed, training goes on" "$FULL/events.log"
  check "ckpt-08 no half checkpoint is left" [ ! -e "$FULL/checkpoints/step-16" ]
  check "ckpt-08 later checkpoints are taken" grep -q "checkpoint step-24 committed" "$FULL/events.log"
  umount "$TMP/full"
fi

# ckpt-09: a fit whose last step is not a multiple of `every` ends with a
# checkpoint of that step anyway: the newest checkpoint is the trained model.
cat >"$TMP/final.lua" <<'EOF2'
local nn = drover.nn
drover.seed(2)
local data = drover.data.synthetic { n = 100, features = 4, classes = 2, seed = 3 }
local model = nn.Sequential { nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2) }
local exp = drover.experiment { name = "final", model = model, loss = nn.CrossEntropy(),
  optimizer = drover.optim.Adam { lr = 0.01 }, verbose = false, runs = arg[1],
  train = { data = data, batch = 16, epochs = 2 }, eval = { data = data },
  checkpoint = { every = 5 } }
exp:fit()
model:save(arg[2])
print("again " .. exp:checkpoint())
EOF2
"$DROVER" run "$TMP/final.lua" "$RUNS/final" "$TMP/final.st" >"$TMP/final.out" 2>&1
FIN=$(ls -d "$RUNS"/final/final-*)
check "ckpt-09 every 5 over 14 steps: 5, 10 and the last, 14" [ "$(ls "$FIN/checkpoints" | sort -t- -k2 -n | tr '\n' ' ')" = "step-5 step-10 step-14 " ]
check "ckpt-09 the last checkpoint is the trained model" [ "$(sha "$FIN/checkpoints/step-14/model.safetensors")" = "$(sha "$TMP/final.st")" ]
check "ckpt-09 its manifest has the final eval" grep -q '"eval_accuracy": "0\.[0-9]' "$FIN/checkpoints/step-14/manifest.json"
check "ckpt-09 exp:checkpoint() after it returns that one" grep -q "^again $FIN/checkpoints/step-14$" "$TMP/final.out"

# ckpt-10..12: exp:save(dir) and drover.experiment.load(dir): a fit, a
# save, a load in another process and a second fit end bit-identical to
# two fits in one process (Adam's slots and count, Dropout's generator,
# the second fit's shuffling seed all come back).
cat >"$TMP/save.lua" <<'EOF2'
local nn = drover.nn
local mode, dir, out = arg[1], arg[2], arg[3]
drover.seed(3)
local data = drover.data.synthetic { n = 256, features = 8, classes = 3, seed = 1 }
local function mk()
  local model = nn.Sequential { nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3) }
  return drover.experiment { name = "sv", model = model, loss = nn.CrossEntropy(),
    optimizer = drover.optim.Adam { lr = 0.0123, betas = { 0.85, 0.995 } }, verbose = false,
    runs = false, train = { data = data, batch = 16, epochs = 2 }, eval = { data = data }, seed = 7 }
end
if mode == "whole" then
  local e = mk(); e:fit(); e:fit(); e.model:save(out)
elseif mode == "save" then
  local e = mk(); e:fit(); print("saved " .. e:save(dir))
elseif mode == "load" then
  local e = drover.experiment.load(dir, { train = { data = data }, eval = { data = data } })
  print(e.name, tostring(e.optimizer))
  print("steps " .. e:fit().steps); e.model:save(out)
else -- errors, one per line
  local function try(f) local ok, err = pcall(f); print(ok, err) end
  try(function() drover.experiment.load(dir .. "/nothere", { train = { data = data } }) end)
  try(function() drover.experiment.load(dir) end)
  try(function() drover.experiment.load(out, { train = { data = data } }) end)
  try(function() drover.experiment.load(arg[4], { train = { data = data } }) end)
end
EOF2
"$DROVER" run "$TMP/save.lua" whole - "$TMP/whole.st" >"$TMP/whole.out" 2>&1
"$DROVER" run "$TMP/save.lua" save "$TMP/saved" >"$TMP/save.out" 2>&1
check "ckpt-10 exp:save returns its directory" grep -q "^saved $TMP/saved$" "$TMP/save.out"
check "ckpt-10 model, state and a manifest with the description" sh -c "[ -f '$TMP/saved/model.safetensors' ] && [ -f '$TMP/saved/state.safetensors' ] && grep -q '\"format\": \"drover-experiment-1\"' '$TMP/saved/manifest.json'"
"$DROVER" run "$TMP/save.lua" load "$TMP/saved" "$TMP/loaded.st" >"$TMP/load.out" 2>&1
check "ckpt-10 the loaded experiment is the saved one" grep -q "^sv	optim.Adam { lr = 0.0123, beta1 = 0.85, beta2 = 0.995 }" "$TMP/load.out"
check "ckpt-10 it fits on" grep -q "^steps 32$" "$TMP/load.out"
check "ckpt-10 save, load, fit == two fits, bit for bit" [ "$(sha "$TMP/loaded.st")" = "$(sha "$TMP/whole.st")" ]
"$DROVER" run "$TMP/save.lua" save "$TMP/saved" >"$TMP/save2.out" 2>&1
check "ckpt-11 saving over a save replaces it" grep -q "^saved $TMP/saved$" "$TMP/save2.out"
cp -r "$TMP/saved" "$TMP/flipped"
python3 -c "import sys;p=sys.argv[1];b=bytearray(open(p,'rb').read());b[-5]^=4;open(p,'wb').write(b)" "$TMP/flipped/state.safetensors"
"$DROVER" run "$TMP/save.lua" errors "$TMP/saved" "$FIN/checkpoints/step-14" "$TMP/flipped" >"$TMP/lerr.out" 2>&1
check "ckpt-12 no such directory" grep -q "^false.*experiment: '$TMP/saved/nothere': No such file or directory" "$TMP/lerr.out"
check "ckpt-12 the data must be given, the saved one is named" grep -q "^false.*was trained on drover.dataset synthetic: 256 x 8.*train = { data = ds }" "$TMP/lerr.out"
check "ckpt-12 a checkpoint is not a saved experiment" grep -q "^false.*is not a saved experiment" "$TMP/lerr.out"
check "ckpt-12 a damaged save names the file" grep -q "^false.*state.safetensors.*sha256" "$TMP/lerr.out"

# export-01..06: `drover export RUN [--step N] -o FILE` writes the model of a
# checkpoint; errors say what is missing.
"$DROVER" export "$REF" -o "$TMP/x.st" >"$TMP/x.out" 2>&1
check "export-01 by default the newest checkpoint's model" sh -c "grep -q 'the model of step 192 of' '$TMP/x.out' && cmp -s '$TMP/x.st' '$REF/checkpoints/step-192/model.safetensors'"
"$DROVER" export "$(basename "$REF")" --runs "$RUNS/ref" --step 176 -o "$TMP/x.st" >"$TMP/x.out" 2>&1
check "export-02 a run by name, --step N" sh -c "grep -q 'the model of step 176 of' '$TMP/x.out' && cmp -s '$TMP/x.st' '$REF/checkpoints/step-176/model.safetensors'"
"$DROVER" export "$REF" --step 100 -o "$TMP/y.st" >"$TMP/x.out" 2>&1; rc=$?
check "export-03 a step it does not have: the steps it has" sh -c "[ $rc -eq 1 ] && grep -q 'has no checkpoint of step 100; it has steps 8, 176, 184, 192' '$TMP/x.out' && [ ! -e '$TMP/y.st' ]"
"$DROVER" export nope --runs "$RUNS/ref" -o "$TMP/y.st" >"$TMP/x.out" 2>&1; rc=$?
check "export-04 no such run" sh -c "[ $rc -eq 1 ] && grep -q \"no run 'nope' (not a directory, nor a run in '$RUNS/ref'\" '$TMP/x.out'"
mkdir -p "$TMP/empty-run"
"$DROVER" export "$TMP/empty-run" -o "$TMP/y.st" >"$TMP/x.out" 2>&1; rc=$?
check "export-04 a run without checkpoints" sh -c "[ $rc -eq 1 ] && grep -q 'has no checkpoint (checkpoint = { every = STEPS }' '$TMP/x.out'"
cp -r "$REF" "$TMP/dmg"
python3 -c "import sys;p=sys.argv[1];b=bytearray(open(p,'rb').read());b[-5]^=4;open(p,'wb').write(b)" "$TMP/dmg/checkpoints/step-192/model.safetensors"
"$DROVER" export "$TMP/dmg" -o "$TMP/x.st" >"$TMP/x.out" 2>&1
check "export-05 a damaged newest checkpoint is named and passed over" sh -c "grep -q 'checkpoint step-192 is damaged.*sha256' '$TMP/x.out' && grep -q 'the model of step 184 of' '$TMP/x.out' && cmp -s '$TMP/x.st' '$REF/checkpoints/step-184/model.safetensors'"
"$DROVER" export "$TMP/dmg" --step 192 -o "$TMP/y.st" >"$TMP/x.out" 2>&1; rc=$?
check "export-05 asked for by step, it is an error naming it" sh -c "[ $rc -eq 1 ] && grep -q 'checkpoint step-192 of run .* is damaged: .*model.safetensors.*sha256' '$TMP/x.out' && [ ! -e '$TMP/y.st' ]"
"$DROVER" export "$REF" >"$TMP/x.out" 2>&1; rc=$?
check "export-06 -o is needed (usage error)" sh -c "[ $rc -eq 2 ] && grep -q -- '-o FILE is needed' '$TMP/x.out'"
