# test_noshare.sh - drover on a Spark whose nodes share no file system with
# the coordinator, as on a real Hadoop cluster (issue 25): the test Spark's
# worker runs in a mount namespace where the coordinator's directory
# ($TMP/coord: the run directories, the data, the script's working
# directory) is covered by an empty tmpfs (tests/noshare/hide.sh, through
# DROVER_SPARK_HIDE of tests/spark/start.sh). test_noshare_yarn.sh is the
# same on YARN; what both share (the probe, the test HDFS started once per
# file with the digits on it as CSV and IDX, the checkpoint cases) is in
# tests/cli/noshare_cases.sh. The first case proves the mode is on
# (noshare_check, tests/cli/lib.sh); then: s01 a scheduled function on a
# worker cannot see the run directory, the marker or the data, and what it
# writes there never reaches the coordinator; s02 files-mode training from
# a CSV shipped with `files = { "train.csv" }` learns digits, s04 and so
# does one read by the coordinator's absolute path, shipped (the workers
# find it under its shipped name); s06 files-mode training from hdfs://
# CSV and IDX (the data exists only under $COORD and on HDFS); s05
# checkpoints every 20 steps reach the run directory through the
# coordinator; s03 the nodes' logs reach <run>/logs through --log-forward.
# Sync fits with a chief as the only trainer, checkpoints every 16 steps,
# against one uninterrupted reference: s07 ps:0 SIGKILLed mid-fit is
# relaunched (a new Spark application), restored from the newest
# checkpoint through the coordinator, and the fit ends bit-identical to
# the reference; s08 that run's chief summaries are in events/chief/
# (through the coordinator) and its nodes' logs in <run>/logs; s09 the
# coordinator SIGKILLed, its nodes and Spark drivers end by themselves,
# and `drover run --resume` ends bit-identical; s10, s11 the same two
# with checkpoint.dir on the test HDFS.
#
# Adding a case under this mode (checkpoints every N steps, a ps SIGKILLed
# and restored, the coordinator SIGKILLed and --resume, HDFS):
#  1. write its script as $TMP/NAME.lua with runs = "$RUNS" (under $COORD),
#     its data under $COORD (work/train.csv and data/digits.csv are there)
#     and `spark = dofile("$TMP/spark.lua")` for Spark; anything a node
#     must read has to travel (files, the connection, HDFS);
#  2. run it with `noshare_run NAME SECONDS` (from $COORD/work, bounded,
#     output in $TMP/NAME.out, status in rc), or in the background from
#     $COORD/work with its pid given to kill_at_exit to SIGKILL it and
#     `--resume` it; the nodes share our pid namespace, so a node's pid
#     from c:nodes() can be SIGKILLed as in test_spark.sh;
#  3. put it after the engine's noshare_check, in the engine's section
#     (noshare_spark here, noshare_yarn in test_noshare_yarn.sh), numbered
#     noshare-sNN / noshare-yNN; a case for both engines goes in
#     noshare_cases.sh as a function of the engine's cluster options;
#  4. assert on the coordinator's side (its output, $RUNS/*/...): a node
#     writing under $COORD writes into its tmpfs, never the run directory.
# Skipped, with the reason, where an engine cannot start here or unshare
# and mount are not permitted (start.sh exits 77); DROVER_SPARK_REQUIRED=1
# (CI) makes that a failure. Not under `make
# asan` unless DROVER_SPARK_ASAN=1 (the JVMs are slow there; test_spark.sh
# says why that loses no C coverage).
# run.sh timeout: 900
. tests/cli/lib.sh

if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_SPARK_ASAN:-0}" != 1 ]; then
  echo "SKIP test_noshare: the engines under ASan (SANITIZED=1; DROVER_SPARK_ASAN=1 runs them)"
  exit 0
fi

. tests/cli/noshare_cases.sh

