#!/bin/sh
# scale.sh - one coordinator holding many nodes: SCALE_NODES (1000, then
# 10000 unless SCALE_BIG=0) simulated workers (bench_scale, launcher =
# "external") on loopback. Prints the figures scale.lua measures with the
# issue's goals beside them: reservation (< 1 s for 1,000), the
# coordinator's CPU at steady heartbeats (< 5% of a core) and RSS
# (< 50 MB), `drover attach --print` of every node, and no-op closures/s
# across all of them. The simulator runs on the same 2 cores, so CPU and
# rates here include its share of the machine.
set -eu
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
runs="${TMPDIR:-/tmp}/drover-bench-scale"
for n in ${SCALE_NODES:-1000} $([ "${SCALE_BIG:-1}" = 0 ] || echo 10000); do
  rm -rf "$runs" "$runs".*
  out=$(timeout 600 "$build/drover" run tests/bench/scale.lua "$n" "$runs" "$build/bench_scale" \
        "$PWD/$build/drover" 20000 2>&1) || { echo "$out" | tail -5; exit 1; }
  echo "$out" | sed 's/^/  /'
  sed 's/^/  sim: /' "$runs.sim.out"
  rm -rf "$runs" "$runs".*
done
