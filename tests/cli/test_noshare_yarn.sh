# test_noshare_yarn.sh - drover on the test YARN whose NodeManagers share no
# file system with the coordinator, as on a real Hadoop cluster (issue 25):
# the MiniYARNCluster runs in a mount namespace where the coordinator's
# directory ($TMP/coord: the run directories, the data, the script's
# working directory) is covered by an empty tmpfs (tests/noshare/hide.sh,
# through DROVER_YARN_HIDE of tests/yarn/start.sh); test_noshare.sh is the
# same for Spark, and the recipe for a new case is in its header. The
# shared parts (the probe, the test HDFS, the checkpoint cases) are in
# tests/cli/noshare_cases.sh.
# Cases: y00 the mode is on (noshare_check); y01 a scheduled function on a
# container cannot see the run directory, the marker or the data, and what
# it writes there never reaches the coordinator, while its key came with
# its container and its log reaches <run>/logs; y06 files-mode training
# from hdfs:// CSV and IDX (the data exists only under $COORD and on the
# test HDFS); sync fits with a chief as the only trainer and checkpoints
# every 16 steps: y07 ps:0 SIGKILLed mid-fit is relaunched and restored
# from the newest checkpoint (through the coordinator) and the fit ends
# with the parameters of an uninterrupted run; y08 the chief's summaries
# in events/chief/ (through the coordinator) and the nodes' logs; y09 the
# coordinator SIGKILLed and `drover run --resume` gives the same
# parameters; y10, y11 the same with checkpoint.dir on the test HDFS.
# Only processes this test started are signalled, by pid (a node's from
# the pid it registered with, in events.log).
# Skipped, with the reason, where YARN cannot start here or unshare and
# mount are not permitted (start.sh exits 77); DROVER_YARN_REQUIRED=1 (CI)
# makes that a failure. Not under `make asan` unless DROVER_SPARK_ASAN=1.
# run.sh timeout: 900
. tests/cli/lib.sh

if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_noshare_yarn: the engines under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs them)"
  exit 0
fi

. tests/cli/noshare_cases.sh

noshare_yarn() {
  : "${DROVER_YARN_DIR:=$TMP/yarn}"
  DROVER_YARN_STAGING=$TMP/staging # the AM's, on the cluster's file:///: visible
  export DROVER_YARN_DIR DROVER_YARN_STAGING
  mkdir -p "$DROVER_YARN_STAGING"
  engine_try yarn "noshare-y00 tests/yarn/start.sh starts the test YARN with $COORD hidden" || return 0
  . "$DROVER_YARN_DIR/env"
  noshare_check yarn "noshare-y00 the test YARN's mount namespace hides $COORD"
  # orphan_timeout: the AM of a run whose coordinator y09 SIGKILLs ends soon
  cat >"$TMP/yarn_opts.lua" <<LUA
return { launcher = "yarn", bind = "127.0.0.1", reservation_timeout = 120,
  yarn = { max_attempts = 1, orphan_timeout = 10 } }
LUA
  cat >"$TMP/yarn_probe.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local opts = dofile("$TMP/yarn_opts.lua")
opts.ps, opts.worker, opts.files, opts.runs, opts.name = 1, 2, { "train.csv" }, "$RUNS", "yarn"
local c = drover.cluster(opts)
io.stdout:write("run_dir ", c.run_dir, "\n")
dofile("$TMP/probe.lua")(c)
c:schedule(function() print("noshare print from a closure") return true end):fetch()
-- data on the test HDFS (made under $COORD, hidden from the nodes): CSV and IDX
local H = os.getenv("NOSHARE_H") or ""
if H ~= "" then
  for _, f in ipairs { "csv", "idx" } do
    local ds = f == "csv" and data.csv(H .. "/digits.csv", { label = -1 }) or
      data.idx(H .. "/images.idx", H .. "/labels.idx")
    local tr, te = ds:split(0.8, { seed = 1 })
    local std, st = tr:standardize()
    io.stdout:write("hdfs ", f, " files mode ", tostring(std.files), "\n")
    local r = c:fit(drover.experiment {
      name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
      model = nn.Sequential { nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
      train = { data = std, batch = 32, epochs = 10 },
      eval = { data = te:standardize(st), every = 1000 }, seed = 1, verbose = false })
    io.stdout:write(string.format("hdfs %s eval_accuracy %.4f steps %d\n", f, r.eval_accuracy, r.steps))
  end
end
c:shutdown()
io.stdout:write("shut down\n")
LUA
  NOSHARE_H=$NOSHARE_H noshare_run yarn_probe 400
  check "noshare-y01 the run on YARN with $COORD hidden succeeds (status $rc)" [ $rc -eq 0 ]
  noshare_probe_checks y "$TMP/yarn_probe.out"
  dir=$(sed -n 's/^run_dir //p' "$TMP/yarn_probe.out")
  for n in ps-0 worker-0 worker-1; do
    check "noshare-y01 $n's own lines reached $n.log in the run directory" \
      grep -q "Z ${n%-*}:${n#*-} I registered" "$dir/logs/$n.log"
  done
  check "noshare-y01 so did a closure's print()" \
    sh -c "cat '$dir'/logs/worker-*.log | grep -q 'Z worker:[01] stdout noshare print from a closure\$'"
  check "noshare-y01 the run shut down cleanly" grep -q "^shut down" "$TMP/yarn_probe.out"
  if [ -n "$NOSHARE_H" ]; then
    for f in csv idx; do
      check "noshare-y06 data.$f from hdfs:// is a file's (files mode)" grep -q "^hdfs $f files mode true$" "$TMP/yarn_probe.out"
      acc=$(sed -n "s/^hdfs $f eval_accuracy \([0-9.]*\) .*/\1/p" "$TMP/yarn_probe.out")
      check "noshare-y06 the containers read it from HDFS and learn digits to >= 0.9 (got '$acc')" \
        awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
    done
    check "noshare-y06 each worker read its shard from its file in both fits" \
      sh -c "[ \$(grep -c 'worker:0 I .* examples read from its file' '$dir/logs/worker-0.log') -ge 2 ] &&
             [ \$(grep -c 'worker:1 I .* examples read from its file' '$dir/logs/worker-1.log') -ge 2 ]"
  else
    echo "SKIP noshare-y06: no test HDFS here (noshare-h00)"
  fi

  ck_ref
  noshare_ckpt_cases y "$TMP/yarn_opts.lua"
  bash tests/yarn/stop.sh
}

noshare_yarn
