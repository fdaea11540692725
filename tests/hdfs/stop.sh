#!/usr/bin/env bash
# stop.sh - stops the test HDFS that tests/hdfs/start.sh started, and
# nothing else: the pid in $DROVER_HDFS_DIR/pid, checked against its
# command line so a reused pid is never signalled. SIGTERM (its shutdown
# hook stops the cluster in at most 8 s), up to 15 s, then SIGKILL of the
# JVM's process group (setsid in start.sh). Idempotent. The state stays
# (start.sh removes it before a new cluster).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_HDFS_DIR:-/tmp/drover-hdfs}
ENGINE=hdfs
# shellcheck source=tests/engine_lib.sh
. "$HERE/../engine_lib.sh"
exec </dev/null
jvm_stop drover.yarn.TestHdfs "the test HDFS"
