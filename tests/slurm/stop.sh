#!/usr/bin/env bash
# stop.sh - stops the Slurm that tests/slurm/start.sh started, and nothing
# else: the pids recorded in $DROVER_SLURM_DIR/pids (each checked against
# its program name, so a reused pid is never signalled).
#
# Order: cancel every job while slurmctld is up (Slurm tears down its own
# steps, whose slurmstepd outlive slurmd), wait for the processes below our
# tini to go, then SIGTERM slurmd, tini, slurmctld and our own munged, each
# with a bounded wait and SIGKILL after it.
# Idempotent: a no-op when nothing of ours runs.
#
# Exit status: 0 when nothing we started is left; 1 otherwise (named on
# stderr); 77 when not root (there is nothing we could have started).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${DROVER_SLURM_DIR:-/tmp/drover-slurm}
PIDS=$DIR/pids
export SLURM_CONF=$DIR/slurm.conf
log() { printf '[slurm stop] %s\n' "$*" >&2; }
exec </dev/null

[ "$(id -u)" = 0 ] || { echo "SKIP not root"; exit 77; }
[ -d "$PIDS" ] || exit 0
# shellcheck source=tests/slurm/lib.sh
. "$HERE/lib.sh"

# stop_pid PID NAME: SIGTERM, up to 15 s, then SIGKILL and up to 5 s more.
stop_pid() {
  kill -TERM "$1" 2>/dev/null || return 0
  if wait_until 15 eval '! alive '"$1"; then log "stopped $2 ($1)"; return 0; fi
  log "$2 ($1) ignored SIGTERM: SIGKILL"
  kill -KILL "$1" 2>/dev/null
  wait_until 5 eval '! alive '"$1"
}

# ============================== jobs =======================================
if ours slurmctld >/dev/null; then
  jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    # KillWait=5 in our slurm.conf, so 20 s is plenty
    no_jobs() { [ -z "$(squeue -h -o %A 2>/dev/null)" ]; }
    wait_until 20 no_jobs || log "jobs still listed after 20 s: $(squeue -h -o %A | tr '\n' ' ')"
  fi
fi
# slurmstepd and the tasks of cancelled steps run below our tini
if tini=$(ours tini); then
  steps_gone() { [ -z "$(descendants "$tini" | grep -vx "$(ours slurmd || echo -)")" ]; }
  wait_until 20 steps_gone || log "processes still below tini after 20 s: $(descendants "$tini" | tr '\n' ' ')"
fi

# ============================== daemons ====================================
for name in slurmd tini slurmctld munged; do
  if pid=$(ours "$name"); then stop_pid "$pid" "$name"; fi
done

# ============================== check ======================================
left=""
for name in slurmd tini slurmctld munged; do
  if pid=$(ours "$name"); then left="$left $name($pid)"; else rm -f "$PIDS/$name.pid"; fi
done
# Our munged's socket directory (start.sh names it), once munged is gone.
if [ -s "$DIR/munge.dir" ] && ! ours munged >/dev/null; then
  m=$(cat "$DIR/munge.dir")
  case "$m" in /run/munge/drover-[0-9]*) rm -rf "$m" && rm -f "$DIR/munge.dir" ;; esac
fi
if [ -n "$left" ]; then
  log "still running:$left"
  exit 1
fi
exit 0
