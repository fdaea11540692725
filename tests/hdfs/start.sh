#!/usr/bin/env bash
# start.sh - the test HDFS: Hadoop's MiniDFSCluster (a real NameNode and
# one DataNode in one JVM: drover.yarn.TestHdfs, in the test YARN's jar)
# on loopback, WebHDFS on, permissions checked, the superuser the user
# running it; from tests/yarn/ built by `make yarn-deps` (build/yarn,
# Maven repository build/m2: nothing goes into the system).
#
# Usage: bash tests/hdfs/start.sh        then  . "$DROVER_HDFS_DIR/env"
# which sets DROVER_HDFS (hdfs://127.0.0.1:RPCPORT, the NameNode's RPC
# address as fs.defaultFS names it), DROVER_WEBHDFS
# (webhdfs://127.0.0.1:HTTPPORT, its WebHDFS address) and HADOOP_CONF_DIR
# (core-site.xml with fs.defaultFS, hdfs-site.xml with
# dfs.namenode.http-address: what a cluster's client configuration has),
# plus DROVER_HDFS_DIR and DROVER_HDFS_CLASSPATH (Hadoop's own client, for
# `java -cp "$DROVER_HDFS_CLASSPATH" drover.yarn.HdfsShell cat|put PATH`).
# /tmp in it is 1777 and /user/$USER the user's.
#
# Ports: free ones on 127.0.0.1 picked below the kernel's ephemeral range.
# Everything lives under $DROVER_HDFS_DIR (default /tmp/drover-hdfs): the
# JVM's pid, its log (log/hdfs.log), the blocks and namespace (work/).
# Idempotent: a live cluster of ours is reused; otherwise what is left is
# stopped (stop.sh) and a new one started on fresh state. Every wait is
# bounded (DROVER_HDFS_TIMEOUT seconds, default 90).
#
# Exit status: 0 started (or already running); 77 with "SKIP <reason>" when
# Java or the built jars are missing; 1 for anything else. With
# DROVER_HDFS_REQUIRED=1 (CI) a SKIP is a failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DIR=${DROVER_HDFS_DIR:-/tmp/drover-hdfs}
TIMEOUT=${DROVER_HDFS_TIMEOUT:-90}
JAR=${DROVER_YARN_JAR:-$ROOT/build/yarn/drover-yarn-test.jar}
CP_FILE=$(dirname "$JAR")/classpath.txt

ENGINE=hdfs
# shellcheck source=tests/engine_lib.sh
. "$HERE/../engine_lib.sh"
exec </dev/null

command -v java >/dev/null || skip "no java (the test HDFS is Hadoop's MiniDFSCluster)"
[ -f "$JAR" ] && [ -f "$CP_FILE" ] || skip "no $JAR (run make yarn-deps)"

nn_up() { [ -s "$DIR/nn" ] && [ -s "$DIR/env" ] &&
  curl -sf -m 5 "http://127.0.0.1:$(cut -d' ' -f2 "$DIR/nn")/webhdfs/v1/?op=GETFILESTATUS" >/dev/null; }

if jvm_ours drover.yarn.TestHdfs >/dev/null && nn_up; then
  log "reusing the test HDFS at $(cat "$DIR/nn")"
  exit 0
fi
bash "$HERE/stop.sh" || true
rm -rf "$DIR"
mkdir -p "$DIR/log" "$DIR/conf"
cp "$ROOT/tests/yarn/src/main/resources/log4j.properties" "$DIR/conf/"
cp_all="$JAR:$(cat "$CP_FILE")"

# setsid: the cluster outlives this script; stop.sh ends it by its pid.
# HADOOP_USER_NAME unset: the superuser is the user running this.
start_hdfs() {
  env -u HADOOP_USER_NAME setsid java -Xmx512m -cp "$DIR/conf:$cp_all" drover.yarn.TestHdfs "$DIR" \
    >"$DIR/log/hdfs.log" 2>&1 &
  echo $! >"$DIR/pid"
}
jvm_start_retry "$DIR/nn" "$DIR/log/hdfs.log" start_hdfs ||
  jvm_await "$DIR/nn" "$(cat "$DIR/pid")" "the test HDFS" "$DIR/log/hdfs.log"
read -r rpc http <"$DIR/nn"
cat >"$DIR/env" <<ENV
export DROVER_HDFS_DIR='$DIR'
export DROVER_HDFS='hdfs://127.0.0.1:$rpc'
export DROVER_WEBHDFS='webhdfs://127.0.0.1:$http'
export HADOOP_CONF_DIR='$DIR/conf'
export DROVER_HDFS_CLASSPATH='$DIR/conf:$cp_all'
ENV
if ! nn_up; then
  log "the test HDFS's WebHDFS does not answer on 127.0.0.1:$http"
  bash "$HERE/stop.sh" || true
  exit 1
fi
log "test HDFS up: hdfs://127.0.0.1:$rpc, webhdfs://127.0.0.1:$http (pid $(cat "$DIR/pid"))"
