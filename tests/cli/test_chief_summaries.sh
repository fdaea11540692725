# test_chief_summaries.sh - the chief's TensorBoard summaries when the
# chief cannot see the run directory (issue 25): the coordinator writes
# events/chief/ from the chief's RESULTs. The chief is started (by the
# local launcher, through a $DROVER_LAUNCH_EXE wrapper) in a mount
# namespace where a tmpfs hides the directory that holds the runs, as a
# Spark executor or YARN container on another host would be. The run is
# sync with the chief as its only trainer (deterministic: every step is
# the chief's), so TensorBoard's reader must find in the hidden chief's
# events/chief/ the very scalars (tags, steps, values) of a chief that
# writes its own; and each run has one file there, by one writer.
# Only processes this test started are signalled, by pid (timeout ends
# each run).
. tests/cli/lib.sh
PY=${VENV:+$VENV/bin/python}
PY=${PY:-/usr/bin/python3}
if ! "$PY" -c "import tensorboard" 2>/dev/null; then
  echo "SKIP chiefsum: $PY has no tensorboard package (make venv installs it)"
  exit 0
fi
HIDE=$TMP/hidden
RUNS=$HIDE/runs
mkdir -p "$RUNS" "$TMP/keys"
why=$(bash tests/noshare/hide.sh check "$HIDE" "$TMP/keys" "$DROVER")
case $? in
  0) ;;
  1) echo "SKIP chiefsum: $why"; exit 0 ;;
  *) fail "chiefsum" "hide.sh check: $why"; exit 1 ;;
esac

# The node wrapper: the chief runs where $HIDE is an empty tmpfs
# (tests/noshare/hide.sh), its key file copied out first (the launcher put
# it in the run dir).
cat >"$TMP/node.sh" <<SH
#!/bin/sh
case " \$* " in
*" --role chief "*)
  k=\$(mktemp -p "$TMP/keys") && cp "\$DROVER_SECRET_FILE" "\$k" || exit 1
  DROVER_SECRET_FILE=\$k exec bash "$PWD/tests/noshare/hide.sh" exec "$HIDE" "$DROVER" "\$@" ;;
esac
exec "$DROVER" "\$@"
SH
chmod +x "$TMP/node.sh"

# arg[1] = runs, arg[2] = name
cat >"$TMP/fit.lua" <<'LUA'
local nn, optim = drover.nn, drover.optim
local runs, name = arg[1], arg[2]
drover.seed(3)
local data = drover.data.synthetic { n = 512, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4) }
local exp = drover.experiment { name = "cs", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 2 },
  verbose = false, seed = 5, mode = "sync" }
local c = drover.cluster { ps = 1, chief = 1, worker = 0, runs = runs, name = name }
local r = c:fit(exp)
print("steps " .. r.global_steps .. " run " .. c.run_dir)
c:shutdown()
LUA
run_of() { sed -n 's/^steps [0-9]* run //p' "$1"; }
files() { ls "$1/events/chief" 2>/dev/null | wc -l; }

# The chief's scalars as TensorBoard's reader gives them, against the
# run's metrics.jsonl (the chief is its only trainer: each of its lines is
# a chief's step) and, given a second run, against that run's on every
# step both have. A sync fit may run one step past its last (timing): the
# steps are each run's own. Prints "ok" or what differs.
cat >"$TMP/same.py" <<'PY'
import json, math, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
TAGS = {"train/loss": "loss", "train/accuracy": "accuracy"}
def scalars(run):
    ev = EventAccumulator(run + "/events/chief"); ev.Reload()
    assert set(ev.Tags()["scalars"]) == set(TAGS), ev.Tags()["scalars"]
    return {tag: {e.step: e.value for e in ev.Scalars(tag)} for tag in TAGS}
def check(run):
    tb = scalars(run)
    lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
    lines = [l for l in lines if "loss" in l]
    assert len(lines) >= 64, len(lines)
    for tag, key in TAGS.items():
        assert sorted(tb[tag]) == [l["step"] for l in lines], (run, tag, sorted(tb[tag]))
        for l in lines:
            assert math.isclose(tb[tag][l["step"]], l[key], rel_tol=1e-6), (run, tag, l)
    return tb
a = check(sys.argv[1])
if len(sys.argv) > 2:
    b = check(sys.argv[2])
    for tag in TAGS:
        both = sorted(set(a[tag]) & set(b[tag]))
        assert len(both) >= 64, both
        diff = [(s, a[tag][s], b[tag][s]) for s in both if a[tag][s] != b[tag][s]]
        assert not diff, (tag, diff[:3])
print("ok")
PY

# chiefsum-01: the reference, a chief that sees the run directory.
timeout 300 "$DROVER" run "$TMP/fit.lua" "$RUNS" ref >"$TMP/ref.out" 2>&1
REF=$(run_of "$TMP/ref.out")
check "chiefsum-01 the reference run trained" [ -n "$REF" ]
check "chiefsum-01 one file in events/chief/ ($(files "$REF"))" [ "$(files "$REF")" -eq 1 ]
check "chiefsum-01 the chief wrote it itself" grep -q "summaries: writing .*/events/chief/" "$REF/logs/chief-0.log"
check "chiefsum-01 the coordinator did not" \
  sh -c "! grep -q 'summaries: the chief' '$REF/events.log' '$REF/logs/coordinator.log'"
r=$("$PY" "$TMP/same.py" "$REF" 2>&1 | tail -1)
check "chiefsum-01 TensorBoard reads its train/loss and train/accuracy: metrics.jsonl's steps and values ($r)" \
  [ "$r" = ok ]

# chiefsum-02: the chief in a namespace where the runs are hidden.
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/fit.lua" "$RUNS" hid >"$TMP/hid.out" 2>&1
HID=$(run_of "$TMP/hid.out")
check "chiefsum-02 a fit whose chief cannot see the run directory trained" [ -n "$HID" ]
check "chiefsum-02 events.log says the coordinator writes the chief's summaries" \
  grep -q "summaries: the chief's through the coordinator (the run directory is not visible on its host)" "$HID/events.log"
check "chiefsum-02 the chief says it does not write them" \
  grep -q "summaries: the run directory is not visible here; the coordinator writes them" "$HID/logs/chief-0.log"
check "chiefsum-02 one file in events/chief/ ($(files "$HID"))" [ "$(files "$HID")" -eq 1 ]
r=$("$PY" "$TMP/same.py" "$HID" "$REF" 2>&1 | tail -1)
check "chiefsum-02 TensorBoard reads the reference's scalars: tags, steps, values ($r)" [ "$r" = ok ]
