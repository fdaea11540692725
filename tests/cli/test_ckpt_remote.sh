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
# coordinator and the fit ends bit-identical; the file streams in pieces as
# the ps encodes it; a coordinator SIGKILLed and
# `drover run --resume` ends bit-identical to an uninterrupted run; a ps
# announcing a wrong digest fails that checkpoint only; a peer that is not
# the coordinator sending a checkpoint piece to a ps is refused; with
# ps_replicas = 1 (both hidden) the primary SIGKILLed after a checkpoint:
# its replica takes over and the checkpoints after that still go through
# the coordinator.
# Only processes this test started are signalled, by pid.
. tests/cli/lib.sh
HIDE=$TMP/hidden
RUNS=$HIDE/runs
mkdir -p "$RUNS" "$TMP/keys"
PY=$VENV/bin/python

# The node wrapper: a ps gets its own mount namespace with $HIDE covered
# (its key file copied out first: the launcher put it in the run dir).
# Nodes remove their key file once read: rc-05's hand-made peer uses the
# copies kept here as each node starts.
mkdir -p "$TMP/stolen"
cat >"$TMP/node.sh" <<SH
#!/bin/sh
prev=
for a do case \$prev in --role) role=\$a ;; --index) index=\$a ;; esac; prev=\$a; done
cp -p "\$DROVER_SECRET_FILE" "$TMP/stolen/\$role-\$index.key"
case " \$* " in
*" --role ps "*)
  k=\$(mktemp -p "$TMP/keys") && cp "\$DROVER_SECRET_FILE" "\$k" || exit 1
  DROVER_SECRET_FILE=\$k exec unshare -m sh -c 'mount -t tmpfs tmpfs "\$0" && exec "\$@"' \
    "$HIDE" "$DROVER" "\$@" ;;
esac
exec "$DROVER" "\$@"
SH
chmod +x "$TMP/node.sh"

# arg[1] = final model, arg[2] = "slow", arg[3] = runs, arg[4] = name,
# arg[5] = "repl" for ps_replicas = 1
cat >"$TMP/fit.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local out, slow, runs, name = arg[1], arg[2] == "slow", arg[3], arg[4]
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4) }
local c
local count = dofile("tests/cli/ckpt_committed.lua")
local function committed() return count(c and c.run_dir) end
local fours = 0
local exp = drover.experiment { name = "rc", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 2 },
  verbose = false, seed = 5, mode = "sync", checkpoint = { every = 16, keep = 100 },
  progress = function(p)
    -- once per 4 steps passed: a turn of the loop may take in several
    local k = p.step // 4
    if k <= fours then return end
    fours = k
    if slow then os.execute("sleep 0.05") end
    -- rc-02 wants several checkpoints through the coordinator: a fast fit
    -- on a loaded machine once committed 1 (one is skipped while another
    -- is out), so it pauses every 4 steps until 2 are
    if name == "hid" and committed() < 2 then os.execute("sleep 0.2") end
  end }
c = drover.cluster { ps = 1, worker = 1, runs = runs, name = name,
  ps_replicas = arg[5] == "repl" and 1 or 0 }
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
check "rc-02 several checkpoints were taken (how many depends on timing and load)" [ "$(ls "$HID/checkpoints" | wc -l)" -ge 2 ]
# The steps a sync checkpoint lands on depend on timing, and a fit's last
# one may hold one version more than its step: the checkpoints both runs
# have of the same step and version are compared (at least one).
version() { grep -o '"version": "[0-9]*"' "$1/manifest.json"; }
# same_files RUN_A RUN_B: how many such pairs, all bit-identical (else -1)
same_files() {
  n=0
  for d in "$1"/checkpoints/step-*; do
    e=$2/checkpoints/$(basename "$d")
    [ -f "$e/manifest.json" ] && [ "$(version "$d")" = "$(version "$e")" ] || continue
    cmp -s "$d/ps-0.safetensors" "$e/ps-0.safetensors" || { echo -1; return; }
    grep -q "\"$(sha "$e/ps-0.safetensors")\"" "$d/manifest.json" || { echo -1; return; }
    n=$((n + 1))
  done
  echo $n
}
same=$(same_files "$REF" "$HID")
check "rc-02 bit-identical to the files the ps wrote itself, same manifest sha256 ($same compared)" [ "$same" -ge 1 ]
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
same=$(same_files "$REF" "$VIA")
check "rc-03 its files are the reference's ($same compared)" [ "$same" -ge 1 ]

