#!/usr/bin/env bash
# start.sh - a standalone Spark (one master, one worker) on loopback for
# drover's tests, from the pyspark package (it carries Spark's jars) in a
# project-local virtual environment (`make spark`), on the machine's Java.
#
# Usage: bash tests/spark/start.sh        then  . "$DROVER_SPARK_DIR/env"
#
#  - everything of its own lives under $DROVER_SPARK_DIR (default
#    /tmp/drover-spark): the pids it started, logs, Spark's work directory;
#  - its own ports: DROVER_SPARK_PORT for the master, the next three for
#    the master's UI, the worker's UI and the REST server; without it, four
#    free consecutive ports below the ephemeral range (free_port_base),
#    picked again when one is taken before Spark binds it (Spark's own
#    retry on the next port is off: the ports would no longer be ours);
#  - the worker offers DROVER_SPARK_CORES (default 8) cores and 8 GB: slots
#    for bookkeeping, not a claim on the machine (a drover node per core);
#  - DROVER_SPARK_GPUS=N (default 0): the worker offers N GPUs, addresses
#    "0".."N-1", found by a discovery script written under $DROVER_SPARK_DIR
#    (spark.worker.resource.gpu.*): Spark assigns them to executors that
#    ask (spark.executor.resource.gpu.amount) without a real GPU here;
#  - bounds every wait (DROVER_SPARK_TIMEOUT seconds, default 90).
#  - writes $DROVER_SPARK_DIR/env: SPARK_HOME, PATH (spark-submit),
#    DROVER_SPARK_MASTER (spark://...), DROVER_SPARK_UI (http://...),
#    PYSPARK_PYTHON (the venv's python, on executors too),
#    DROVER_SPARK_HIDDEN (the hidden directories, '' for none) and
#    DROVER_SPARK_NS_PID (the worker's pid: nsenter -t PID -m sees as it does);
#  - DROVER_SPARK_HIDE="DIR [DIR...]": no shared file system. The worker
#    (and so its executors and drover's nodes) runs in a mount namespace of
#    its own where each DIR (the coordinator's: run directories, data) is
#    covered by an empty tmpfs (tests/noshare/hide.sh); the master stays
#    outside. Each DIR must exist and hold neither $DROVER_SPARK_DIR, the
#    venv nor /tmp. Where unshare and mount are not permitted: SKIP; a DIR that
#    does not exist or would hide what the engine needs: exit 1.
#
# Exit status: 0 started; 77 SKIP with a line "SKIP <reason>" (no venv with
# pyspark, no java, ports taken, daemons did not come up); 1 otherwise.
# With DROVER_SPARK_REQUIRED=1 (CI) a SKIP is a failure: exit 1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_SPARK_DIR:-/tmp/drover-spark}
PORT=${DROVER_SPARK_PORT:-}
TIMEOUT=${DROVER_SPARK_TIMEOUT:-90}
CORES=${DROVER_SPARK_CORES:-8}
SPARK_VENV=${SPARK_VENV:-$HERE/../../build/spark-venv}
PIDS=$DIR/pids

log() { printf '[spark start] %s\n' "$*" >&2; }
skip() {
  echo "SKIP $*"
  if [ "${DROVER_SPARK_REQUIRED:-0}" = 1 ]; then log "DROVER_SPARK_REQUIRED=1: failing"; exit 1; fi
  exit 77
}
exec </dev/null

# shellcheck source=tests/spark/lib.sh
. "$HERE/lib.sh"

[ -x "$SPARK_VENV/bin/python" ] || skip "no Spark venv at $SPARK_VENV (make spark)"
SPARK_VENV=$(cd "$SPARK_VENV" && pwd)
SPARK_HOME=$("$SPARK_VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null) ||
  skip "pyspark is not importable from $SPARK_VENV"
command -v java >/dev/null || skip "no java in PATH (Spark needs Java 17 or later)"
read -r -a hide_dirs <<<"${DROVER_SPARK_HIDE:-}"
HIDE="${hide_dirs[*]}" # one space between directories, '' for none
HIDE_WRAP=()
if [ -n "$HIDE" ]; then
  why=$(bash "$HERE/../noshare/hide.sh" check "$HIDE" "$DIR" "$SPARK_VENV" "$SPARK_HOME" \
    "$HERE/../../build" /tmp) || case $? in
    1) skip "DROVER_SPARK_HIDE='$HIDE': $why" ;;
    *) log "DROVER_SPARK_HIDE='$HIDE': $why"; exit 1 ;;
  esac
  HIDE_WRAP=(bash "$HERE/../noshare/hide.sh" exec "$HIDE")
fi

bash "$HERE/stop.sh" >/dev/null 2>&1 || true
FIXED=${PORT:+1}
if [ -n "$FIXED" ]; then
  for p in "$PORT" $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
    if port_listening "$p"; then skip "TCP port $p is in use (set DROVER_SPARK_PORT)"; fi
  done
