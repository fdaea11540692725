#!/bin/sh
# run.sh - benchmarks with their references measured in the same run.
# `make bench` runs it. BENCH_SECONDS sets each measurement's length;
# BENCH_PAIRS (3, at least 3) how many times each ratio is measured.
#
# On a shared machine one measurement swings too much to steer by, so each
# ratio is measured in BENCH_PAIRS alternating pairs (ours, the reference,
# ours, the reference, ...) and reported as the median of the pairs'
# ratios with their min and max:
#   NAME MEDIAN (median of N pairs; min A, max B)
set -eu
cd "$(dirname "$0")/../.."
secs=${BENCH_SECONDS:-6}
pairs=${BENCH_PAIRS:-3}
[ "$pairs" -ge 3 ] || pairs=3
build=${BUILD:-build}
runs="${TMPDIR:-/tmp}/drover-bench-runs"
export OPENBLAS_NUM_THREADS=1

# field NAME TEXT: the number after NAME in TEXT's line "NAME VALUE".
field() { echo "$2" | awk -v n="$1" '$1 == n { print $2; exit }'; }
# ratio A B: A / B, or nothing when either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.4f\n", a / b }'; }
# median NAME [UNIT] < ratios, one a line: the summary line.
median() {
  sort -g | awk -v n="$1" -v u="${2:-}" '
    NF { v[++k] = $1 }
    END {
      if (!k) { printf "%s skipped: no measurement\n", n; exit }
      m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "%s %.2f%s (median of %d pairs; min %.2f, max %.2f)\n", n, m, u, k, v[1], v[k]
    }'
}
have_torch() { /usr/bin/python3 -c "import $1" 2>/dev/null; }

echo "== MLP 784-256-256-10, batch 128, SGD momentum, float32, 1 thread"
: >"$build/bench.gemm"; : >"$build/bench.torch"
i=0
while [ $i -lt "$pairs" ]; do
  out=$("$build/bench_mlp" "$secs")
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field drover_samples_per_sec "$out")" "$(field gemm_bound_samples_per_sec "$out")" >>"$build/bench.gemm"
  if have_torch torch; then
    ref=$(/usr/bin/python3 tests/bench/torch_mlp.py "$secs")
    echo "$ref" | sed "s/^/pair $((i + 1)): /"
    ratio "$(field drover_samples_per_sec "$out")" "$(field torch_samples_per_sec "$ref")" >>"$build/bench.torch"
  fi
  i=$((i + 1))
done
median fraction_of_gemm_bound <"$build/bench.gemm"
if have_torch torch; then median ratio_vs_pytorch x <"$build/bench.torch"
else echo "ratio_vs_pytorch skipped: /usr/bin/python3 has no torch (make bench-deps installs python3-torch)"; fi

echo
echo "== CNN conv5x5x32-pool-conv5x5x64-pool-linear1024x10, batch 64, 28x28, SGD momentum, float32, 1 thread"
echo "(the machine may be shared: each figure is a median over alternating pairs, ours then PyTorch's)"
: >"$build/bench.cgemm"; : >"$build/bench.ctorch"; : >"$build/bench.cgemmc"; : >"$build/bench.ctorchc"
i=0
while [ $i -lt "$pairs" ]; do
  out=$("$build/bench_cnn" "$secs")
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field drover_samples_per_sec "$out")" "$(field gemm_bound_samples_per_sec "$out")" >>"$build/bench.cgemm"
  ratio "$(field drover_samples_per_cpu_sec "$out")" "$(field gemm_bound_samples_per_cpu_sec "$out")" >>"$build/bench.cgemmc"
  if have_torch torch; then
    ref=$(/usr/bin/python3 tests/bench/torch_cnn.py "$secs")
    echo "$ref" | sed "s/^/pair $((i + 1)): /"
    ratio "$(field drover_samples_per_sec "$out")" "$(field torch_samples_per_sec "$ref")" >>"$build/bench.ctorch"
    ratio "$(field drover_samples_per_cpu_sec "$out")" "$(field torch_samples_per_cpu_sec "$ref")" >>"$build/bench.ctorchc"
  fi
  i=$((i + 1))
