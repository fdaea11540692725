# lib.sh - helpers for CLI tests (sourced). Each case prints PASS/FAIL lines
# that tests/run.sh counts.
: "${DROVER:=$PWD/drover}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-cli-XXXXXX")
trap '[ -n "$KEEP_TMP" ] || rm -rf "$TMP"' EXIT
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
  trap 'kill -9 $trainer 2>/dev/null; [ -n "$KEEP_TMP" ] || rm -rf "$TMP"' EXIT
  wait_for 60 test -s "$RUNS/current"
  RUN=$(cat "$RUNS/current" 2>/dev/null)
  wait_for 30 test -s "$RUN/coordinator"
}
