# lib.sh - helpers for CLI tests (sourced). Each case prints PASS/FAIL lines
# that tests/run.sh counts.
: "${DROVER:=$PWD/drover}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-cli-XXXXXX")
# at_exit CMD: CMD (shell text, evaluated then) runs when the test exits,
# before $TMP is removed (KEEP_TMP=1 keeps it); the last added runs first.
# A test that sets its own EXIT trap replaces all of this.
AT_EXIT=
at_exit() { AT_EXIT="$1; $AT_EXIT"; }
# kill_at_exit PID...: those processes are SIGKILLed at exit (if still there).
kill_at_exit() { [ -z "$*" ] || at_exit "kill -9 $* 2>/dev/null"; }
# note_coords: the coordinators of the runs under $RUNS, killed at exit:
# "ADDRESS PID" in each run's coordinator file while it runs.
note_coords() {
  for f in "$RUNS"/*/coordinator; do
    [ -f "$f" ] && kill_at_exit "$(awk '{ print $2; exit }' "$f")"
  done
}
trap 'eval "$AT_EXIT"; [ -n "$KEEP_TMP" ] || rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# check NAME CONDITION-COMMAND... : PASS when the command succeeds.
check() { name=$1; shift; if "$@"; then pass "$name"; else fail "$name" "$*"; fi; }

# wait_for SECONDS CMD...: true once CMD succeeds (polled every 0.1 s).
wait_for() {
  limit=$(( $1 * 10 )); shift
  i=0
  while [ $i -lt $limit ]; do
    "$@" && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# python_client NAME: PY, the Python of $VENV (make venv), with the Python
# client (clients/python) on its path; without VENV the test prints "SKIP
# NAME: ..." and exits.
python_client() {
  if [ -z "${VENV:-}" ]; then
    echo "SKIP $1: VENV is not set (make venv)"
    exit 0
  fi
  PY=$VENV/bin/python
  export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
}

# feed_fit_start NAME: runs, in the background, a script training a small
# digits MLP on 1 ps + 2 workers with feed = "external" (epochs 2), that
# prints "FED n TRAINED m" into $TMP/NAME.out when its fit ends. Sets
# trainer (its pid, killed at exit) and RUN (its run directory, once the
# coordinator is up) for the Python feeders of the test.
feed_fit_start() {
  RUNS=$TMP/runs
  mkdir -p "$RUNS"
  cat > "$TMP/$1.lua" <<LUA
local nn, optim = drover.nn, drover.optim
local exp = drover.experiment {
  name = "$1", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
  train = { feed = "external", epochs = 2, feed_timeout = 60 }, seed = 1, verbose = false,
}
local c = drover.cluster { ps = 1, worker = 2, runs = "$RUNS", name = "$1" }
local f = io.open("$RUNS/current", "w"); f:write(c.run_dir, "\n"); f:close()
local r = c:fit(exp)
print(string.format("FED %d TRAINED %d", r.fed, r.batches))
c:shutdown()
LUA
  "$DROVER" run "$TMP/$1.lua" >"$TMP/$1.out" 2>&1 &
  trainer=$!
  at_exit 'kill -9 $trainer 2>/dev/null'
  wait_for 60 test -s "$RUNS/current"
  RUN=$(cat "$RUNS/current" 2>/dev/null)
  wait_for 30 test -s "$RUN/coordinator"
}

# engine_start ENGINE CASE: starts the test ENGINE (bash tests/ENGINE/start.sh,
# set up by the caller's DROVER_<ENGINE>_* variables) and stops it at exit
# (stop.sh; run.sh's timeout sends TERM, which exits, so that runs too).
# Where start.sh cannot run here (exit 77: no Java, no Slurm, ...) the test
# prints "SKIP <test>: why" and exits 0; where it fails, "FAIL CASE: ..."
# with start.sh's last words, and exits 1. The caller then sources the env
# file start.sh wrote.
engine_start() {
  why=$(bash "tests/$1/start.sh" 2>"$TMP/start.err")
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "SKIP $(basename "$0" .sh): ${why#SKIP }"
    exit 0
  fi
  if [ $rc -ne 0 ]; then
    fail "$2" "exit $rc: $why $(tail -n 5 "$TMP/start.err")"
    exit 1
  fi
  at_exit "bash tests/$1/stop.sh"
  trap 'exit 143' TERM INT
}

# trainer_start NAME: runs tests/cli/train_until.lua in the background: 1 ps
# + 2 workers in $RUNS under NAME, training (throttled) until trainer_stop
# NAME (at most 90 s), output in $TMP/NAME.out. Sets trainer (its pid,
# stopped at exit) and RUN (its run directory; empty when the cluster did
# not come up in 60 s).
trainer_start() {
  mkdir -p "$RUNS"
  "$DROVER" run tests/cli/train_until.lua "$RUNS" "$1" >"$TMP/$1.out" 2>&1 &
  trainer=$!
  at_exit "trainer_stop $1"
  wait_for 60 test -s "$RUNS/$1"
  RUN=$(cat "$RUNS/$1" 2>/dev/null)
}

# trainer_stop NAME: asks trainer_start's run to end its fit, gives it 30 s
# to finish, then SIGKILLs it.
trainer_stop() {
  touch "$RUNS/stop-$1"
  wait_for 30 sh -c "! kill -0 $trainer 2>/dev/null"
  kill -9 $trainer 2>/dev/null
}

# engine_try ENGINE CASE: engine_start for a test of several engines: where
# ENGINE cannot start here it prints "SKIP CASE: why" and returns 1 (and
# where start.sh fails, "FAIL CASE: ..." and returns 1), so the test goes
# on with its next engine. Stop it with `bash tests/ENGINE/stop.sh` before
# starting the next (the machine is small); at exit it is stopped anyway.
engine_try() {
  why=$(bash "tests/$1/start.sh" 2>"$TMP/start.err")
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "SKIP $2: ${why#SKIP }"
    return 1
  fi
  if [ $rc -ne 0 ]; then
    fail "$2" "exit $rc: $why $(tail -n 5 "$TMP/start.err")"
    return 1
  fi
  at_exit "bash tests/$1/stop.sh"
  trap 'exit 143' TERM INT
}

# yarn_start CASE: engine_start yarn for the YARN tests: the test YARN in
# $DROVER_YARN_DIR ($TMP/yarn unless set), its env file sourced, RM the
# ResourceManager's REST address, and DROVER_YARN_STAGING=$TMP/staging
# (where the AM stages the binary and the files, on the test YARN's
# default file system, file:///) made and exported.
yarn_start() {
  : "${DROVER_YARN_DIR:=$TMP/yarn}"
  export DROVER_YARN_DIR
  engine_start yarn "$1"
  . "$DROVER_YARN_DIR/env"
  RM=http://$DROVER_YARN_RM
  DROVER_YARN_STAGING=$TMP/staging
  export DROVER_YARN_STAGING
  mkdir -p "$DROVER_YARN_STAGING"
}

# After yarn_start: the applications the RM still runs (live_apps), the
# containers it still has allocated (containers), and neither
# (nothing_left: a case left nothing behind).
live_apps() {
  curl -s -m 5 "$RM/ws/v1/cluster/apps?states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING" |
    grep -o '"id":"application_[0-9_]*"'
}
containers() {
  curl -s -m 5 "$RM/ws/v1/cluster/metrics" | sed -n 's/.*"containersAllocated":\([0-9]*\).*/\1/p'
}
nothing_left() { [ -z "$(live_apps)" ] && [ "$(containers)" = 0 ]; }