done
median cnn_fraction_of_gemm_bound <"$build/bench.cgemm"
median cnn_fraction_of_gemm_bound_cpu_time <"$build/bench.cgemmc"
if have_torch torch; then
  median cnn_ratio_vs_pytorch x <"$build/bench.ctorch"
  median cnn_ratio_vs_pytorch_cpu_time x <"$build/bench.ctorchc"
else echo "cnn_ratio_vs_pytorch skipped: /usr/bin/python3 has no torch (make bench-deps installs python3-torch)"; fi

echo
echo "== wide & deep on Criteo-format data (100,000 generated rows, 26 hashed fields, 2^20-row tables), 1 thread, vs PyTorch (EmbeddingBag sparse=True + SparseAdam)"
"$build/drover" run examples/gen_ctr.lua "$build/bench.ctr.tsv" 100000 1 >/dev/null
: >"$build/bench.ctr"
i=0
while [ $i -lt "$pairs" ]; do
  out=$("$build/drover" run tests/bench/ctr.lua "$build/bench.ctr.tsv" 1048576 "$secs")
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  if have_torch torch; then
    ref=$(/usr/bin/python3 tests/bench/torch_ctr.py "$build/bench.ctr.tsv" 1048576 "$secs")
    echo "$ref" | sed "s/^/pair $((i + 1)): /"
    ratio "$(field drover_samples_per_sec "$out")" "$(field torch_samples_per_sec "$ref")" >>"$build/bench.ctr"
  fi
  i=$((i + 1))
done
if have_torch torch; then median ratio_vs_pytorch x <"$build/bench.ctr"; echo "(goal: at least 1.2)"
else echo "ratio_vs_pytorch skipped: /usr/bin/python3 has no torch"; fi
rm -f "$build/bench.ctr.tsv"

echo
echo "== a 2^20 x 16 sparse table on 1 ps + 2 workers (async, TCP) vs the same table as a dense parameter (26 ids a row, batch 512: ~1.3% of the rows a step)"
: >"$build/bench.sp"; : >"$build/bench.spb"
i=0
while [ $i -lt "$pairs" ]; do
  out=$("$build/drover" run tests/bench/sparse_cluster.lua "$build/bench.sparse.csv" "$secs")
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field sparse_steps_per_sec "$out")" "$(field dense_steps_per_sec "$out")" >>"$build/bench.sp"
  ratio "$(field sparse_ps_bytes_per_step "$out")" "$(field rows_bytes_per_step "$out")" >>"$build/bench.spb"
  i=$((i + 1))
done
median sparse_vs_dense_steps x <"$build/bench.sp"; echo "(goal: at least 10)"
median sparse_ps_bytes_vs_rows x <"$build/bench.spb"
echo "(the ps's bytes read and written per step against unique ids x 16 x 4 x 2: the ids and headers are the rest)"
rm -f "$build/bench.sparse.csv"

echo
echo "== push+pull of a 1 MiB tensor through a ps process vs loopback TCP"
: >"$build/bench.pp"
i=0
while [ $i -lt "$pairs" ]; do
  out=$("$build/bench_pushpull" "$secs" 2>/dev/null)
  echo "$out" | grep -v fraction | sed "s/^/pair $((i + 1)): /"
  ratio "$(field pushpull_1MiB_MB_per_sec "$out")" "$(field loopback_MB_per_sec "$out")" >>"$build/bench.pp"
  i=$((i + 1))
done
median pushpull_fraction_of_loopback <"$build/bench.pp"

echo
echo "== local cluster: start-up, and 1 ps + 2 workers training the same MLP"
: >"$build/bench.rpc"; : >"$build/bench.rpcsync"
i=0
while [ $i -lt "$pairs" ]; do
  out=$(BENCH_RUNS="$runs" ./drover run tests/bench/cluster.lua "$secs")
  rm -rf "$runs"
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  if have_torch torch.distributed.rpc; then
    ref=$(/usr/bin/python3 tests/bench/torch_rpc_ps.py "$secs" 2>/dev/null | tail -n 1)
    echo "$ref" | sed "s/^/pair $((i + 1)): /"
    theirs=$(field torch_rpc_samples_per_sec "$ref")
    ratio "$(field cluster_samples_per_sec "$out")" "$theirs" >>"$build/bench.rpc"
    ratio "$(field cluster_sync_samples_per_sec "$out")" "$theirs" >>"$build/bench.rpcsync"
  fi
  i=$((i + 1))