noshare_spark() {
  : "${DROVER_SPARK_DIR:=$TMP/spark}" # ports: start.sh picks free ones
  export DROVER_SPARK_DIR
  engine_try spark "noshare-s00 tests/spark/start.sh starts Spark with $COORD hidden" || return 0
  . "$DROVER_SPARK_DIR/env"
  noshare_check spark "noshare-s00 the Spark worker's mount namespace hides $COORD"
  cat >"$TMP/spark.lua" <<LUA
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
return { master = "$DROVER_SPARK_MASTER", master_ui = "$DROVER_SPARK_UI",
  conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
           ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } }
LUA
  # noshare-s01..s03: one cluster: the probe, a files-mode fit from the
  # shipped CSV, the nodes' logs
  cat >"$TMP/spark_fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("train.csv", { label = -1 })
io.stdout:write("files mode ", tostring(digits.files), "\n")
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local c = drover.cluster { launcher = "spark", ps = 1, worker = 2, runs = "$RUNS", name = "spark",
  bind = "127.0.0.1", reservation_timeout = 240, spark = dofile("$TMP/spark.lua"),
  files = { "train.csv", "$COORD/data/digits.csv" } }
io.stdout:write("run_dir ", c.run_dir, "\n")
dofile("$TMP/probe.lua")(c)
c:schedule(function() print("noshare print from a closure") return true end):fetch()
local function exp(train, test, epochs, checkpoint)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train, batch = 32, epochs = epochs or 10 },
    eval = { data = test, every = 1000 }, seed = 1, verbose = false, checkpoint = checkpoint }
