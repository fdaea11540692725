# engine_lib.sh - what the test engines' start.sh and stop.sh share
# (tests/hdfs/, tests/yarn/: one JVM each, its pid in $DIR/pid). Sourced by
# bash with ENGINE set ("hdfs": it names the log lines and the
# DROVER_<ENGINE>_REQUIRED variable); the JVM helpers need DIR (the state
# directory) and, for jvm_await, TIMEOUT (seconds) and HERE (stop.sh's).

# log WORDS...: "[ENGINE start] WORDS" on stderr (start or stop: the script's name).
log() { printf '[%s %s] %s\n' "$ENGINE" "$(basename "$0" .sh)" "$*" >&2; }

# skip WHY...: prints "SKIP WHY" and exits 77 (the test SKIPs); with
# DROVER_<ENGINE>_REQUIRED=1 (CI) exits 1 instead.
skip() {
  local req="DROVER_${ENGINE^^}_REQUIRED"
  echo "SKIP $*"
  if [ "${!req:-0}" = 1 ]; then log "$req=1: failing"; exit 1; fi
  exit 77
}

# alive PID: the process exists and is not a zombie (`kill -0` succeeds on
# zombies, and this machine's PID 1 reaps orphans lazily).
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null &&
  ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# jvm_ours CLASS: prints the pid in $DIR/pid when that process is alive and
# runs CLASS (a pid reused by another program is not ours); false otherwise.
jvm_ours() {
  local pid
  pid=$(cat "$DIR/pid" 2>/dev/null) || return 1
  alive "$pid" && grep -q "$1" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

# jvm_await FILE PID WHAT LOG: waits, at most $TIMEOUT s, for the JVM PID to
# write FILE (it does once it is up). Where it does not (it died, or the
# time passed), says so with the end of LOG, stops it (stop.sh) and exits 1.
jvm_await() {
  jvm_up "$1" "$2" && return 0
  log "$3 did not come up in ${TIMEOUT}s; its log ends:"
  tail -20 "$4" >&2
  bash "$HERE/stop.sh" || true
  exit 1
}

# jvm_up FILE PID: 0 once FILE has content, 1 when PID died or TIMEOUT
# seconds passed first.
jvm_up() {
  for _ in $(seq "$TIMEOUT"); do
    [ -s "$1" ] && return 0
    alive "$2" || break
    sleep 1
  done
  [ -s "$1" ]
}

# jvm_start_retry FILE LOG CMD...: runs CMD (which starts the JVM in the
# background and writes its pid to $DIR/pid) and waits for FILE; the test
# clusters take ports the kernel gave as free and bind them a moment
# later, so another test may take one first: a BindException in LOG
# starts it again, up to three times. Returns as jvm_up.
jvm_start_retry() {
  local file=$1 logf=$2 try
  shift 2
  for try in 1 2 3; do
    "$@"
    jvm_up "$file" "$(cat "$DIR/pid")" && return 0
    grep -q "BindException" "$logf" 2>/dev/null && [ $try -lt 3 ] || return 1
    log "a port was taken between its choice and its bind (try $try); starting again"
    bash "$HERE/stop.sh" >/dev/null 2>&1 || true
  done
  return 1
}

# jvm_stop CLASS WHAT: stops the JVM of jvm_ours CLASS, and nothing else:
# SIGTERM (its shutdown hook stops the cluster in at most 8 s), up to 15 s,
# then SIGKILL of its process group (setsid in start.sh). 0 when it is
# gone (or was not running: $DIR/pid removed), 1 when it still runs.
jvm_stop() {
  local pid
  pid=$(jvm_ours "$1") || { rm -f "$DIR/pid"; return 0; }
  kill -TERM "$pid"
  for _ in $(seq 30); do alive "$pid" || break; sleep 0.5; done
  if alive "$pid"; then
    log "$2 ($pid) ignored SIGTERM: SIGKILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
    for _ in $(seq 10); do alive "$pid" || break; sleep 0.5; done
  fi
  if alive "$pid"; then log "$2 ($pid) is still running"; return 1; fi
  rm -f "$DIR/pid"
  log "stopped $2 ($pid)"
}