done
if have_torch torch.distributed.rpc; then
  median cluster_ratio_vs_torch_rpc x <"$build/bench.rpc"
  median cluster_sync_ratio_vs_torch_rpc x <"$build/bench.rpcsync"
else
  echo "cluster_ratio_vs_torch_rpc skipped: no torch.distributed.rpc in /usr/bin/python3"
fi

echo
echo "== the same CNN on a local cluster, 1 ps + 2 workers (1 thread each), vs one process (bench_cnn)"
: >"$build/bench.ccl"; : >"$build/bench.cclsync"; : >"$build/bench.cclrate"
i=0
while [ $i -lt "$pairs" ]; do
  out=$(BENCH_RUNS="$runs" ./drover run tests/bench/cluster_cnn.lua "$secs")
  rm -rf "$runs"
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  one=$("$build/bench_cnn" "$secs" | awk '/^drover_samples_per_sec/ {print $2}')
  echo "pair $((i + 1)): one_process_samples_per_sec $one"
  field cluster_cnn_samples_per_sec "$out" >>"$build/bench.cclrate"
  ratio "$(field cluster_cnn_samples_per_sec "$out")" "$one" >>"$build/bench.ccl"
  ratio "$(field cluster_cnn_sync_samples_per_sec "$out")" "$one" >>"$build/bench.cclsync"
  i=$((i + 1))
done
median cluster_cnn_samples_per_sec " samples/s" <"$build/bench.cclrate"
median cluster_cnn_ratio_vs_one_process x <"$build/bench.ccl"
median cluster_cnn_sync_ratio_vs_one_process x <"$build/bench.cclsync"
rm -f "$build"/bench.ccl "$build"/bench.cclsync "$build"/bench.cclrate

echo
echo "== sync, 1 ps + 3 workers, backup_workers = 1: without and with a straggler (worker:2 +20 ms a step)"
: >"$build/bench.straggler"
i=0
while [ $i -lt "$pairs" ]; do
  base=$(BENCH_RUNS="$runs" ./drover run tests/bench/backup.lua "$secs" | awk '/^sync_backup/ {print $2}')
  slow=$(DROVER_FAULT=slow:worker:2:20 BENCH_RUNS="$runs" ./drover run tests/bench/backup.lua "$secs" 2>/dev/null | awk '/^sync_backup/ {print $2}')
  echo "pair $((i + 1)): sync_backup_global_steps_per_sec $base, with the straggler $slow"
  ratio "$slow" "$base" >>"$build/bench.straggler"
  i=$((i + 1))
done
rm -rf "$runs"
median straggler_step_rate_ratio <"$build/bench.straggler"
echo "(its share would allow 0.67)"

echo
echo "== ps failover: SIGKILL of the ps to 5 train steps done again (async, 1 ps + 2 workers), and replicas' cost"
: >"$build/bench.fock"; : >"$build/bench.forep"; : >"$build/bench.frate"; : >"$build/bench.fsync"
i=0
while [ $i -lt "$pairs" ]; do
  out=$(BENCH_RUNS="$runs" ./drover run tests/bench/failover.lua "$secs" 2>/dev/null)
  rm -rf "$runs"
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  field failover_checkpoint_ms "$out" >>"$build/bench.fock"
  field failover_replica_ms "$out" >>"$build/bench.forep"
  ratio "$(field cluster_replicas_samples_per_sec "$out")" "$(field cluster_samples_per_sec "$out")" >>"$build/bench.frate"
  ratio "$(field cluster_sync_replicas_samples_per_sec "$out")" "$(field cluster_sync_samples_per_sec "$out")" >>"$build/bench.fsync"
  i=$((i + 1))
done
median failover_from_checkpoint " ms" <"$build/bench.fock"
echo "(goal: under 2000 ms)"
median failover_with_replica " ms" <"$build/bench.forep"
echo "(goal: under 1000 ms)"
median replicas_samples_per_sec_ratio <"$build/bench.frate"
median replicas_sync_samples_per_sec_ratio <"$build/bench.fsync"
rm -f "$build"/bench.fock "$build"/bench.forep "$build"/bench.frate "$build"/bench.fsync