fi
mkdir -p "$DIR" "$PIDS" "$DIR/log" "$DIR/work"
trap 'rc=$?; if [ $rc -ne 0 ]; then bash "$HERE/stop.sh" >/dev/null 2>&1; fi; exit $rc' EXIT

export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR=$DIR/log SPARK_WORKER_DIR=$DIR/work
GPUS=${DROVER_SPARK_GPUS:-0}
case $GPUS in ''|*[!0-9]*) skip "DROVER_SPARK_GPUS='$GPUS' is not a count" ;; esac
if [ "$GPUS" -gt 0 ]; then
  addrs=$(seq -s '","' 0 $((GPUS - 1)))
  printf '#!/bin/sh\necho %s\n' "'{\"name\":\"gpu\",\"addresses\":[\"$addrs\"]}'" >"$DIR/gpus.sh"
  chmod 755 "$DIR/gpus.sh"
  GPU_OPTS="-Dspark.worker.resource.gpu.amount=$GPUS -Dspark.worker.resource.gpu.discoveryScript=$DIR/gpus.sh"
fi
# Small daemons: they only schedule.
export SPARK_DAEMON_MEMORY=256m
# start_daemons: the master, then the worker, on $PORT..$PORT+3. Status 0
# up; 2 a daemon died (a port taken since we looked: start again with
# others); 1 no answer within $TIMEOUT s.
start_daemons() {
  local pid
  UI_PORT=$((PORT + 1))
  export SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=true -Dspark.master.rest.port=$((PORT + 3)) -Dspark.port.maxRetries=0"
  export SPARK_WORKER_OPTS="${GPU_OPTS:-} -Dspark.port.maxRetries=0"
  # spark-class runs in the foreground: we keep its pid (it execs java).
  setsid "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 \
    --port "$PORT" --webui-port "$UI_PORT" >"$DIR/log/master.out" 2>&1 &
  pid=$!
  echo $pid >"$PIDS/master.pid"
  wait_until "$TIMEOUT" eval 'master_json >/dev/null 2>&1 || ! alive '"$pid" || return 1
  alive "$pid" || return 2
  setsid "${HIDE_WRAP[@]}" "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 \
    --cores "$CORES" --memory 8g --webui-port $((PORT + 2)) --work-dir "$DIR/work" \
    "spark://127.0.0.1:$PORT" >"$DIR/log/worker.out" 2>&1 &
  pid=$!
  echo $pid >"$PIDS/worker.pid"
  wait_until "$TIMEOUT" eval 'worker_alive || ! alive '"$pid" || return 1
  alive "$pid" || return 2
}
for try in 1 2 3 4 5; do
  if [ -z "$FIXED" ]; then
    PORT=$(free_port_base 4) || skip "no four free consecutive TCP ports below the ephemeral range"
  fi
  rc=0; start_daemons || rc=$?
  [ $rc -eq 2 ] && [ -z "$FIXED" ] && [ $try -lt 5 ] || break
  log "a daemon could not bind its port (taken meanwhile): again with other ports"
  bash "$HERE/stop.sh" >/dev/null 2>&1 || true
  mkdir -p "$PIDS"
done
case $rc in
  0) ;;
  2) skip "a Spark daemon exited (ports $PORT..$((PORT + 3))): $(tail -n 3 "$DIR/log/master.out" "$DIR/log/worker.out" 2>/dev/null)" ;;
  *) skip "Spark did not come up on ports $PORT..$((PORT + 3)) within $TIMEOUT s: $(tail -n 3 "$DIR/log/master.out" "$DIR/log/worker.out" 2>/dev/null)" ;;
esac
cat >"$DIR/env" <<ENV
SPARK_HOME=$SPARK_HOME
PATH=$SPARK_HOME/bin:\$PATH
PYSPARK_PYTHON=$SPARK_VENV/bin/python
PYSPARK_DRIVER_PYTHON=$SPARK_VENV/bin/python
SPARK_LOCAL_IP=127.0.0.1
DROVER_SPARK_MASTER=spark://127.0.0.1:$PORT
DROVER_SPARK_UI=http://127.0.0.1:$UI_PORT
DROVER_SPARK_PORT=$PORT
export SPARK_HOME PATH PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON SPARK_LOCAL_IP DROVER_SPARK_MASTER DROVER_SPARK_UI DROVER_SPARK_PORT
ENV
# No shared file system: the worker's mount namespace is not ours.
wpid=$(cat "$PIDS/worker.pid")
if [ -n "$HIDE" ] &&
  [ "$(readlink "/proc/$wpid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ]; then
  log "DROVER_SPARK_HIDE: the worker ($wpid) runs in our mount namespace"
  exit 1
fi
cat >>"$DIR/env" <<ENV
DROVER_SPARK_HIDDEN='$HIDE'
DROVER_SPARK_NS_PID=$wpid
export DROVER_SPARK_HIDDEN DROVER_SPARK_NS_PID
ENV
[ -z "$HIDE" ] || log "hidden from the worker (pid $wpid): $HIDE"
log "master spark://127.0.0.1:$PORT (UI $UI_PORT), one worker with $CORES cores, $GPUS gpus (state in $DIR)"
