# test_tensorboard.sh - TensorBoard served (issue 24): a real TensorBoard,
# the `tensorboard` package `make venv` installs into $VENV (named by
# DROVER_TENSORBOARD), asked over its own HTTP API (tests/cli/tb_scalars.py)
# for the scalars a run's metrics.jsonl holds.
#   tb-01  a cluster with tensorboard = { port, bind }: the URL on stderr, in
#          events.log, `drover ls` and attach; train/loss and eval/accuracy
#          as metrics.jsonl has them; a second run on the same port refused
#          with no run directory; TensorBoard (and its group) gone after
#   tb-02  an in-process experiment with tensorboard = true (TensorBoard's
#          port, or the next free one): the same, run "train"
#   tb-03  the coordinator SIGKILLed: TensorBoard goes too (PR_SET_PDEATHSIG)
#   tb-04  `drover tensorboard RUN1 RUN2` serves both, each under its name;
#          Ctrl-C ends it (exit 0) and TensorBoard with it
#   tb-05  an experiment's tensorboard = { port } fitted with c:fit(exp) on a
#          cluster without one: the coordinator serves it, until shutdown
#   tb-06  refusals: no TensorBoard installed (the way to install it), a
#          port out of range, an address not of this machine, a wrong form,
#          an in-process run without a run directory
# Listens on 127.0.0.1 only, on ports the kernel says are free. Every wait is
# bounded; the processes it starts are ended by pid.
# run.sh timeout: 420
. tests/cli/lib.sh
if [ -z "${VENV:-}" ] || [ ! -x "$VENV/bin/tensorboard" ]; then
  echo "SKIP tensorboard: no \$VENV/bin/tensorboard (make venv installs it)"
  exit 0