echo
echo "== ClusterCoordinator: closures through the coordinator, and recovery"
: >"$build/bench.closures"
i=0
while [ $i -lt "$pairs" ]; do
  out=$(BENCH_RUNS="$runs" ./drover run tests/bench/schedule.lua "$secs")
  rm -rf "$runs"
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  # The reference: CALL/CALL_RESULT-sized request/reply messages between one
  # process and 2 workers over loopback TCP, 16 in flight per worker.
  ref=$("$build/bench_msgrate" "$secs")
  echo "$ref" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field closures_per_sec_2workers "$out")" "$(field loopback_msgs_per_sec_2workers "$ref")" >>"$build/bench.closures"
  i=$((i + 1))
done
median closures_ratio_vs_loopback_msgs <"$build/bench.closures"
rm -f "$build"/bench.gemm "$build"/bench.torch "$build"/bench.cgemm "$build"/bench.ctorch "$build"/bench.pp "$build"/bench.rpc \
  "$build"/bench.rpcsync "$build"/bench.straggler "$build"/bench.closures

echo
BUILD="$build" BENCH_SECONDS="$secs" BENCH_PAIRS="$pairs" sh tests/bench/transport.sh

echo
echo "== cluster checkpoints: write throughput, training with a checkpoint every 2 s, ps failover"
out=$(BENCH_RUNS="$runs" ./drover run tests/bench/checkpoint.lua "$secs" "$pairs")
rm -rf "$runs"
echo "$out"
echo "$out" | awk '$1 == "write" { printf "%.4f\n", $2 / $4 }' | median ckpt_write_vs_seq_fsync
echo "$out" | awk '$1 == "write" { printf "%.4f\n", $3 / $4 }' | median ckpt_whole_vs_seq_fsync
echo "(goal for the write: at least 0.8)"
echo "$out" | awk '$1 == "train" { printf "%.4f\n", $2 / $3 }' | median train_with_ckpt_every_2s_vs_none
echo "(goal: at least 0.95)"
echo "$out" | awk '$1 == "failover" && $2 >= 0 { print $2 }' | median ps_sigkill_to_steps_again " s"
echo "(goal: under 2 s)"

echo
echo "== a cluster checkpoint's way: through the coordinator, and to HDFS, vs the ps writing the run directory"
# ckroute MODE [URL]: MB/s of one timed checkpoint of the 151 MB model.
ckroute() {
  BENCH_RUNS="$runs" ./drover run tests/bench/ckpt_route.lua "$@" | awk '$1 == "ckpt" { print $3; exit }'
}
hdfs_dir=$runs-hdfs
hdfs_url=
if DROVER_HDFS_DIR=$hdfs_dir bash tests/hdfs/start.sh >/dev/null 2>"$build/bench.hdfs.err"; then
  . "$hdfs_dir/env"
  hdfs_url=$DROVER_WEBHDFS/bench
else
  echo "(no test HDFS: $(tail -1 "$build/bench.hdfs.err"); the HDFS ratio is skipped)"
fi
: >"$build/bench.ckcoord"; : >"$build/bench.ckhdfs"
i=0
while [ $i -lt "$pairs" ]; do
  via=$(DROVER_CKPT_VIA_COORD=1 ckroute coord 1)
  loc=$(ckroute local 1)
  hd=
  [ -n "$hdfs_url" ] && hd=$(ckroute hdfs 1 "$hdfs_url")
  echo "pair $((i + 1)): MB/s through the coordinator $via, writing locally $loc${hd:+, to HDFS $hd}"
  ratio "$via" "$loc" >>"$build/bench.ckcoord"
  [ -n "$hd" ] && ratio "$hd" "$loc" >>"$build/bench.ckhdfs"
  i=$((i + 1))
done
rm -rf "$runs"
median ckpt_via_coordinator_vs_local <"$build/bench.ckcoord"
echo "(goal: at least 0.5)"
if [ -n "$hdfs_url" ]; then
  median ckpt_to_hdfs_vs_local <"$build/bench.ckhdfs"
  echo "(reported: the test HDFS is one JVM on this machine, one DataNode, replication 1)"
  DROVER_HDFS_DIR=$hdfs_dir bash tests/hdfs/stop.sh 2>/dev/null
  rm -rf "$hdfs_dir"