# rc-08: the ps streams its file as it encodes it: in 1 KiB pieces, the
# first is on the socket before the last is encoded, and the files are
# still the reference's.
DROVER_REPL_PIECE=1024 DROVER_CKPT_VIA_COORD=1 timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/pipe.st" fast "$RUNS" pipe >"$TMP/pipe.out" 2>&1
PIPE=$(run_of "$TMP/pipe.out")
# The "first queued" and "last encoded" times of each file of several pieces.
pipelined() {
  sed -n 's/.*streamed: [0-9]* bytes in \([0-9]*\) pieces, the first queued after \([0-9.]*\) ms, the last encoded after \([0-9.]*\) ms/\1 \2 \3/p' \
    "$PIPE/logs/ps-0.log" | awk '$1 > 2 { n++; if ($2 >= $3) bad++ } END { exit !(n > 0 && !bad) }'
}
check "rc-08 each file's first piece left before its last was encoded" pipelined
same=$(same_files "$REF" "$PIPE")
check "rc-08 its files are the reference's ($same compared)" [ "$same" -ge 1 ]
check "rc-08 the final parameters are the reference's" [ "$(sha "$TMP/pipe.st")" = "$(sha "$TMP/ref.st")" ]

# rc-04: a wrong digest from the ps fails that checkpoint only.
DROVER_FAULT=ckpt-bad-digest:ps:0 DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/bad.st" fast "$RUNS" bad >"$TMP/bad.out" 2>&1
BAD=$(run_of "$TMP/bad.out")
check "rc-04 the fit went on to its end" [ "$(sha "$TMP/bad.st")" = "$(sha "$TMP/ref.st")" ]
check "rc-04 the checkpoints failed, saying why" grep -q "checkpoint step [0-9]* failed: ps:0: its file did not come whole: its bytes do not have the SHA-256 announced" "$BAD/events.log"
check "rc-04 no directory of a failed checkpoint is left" [ -z "$(ls "$BAD/checkpoints" 2>/dev/null)" ]

