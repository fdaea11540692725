#!/usr/bin/env bash
# stop.sh - stops the Spark that tests/spark/start.sh started, and nothing
# else: the pids in $DROVER_SPARK_DIR/pids, each checked to be Spark's
# java for that daemon. The worker first (it kills its executors), then
# the master; SIGTERM, up to 15 s, then SIGKILL. Idempotent.
# Exit status: 0 when nothing we started is left; 1 otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_SPARK_DIR:-/tmp/drover-spark}
PIDS=$DIR/pids
exec </dev/null
[ -d "$PIDS" ] || exit 0
# shellcheck source=tests/spark/lib.sh
. "$HERE/lib.sh"
log() { printf '[spark stop] %s\n' "$*" >&2; }
left=0
for name in worker master; do
  pid=$(spark_ours "$name") || continue
  # executors and their Python workers are the worker's descendants
  kids=$(descendants "$pid")
  kill -TERM "$pid" 2>/dev/null
  if ! wait_until 15 eval '! alive '"$pid"; then
    log "$name ($pid) ignored SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null
    wait_until 5 eval '! alive '"$pid" || { log "$name ($pid) is still alive"; left=1; }
  fi
  for k in $kids; do
    if alive "$k"; then kill -KILL "$k" 2>/dev/null; fi
  done
  rm -f "$PIDS/$name.pid"
done
exit $left