fi
rm -f "$build/bench.ckcoord" "$build/bench.ckhdfs" "$build/bench.hdfs.err"

echo
echo "== feed mode: the MLP fed by the coordinator vs read from each worker's shard; feed bytes/s vs loopback TCP"
: >"$build/bench.feed"; : >"$build/bench.feedbytes"
i=0
while [ $i -lt "$pairs" ]; do
  out=$(BENCH_RUNS="$runs" ./drover run tests/bench/feed.lua "$secs")
  rm -rf "$runs"
  echo "$out" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field feed_samples_per_sec "$out")" "$(field shard_samples_per_sec "$out")" >>"$build/bench.feed"
  ref=$("$build/bench_pushpull" "$secs" 2>/dev/null | grep '^loopback_MB_per_sec')
  echo "$ref" | sed "s/^/pair $((i + 1)): /"
  ratio "$(field feed_MB_per_sec "$out")" "$(field loopback_MB_per_sec "$ref")" >>"$build/bench.feedbytes"
  i=$((i + 1))
done
median feed_vs_shard_samples <"$build/bench.feed"
echo "(goal 0.9)"
median feed_bytes_fraction_of_loopback <"$build/bench.feedbytes"
echo "(goal 0.6)"
rm -f "$build"/bench.feed "$build"/bench.feedbytes

echo
echo "== predict: rows/s of c:predict on 2 workers against in-process forward passes"
out=$(BENCH_RUNS="$runs" OPENBLAS_NUM_THREADS=1 ./drover run tests/bench/predict.lua)
rm -rf "$runs"
echo "$out"
echo "(goal: a ratio of 1.5 or more)"

echo
echo "== dashboard: CPU of the dashboard process, 256 simulated nodes, 10 redraws/s, 200x60 tmux pane"
DROVER=./drover DASH_SECONDS="$secs" sh tests/bench/dash.sh

echo
echo "== attach: bytes sent to one attach client (a 1 ps + 2 worker fit at 4 and 10 Hz; one update of a 256-node model)"
DROVER_BENCH=1 DROVER="$PWD/drover" "$build/unit_tests" coord_dash_bytes runsnap_256 2>&1 | grep -v '^PASS\|^unit:'

echo
echo "== launchers: submit to cluster ready (1 ps + 2 workers), YARN (MiniYARNCluster) vs Slurm (own sbatch job)"
sh tests/bench/launch_ready.sh "$PWD/drover" "$pairs"

echo
echo "== Spark: an RDD fed from PySpark (drover_client.spark.feed; rows, then blocks) vs files mode, same MLP, same Spark-launched cluster"
BUILD="$build" sh tests/bench/spark_feed.sh "$PWD/drover" "$pairs"
echo "(goal: at least 0.8; TFoS: about 0.12)"

echo
echo "== files mode from hdfs:// (test HDFS) vs the same IDX on local disk, the MLP, 1 ps + 2 workers"
DROVER="$PWD/drover" BENCH_PAIRS="$pairs" sh tests/bench/hdfs_data.sh
echo "(goal: at least 0.9)"

echo
echo "== loss: 1 ps + 2 workers, seconds from a signal to worker:1 lost (median, min, max of 3)"
BENCH_RUNS="$runs" "$build/drover" run tests/bench/loss.lua 2>&1 | grep '^loss_'
echo "(goal: under 2 s; hung: heartbeat_timeout, 5 s by default, decides)"

echo
echo "== scale up: 1 ps + 1 worker, c:scale { worker = 2 } between fits and during a fit (median, min, max of 3)"
BENCH_RUNS="$runs" "$build/drover" run tests/bench/scale_up.lua 2>&1 | grep '^scale_'
echo "(goal: under 1 s to the new worker's first step)"

echo
echo "== grow: 1 ps, an async fit on 1 worker grown to 2 at half its steps, vs the mean of fixed 1- and 2-worker fits (samples/s)"
BENCH_RUNS="$runs" BENCH_PAIRS="$pairs" "$build/drover" run tests/bench/grow.lua 2>&1 | grep -E '^(pair|grow_)'

echo
echo "== scale: one coordinator, 1,000 and 10,000 simulated workers (bench_scale) on loopback"
BUILD="$build" sh tests/bench/scale.sh