# A checkpoint committed in run $1 (events.log says so).
committed() { grep -q " checkpoint step [0-9]*: " "$1/events.log" 2>/dev/null; }
new_run() { ls -d "$RUNS"/$1-* 2>/dev/null; }
gone() { [ ! -d "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

# rc-05: the hidden ps SIGKILLed mid-fit, restarted hidden again: it is
# restored from the newest checkpoint through the coordinator, the fit
# ends, bit-identical to the reference. A hand-made peer meanwhile: a
# worker's key sending a checkpoint piece to the ps is closed at the
# header; the coordinator's key sending a piece without its CKPT_FILE is
# refused, and only that connection goes.
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/fo.st" slow "$RUNS" fo >"$TMP/fo.out" 2>&1 &
fo=$!
kill_at_exit $fo
wait_for 60 sh -c "[ -n \"\$(ls -d '$RUNS'/fo-* 2>/dev/null)\" ]"
FO=$(new_run fo)
wait_for 60 committed "$FO"
ps_pid=$(sed -n 's/.* node start ps:0 pid \([0-9]*\).*/\1/p' "$FO/events.log" | head -1)
ps_port=$(sed -n 's/.* ps:0 .*pid [0-9]* host [0-9.]* port \([0-9]*\).*/\1/p' "$FO/events.log" | head -1)
W=$TMP/stolen/worker-0.key
if [ -x "$PY" ] && [ -n "$ps_port" ]; then
  raw() { timeout 20 "$PY" tests/cli/rawpeer.py "$@" 2>&1; }
  check "rc-05 a worker's CKPT_PIECE to the ps is closed at its header" \
    [ "$(raw 127.0.0.1:$ps_port "$W#ps.0" 0 2 0 80 16 00000000000000000400000001020304)" = closed ]
  check "rc-05 the coordinator's key: a CKPT_PIECE without CKPT_FILE is refused" \
    [ "$(raw 127.0.0.1:$ps_port "$TMP/stolen/ps-0.key#all" 0 4 0 80 16 00000000000000000400000001020304)" = closed ]
else
  fail "rc-05 hand-made peer" "no python ($PY) or no ps port ($ps_port)"
fi
check "rc-05 the ps had started" [ -n "$ps_pid" ]
kill -9 "$ps_pid"
wait $fo
FO_RC=$?
check "rc-05 the run ended well ($FO_RC)" [ $FO_RC -eq 0 ]
check "rc-05 ps:0 was restored from a checkpoint" grep -q "restoring from step [1-9][0-9]* " "$FO/events.log"
check "rc-05 through the coordinator (the restarted ps's log)" \
  grep -q "checkpoint file .*ps-0.safetensors came from the coordinator" "$FO/logs/ps-0.log"
check "rc-05 the refused piece is in the ps's log" grep -q "CKPT_PIECE without a CKPT_FILE before it" "$FO/logs/ps-0.log"
check "rc-05 bit-identical to the reference" [ "$(sha "$TMP/fo.st")" = "$(sha "$TMP/ref.st")" ]

# rc-06: the coordinator SIGKILLed mid-fit; --resume (the ps hidden again)
# ends bit-identical to the reference.
DROVER_LAUNCH_EXE=$TMP/node.sh "$DROVER" run "$TMP/fit.lua" "$TMP/res.st" slow "$RUNS" kl >"$TMP/kl.out" 2>&1 &
kl=$!
kill_at_exit $kl
wait_for 60 sh -c "[ -n \"\$(ls -d '$RUNS'/kl-* 2>/dev/null)\" ]"
KL=$(new_run kl)
wait_for 60 committed "$KL"
kill -9 $kl; wait $kl 2>/dev/null
NP=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$KL/events.log")
for p in $NP; do wait_for 15 gone "$p"; done
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run --resume "$KL" >"$TMP/kl2.out" 2>&1
check "rc-06 the resumed run finished" grep -q "^steps 128 run $KL\$" "$TMP/kl2.out"
check "rc-06 it resumed from a checkpoint" grep -q "resuming fit 1 from step [1-9][0-9]* " "$KL/events.log"
check "rc-06 bit-identical to the uninterrupted run" [ "$(sha "$TMP/res.st")" = "$(sha "$TMP/ref.st")" ]

# rc-07: ps_replicas = 1, primary and replica hidden: a checkpoint, then
# the primary SIGKILLed; the replica takes over (no rollback) and the
# checkpoints after that go through the coordinator; the fit ends
# bit-identical to the reference (sync: no update lost).
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$TMP/rp.st" slow "$RUNS" rp repl >"$TMP/rp.out" 2>&1 &
rp=$!
kill_at_exit $rp
wait_for 60 sh -c "[ -n \"\$(ls -d '$RUNS'/rp-* 2>/dev/null)\" ]"
RP=$(new_run rp)
wait_for 60 committed "$RP"
prim=$(sed -n 's/.* node start ps:0 pid \([0-9]*\).*/\1/p' "$RP/events.log" | head -1)
check "rc-07 the primary had started" [ -n "$prim" ]
[ -n "$prim" ] && kill -9 "$prim"
wait $rp
RP_RC=$?
check "rc-07 the run ended well ($RP_RC)" [ $RP_RC -eq 0 ]
check "rc-07 the group goes through the coordinator" \
  grep -q "checkpoints: ps:0 through the coordinator (the run directory is not visible on its host)" "$RP/events.log"
check "rc-07 the replica was promoted" grep -q "replica ps:1 promoted in place of ps:0" "$RP/events.log"
check "rc-07 no rollback from a checkpoint" sh -c "! grep -q 'restoring from step' '$RP/events.log'"
after=$(awk '/promoted in place of/ { p = 1 } p && / checkpoint step [0-9]*: / { n++ } END { print n + 0 }' "$RP/events.log")
check "rc-07 checkpoints after the promotion were committed ($after)" [ "$after" -ge 1 ]
check "rc-07 none failed" sh -c "! grep -q 'checkpoint.*failed' '$RP/events.log'"
check "rc-07 bit-identical to the reference" [ "$(sha "$TMP/rp.st")" = "$(sha "$TMP/ref.st")" ]
