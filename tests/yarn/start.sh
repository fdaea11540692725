#!/usr/bin/env bash
# start.sh - the test YARN: Hadoop's MiniYARNCluster (a real ResourceManager
# and two NodeManagers, the second labelled "gpu", in one JVM) on loopback,
# from tests/yarn/ built by `make yarn-deps` (build/yarn, Maven repository
# build/m2: nothing goes into the system), with drover's ApplicationMaster
# from yarn/ (build/yarn-am/drover-yarn-am.jar, also `make yarn-deps`).
#
# Usage: bash tests/yarn/start.sh        then  . "$DROVER_YARN_DIR/env"
# which sets DROVER_YARN_RM (host:port of the RM's REST API) and
# DROVER_YARN_AM_CLASSPATH (the classpath drover's ApplicationMaster runs
# with: the cluster's configuration, the AM's jar and this machine's Hadoop
# jars, as `yarn classpath` gives them on a cluster) and DROVER_YARN_AM_JAR
# (the AM's jar). With DROVER_YARN_KERBEROS=1 the cluster's web endpoints,
# the RM's REST API among them, ask for Kerberos (SPNEGO) from a MiniKdc
# (tests/yarn/src/.../Kdc.java), and the env file also sets KRB5_CONFIG and
# KRB5CCNAME: a ticket cache with a TGT of alice, as `kinit alice` leaves.
#
# The NodeManagers have what a cluster's have in their environment, which
# YARN's default application classpath names (drover's, for an installed
# AM jar: src/launch/launch_yarn_rm.c): HADOOP_CONF_DIR (conf/: the
# cluster's yarn-site.xml and log4j.properties) and HADOOP_COMMON_HOME
# (hadoop/: share/hadoop/common/lib/ links to the Hadoop jars).
#
# Everything lives under $DROVER_YARN_DIR (default /tmp/drover-yarn): the
# JVM's pid, its log (log/yarn.log), the cluster's work dirs and container
# logs (work/). Idempotent: a live cluster of ours is reused; otherwise what
# is left is stopped (stop.sh) and a new one started on fresh state. Every
# wait is bounded (DROVER_YARN_TIMEOUT seconds, default 90).
#
# DROVER_YARN_HIDE="DIR [DIR...]": no shared file system. The JVM (its
# ResourceManager, NodeManagers and so every container: drover's AM and
# nodes) runs in a mount namespace of its own where each DIR (the
# coordinator's: run directories, data) is covered by an empty tmpfs
# (tests/noshare/hide.sh). Each DIR must exist and hold neither
# $DROVER_YARN_DIR, the jars, $DROVER_YARN_STAGING nor /tmp; the env file
# then also says DROVER_YARN_HIDDEN (the directories, '' for none) and
# DROVER_YARN_NS_PID (the JVM: nsenter -t PID -m sees as it does). A live
# cluster is reused only when it hides the same. Where unshare and mount
# are not permitted: SKIP; a DIR that does not exist or would hide what
# the engine needs: exit 1.
#
# Exit status: 0 started (or already running); 77 with "SKIP <reason>" when
# Java, Maven or the built jars are missing; 1 for anything else. With
# DROVER_YARN_REQUIRED=1 (CI) a SKIP is a failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DIR=${DROVER_YARN_DIR:-/tmp/drover-yarn}
TIMEOUT=${DROVER_YARN_TIMEOUT:-90}
JAR=${DROVER_YARN_JAR:-$ROOT/build/yarn/drover-yarn-test.jar}
AM_JAR=${DROVER_YARN_AM_JAR:-$ROOT/build/yarn-am/drover-yarn-am.jar}
CP_FILE=$(dirname "$JAR")/classpath.txt

ENGINE=yarn
# shellcheck source=tests/engine_lib.sh
. "$HERE/../engine_lib.sh"
exec </dev/null

