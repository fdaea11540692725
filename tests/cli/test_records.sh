#!/bin/sh
# test_records.sh - a run directory on a full disk (a small tmpfs, root
# only): no record is half-written, the first failure is said on stderr and
# in events.log, and the run's exit status says records were lost.
. tests/cli/lib.sh
trap 'umount "$TMP/full" 2>/dev/null; rm -rf "$TMP"' EXIT

cat >"$TMP/fit.lua" <<'EOF'
local nn, optim, data = drover.nn, drover.optim, drover.data
local d = data.synthetic { n = 64, features = 4, classes = 2 }
local e = drover.experiment { name = "full", model = nn.Sequential { nn.Linear(4, 2) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
  train = { data = d, batch = 1, epochs = 40 }, verbose = false, runs = arg[1] }
print("steps " .. e:fit().steps)
EOF
cat >"$TMP/cluster.lua" <<'EOF'
local nn, optim, data = drover.nn, drover.optim, drover.data
local d = data.synthetic { n = 64, features = 4, classes = 2 }
local e = drover.experiment { name = "full", model = nn.Sequential { nn.Linear(4, 2) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
  train = { data = d, batch = 1, epochs = 40 }, verbose = false }
local c <close> = drover.cluster { ps = 1, worker = 1, runs = arg[1], name = "full" }
print("steps " .. c:fit(e).steps)
c:shutdown()
EOF

# Every line of a metrics.jsonl is whole JSON.
whole_lines() { python3 -c 'import json,sys
for l in open(sys.argv[1]): json.loads(l)' "$1"; }

mkdir -p "$TMP/full"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$TMP/full" 2>/dev/null; then
  echo "SKIP records-01: mounting a tmpfs needs root"
else
  "$DROVER" run "$TMP/fit.lua" "$TMP/full/runs" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  RUN=$(ls -d "$TMP"/full/runs/full-*)
  check "records-01 the fit went on to the end" grep -q "^steps 2560" "$TMP/out"
  check "records-01 exit status 1 (records were lost): $rc" [ "$rc" -eq 1 ]
  # Which file fails first (metrics.jsonl, events.log, a TensorBoard
  # file) depends on how the pages fill up; the first is named.
  check "records-01 stderr names a file and the reason" \
    grep -q "records lost: .*cannot write .*No space left on device" "$TMP/err"
  check "records-01 stderr counts them" grep -q "records could not be written to the run directory" "$TMP/err"
  # events.log says so, unless it is full itself
  check "records-01 events.log says so" sh -c "grep -q 'records lost: .*No space left on device' '$RUN/events.log' ||
    grep -q 'cannot write .*events.log' '$TMP/err' || [ \$(grep -c . '$RUN/events.log') -lt 3 ]"
  check "records-01 every metrics line is whole" whole_lines "$RUN/metrics.jsonl"
  check "records-01 said once" [ "$(grep -c 'records lost' "$TMP/err")" -eq 1 ]
  rm -rf "$TMP/full/runs"

  "$DROVER" run "$TMP/cluster.lua" "$TMP/full/runs" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  RUN=$(ls -d "$TMP"/full/runs/full-*)
  check "records-02 a cluster's fit went on to the end" grep -q "^steps 2560" "$TMP/out"
  check "records-02 exit status 1: $rc" [ "$rc" -eq 1 ]
  check "records-02 stderr names the file" grep -q "records lost: .*cannot write .*No space left on device" "$TMP/err"
  check "records-02 every metrics line is whole" whole_lines "$RUN/metrics.jsonl"
  umount "$TMP/full"
fi

# Room enough: status 0 and nothing said.
"$DROVER" run "$TMP/fit.lua" "$TMP/runs" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "records-03 with room the run exits 0: $rc" [ "$rc" -eq 0 ]
check "records-03 nothing lost" sh -c "! grep -q 'records lost' '$TMP/err'"
