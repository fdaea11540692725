#!/bin/sh
# hdfs_data.sh - files mode from hdfs:// vs the same file on local disk
# (tests/bench/hdfs_data.lua), against the test HDFS (tests/hdfs/start.sh,
# a MiniDFSCluster on loopback: `make yarn-deps`). Prints each pair and
# hdfs_vs_local_files_mode MEDIAN (median of N pairs; min A, max B).
# Skipped, saying why, where the test HDFS cannot start.
cd "$(dirname "$0")/../.."
DROVER=${DROVER:-./drover}
pairs=${BENCH_PAIRS:-3}
export DROVER_HDFS_DIR=${DROVER_HDFS_DIR:-${TMPDIR:-/tmp}/drover-bench-hdfs}
export BENCH_RUNS=${BENCH_RUNS:-${TMPDIR:-/tmp}/drover-bench-runs}
export OPENBLAS_NUM_THREADS=1
why=$(bash tests/hdfs/start.sh 2>/dev/null)
case $? in
0) ;;
77) echo "hdfs_vs_local_files_mode skipped: ${why#SKIP }"; exit 0 ;;
*) echo "hdfs_vs_local_files_mode skipped: the test HDFS did not start"; exit 0 ;;
esac
DIR=$(mktemp -d "${TMPDIR:-/tmp}/drover-bench-hdfsdata-XXXXXX")
trap 'bash tests/hdfs/stop.sh >/dev/null 2>&1; rm -rf "$DIR"' EXIT
. "$DROVER_HDFS_DIR/env"
# the 60000x28x28 images and labels of tests/cli/files_hdfs.lua (only its gen phase)
"$DROVER" run tests/cli/files_hdfs.lua gen "$DIR" >/dev/null
rm -f "$DIR"/*.npy "$DIR"/*.svm
for f in images.idx labels.idx; do "$DROVER" hdfs put "$DIR/$f" "$DROVER_HDFS/bench/$f" || exit 1; done
"$DROVER" run tests/bench/hdfs_data.lua "$DIR" "$DROVER_HDFS/bench" "$pairs" | tee "$DIR/out"
awk '$1 == "pair" && $2 > 0 { printf "%.4f\n", $3 / $2 }' "$DIR/out" | sort -g | awk '
  NF { v[++k] = $1 }
  END {
    if (!k) { print "hdfs_vs_local_files_mode skipped: no measurement"; exit }
    m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    printf "hdfs_vs_local_files_mode %.2f (median of %d pairs; min %.2f, max %.2f)\n", m, k, v[1], v[k]
  }'
