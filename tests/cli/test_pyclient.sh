# test_pyclient.sh - the Python client (clients/python) against a real
# cluster on loopback: a 1 ps + 2 worker run trains (throttled) until this
# test says stop; Python attaches through the run directory and through
# HOST:PORT with the secret file, reads the metric stream (checked against
# the run's metrics.jsonl), is refused with a wrong or readable secret and
# for a command from a read-only client, and sees the stream end with the
# run. Every wait is bounded; the run is ended by its pid.
. tests/cli/lib.sh
python_client pyclient
RUNS=$TMP/runs
mkdir -p "$RUNS"

# A cluster that trains (throttled) until $RUNS/stop-py exists (lib.sh).
trainer_start py
check "pyclient-t00 the training run started" test -n "$RUN" -a -d "$RUN"
wait_for 30 test -s "$RUN/coordinator"

cat > "$TMP/live.py" <<'PY'
import json, os, sys, time
import drover_client as dc

run_dir, tmp = sys.argv[1], sys.argv[2]
def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))

# t01: attach through the run directory; the run's header and nodes
with dc.connect(run_dir, timeout=20) as run:
    st = run.snapshot()
    names = sorted(n["name"] for n in run.nodes)
    result("pyclient-t01 a SNAPSHOT names the run", st["run_dir"].endswith(os.path.basename(run_dir)),
           st["run_dir"])
    result("pyclient-t01 the run is training", st["state"] == "training", st["state"])
    result("pyclient-t01 its nodes", names == ["ps:0", "worker:0", "worker:1"], names)

    # t02: the metric stream: train/loss points with growing steps, the
    # losses metrics.jsonl has for those steps
    got, deadline = [], time.monotonic() + 60
    for m in run.metrics(timeout=20):
        if m.tag == "train/loss":
            got.append(m)
        if len(got) >= 40 or time.monotonic() > deadline:
            break
    steps = [m.step for m in got]
    result("pyclient-t02 40 train/loss points came", len(got) >= 40, len(got))
    result("pyclient-t02 their steps grow", steps == sorted(set(steps)), steps[:50])
    loss = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j and "step" in j and "node" in j:
                loss[j["step"]] = j["loss"]
    bad = [(m.step, m.value, loss.get(int(m.step))) for m in got
           if int(m.step) not in loss or abs(loss[int(m.step)] - m.value) > 1e-6 * max(1, abs(m.value))]
    result("pyclient-t02 they are metrics.jsonl's losses", not bad, bad[:5])
    kept = [m.step for m in run.series.get("train/loss", [])]
    result("pyclient-t02 run.series keeps them", set(steps) <= set(kept), kept[-5:])
    # A node's links travel when they change ("" in the snapshots after):
    # snapshots later the client still has each, the coordinator's link
    # first and a worker's to ps:0 after it (reported by its next heartbeat).
    def links():
        return {n["name"]: n["links"] for n in run.nodes}
    deadline = time.monotonic() + 20
    while ",ps:0=" not in links().get("worker:0", "") and time.monotonic() < deadline:
        run.snapshot()
    for _ in range(3):
        run.snapshot()
    links = links()
    result("pyclient-t02 each node's links are kept across snapshots",
           all(v.startswith("coord=") for v in links.values()) and
           ",ps:0=" in links.get("worker:0", ""), links)

    # t05: a read-only client's Lua command is refused; a log tail is not
    try:
        run.command("return 1")
        result("pyclient-t05 a read-only client's command is refused", False, "accepted")
    except dc.DroverError as e:
        result("pyclient-t05 a read-only client's command is refused",
               "read-only" in str(e) and e.code_name == "DRV_EPERM", (e, e.code))
    tail = run.command("worker:0", kind="LOG_TAIL")
    result("pyclient-t05 the log tail of worker:0", "worker:0 I setup:" in tail, tail[-300:])

# t03: HOST:PORT and the secret file
with open(os.path.join(run_dir, "coordinator")) as f:
    addr = f.read().split()[0]
with dc.connect(addr, secret_file=os.path.join(run_dir, "view.key"), timeout=20) as run:
    st = run.snapshot()
    result("pyclient-t03 HOST:PORT with the secret file", st["state"] == "training", st)
try:
    dc.connect(addr)
    result("pyclient-t03 HOST:PORT alone is refused", False, "accepted")
except dc.DroverError as e:
    result("pyclient-t03 HOST:PORT alone is refused", "secret_file" in str(e), e)

# t04: a wrong secret, a secret others may read
wrong = os.path.join(tmp, "wrong")
with open(wrong, "w") as f:
    f.write("ab" * 32 + "\n")
os.chmod(wrong, 0o600)
try:
    dc.connect(addr, secret_file=wrong, timeout=20)
    result("pyclient-t04 a wrong secret is refused", False, "accepted")
except dc.AuthError as e:
    result("pyclient-t04 a wrong secret is refused", "secret" in str(e), e)
os.chmod(wrong, 0o644)
try:
    dc.connect(addr, secret_file=wrong, timeout=20)
    result("pyclient-t04 a readable secret file is refused", False, "accepted")
except dc.AuthError as e:
    result("pyclient-t04 a readable secret file is refused", "chmod 600" in str(e), e)
with dc.connect(run_dir, timeout=20) as run:
    result("pyclient-t04 the run still serves clients", run.snapshot()["state"] == "training")

# t06: the stream ends with the run
with dc.connect(run_dir, timeout=20) as run:
    run.snapshot()
    open(os.path.join(os.path.dirname(run_dir), "stop-py"), "w").close()
    n = sum(1 for _ in run.metrics(timeout=60))
    result("pyclient-t06 the stream ends when the run does", run.ended, "not ended")
PY
timeout 150 "$PY" "$TMP/live.py" "$RUN" "$TMP"
check "pyclient-t06 the run ended" wait_for 30 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "pyclient-t06 the trainer exited 0" test $? -eq 0
cat > "$TMP/ended.py" <<'PY'
import sys
import drover_client as dc
try:
    dc.connect(sys.argv[1])
    print("FAIL pyclient-t07 an ended run is refused: accepted")
except dc.DroverError as e:
    print(("PASS pyclient-t07 an ended run is refused" if "not running" in str(e)
           else "FAIL pyclient-t07 an ended run is refused: %s" % e))
PY
"$PY" "$TMP/ended.py" "$RUN"