# No shared file system (tests/noshare/hide.sh, tests/cli/test_noshare.sh).
# noshare_dir: makes COORD=$TMP/coord, the coordinator's side, with a
# marker file NOSHARE_MARK in it, and exports DROVER_SPARK_HIDE and
# DROVER_YARN_HIDE so that the engine started next runs its nodes where
# COORD is an empty tmpfs. Put the runs (RUNS=$COORD/runs), the data and
# the script's working directory under COORD; the engines' own
# directories ($TMP/spark, $TMP/yarn) stay outside it, visible.
noshare_dir() {
  COORD=$TMP/coord
  NOSHARE_MARK=$COORD/.noshare-marker
  mkdir -p "$COORD"
  echo "the coordinator's side of $TMP" >"$NOSHARE_MARK"
  DROVER_SPARK_HIDE=$COORD DROVER_YARN_HIDE=$COORD
  export DROVER_SPARK_HIDE DROVER_YARN_HIDE
}

# noshare_check ENGINE CASE: after ENGINE's env file is sourced, proves the
# mode is on before the test asserts anything else (a run that silently
# shared the directory would prove nothing): the env file says COORD is
# hidden, the engine's process (DROVER_<ENGINE>_NS_PID) has a mount
# namespace that is not ours, in which the engine's own directory is there
# and NOSHARE_MARK is not, and a file written there under COORD does not
# appear here. PASS CASE, or FAIL CASE with why and exit 1.
noshare_check() {
  eng=$(echo "$1" | tr 'a-z' 'A-Z')
  eval "ns_hidden=\${DROVER_${eng}_HIDDEN-} ns_pid=\${DROVER_${eng}_NS_PID-} ns_dir=\${DROVER_${eng}_DIR-}"
  ns_why=
  case " $ns_hidden " in
    *" $COORD "*) ;;
    *) ns_why="the engine's env file hides '$ns_hidden', not $COORD" ;;
  esac
  if [ -z "$ns_why" ] && ! [ -r "/proc/$ns_pid/ns/mnt" ]; then
    ns_why="no process $ns_pid (DROVER_${eng}_NS_PID)"
  elif [ -z "$ns_why" ] && [ "$(readlink "/proc/$ns_pid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ]; then
    ns_why="its process $ns_pid is in our mount namespace"
  elif [ -z "$ns_why" ] && ! [ -s "$NOSHARE_MARK" ]; then
    ns_why="no $NOSHARE_MARK on the coordinator's side"
  elif [ -z "$ns_why" ] && ! nsenter -t "$ns_pid" -m -- test -d "$ns_dir"; then
    ns_why="nsenter -t $ns_pid -m does not see the engine's own $ns_dir"
  elif [ -z "$ns_why" ] && nsenter -t "$ns_pid" -m -- test -e "$NOSHARE_MARK"; then
    ns_why="$NOSHARE_MARK is visible in its mount namespace"
  elif [ -z "$ns_why" ] && ! nsenter -t "$ns_pid" -m -- sh -c 'echo x >"$1/.noshare-$2"' _ "$COORD" "$1"; then
    ns_why="cannot write into the tmpfs over $COORD in its mount namespace"
  elif [ -z "$ns_why" ] && [ -e "$COORD/.noshare-$1" ]; then
    ns_why="a file written under $COORD in its mount namespace appeared here"
  fi
  if [ -n "$ns_why" ]; then
    fail "$2" "$ns_why"
    exit 1
  fi
  pass "$2"
}
