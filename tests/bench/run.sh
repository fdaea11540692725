#!/bin/sh
# run.sh - benchmarks with their references measured in the same run.
# `make bench` runs it. BENCH_SECONDS sets each measurement's length.
set -eu
cd "$(dirname "$0")/../.."
secs=${BENCH_SECONDS:-6}
build=${BUILD:-build}
export OPENBLAS_NUM_THREADS=1

echo "== MLP 784-256-256-10, batch 128, SGD momentum, float32, 1 thread"
out=$("$build/bench_mlp" "$secs")
echo "$out"
ours=$(echo "$out" | awk '/^drover_samples_per_sec/ {print $2}')
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  ref=$(/usr/bin/python3 tests/bench/torch_mlp.py "$secs")
  echo "$ref"
  theirs=$(echo "$ref" | awk '/^torch_samples_per_sec/ {print $2}')
  awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "ratio_vs_pytorch %.2f\n", a / b }'
else
  echo "ratio_vs_pytorch skipped: /usr/bin/python3 has no torch (make bench-deps installs python3-torch)"
fi

echo
echo "== push+pull of a 1 MiB tensor through a ps process vs loopback TCP"
"$build/bench_pushpull" "$secs" 2>/dev/null

echo
echo "== local cluster: start-up, and 1 ps + 2 workers training the same MLP"
out=$(BENCH_RUNS="${TMPDIR:-/tmp}/drover-bench-runs" ./drover run tests/bench/cluster.lua "$secs")
echo "$out"
rm -rf "${TMPDIR:-/tmp}/drover-bench-runs"
ours=$(echo "$out" | awk '/^cluster_samples_per_sec/ {print $2}')
if /usr/bin/python3 -c 'import torch.distributed.rpc' 2>/dev/null; then
  ref=$(/usr/bin/python3 tests/bench/torch_rpc_ps.py "$secs" 2>/dev/null | tail -n 1)
  echo "$ref"
  theirs=$(echo "$ref" | awk '/^torch_rpc_samples_per_sec/ {print $2}')
  sync=$(echo "$out" | awk '/^cluster_sync_samples_per_sec/ {print $2}')
  awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "cluster_ratio_vs_torch_rpc %.2f\n", a / b }'
  awk -v a="$sync" -v b="$theirs" 'BEGIN { printf "cluster_sync_ratio_vs_torch_rpc %.2f\n", a / b }'
else
  echo "cluster_ratio_vs_torch_rpc skipped: no torch.distributed.rpc in /usr/bin/python3"
fi

echo
echo "== sync, 1 ps + 3 workers, backup_workers = 1: without and with a straggler (worker:2 +20 ms a step)"
base=$(BENCH_RUNS="${TMPDIR:-/tmp}/drover-bench-runs" ./drover run tests/bench/backup.lua "$secs" | awk '/^sync_backup/ {print $2}')
slow=$(DROVER_FAULT=slow:worker:2:20 BENCH_RUNS="${TMPDIR:-/tmp}/drover-bench-runs" ./drover run tests/bench/backup.lua "$secs" 2>/dev/null | awk '/^sync_backup/ {print $2}')
echo "sync_backup_global_steps_per_sec $base"
echo "sync_backup_global_steps_per_sec_with_straggler $slow"
awk -v a="$slow" -v b="$base" 'BEGIN { printf "straggler_step_rate_ratio %.2f (its share would allow 0.67)\n", a / b }'

echo
echo "== ClusterCoordinator: closures through the coordinator, and recovery"
out=$(BENCH_RUNS="${TMPDIR:-/tmp}/drover-bench-runs" ./drover run tests/bench/schedule.lua "$secs")
echo "$out"
rm -rf "${TMPDIR:-/tmp}/drover-bench-runs"
ours=$(echo "$out" | awk '/^closures_per_sec_2workers/ {print $2}')
# The reference: CALL/CALL_RESULT-sized request/reply messages between one
# process and 2 workers over loopback TCP, 16 in flight per worker.
ref=$("$build/bench_msgrate" "$secs")
echo "$ref"
theirs=$(echo "$ref" | awk '/^loopback_msgs_per_sec_2workers/ {print $2}')
awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "closures_ratio_vs_loopback_msgs %.2f\n", a / b }'

echo
echo "== dashboard: CPU of the dashboard process, 256 simulated nodes, 10 redraws/s, 200x60 tmux pane"
DROVER=./drover DASH_SECONDS="$secs" sh tests/bench/dash.sh

echo
echo "== attach: bytes sent to one attach client (a 1 ps + 2 worker fit at 4 and 10 Hz; one update of a 256-node model)"
DROVER_BENCH=1 DROVER="$PWD/drover" "$build/unit_tests" coord_dash_bytes dash_snap_256 2>&1 | grep -v '^PASS\|^unit:'
