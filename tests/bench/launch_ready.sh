#!/bin/sh
# launch_ready.sh - time from submit to "cluster ready" (1 ps + 2 workers)
# with launcher = "yarn" on the test YARN against launcher = "slurm" (a job
# of drover's own, sbatch'ed) on the test Slurm, both started here and
# stopped after. Each pair measures one of each; prints
#   yarn_vs_slurm_ready RATIO (median ...)   and each side's seconds.
# A side whose cluster cannot start here is reported as skipped.
# Usage: sh tests/bench/launch_ready.sh DROVER PAIRS
set -u
DROVER=$1
pairs=${2:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/drover-bench-ready-XXXXXX")
export DROVER_YARN_DIR=$tmp/yarn DROVER_SLURM_DIR=$tmp/slurm DROVER_YARN_STAGING=$tmp/staging
export DROVER_SLURM_PORT=$((24000 + ($$ % 2000) * 2))
cleanup() { [ -z "${BENCH_KEEP:-}" ] || cat "$tmp"/err.* >&2; bash tests/yarn/stop.sh 2>/dev/null; bash tests/slurm/stop.sh 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
yarn_ok=0 slurm_ok=0
bash tests/yarn/start.sh >/dev/null 2>&1 && yarn_ok=1 && . "$DROVER_YARN_DIR/env"
bash tests/slurm/start.sh >/dev/null 2>&1 && slurm_ok=1 && . "$DROVER_SLURM_DIR/env"
export DROVER_YARN_RM DROVER_YARN_AM_CLASSPATH SLURM_CONF 2>/dev/null

cat >"$tmp/ready.lua" <<LUA
local launcher = arg[1]
local t0 = drover.clock()
local c = drover.cluster { launcher = launcher, bind = "127.0.0.1", ps = 1, worker = 2,
  runs = "$tmp/runs", name = launcher }
io.stdout:write(string.format("ready_seconds %.3f\n", drover.clock() - t0))
c:shutdown()
LUA
one() { # LAUNCHER: seconds to ready, or nothing
  "$DROVER" run "$tmp/ready.lua" "$1" 2>>"$tmp/err.$1" | awk '$1 == "ready_seconds" { print $2 }'
}
i=0
: >"$tmp/ratios"
while [ $i -lt "$pairs" ]; do
  y=""; s=""
  [ $yarn_ok = 1 ] && y=$(one yarn)
  [ $slurm_ok = 1 ] && s=$(one slurm)
  echo "pair $((i + 1)): yarn_ready_s ${y:-skipped} slurm_ready_s ${s:-skipped}"
  awk -v a="$y" -v b="$s" 'BEGIN { if (a != "" && b > 0) printf "%.4f\n", a / b }' >>"$tmp/ratios"
  i=$((i + 1))
done
sort -g "$tmp/ratios" | awk '
  NF { v[++k] = $1 }
  END {
    if (!k) { print "yarn_vs_slurm_ready skipped: no measurement"; exit }
    m = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    printf "yarn_vs_slurm_ready %.2f (median of %d pairs; min %.2f, max %.2f)\n", m, k, v[1], v[k]
  }'
