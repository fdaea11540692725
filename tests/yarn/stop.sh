#!/usr/bin/env bash
# stop.sh - stops the test YARN that tests/yarn/start.sh started, and
# nothing else: the pid in $DROVER_YARN_DIR/pid, checked against its
# command line so a reused pid is never signalled. The MiniYARNCluster's
# shutdown hook stops its NodeManagers, which kill their containers.
# SIGTERM (its hook stops the cluster in at most 8 s), up to 15 s, then
# SIGKILL of the JVM's process group (setsid in start.sh). Idempotent.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_YARN_DIR:-/tmp/drover-yarn}
ENGINE=yarn
# shellcheck source=tests/engine_lib.sh
. "$HERE/../engine_lib.sh"
exec </dev/null
jvm_stop drover.yarn.TestCluster "the test YARN"
