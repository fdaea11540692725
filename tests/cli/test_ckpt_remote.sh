# test_ckpt_remote.sh - cluster checkpoints when a ps cannot see the run
# directory (issue 25, item 1): its file travels to the coordinator, and
# back for a restore, over its data connection. The ps is started (by the
# local launcher, through a $DROVER_LAUNCH_EXE wrapper) in a mount
# namespace where a tmpfs hides the directory that holds the runs, as a
# Spark executor or YARN container on another host would be. Cases: the
# files exist, their manifest sha256s are sha256sum's, PyTorch's
# safetensors reader loads them, and they are bit-identical to a ps that
# writes them itself (sync, one worker); DROVER_CKPT_VIA_COORD=1 forces
# the way; a hidden ps SIGKILLed mid-fit is restored through the
# coordinator and the fit ends bit-identical; a coordinator SIGKILLed and
# `drover run --resume` ends bit-identical to an uninterrupted run; a ps
# announcing a wrong digest fails that checkpoint only; a peer that is not
# the coordinator sending a checkpoint piece to a ps is refused.
# Only processes this test started are signalled, by pid.
. tests/cli/lib.sh
HIDE=$TMP/hidden
RUNS=$HIDE/runs
mkdir -p "$RUNS" "$TMP/keys"
PY=$VENV/bin/python

# The node wrapper: a ps gets its own mount namespace with $HIDE covered
# (its key file copied out first: the launcher put it in the run dir).
cat >"$TMP/node.sh" <<SH
#!/bin/sh
case " \$* " in
*" --role ps "*)
  k=\$(mktemp -p "$TMP/keys") && cp "\$DROVER_SECRET_FILE" "\$k" || exit 1
  DROVER_SECRET_FILE=\$k exec unshare -m sh -c 'mount -t tmpfs tmpfs "\$0" && exec "\$@"' \
    "$HIDE" "$DROVER" "\$@" ;;
esac
exec "$DROVER" "\$@"
SH
chmod +x "$TMP/node.sh"

# arg[1] = final model, arg[2] = "slow", arg[3] = runs, arg[4] = name
cat >"$TMP/fit.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local out, slow, runs, name = arg[1], arg[2] == "slow", arg[3], arg[4]
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4) }
local exp = drover.experiment { name = "rc", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 2 },
  verbose = false, seed = 5, mode = "sync", checkpoint = { every = 16, keep = 100 },
  progress = function(p) if slow and p.step % 4 == 0 then os.execute("sleep 0.05") end end }
local c = drover.cluster { ps = 1, worker = 1, runs = runs, name = name }
local r = c:fit(exp)
print("steps " .. r.global_steps .. " run " .. c.run_dir)
c:save(out)
c:shutdown()
EOF
sha() { sha256sum "$1" | cut -d' ' -f1; }
run_of() { sed -n 's/^steps [0-9]* run //p' "$1"; }
# Every ps file of run $1's checkpoints against its manifest's sha256.
manifest_ok() {
  for d in "$1"/checkpoints/step-*; do
    f=$d/ps-0.safetensors
    [ -f "$f" ] || return 1
    grep -q "\"$(sha "$f")\"" "$d/manifest.json" || return 1
  done
}

# rc-01: the reference, ps writing the run directory itself.
timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/ref.st" fast "$RUNS" ref >"$TMP/ref.out" 2>&1
REF=$(run_of "$TMP/ref.out")
check "rc-01 the reference run trained" [ -n "$REF" ]
check "rc-01 its ps writes the run directory" grep -q "checkpoints: ps:0 writes the run directory" "$REF/events.log"

# rc-02: the ps in a namespace where the runs are hidden.
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/hid.st" fast "$RUNS" hid >"$TMP/hid.out" 2>&1
HID=$(run_of "$TMP/hid.out")
check "rc-02 a fit whose ps cannot see the run directory trained" [ -n "$HID" ]
check "rc-02 events.log says its files go through the coordinator" \
  grep -q "checkpoints: ps:0 through the coordinator (the run directory is not visible on its host)" "$HID/events.log"
check "rc-02 no checkpoint failed" sh -c "! grep -q 'checkpoint.*failed' '$HID/events.log'"
check "rc-02 every checkpoint's ps file is there, as its manifest says" manifest_ok "$HID"
check "rc-02 several checkpoints were taken" [ "$(ls "$HID/checkpoints" | wc -l)" -ge 4 ]
# The steps a sync checkpoint lands on depend on timing: those both runs
# have (the fit's last one at least) are compared.
same=0
for d in "$REF"/checkpoints/step-*; do
  h=$HID/checkpoints/$(basename "$d")/ps-0.safetensors
  [ -f "$h" ] || continue
  if cmp -s "$d/ps-0.safetensors" "$h"; then same=$((same + 1)); else same=-999; fi
done
check "rc-02 bit-identical to the files the ps wrote itself ($same compared)" [ $same -ge 1 ]
check "rc-02 the manifest's sha256 of the last one is the reference's" \
  [ "$(grep -o '[0-9a-f]\{64\}' "$HID/checkpoints/step-128/manifest.json")" = "$(grep -o '[0-9a-f]\{64\}' "$REF/checkpoints/step-128/manifest.json")" ]
check "rc-02 the final parameters are the reference's" [ "$(sha "$TMP/hid.st")" = "$(sha "$TMP/ref.st")" ]
last=$(ls -d "$HID"/checkpoints/step-* | sort -t- -k2 -n | tail -1)
check "rc-02 PyTorch's safetensors reader loads it" "$PY" -c "
import sys, safetensors.torch as st
t = st.load_file(sys.argv[1]); assert len(t) >= 4, t.keys()
from safetensors import safe_open
with safe_open(sys.argv[1], 'pt') as f: assert 'version' in f.metadata()" "$last/ps-0.safetensors"

# rc-03: DROVER_CKPT_VIA_COORD=1 forces the way for a ps that could write.
DROVER_CKPT_VIA_COORD=1 timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/via.st" fast "$RUNS" via >"$TMP/via.out" 2>&1
VIA=$(run_of "$TMP/via.out")
check "rc-03 forced through the coordinator, said so" grep -q "checkpoints: ps:0 through the coordinator (DROVER_CKPT_VIA_COORD=1)" "$VIA/events.log"
check "rc-03 its files are the reference's" cmp -s "$VIA/checkpoints/step-128/ps-0.safetensors" "$REF/checkpoints/step-128/ps-0.safetensors"

# rc-04: a wrong digest from the ps fails that checkpoint only.
DROVER_FAULT=ckpt-bad-digest:ps:0 DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/bad.st" fast "$RUNS" bad >"$TMP/bad.out" 2>&1
BAD=$(run_of "$TMP/bad.out")
check "rc-04 the fit went on to its end" [ "$(sha "$TMP/bad.st")" = "$(sha "$TMP/ref.st")" ]
check "rc-04 the checkpoints failed, saying why" grep -q "checkpoint step [0-9]* failed: ps:0: its file did not come whole: its bytes do not have the SHA-256 announced" "$BAD/events.log"
check "rc-04 no directory of a failed checkpoint is left" [ -z "$(ls "$BAD/checkpoints" 2>/dev/null)" ]