fi
PY=$VENV/bin/python
export DROVER_TENSORBOARD=$VENV/bin/tensorboard
RUNS=$TMP/runs
mkdir -p "$RUNS"

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# alive_group PGID: some process of that group lives (a zombie no init
# reaps does not count).
alive_group() { ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { n++ } END { exit n == 0 }'; }
gone() { ! alive_group "$1"; }
# reaped_at_exit PGID: a TensorBoard the test saw is ended at exit even when
# drover failed to (a safety net: the checks say whether it did).
reaped_at_exit() { [ -n "$1" ] && at_exit "kill -9 -- -$1 2>/dev/null"; }
# scalars URL RUN TAG METRICS FIELD: TensorBoard's points are the file's.
scalars() { "$PY" tests/cli/tb_scalars.py "$@" 2>&1 | grep -qx ok; }

# A cluster (arg[3]: its tensorboard port; with arg[4] "exp" the
# experiment's instead) or an in-process fit (no port: tensorboard = true)
# that trains one epoch with evals, writes RUNS/fitted-NAME (its run
# directory) and waits for RUNS/stop-NAME (at most 120 s).
cat >"$TMP/fit.lua" <<'LUA'
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs, name, port, on_exp = arg[1], arg[2], tonumber(arg[3]), arg[4] == "exp"
local train, test = data.csv("examples/data/digits.csv", { label = -1 }):split(0.8, { seed = 1 })
local exp = drover.experiment {
  name = name, runs = runs, model = nn.Sequential { nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 }, verbose = false,
  train = { data = train, batch = 64, epochs = 1 }, eval = { data = test, every = 10 },
  tensorboard = (not port or nil) or (on_exp and { port = port }) or nil,
}
local c, dir
if port then
  c = drover.cluster { ps = 1, worker = 1, runs = runs, name = name,
                       tensorboard = not on_exp and { port = port, bind = "127.0.0.1" } or nil }
  c:fit(exp)
  dir = c.run_dir
else
  exp:fit()
  dir = exp:run_dir()
end
local f = assert(io.open(runs .. "/fitted-" .. name, "w")); f:write(dir, "\n"); f:close()
local function exists(p) local h = io.open(p) if h then h:close() return true end return false end
local t0 = drover.clock()
while not exists(runs .. "/stop-" .. name) and drover.clock() - t0 < 120 do drover.sleep(0.1) end
if c then c:shutdown() end
LUA

# start NAME [PORT]: the script in the background; pid in $bg, run
# directory in $RUN once it has fitted.
start() {
  "$DROVER" run "$TMP/fit.lua" "$RUNS" "$@" >"$TMP/$1.out" 2>"$TMP/$1.err" &
  bg=$!
  at_exit "kill -9 $bg 2>/dev/null"
  wait_for 120 test -s "$RUNS/fitted-$1"
  RUN=$(cat "$RUNS/fitted-$1" 2>/dev/null)
}
# finish NAME PID: asks the run to end; true when it exited 0 within 60 s.
finish() {
  touch "$RUNS/stop-$1"
  wait_for 60 sh -c "! kill -0 $2 2>/dev/null"
  wait "$2"
}

# ---- tb-01: a cluster ---------------------------------------------------------
port=$(free_port)
url="http://127.0.0.1:$port/"
start c1 "$port"
c1=$bg
C1=$RUN
check "tb-01 the cluster trained" [ -n "$C1" ]
check "tb-01 the URL said at start" grep -q "drover: TensorBoard at $url" "$TMP/c1.err"
check "tb-01 events.log has it" grep -q "tensorboard: $url (pid [0-9]*)" "$C1/events.log"
check "tb-01 drover ls shows it" sh -c "'$DROVER' ls '$RUNS' | grep '^c1-' | grep -q ' $url\$'"
check "tb-01 attach shows it" sh -c "'$DROVER' attach --print '$C1' | grep -qx 'tensorboard $url'"
check "tb-01 TensorBoard's train/loss is metrics.jsonl's loss" \
  scalars "$url" coordinator train/loss "$C1/metrics.jsonl" loss
check "tb-01 TensorBoard's eval/accuracy is metrics.jsonl's eval_accuracy" \
  scalars "$url" coordinator eval/accuracy "$C1/metrics.jsonl" eval_accuracy
tb=$(cut -d' ' -f2 "$C1/tensorboard" 2>/dev/null)
reaped_at_exit "$tb"
check "tb-01 its pid is recorded" [ -n "$tb" ]
check "tb-01 in a process group of its own" [ "$(ps -o pgid= -p "$tb" | tr -d ' ')" = "$tb" ]
# The same port again: refused before a run directory is made.
printf 'drover.cluster { ps = 1, worker = 1, runs = "%s", name = "taken", tensorboard = { port = %s } }\n' \
  "$RUNS" "$port" >"$TMP/taken.lua"
"$DROVER" run "$TMP/taken.lua" >/dev/null 2>"$TMP/taken.err"
check "tb-01 a taken port is refused" grep -q "cannot listen on 127.0.0.1 port $port: Address already in use" "$TMP/taken.err"
check "tb-01 and no run directory is made" sh -c "! ls -d '$RUNS'/taken-* 2>/dev/null"
check "tb-01 the run ended well" finish c1 "$c1"
check "tb-01 TensorBoard and its group gone after the run" wait_for 10 gone "${tb:-0}"
check "tb-01 its file removed" [ ! -e "$C1/tensorboard" ]
check "tb-01 events.log says it stopped" grep -q "tensorboard stopped (pid $tb)" "$C1/events.log"

# ---- tb-02: in process, TensorBoard's own port choice ------------------------
start i1
i1=$bg
I1=$RUN
iurl=$(cut -d' ' -f1 "$I1/tensorboard" 2>/dev/null)
itb=$(cut -d' ' -f2 "$I1/tensorboard" 2>/dev/null)
reaped_at_exit "$itb"
check "tb-02 a URL on 127.0.0.1 (6006..6015, else any port)" \
  sh -c "echo '$iurl' | grep -Eq '^http://127\.0\.0\.1:[0-9]+/\$'"
check "tb-02 said at start" grep -q "drover: TensorBoard at $iurl" "$TMP/i1.err"
check "tb-02 drover ls shows it" sh -c "'$DROVER' ls '$RUNS' | grep '^i1-' | grep -q ' $iurl\$'"
check "tb-02 TensorBoard's train/loss is metrics.jsonl's loss" \
  scalars "$iurl" train train/loss "$I1/metrics.jsonl" loss
check "tb-02 TensorBoard's eval/accuracy is metrics.jsonl's eval_accuracy" \
  scalars "$iurl" train eval/accuracy "$I1/metrics.jsonl" eval_accuracy
check "tb-02 the run ended well" finish i1 "$i1"
check "tb-02 TensorBoard gone after the run" wait_for 10 gone "${itb:-0}"

# ---- tb-03: the coordinator SIGKILLed ----------------------------------------
start k1 "$(free_port)"
k1=$bg
K1=$RUN
ktb=$(cut -d' ' -f2 "$K1/tensorboard" 2>/dev/null)
reaped_at_exit "$ktb"
nodes=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\)$/\1/p' "$K1/events.log")
at_exit "kill -9 $nodes 2>/dev/null"
check "tb-03 TensorBoard serves" alive_group "${ktb:-0}"
kill -9 "$k1"
check "tb-03 the coordinator SIGKILLed: TensorBoard goes too" wait_for 10 gone "${ktb:-0}"
check "tb-03 drover ls no longer shows it" sh -c "! '$DROVER' ls '$RUNS' | grep '^k1-' | grep -q http"
kill -9 $nodes 2>/dev/null # they would leave by themselves once the coordinator is silent

# ---- tb-04: drover tensorboard RUN1 RUN2 ---------------------------------------
port=$(free_port)
url="http://127.0.0.1:$port/"
"$DROVER" tensorboard --port "$port" --runs "$RUNS" c1 "$I1" >"$TMP/serve.out" 2>&1 &
serve=$!
at_exit "kill -9 $serve 2>/dev/null"
wait_for 30 grep -q "serving 2 runs" "$TMP/serve.out"
c1n=$(basename "$C1")
i1n=$(basename "$I1")
check "tb-04 says where and what" grep -q "drover: TensorBoard at $url serving 2 runs: $c1n, $i1n" "$TMP/serve.out"
check "tb-04 the cluster run under its name" \
  scalars "$url" "$c1n/coordinator" train/loss "$C1/metrics.jsonl" loss
