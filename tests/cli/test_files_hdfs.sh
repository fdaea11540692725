# test_files_hdfs.sh - data on HDFS in files mode (issue 25, item 3)
# against a real HDFS (tests/hdfs/start.sh: MiniDFSCluster on loopback).
# The files are put with `drover hdfs put`; the cases are Lua
# (tests/cli/files_hdfs.lua): a 60000x28x28 IDX from HDFS trains on 1 ps +
# 2 workers with the coordinator's peak RSS under 60 MB and the workers
# reading it by byte ranges (their DROVER_HDFS_TRACE counts); CSV converges
# on 2 workers like the local file; CSV, .csv.gz, libsvm, .npy and IDX from
# HDFS give, sync on one worker, bit-identical parameters to the same local
# files; the eager readers take URLs; a malformed line names the URL and
# the line, a missing file the URL and HDFS's FileNotFoundException. Last,
# workers started in a mount namespace where the local data directory is
# hidden (and without HADOOP_CONF_DIR) train from hdfs://, while the same
# fit from the local path fails there: the workers read HDFS, not a
# shared disk. Skipped with the reason where Java or the jars are missing.
# run.sh timeout: 900
. tests/cli/lib.sh
: "${DROVER_HDFS_DIR:=$TMP/hdfs}"
export DROVER_HDFS_DIR
unset HADOOP_USER_NAME

engine_start hdfs "fh-00 tests/hdfs/start.sh starts the test HDFS"
. "$DROVER_HDFS_DIR/env"

L=$TMP/data
RUNS=$TMP/runs
mkdir -p "$L" "$RUNS"
cp examples/data/digits.csv "$L/"
timeout 300 "$DROVER" run tests/cli/files_hdfs.lua gen "$L" >"$TMP/gen.out" 2>&1 ||
  { fail "fh-00 the test files" "$(tail -n 5 "$TMP/gen.out")"; exit 1; }
gzip -kf "$L/digits.csv"
# bad.csv: line 8 has a field too few
{ head -n 7 "$L/digits.csv"; sed -n 8p "$L/digits.csv" | sed 's/,[0-9]*$//'; sed -n '9,20p' "$L/digits.csv"; } >"$L/bad.csv"
gzip -kf "$L/bad.csv"
H=$DROVER_HDFS/t/fh
ok=1
for f in digits.csv digits.csv.gz digits.svm x.npy y.npy images.idx labels.idx bad.csv bad.csv.gz; do
  timeout 120 "$DROVER" hdfs put "$L/$f" "$H/$f" 2>>"$TMP/put.err" || ok=0
done
check "fh-00 the test files are on HDFS (drover hdfs put)" [ $ok -eq 1 ]

export H L RUNS W="$DROVER_WEBHDFS/t/fh" DROVER_HDFS_TRACE=1
timeout 300 "$DROVER" run tests/cli/files_hdfs.lua rss
timeout 600 "$DROVER" run tests/cli/files_hdfs.lua main

# fh-06: workers that cannot see $L at all (a tmpfs over it in their own
# mount namespace), nor Hadoop's configuration, as on a cluster node.
cat >"$TMP/node.sh" <<SH
#!/bin/sh
case " \$* " in
*" --role worker "*)
  k=\$(mktemp -p "$TMP") && cp "\$DROVER_SECRET_FILE" "\$k" || exit 1
  unset HADOOP_CONF_DIR
  DROVER_SECRET_FILE=\$k exec unshare -m sh -c 'mount -t tmpfs tmpfs "\$0" && exec "\$@"' \
    "$L" "$DROVER" "\$@" ;;
esac
exec "$DROVER" "\$@"
SH
chmod +x "$TMP/node.sh"
cat >"$TMP/hidden.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local ds = drover.data.csv(arg[1], { label = -1 }):shuffle { seed = 3 }:standardize()
local exp = drover.experiment { name = "hid", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.05 },
  model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  train = { data = ds, batch = 32, epochs = 2 }, seed = 1, verbose = false }
local c = drover.cluster { ps = 1, worker = 2, runs = os.getenv("RUNS"), name = "hid", max_restarts = 0 }
local r = c:fit(exp)
print(string.format("accuracy %.4f", r.accuracy))
c:shutdown()
EOF
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/hidden.lua" "$H/digits.csv" >"$TMP/hid.out" 2>&1
r=$?
acc=$(sed -n 's/^accuracy //p' "$TMP/hid.out")
check "fh-06 workers that see no local path train from hdfs:// (accuracy $acc)" \
  sh -c "[ $r -eq 0 ] && awk 'BEGIN { exit !($acc > 0.7) }'"
DROVER_LAUNCH_EXE=$TMP/node.sh timeout 300 "$DROVER" run "$TMP/hidden.lua" "$L/digits.csv" >"$TMP/hid2.out" 2>&1
r=$?
check "fh-06 ... while the local path is hidden from them (that fit fails naming it)" \
  sh -c "[ $r -ne 0 ] && grep -q \"cannot open '$L/digits.csv'\" '$TMP/hid2.out'"
[ $r -ne 0 ] || cat "$TMP/hid2.out" | tail -n 5