command -v java >/dev/null || skip "no java (the test YARN is Hadoop's MiniYARNCluster)"
[ -f "$JAR" ] && [ -f "$CP_FILE" ] || skip "no $JAR (run make yarn-deps)"
[ -f "$AM_JAR" ] || skip "no $AM_JAR (run make yarn-deps)"
read -r -a hide_dirs <<<"${DROVER_YARN_HIDE:-}"
HIDE="${hide_dirs[*]}" # one space between directories, '' for none
HIDE_WRAP=()
if [ -n "$HIDE" ]; then
  why=$(bash "$HERE/../noshare/hide.sh" check "$HIDE" "$DIR" "$(dirname "$JAR")" \
    "$(dirname "$AM_JAR")" "$ROOT/build" "${DROVER_YARN_STAGING:-}" /tmp) || case $? in
    1) skip "DROVER_YARN_HIDE='$HIDE': $why" ;;
    *) log "DROVER_YARN_HIDE='$HIDE': $why"; exit 1 ;;
  esac
  HIDE_WRAP=(bash "$HERE/../noshare/hide.sh" exec "$HIDE")
fi

rm_up() { [ -s "$DIR/rm" ] && curl -sf -m 5 "http://$(cat "$DIR/rm")/ws/v1/cluster/info" >/dev/null; }

if jvm_ours drover.yarn.TestCluster >/dev/null && rm_up && [ "$(cat "$DIR/hidden" 2>/dev/null)" = "$HIDE" ]; then
  log "reusing the test YARN at $(cat "$DIR/rm")"
  exit 0
fi
bash "$HERE/stop.sh" || true
rm -rf "$DIR"
mkdir -p "$DIR/log" "$DIR/conf" "$DIR/hadoop/share/hadoop/common/lib"
cp "$HERE/src/main/resources/log4j.properties" "$DIR/conf/"
printf '%s\n' "$HIDE" >"$DIR/hidden"
hadoop_cp=$(cat "$CP_FILE")
(IFS=:; for j in $hadoop_cp; do ln -s "$j" "$DIR/hadoop/share/hadoop/common/lib/"; done)

# The NodeManagers' JAVA_HOME, passed on to containers: a JDK whose
# bin/java notes each run in $DIR/jdk/used, then runs this machine's java.
# The AM's command runs $JAVA_HOME/bin/java when JAVA_HOME is set
# (launch_yarn_rm.c); test_yarn.sh checks the AM came through it.
mkdir -p "$DIR/jdk/bin"
real_java=$(readlink -f "$(command -v java)")
cat >"$DIR/jdk/bin/java" <<JAVA
#!/bin/sh
echo "\$\$" >>'$DIR/jdk/used'
exec '$real_java' "\$@"
JAVA
chmod +x "$DIR/jdk/bin/java"

# setsid: the cluster outlives this script; stop.sh ends it by its pid.
start_yarn() {
  JAVA_HOME=$DIR/jdk HADOOP_CONF_DIR=$DIR/conf HADOOP_COMMON_HOME=$DIR/hadoop \
    setsid "${HIDE_WRAP[@]}" java -Xmx1g -cp "$JAR:$hadoop_cp" drover.yarn.TestCluster "$DIR" >"$DIR/log/yarn.log" 2>&1 &
  echo $! >"$DIR/pid"
}
jvm_start_retry "$DIR/rm" "$DIR/log/yarn.log" start_yarn ||
  jvm_await "$DIR/rm" "$(cat "$DIR/pid")" "the test YARN" "$DIR/log/yarn.log"
pid=$(cat "$DIR/pid")
cat >"$DIR/env" <<ENV
export DROVER_YARN_DIR='$DIR'
export DROVER_YARN_RM='$(cat "$DIR/rm")'
export DROVER_YARN_AM_CLASSPATH='$DIR/conf:$AM_JAR:$hadoop_cp'
export DROVER_YARN_AM_JAR='$AM_JAR'
export DROVER_YARN_HIDDEN='$HIDE'
export DROVER_YARN_NS_PID=$pid
ENV
# No shared file system: the JVM's mount namespace is not ours.
if [ -n "$HIDE" ] && [ "$(readlink "/proc/$pid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ]; then
  log "DROVER_YARN_HIDE: the test YARN ($pid) runs in our mount namespace"
  bash "$HERE/stop.sh" || true
  exit 1
fi
[ -z "$HIDE" ] || log "hidden from the test YARN (pid $pid): $HIDE"
if [ -f "$DIR/kdc/krb5.conf" ]; then # DROVER_YARN_KERBEROS=1: a client's Kerberos (Kdc.java)
  printf "export KRB5_CONFIG='%s'\nexport KRB5CCNAME='FILE:%s'\n" "$DIR/kdc/krb5.conf" \
    "$DIR/kdc/ccache" >>"$DIR/env"
fi
log "test YARN up: RM REST at http://$(cat "$DIR/rm") (pid $pid)"