check "tb-04 the in-process run under its name" \
  scalars "$url" "$i1n/train" eval/accuracy "$I1/metrics.jsonl" eval_accuracy
stb=$(ps -o pid= --ppid "$serve" | tr -d ' ')
reaped_at_exit "$stb"
kill -INT "$serve"
wait_for 15 sh -c "! kill -0 $serve 2>/dev/null"
wait "$serve"
check "tb-04 Ctrl-C ends it with status 0" [ $? -eq 0 ]
check "tb-04 and TensorBoard with it" wait_for 10 gone "${stb:-0}"
"$DROVER" tensorboard --runs "$RUNS" nosuchrun >/dev/null 2>"$TMP/nosuch.err"
check "tb-04 an unknown run is refused" grep -q "no run 'nosuchrun'" "$TMP/nosuch.err"

# ---- tb-05: an experiment's tensorboard on a cluster --------------------------
port=$(free_port)
url="http://127.0.0.1:$port/"
start e1 "$port" exp
e1=$bg
E1=$RUN
etb=$(cut -d' ' -f2 "$E1/tensorboard" 2>/dev/null)
reaped_at_exit "$etb"
check "tb-05 c:fit(exp) started the experiment's TensorBoard" grep -q "drover: TensorBoard at $url" "$TMP/e1.err"
check "tb-05 over the cluster's run" \
  scalars "$url" coordinator eval/accuracy "$E1/metrics.jsonl" eval_accuracy
check "tb-05 the run ended well" finish e1 "$e1"
check "tb-05 TensorBoard gone with the cluster" wait_for 10 gone "${etb:-0}"

# ---- tb-06: refusals -------------------------------------------------------------
# refused WHAT SNIPPET LUA: the script fails saying SNIPPET.
refused() {
  printf '%s\n' "$3" >"$TMP/r.lua"
  ! "$DROVER" run "$TMP/r.lua" >/dev/null 2>"$TMP/r.err" && grep -q -- "$2" "$TMP/r.err" ||
    { echo "  (stderr: $(head -c 300 "$TMP/r.err"))"; false; }
}
C="drover.cluster { ps = 1, worker = 1, runs = '$RUNS', name = 'refused', tensorboard ="
check "tb-06 a port out of range" refused x "tensorboard.port = 70000 is too large" "$C { port = 70000 } }"
check "tb-06 an address of no machine here" refused x "cannot listen on 192.0.2.1" \
  "$C { bind = '192.0.2.1' } }"
check "tb-06 a wrong form" refused x "tensorboard must be true, false or a table" "$C 'yes' }"
check "tb-06 an unknown key" refused x "unknown option 'prot'" "$C { prot = 1 } }"
check "tb-06 none of them made a run directory" sh -c "! ls -d '$RUNS'/refused-* 2>/dev/null"
check "tb-06 in process without a run directory" refused x "runs = false makes none" \
  "drover.experiment { model = drover.nn.Linear(2, 2), loss = drover.nn.MSE(), runs = false,
     optimizer = drover.optim.SGD { lr = 0.1 }, tensorboard = true,
     train = { data = drover.data.synthetic { n = 8, features = 2, classes = 2 } } }:fit()"
# No TensorBoard anywhere: a copy of drover away from build/, a PATH without one.
mkdir -p "$TMP/bin"
cp "$DROVER" "$TMP/bin/drover"
if [ -e /usr/bin/tensorboard ] || [ -e /bin/tensorboard ]; then
  echo "SKIP tb-06 not installed: this machine has a tensorboard in /usr/bin"
else
  bare() { env -u DROVER_TENSORBOARD PATH=/usr/bin:/bin "$TMP/bin/drover" "$@"; }
  printf '%s\n' "$C true }" >"$TMP/none.lua"
  bare run "$TMP/none.lua" >/dev/null 2>"$TMP/none.err"
  check "tb-06 not installed: refused, saying how to install it" \
    grep -q "TensorBoard is not installed.*make tensorboard.*pip install tensorboard" "$TMP/none.err"
  printf '%s\n' "drover.experiment { model = drover.nn.Linear(2, 2), loss = drover.nn.MSE(),
    optimizer = drover.optim.SGD { lr = 0.1 }, tensorboard = true,
    train = { data = drover.data.synthetic { n = 8, features = 2, classes = 2 } } }" >"$TMP/none2.lua"
  bare run "$TMP/none2.lua" >/dev/null 2>"$TMP/none2.err"
  check "tb-06 an experiment refused where it is described" \
    grep -q "none2.lua:1: experiment: tensorboard: TensorBoard is not installed" "$TMP/none2.err"
  bare tensorboard --runs "$RUNS" >/dev/null 2>"$TMP/none3.err"
  check "tb-06 drover tensorboard too" grep -q "make tensorboard" "$TMP/none3.err"
fi