end
local test_std = test_ds:standardize(stats)
local r = c:fit(exp(train_std, test_std))
io.stdout:write(string.format("eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
-- the data by its absolute path, shipped: found under its shipped name
local abs = data.csv("$COORD/data/digits.csv", { label = -1 })
local abs_train, abs_test = abs:split(0.8, { seed = 1 })
local abs_std, abs_stats = abs_train:standardize()
io.stdout:write("abs files mode ", tostring(abs_std.files), "\n")
local abs_test_std = abs_test:standardize(abs_stats)
r = c:fit(exp(abs_std, abs_test_std))
io.stdout:write(string.format("abs eval_accuracy %.4f steps %d\n", r.eval_accuracy, r.steps))
-- data on the test HDFS (made under $COORD, hidden from the nodes): CSV and IDX
local H = os.getenv("NOSHARE_H") or ""
if H ~= "" then
  for _, f in ipairs { "csv", "idx" } do
    local ds = f == "csv" and data.csv(H .. "/digits.csv", { label = -1 }) or
      data.idx(H .. "/images.idx", H .. "/labels.idx")
    local tr, te = ds:split(0.8, { seed = 1 })
    local std, st = tr:standardize()
    io.stdout:write("hdfs ", f, " files mode ", tostring(std.files), "\n")
    r = c:fit(exp(std, (te:standardize(st))))
    io.stdout:write(string.format("hdfs %s eval_accuracy %.4f steps %d\n", f, r.eval_accuracy, r.steps))
  end
end
-- checkpoints every 20 steps: the ps cannot write the run directory
r = c:fit(exp(train_std, test_std, 2, { every = 20 }))
io.stdout:write(string.format("checkpointed fit steps %d\n", r.steps))
c:shutdown() -- raises if a node failed
io.stdout:write("shut down\n")
LUA
  NOSHARE_H=$NOSHARE_H noshare_run spark_fit 420
  check "noshare-s01 the run on Spark with $COORD hidden succeeds (status $rc)" [ $rc -eq 0 ]
  noshare_probe_checks s "$TMP/spark_fit.out"
  check "noshare-s02 the data is a file's (files mode)" grep -q "^files mode true$" "$TMP/spark_fit.out"
  acc=$(sed -n 's/^eval_accuracy \([0-9.]*\) .*/\1/p' "$TMP/spark_fit.out")
  check "noshare-s02 files mode from the shipped train.csv learns digits to >= 0.9 (got '$acc')" \
    awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
  dir=$(sed -n 's/^run_dir //p' "$TMP/spark_fit.out")
  check "noshare-s02 each worker read its shard from its own copy of the file" \
    sh -c "grep -q 'worker:0 I .* examples read from its file' '$dir/logs/worker-0.log' &&
           grep -q 'worker:1 I .* examples read from its file' '$dir/logs/worker-1.log'"
  check "noshare-s04 data.csv by the coordinator's absolute path, shipped by files, is a file's" \
    grep -q "^abs files mode true$" "$TMP/spark_fit.out"
  acc=$(sed -n 's/^abs eval_accuracy \([0-9.]*\) .*/\1/p' "$TMP/spark_fit.out")
  check "noshare-s04 the workers find it under its shipped name and learn digits to >= 0.9 (got '$acc')" \
    awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
  if [ -n "$NOSHARE_H" ]; then
    for f in csv idx; do
      check "noshare-s06 data.$f from hdfs:// is a file's (files mode)" grep -q "^hdfs $f files mode true$" "$TMP/spark_fit.out"
      acc=$(sed -n "s/^hdfs $f eval_accuracy \([0-9.]*\) .*/\1/p" "$TMP/spark_fit.out")
      check "noshare-s06 the workers read it from HDFS and learn digits to >= 0.9 (got '$acc')" \
        awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
    done
    check "noshare-s06 each worker read its shard from its file in all 5 files-mode fits" \
      sh -c "[ \$(grep -c 'worker:0 I .* examples read from its file' '$dir/logs/worker-0.log') -ge 5 ] &&
             [ \$(grep -c 'worker:1 I .* examples read from its file' '$dir/logs/worker-1.log') -ge 5 ]"
  else
    echo "SKIP noshare-s06: no test HDFS here (noshare-h00)"
  fi
  check "noshare-s05 a fit with checkpoints every 20 steps ran ($(grep '^checkpointed fit' "$TMP/spark_fit.out"))" \
    grep -q "^checkpointed fit steps [1-9]" "$TMP/spark_fit.out"
  check "noshare-s05 events.log says ps:0's checkpoints go through the coordinator" \
    grep -q "checkpoints: ps:0 through the coordinator (the run directory is not visible on its host)" "$dir/events.log"
  check "noshare-s05 no checkpoint failed" sh -c "! grep -q 'checkpoint.*failed' '$dir/events.log'"
  check "noshare-s05 several checkpoints are in the run directory ($(ls "$dir/checkpoints" 2>/dev/null | tr '\n' ' '))" \
    [ "$(ls -d "$dir"/checkpoints/step-* 2>/dev/null | wc -l)" -ge 2 ]
  check "noshare-s05 each holds ps-0's file with the sha256 its manifest says" noshare_manifests_ok "$dir"
  for n in ps-0 worker-0 worker-1; do
    check "noshare-s03 $n's own lines reached $n.log in the run directory (--log-forward)" \
      grep -q "Z ${n%-*}:${n#*-} I registered" "$dir/logs/$n.log"
  done
  check "noshare-s03 so did a closure's print()" \
    sh -c "cat '$dir'/logs/worker-*.log | grep -q 'Z worker:[01] stdout noshare print from a closure\$'"
  check "noshare-s03 the run shut down cleanly" grep -q "^shut down" "$TMP/spark_fit.out"

  # noshare-s07..s10: checkpoints, failover, --resume, the chief's summaries
  cat >"$TMP/spark_opts.lua" <<LUA
return { launcher = "spark", bind = "127.0.0.1", reservation_timeout = 240,
  spark = dofile("$TMP/spark.lua") }
LUA
  ck_ref
  noshare_ckpt_cases s "$TMP/spark_opts.lua"
  bash tests/spark/stop.sh
}

noshare_spark
