# lib.sh - helpers shared by tests/spark/start.sh and stop.sh (sourced by
# bash). Expects DIR (the state directory) and PIDS (its pids/) to be set.
# The generic helpers (wait_until, port_listening, alive) are Slurm's.
# shellcheck source=tests/slurm/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../slurm/lib.sh"

# spark_ours NAME: the pid in $PIDS/NAME.pid when that process is alive and
# is a java running Spark's class for NAME ("master" or "worker"; a pid
# reused by another program is not ours); false otherwise.
spark_ours() {
  local f=$PIDS/$1.pid pid cls
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [ -n "$pid" ] && alive "$pid" || return 1
  case $1 in master) cls=deploy.master.Master ;; *) cls=deploy.worker.Worker ;; esac
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "org\.apache\.spark\.$cls" || return 1
  echo "$pid"
}

# master_json: the standalone master's status (its web UI's /json/).
master_json() {
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())' \
    "http://127.0.0.1:$UI_PORT/json/"
}

# worker_alive: the master lists an ALIVE worker.
worker_alive() { master_json 2>/dev/null | grep -q '"state" *: *"ALIVE"'; }
