# test_pyclient_pip.sh - the Python client installed with pip, as a PySpark
# user ships it: `pip install clients/python` from a clean checkout (the
# source tree without the _wire.py `make` writes) into a fresh virtual
# environment of Debian's python3 (its numpy, setuptools and wheel through
# --system-site-packages; --no-deps --no-build-isolation: nothing from PyPI),
# then, from elsewhere and without PYTHONPATH, imported and talking to a
# running cluster (test_pyclient.sh's scenario: its SNAPSHOT and metric
# stream against metrics.jsonl). Without the C headers the build stops
# saying how to get the message table. The run is ended by its pid.
. tests/cli/lib.sh
SYSPY=/usr/bin/python3
if ! "$SYSPY" -c "import venv, numpy, setuptools, wheel" 2>/dev/null; then
  echo "SKIP pyclient-pip: $SYSPY lacks venv, numpy, setuptools or wheel (sh tools/deps.sh test installs them)"
  exit 0
fi
unset PYTHONPATH

# A clean checkout: what git has of src/, tools/ and clients/python.
CO=$TMP/checkout
mkdir -p "$CO/clients"
cp -r src tools "$CO/"
cp -r clients/python "$CO/clients/"
rm -rf "$CO/clients/python/drover_client/_wire.py" "$CO/clients/python/build" \
  "$CO/clients/python/"*.egg-info
"$SYSPY" -m venv --system-site-packages "$TMP/venv"
PY=$TMP/venv/bin/python
"$TMP/venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
  "$CO/clients/python" >"$TMP/pip.out" 2>&1
check "pip-t01 pip installs clients/python from a clean checkout" \
  sh -c "cd '$TMP' && '$PY' -c 'import drover_client' 2>>'$TMP/pip.out'"
[ -s "$TMP/pip.out" ] && sed 's/^/  pip: /' "$TMP/pip.out" | tail -n 20
check "pip-t01 into the venv's site-packages, not from the source tree" \
  sh -c "cd '$TMP' && '$PY' -c 'import drover_client; print(drover_client.__file__)' | grep -q '^$TMP/venv/lib/'"
want=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' clients/python/drover_client/__init__.py)
check "pip-t01 its own version ($want), as pip knows it" \
  sh -c "'$TMP/venv/bin/pip' show drover_client 2>/dev/null | grep -qx 'Version: $want'"
check "pip-t01 the source tree gained no _wire.py" [ ! -e "$CO/clients/python/drover_client/_wire.py" ]

# Without drover's C headers (the package alone, no _wire.py): refused.
mkdir -p "$TMP/alone"
cp -r "$CO/clients/python" "$TMP/alone/"
rm -rf "$TMP/alone/python/build" "$TMP/alone/python/"*.egg-info
"$SYSPY" -m venv --system-site-packages "$TMP/venv2"
"$TMP/venv2/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
  "$TMP/alone/python" >"$TMP/pip2.out" 2>&1
check "pip-t02 without the C headers the build says how to get the message table" \
  grep -q "install from a drover source tree (pip install clients/python), or run .make." "$TMP/pip2.out"

# pip-t03: the installed client and a running cluster (lib.sh's trainer).
RUNS=$TMP/runs
trainer_start pip
check "pip-t03 the training run started" test -n "$RUN" -a -d "$RUN"
wait_for 30 test -s "$RUN/coordinator"
cat >"$TMP/live.py" <<'PY'
import json, os, sys, time
import drover_client as dc

run_dir = sys.argv[1]
def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))

with dc.connect(run_dir, timeout=20) as run:
    st = run.snapshot()
    result("pip-t03 attached: a SNAPSHOT of the training run",
           st["run_dir"].endswith(os.path.basename(run_dir)) and st["state"] == "training",
           (st["run_dir"], st["state"]))
    got, deadline = [], time.monotonic() + 60
    for m in run.metrics(timeout=20):
        if m.tag == "train/loss":
            got.append(m)
        if len(got) >= 20 or time.monotonic() > deadline:
            break
    loss = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j and "node" in j:
                loss[j["step"]] = j["loss"]
    bad = [(m.step, m.value) for m in got
           if abs(loss.get(int(m.step), float("inf")) - m.value) > 1e-6 * max(1, abs(m.value))]
    result("pip-t03 the metric stream is metrics.jsonl's losses", len(got) >= 20 and not bad,
           (len(got), bad[:5]))
PY
(cd "$TMP" && timeout 90 "$PY" "$TMP/live.py" "$RUN") || fail "pip-t03 the client ran" "exit $?"
