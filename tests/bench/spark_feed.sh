#!/bin/sh
# spark_feed.sh - training samples/s of an RDD fed from a PySpark program
# (drover_client.spark.feed) against files mode (each worker maps its
# shard of the same .npy), the same MLP on the same cluster, launched on
# a real standalone Spark (tests/spark/start.sh; stopped by pid on exit).
# Prints one line per pair and "spark_feed_vs_files_samples MEDIAN ...".
# Skips (one line saying why) where Spark cannot start.
# usage: spark_feed.sh DROVER [PAIRS]   (TMPDIR, SPARK_VENV, BENCH_SPARK_ROWS)
set -u
DROVER=$1
pairs=${2:-3}
rows=${BENCH_SPARK_ROWS:-16384}
epochs=${BENCH_SPARK_EPOCHS:-8}
dir=$(mktemp -d "${TMPDIR:-/tmp}/drover-spark-bench-XXXXXX")
DROVER_SPARK_DIR=$dir/spark
# DROVER_SPARK_PORT: start.sh picks four free ports when it is not set
export DROVER_SPARK_DIR OPENBLAS_NUM_THREADS=1
trainer=
cleanup() {
  [ -n "$trainer" ] && kill -9 "$trainer" 2>/dev/null
  bash tests/spark/stop.sh
  [ -n "${BENCH_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
if ! why=$(bash tests/spark/start.sh 2>"$dir/start.err"); then
  echo "spark_feed_vs_files_samples skipped: ${why:-$(tail -n 3 "$dir/start.err")}"
  exit 0
fi
. "$DROVER_SPARK_DIR/env"
export PYTHONPATH="$PWD/clients/python"
"$PYSPARK_PYTHON" -c "
import numpy as np
rng = np.random.default_rng(1)
n, k = $rows, 10
c = rng.standard_normal((k, 784)).astype(np.float32)
y = rng.integers(0, k, n)
x = (c[y] + rng.standard_normal((n, 784)).astype(np.float32))
np.save('$dir/x.npy', x.astype(np.float32)); np.save('$dir/y.npy', y.astype(np.float32))
"
"$DROVER" run tests/bench/spark_feed.lua "$dir" "$pairs" "$epochs" "$DROVER_SPARK_MASTER" \
  "$DROVER_SPARK_UI" >"$dir/lua.out" 2>&1 &
trainer=$!
timeout 900 "$PYSPARK_PYTHON" tests/bench/spark_feed.py "$dir" "$pairs" "$epochs" >"$dir/py.out" 2>"$dir/py.err"
wait "$trainer"
rc=$?
trainer=
sed 's/^/spark feed: /' "$dir/py.out"
grep '^pair ' "$dir/lua.out"
if [ $rc -ne 0 ]; then
  echo "spark_feed_vs_files_samples skipped: the drover script failed ($rc):"
  tail -n 15 "$dir/lua.out" "$dir/py.err"
  exit 0
fi
median() { # NAME < ratios
  sort -g | awk -v n="$1" '
    NF { v[++k] = $1 }
    END {
      if (!k) { printf "%s skipped: no measurement\n", n; exit }
      m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "%s %.2f (median of %d pairs; min %.2f, max %.2f)\n", n, m, k, v[1], v[k]
    }'
}
awk '$1 == "pair" { print $8 }' "$dir/lua.out" | median spark_feed_rows_vs_files_samples
awk '$1 == "pair" { print $12 }' "$dir/lua.out" | median spark_feed_blocks_vs_files_samples
