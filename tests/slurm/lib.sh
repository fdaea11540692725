# lib.sh - helpers shared by tests/slurm/start.sh and stop.sh (sourced by
# bash). Expects DIR (the state directory) and PIDS (its pids/) to be set.

# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds (true)
# or SECONDS pass (false).
wait_until() {
  local limit=$(($1 * 10)) i=0
  shift
  while [ $i -lt $limit ]; do
    if "$@"; then return 0; fi
    sleep 0.1
    i=$((i + 1))
  done
  "$@"
}

# port_listening PORT: something listens on TCP PORT (IPv4 or IPv6).
port_listening() {
  awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
    END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# free_port_base COUNT: a port P with P..P+COUNT-1 all free, picked at random
# between 10000 and the start of the kernel's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range): a daemon's port in that range
# may be taken by any outgoing connection before the daemon binds it.
# Retries on a taken port; false when 100 tries found none.
free_port_base() {
  local n=$1 lo=10000 hi p k tries=0 ok
  hi=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  case $hi in ''|*[!0-9]*) hi=32768 ;; esac
  [ "$hi" -gt $((lo + n + 100)) ] || hi=32768
  while [ $tries -lt 100 ]; do
    p=$((lo + (RANDOM * 32768 + RANDOM + $$) % (hi - n - lo)))
    ok=1
    for ((k = 0; k < n; k++)); do
      if port_listening $((p + k)); then ok=0; break; fi
    done
    if [ $ok = 1 ]; then echo "$p"; return 0; fi
    tries=$((tries + 1))
  done
  return 1
}

# alive PID: the process exists and is not a zombie. `kill -0` succeeds on
# zombies, and this machine's PID 1 reaps orphans lazily (NOTES.md).
alive() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# ours NAME: prints the pid recorded in $PIDS/NAME.pid if that process is
# alive and still runs the program NAME (a pid reused by another program
# is not ours); false otherwise.
ours() {
  local f=$PIDS/$1.pid pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  echo "$pid"
}

# slurm_ours_alive: slurmctld, tini and slurmd we started are all running.
slurm_ours_alive() {
  ours slurmctld >/dev/null && ours tini >/dev/null && ours slurmd >/dev/null
}

# descendants PID: every live process below PID (children, grandchildren...).
descendants() {
  ps -e -o pid=,ppid=,stat= | awk -v root="$1" '
    $3 !~ /^Z/ { parent[$1] = $2 }
    END { for (p in parent) { q = p; while (q in parent && q != root) q = parent[q];
                              if (q == root && p != root) print p } }'
}
