#!/usr/bin/env bash
# start.sh - a single-machine Slurm (munged, slurmctld, one slurmd) for
# drover's tests, from the verified recipe in ../shared/slurm/NOTES.md.
#
# Usage: bash tests/slurm/start.sh        then  . "$DROVER_SLURM_DIR/env"
#
# What it does, and why it differs from the recipe:
#  - installs with apt-get only the packages that are missing (no libslurm:
#    drover drives Slurm through its commands);
#  - keeps everything of its own under one state directory ($DROVER_SLURM_DIR,
#    default /tmp/drover-slurm): slurm.conf, the daemons' state, logs, and
#    the pids it started. It never writes /etc/slurm: clients find the
#    config through SLURM_CONF (written to $DROVER_SLURM_DIR/env), so a
#    system Slurm, or another copy of the recipe, is left alone;
#  - uses its own ports (DROVER_SLURM_PORT, default 16817 for slurmctld and
#    the next one for slurmd) for the same reason;
#  - is idempotent: when the daemons it recorded are alive and the node is
#    idle it reuses them; otherwise it stops what is left (stop.sh) and
#    starts afresh, with wiped state;
#  - tracks memory (CR_CPU_Memory with DefMemPerCPU=100, where the recipe
#    has CR_CPU), so the launcher's per-step --mem is scheduled and shown
#    by `scontrol show step`, as on most production clusters;
#  - bounds every wait (DROVER_SLURM_TIMEOUT seconds, default 60).
#
# Exit status: 0 started (or already running); 77 SKIP, with a line
# "SKIP <reason>" on stdout, when Slurm cannot be installed or started here
# (not root, no apt-get, install failed, ports taken, daemons did not come
# up); 1 for anything else. With DROVER_SLURM_REQUIRED=1 (CI) a SKIP is a
# failure: exit 1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_SLURM_DIR:-/tmp/drover-slurm}
PORT=${DROVER_SLURM_PORT:-16817}
TIMEOUT=${DROVER_SLURM_TIMEOUT:-60}
CPUS=${DROVER_SLURM_CPUS:-8}
CONF=$DIR/slurm.conf
PIDS=$DIR/pids
LOGS=$DIR/log

log() { printf '[slurm start] %s\n' "$*" >&2; }
skip() {
  echo "SKIP $*"
  if [ "${DROVER_SLURM_REQUIRED:-0}" = 1 ]; then log "DROVER_SLURM_REQUIRED=1: failing"; exit 1; fi
  exit 77
}
exec </dev/null # apt and the daemons must never wait on our stdin

[ "$(id -u)" = 0 ] || skip "Slurm tests need root (to install packages and run slurmd)"

# shellcheck source=tests/slurm/lib.sh
. "$HERE/lib.sh"

# ============================== install ====================================
mkdir -p "$DIR"
need=()
[ -x /usr/sbin/munged ] || need+=(munge)
[ -x /usr/sbin/slurmctld ] || need+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need+=(slurmd)
[ -x /usr/bin/srun ] || need+=(slurm-client)
# tini -s: a child subreaper for slurmd, so orphans of killed tasks are
# reaped at once (NOTES.md pitfall 1: a lazy PID 1 stalls step teardown).
[ -x /usr/bin/tini ] || need+=(tini)
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || skip "Slurm is not installed (missing: ${need[*]}) and there is no apt-get"
  log "installing ${need[*]}"
  # Keep the packages' init scripts from starting daemons during install
  # (without systemd, invoke-rc.d falls back to /etc/init.d).
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  ok=0
  for attempt in 1 2 3; do
    # Lock::Timeout: another apt on the machine makes us wait, not fail.
    if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef \
        -o Dpkg::Options::=--force-confold "${need[@]}" >"$DIR/apt.log" 2>&1; then
      ok=1
      break
    fi
    log "apt-get attempt $attempt failed"
    sleep 2
  done
  if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$ok" = 1 ] || skip "apt-get install ${need[*]} failed: $(tail -n 1 "$DIR/apt.log" 2>/dev/null)"
fi

# ============================== reuse ======================================
if slurm_ours_alive && SLURM_CONF=$CONF sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; then
  log "already running (state in $DIR)"
  echo "SLURM_CONF=$CONF"
  exit 0
fi
bash "$HERE/stop.sh" >/dev/null 2>&1 || true
for p in "$PORT" $((PORT + 1)); do
  if port_listening "$p"; then skip "TCP port $p is in use (set DROVER_SLURM_PORT)"; fi
