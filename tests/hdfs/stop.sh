#!/usr/bin/env bash
# stop.sh - stops the test HDFS that tests/hdfs/start.sh started, and
# nothing else: the pid in $DROVER_HDFS_DIR/pid, checked against its
# command line so a reused pid is never signalled. SIGTERM (its shutdown
# hook stops the cluster in at most 8 s), up to 15 s, then SIGKILL of the
# JVM's process group (setsid in start.sh). Idempotent. The state stays
# (start.sh removes it before a new cluster).
set -uo pipefail
DIR=${DROVER_HDFS_DIR:-/tmp/drover-hdfs}
log() { printf '[hdfs stop] %s\n' "$*" >&2; }
exec </dev/null

pid=$(cat "$DIR/pid" 2>/dev/null) || exit 0
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
if ! alive "$pid" || ! grep -q 'drover.yarn.TestHdfs' "/proc/$pid/cmdline" 2>/dev/null; then
  rm -f "$DIR/pid"
  exit 0
fi
kill -TERM "$pid"
for _ in $(seq 30); do alive "$pid" || break; sleep 0.5; done
if alive "$pid"; then
  log "the test HDFS ($pid) ignored SIGTERM: SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
  for _ in $(seq 10); do alive "$pid" || break; sleep 0.5; done
fi
if alive "$pid"; then log "the test HDFS ($pid) is still running"; exit 1; fi
rm -f "$DIR/pid"
log "stopped the test HDFS ($pid)"
