#!/bin/sh
# transport.sh - same-host links (issue 27): shared memory against loopback
# TCP between co-located processes, in alternating pairs (shm run, tcp run,
# shm, tcp, ...; DROVER_TRANSPORT=auto or tcp in every process's
# environment), each ratio the median of the pairs with its min and max:
#  - push + pull of a 1 MiB tensor through a ps (bench_pushpull pushpull);
#  - the MLP on 1 ps + 2 workers, async (transport.lua mlp), also as a
#    fraction of 2 x the in-process single-thread rate (bench_mlp, measured
#    in each pair): the no-communication ceiling of two workers on 2 cores;
#  - no-op closures/s through the coordinator, 2 workers (transport.lua
#    closures).
# Each run's links (bench_pushpull's log, the cluster's c:nodes()) are
# checked to be the ones asked for: a run that fell back fails the script.
# The MLP's figures depend on the GEMM kernels OpenBLAS picks for the CPU
# (OPENBLAS_CORETYPE passes through) and on the ps's optimizer pass.
#
# Alone, from the repository: make all build/bench_pushpull build/bench_mlp &&
#   sh tests/bench/transport.sh
# (`make bench` runs it from run.sh). BENCH_SECONDS (6) is each run's
# length, BENCH_PAIRS (5, at least 3) how many pairs; BUILD (build) where the
# bench programs are, DROVER (./drover) the binary.
set -eu
cd "$(dirname "$0")/../.."
secs=${BENCH_SECONDS:-6}
pairs=${BENCH_PAIRS:-5}
[ "$pairs" -ge 3 ] || pairs=3
build=${BUILD:-build}
drover=${DROVER:-./drover}
runs="${TMPDIR:-/tmp}/drover-link-runs-$$"
tmp="${TMPDIR:-/tmp}/drover-link-$$"
export OPENBLAS_NUM_THREADS=1
mkdir -p "$tmp"
trap 'rm -rf "$tmp" "$runs"' EXIT

# field NAME TEXT: the number after NAME in TEXT's line "NAME VALUE".
field() { echo "$2" | awk -v n="$1" '$1 == n { print $2; exit }'; }
# ratio A B: A / B, or nothing when either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.4f\n", a / b }'; }
# med FILE: the median of FILE's numbers, one a line.
med() {
  sort -g "$1" | awk 'NF { v[++k] = $1 } END {
    if (!k) exit
    m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    printf (m >= 100 ? "%.0f\n" : "%.2f\n"), m }'
}
# summary NAME [UNIT]: "NAME: shm A UNIT, tcp B UNIT (medians); ratio R (median of N
# pairs; min X, max Y)" from $tmp/NAME.shm, .tcp and .ratio.
summary() {
  f=$tmp/$1
  sort -g "$f.ratio" | awk -v n="$1" -v u="${2:-}" -v a="$(med "$f.shm")" -v b="$(med "$f.tcp")" '
    NF { v[++k] = $1 }
    END {
      if (!k) { printf "%s skipped: no measurement\n", n; exit }
      m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "%s: shm %s%s, tcp %s%s (medians); ratio %.2f (median of %d pairs; min %.2f, max %.2f)\n",
        n, a, u, b, u, m, k, v[1], v[k]
    }'
}
# pair NAME A B: one pair's figures kept for summary.
pair() {
  echo "$2" >>"$tmp/$1.shm"
  echo "$3" >>"$tmp/$1.tcp"
  ratio "$2" "$3" >>"$tmp/$1.ratio"
}
# cluster MODE PART: one transport.lua run, its output, after checking
# that every node's link took MODE's path (auto: shm; tcp: tcp).
cluster() {
  out=$(DROVER_TRANSPORT=$1 BENCH_RUNS="$runs" "$drover" run tests/bench/transport.lua "$2" "$secs")
  rm -rf "$runs"
  want=shm
  [ "$1" = tcp ] && want=tcp
  links=$(echo "$out" | awk '$1 == "links"')
  all=$(echo "$links" | tr ' [],' '\n\n\n\n' | grep -c '=' || true)
  ok=$(echo "$links" | tr ' [],' '\n\n\n\n' | grep -c "=$want\$" || true)
  if [ "$all" -lt 3 ] || [ "$ok" -ne "$all" ]; then
    echo "transport.sh: a $1 run's links are not all $want: $links" >&2
    exit 1
  fi
  echo "$out"
}
# pushpull MODE: bench_pushpull's figure, after checking in its log that
# its data link was (auto) or was not (tcp) shared memory.
pushpull() {
  DROVER_TRANSPORT=$1 "$build/bench_pushpull" "$secs" pushpull 2>"$tmp/pp.log"
  n=$(grep -c 'link to .*: shared memory (same host)' "$tmp/pp.log" || true)
  if { [ "$1" = auto ] && [ "$n" -eq 0 ]; } || { [ "$1" = tcp ] && [ "$n" -ne 0 ]; }; then
    echo "transport.sh: bench_pushpull under DROVER_TRANSPORT=$1 had $n shared-memory links" >&2
    exit 1
  fi
}
say() { echo "pair $1: $2"; }

echo "== same-host links: shared memory (DROVER_TRANSPORT=auto) vs loopback TCP, $pairs alternating pairs of ${secs} s; load: $(cut -d' ' -f1-3 /proc/loadavg)"

i=1
while [ $i -le "$pairs" ]; do
  shm=$(pushpull auto); tcp=$(pushpull tcp)
  a=$(field pushpull_1MiB_MB_per_sec "$shm"); b=$(field pushpull_1MiB_MB_per_sec "$tcp")
  say $i "push+pull 1 MiB: shm $a MB/s, tcp $b MB/s"
  pair pushpull_1MiB "$a" "$b"
  i=$((i + 1))
done
summary pushpull_1MiB " MB/s"
echo "(goal: a ratio of at least 2)"

i=1
while [ $i -le "$pairs" ]; do
  shm=$(cluster auto mlp); tcp=$(cluster tcp mlp); one=$("$build/bench_mlp" "$secs")
  a=$(field cluster_samples_per_sec "$shm"); b=$(field cluster_samples_per_sec "$tcp")
  one=$(field drover_samples_per_sec "$one")
  say $i "MLP 1 ps + 2 workers async: shm $a samples/s, tcp $b; in process, 1 thread: $one"
  pair mlp_async "$a" "$b"
  pair mlp_fraction_of_2x_one_process "$(ratio "$a" "$((2 * one))")" "$(ratio "$b" "$((2 * one))")"
  i=$((i + 1))
done
summary mlp_async " samples/s"
echo "(goal: a ratio of at least 1.25)"
summary mlp_fraction_of_2x_one_process

i=1
while [ $i -le "$pairs" ]; do
  shm=$(cluster auto closures); tcp=$(cluster tcp closures)
  a=$(field closures_per_sec_2workers "$shm"); b=$(field closures_per_sec_2workers "$tcp")
  say $i "no-op closures, 2 workers: shm $a/s, tcp $b/s"
  pair closures "$a" "$b"
  i=$((i + 1))
done
summary closures "/s"
echo "(load at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