done
mkdir -p "$DIR" "$PIDS" "$LOGS"
# From here on, a failed start (a SKIP included) stops what it started.
trap 'rc=$?; if [ $rc -ne 0 ]; then bash "$HERE/stop.sh" >/dev/null 2>&1; fi; exit $rc' EXIT

# ============================== munge ======================================
if [ ! -s /etc/munge/munge.key ]; then # the package's postinst normally makes it
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge /etc/munge/munge.key
chmod 700 /etc/munge
chmod 400 /etc/munge/munge.key
# Our own munged on our own socket: a munged shared with another Slurm of
# these tests (another run on the machine) could be stopped under us. It
# lives below /run/munge, not in $DIR: the user munge must reach it, and a
# test's $DIR is often inside a private (0700) temporary directory.
install -d -o munge -g munge -m 755 /run/munge
MUNGE=/run/munge/drover-$PORT
install -d -o munge -g munge -m 755 "$MUNGE"
echo "$MUNGE" >"$DIR/munge.dir"
SOCK=$MUNGE/munge.socket
munge_ok() { munge -S "$SOCK" -n 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; }
rm -f "$SOCK" "$SOCK.lock"
runuser -u munge -- /usr/sbin/munged --socket="$SOCK" --pid-file="$MUNGE/munged.pid" \
  --log-file="$MUNGE/munged.log" --seed-file="$MUNGE/munged.seed" # forks
wait_until "$TIMEOUT" munge_ok || skip "munged did not come up; see $MUNGE/munged.log"
cp "$MUNGE/munged.pid" "$PIDS/munged.pid"

# ============================== slurm.conf =================================
H=$(hostname -s)
[ -n "$H" ] || skip "hostname -s is empty"
getent hosts "$H" >/dev/null || skip "this host's name '$H' does not resolve"
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
rm -rf "$DIR/ctld" "$DIR/d" # fresh state: no recovered jobs or drained node
mkdir -p "$DIR/ctld" "$DIR/d"
for f in "$LOGS"/*.log; do [ -e "$f" ] && mv -f "$f" "$f.prev"; done
# The lines that matter, each explained in NOTES.md sections 3 and 10.
cat >"$CONF.tmp" <<EOF
# generated by drover's tests/slurm/start.sh on every start
ClusterName=drover
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
# also the delay before a requeued job may run again (default 120 s)
AuthInfo=socket=$SOCK,cred_expire=10
MpiDefault=none
# killpg() of a cancelled task also gets its children (with tini, below)
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,sched_interval=2
SelectType=select/cons_tres
# memory is a consumable, as on most clusters: the launcher's --mem per step
# is then enforced in scheduling and shown by scontrol (a step without --mem
# would take all of its job's memory and make the next step wait); with a
# default per CPU so that a job without --mem does not take the whole node
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=100
# CPUs=$CPUS on a smaller host is trusted, not drained
SlurmdParameters=config_overrides
# a job that can never fit is rejected, not left pending forever
EnforcePartLimits=ALL
ReturnToService=2
KillWait=5
MinJobAge=300
MailProg=/bin/true
SlurmctldPidFile=$PIDS/slurmctld.pid
SlurmdPidFile=$PIDS/slurmd.pid
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$H NodeHostname=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.tmp" "$CONF"
chmod 644 "$CONF"
echo "export SLURM_CONF=$CONF" >"$DIR/env"

# ============================== daemons ====================================
export SLURM_CONF=$CONF
# slurmctld daemonizes itself and writes its pid file. slurmd starts only
# once slurmctld listens: one that registers too early retries after 1 s.
/usr/sbin/slurmctld -f "$CONF" </dev/null >/dev/null 2>&1 ||
  skip "slurmctld failed to start; see $LOGS/slurmctld.log"
wait_until "$TIMEOUT" port_listening "$PORT" ||
  skip "slurmctld is not listening on $PORT; see $LOGS/slurmctld.log"
setsid /usr/bin/tini -s -- /usr/sbin/slurmd -D -f "$CONF" -N "$H" </dev/null >/dev/null 2>&1 &
echo $! >"$PIDS/tini.pid"
node_idle() { sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; }
if ! wait_until "$TIMEOUT" node_idle; then
  tail -n 20 "$LOGS/slurmd.log" "$LOGS/slurmctld.log" >&2 || true
  skip "the Slurm node did not become idle within ${TIMEOUT}s; see $LOGS"
fi
slurm_ours_alive || skip "a daemon exited after start; see $LOGS"
log "slurmctld $(cat "$PIDS/slurmctld.pid"), slurmd $(cat "$PIDS/slurmd.pid") under tini $(cat "$PIDS/tini.pid"); state in $DIR"
echo "SLURM_CONF=$CONF"
