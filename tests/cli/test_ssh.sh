# test_ssh.sh - the ssh launcher against a real sshd that tests/ssh/start.sh
# starts on loopback (hosts "a" = 127.0.0.1 and "b" = 127.0.0.2, one
# sshd): training over ssh, placement by slots, a refusing host, the secret
# kept off every command line, and no node left once the coordinator dies.
# Skips with the reason when sshd cannot be had. Only processes this test
# started are signalled, by pid; every wait is bounded.
. tests/cli/lib.sh
[ -x "$DROVER" ] || { fail "ssh-t00 the binary" "DROVER=$DROVER is not executable"; exit 1; }
SSHD=$TMP/sshd
trap 'sh tests/ssh/stop.sh "$SSHD"; rm -rf "$TMP"' EXIT
out=$(sh tests/ssh/start.sh "$SSHD" 2>&1)
rc=$?
if [ $rc -eq 77 ]; then echo "$out" | sed 's/^SKIP /SKIP test_ssh.sh: /'; exit 0; fi
if [ $rc -ne 0 ]; then fail "ssh-t00 sshd starts" "$out"; exit 1; fi
RUNS=$TMP/runs
CFG=$SSHD/ssh_config

# Connections sshd accepted on ADDR so far (LogLevel VERBOSE logs each).
conns() { grep -c "Connection from .* on $1 port" "$SSHD/sshd.log"; }
# pids of the processes whose command line mentions $1, an absolute run
# directory (anything shorter would match unrelated processes: refused).
# No grep with $1 in its own arguments: it would find itself.
procs_with() {
  case "$1" in "$RUNS"/?*) ;; *) echo "procs_with: refusing pattern '$1'" >&2; return 1 ;; esac
  for f in /proc/[0-9]*/cmdline; do
    c=$({ tr '\0' ' ' < "$f"; } 2>/dev/null)
    case "$c" in *"$1"*) p=${f#/proc/}; echo "${p%/cmdline}" ;; esac
  done
}
# wait_none SECONDS STRING: true once no process mentions STRING.
wait_none() {
  case "$2" in "$RUNS"/?*) ;; *) return 1 ;; esac
  i=0
  while [ $i -lt $(( $1 * 10 )) ]; do
    [ -z "$(procs_with "$2")" ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

cat > "$TMP/fit.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local exp = drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  train = { data = train_std, batch = 32, epochs = 10 },
  eval = { data = test_ds:standardize(stats), every = 100 }, seed = 1, verbose = false }
drover.seed(1)
local c = drover.cluster { launcher = "ssh", hosts = { "a", "b:2" }, ssh_config = "$CFG",
                           ps = 1, worker = 2, runs = "$RUNS", name = "fit",
                           reservation_timeout = 30 }
local r = c:fit(exp)
print(string.format("accuracy %.4f", r.eval_accuracy))
c:shutdown()
LUA

# ssh-t01: 1 ps + 2 workers over ssh learn digits; slots place 1 on a, 2 on b
a0=$(conns 127.0.0.1); b0=$(conns 127.0.0.2)
timeout 120 "$DROVER" run "$TMP/fit.lua" >"$TMP/fit.out" 2>&1
check "ssh-t01 the run succeeds" [ $? -eq 0 ]
acc=$(sed -n 's/^accuracy //p' "$TMP/fit.out")
check "ssh-t01 eval accuracy >= 0.95 (got ${acc:-none})" awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.95) }'
dir=$(ls -d "$RUNS"/fit-* | head -n 1)
check "ssh-t01 three nodes came up" [ "$(grep -c 'node up' "$dir/events.log")" -eq 3 ]
# One session per host checks for drover (same binary here: nothing shipped).
check "ssh-t01 a check and one node session on host a" [ $(( $(conns 127.0.0.1) - a0 )) -eq 2 ]
check "ssh-t01 a check and two node sessions on host b (2 slots)" [ $(( $(conns 127.0.0.2) - b0 )) -eq 3 ]
nothing_shipped() {
  [ "$(grep -c "has this drover at" "$1/events.log")" -eq 2 ] && ! grep -q "shipped" "$1/events.log"
}
check "ssh-t01 both hosts have this drover: nothing shipped" nothing_shipped "$dir"
check "ssh-t01 the coordinator listened on 0.0.0.0 (a remote launcher)" \
  grep -q "coordinator listening on 0.0.0.0:[0-9]*; nodes dial 0.0.0.0:" "$dir/events.log"
check "ssh-t01 every node exited with status 0" [ "$(grep -c 'exited with status 0' "$dir/events.log")" -eq 3 ]
check "ssh-t01 no node or ssh outlives the run" wait_none 10 "$dir"

# ssh-t02: a host that refuses the connection fails the reservation, named
{ printf 'Host dead\n  HostName 127.0.0.1\n  Port 1\n'; cat "$CFG"; } > "$TMP/dead.cfg"
cat > "$TMP/dead.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "ssh", hosts = { "dead", "a:2" },
  ssh_config = "$TMP/dead.cfg", ps = 1, worker = 2, runs = "$RUNS", name = "dead",
  reservation_timeout = 30 })
assert(not ok)
io.stderr:write(err, "\n")
os.exit(3)
LUA
start=$(date +%s)
timeout 60 "$DROVER" run "$TMP/dead.lua" 2>"$TMP/dead.err"
check "ssh-t02 the reservation fails" [ $? -eq 3 ]
check "ssh-t02 it fails before the reservation timeout" [ $(( $(date +%s) - start )) -lt 25 ]
check "ssh-t02 the message names the host" grep -q "host 'dead'" "$TMP/dead.err"
check "ssh-t02 and quotes ssh's reason" grep -q "Connection refused" "$TMP/dead.err"
dir=$(ls -d "$RUNS"/dead-* | head -n 1)
check "ssh-t02 nothing of that run is left" wait_none 10 "$dir"

# ssh-t03: the secret is on no command line; SIGKILL of the coordinator
# leaves no ssh and no node 15 s later (EOF on ssh's stdin stops the node)
cat > "$TMP/hold.lua" <<LUA
local c = drover.cluster { launcher = "ssh", hosts = { "a", "b:2" }, ssh_config = "$CFG",
                           ps = 1, worker = 2, runs = "$RUNS", name = "hold" }
io.stdout:write("ready\n"); io.stdout:flush()
drover.sleep(60)
LUA
"$DROVER" run "$TMP/hold.lua" >"$TMP/hold.out" 2>&1 &
coord=$!
i=0; while [ $i -lt 300 ] && ! grep -q ready "$TMP/hold.out"; do sleep 0.1; i=$((i + 1)); done
check "ssh-t03 the cluster came up" grep -q ready "$TMP/hold.out"
dir=$(ls -d "$RUNS"/hold-* | head -n 1)
secret=$(cat "$dir/secret")
leaks=""
for p in $(procs_with "$dir"); do
  tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | grep -qF "$secret" && leaks="$leaks $p"
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qF "$secret" && leaks="$leaks $p"
done
check "ssh-t03 $(procs_with "$dir" | wc -l) processes of the run, none with the secret in argv or environ" [ -z "$leaks" ]
check "ssh-t03 remote nodes run (3 drover node processes)" \
  [ "$(for p in $(procs_with "$dir"); do tr '\0' ' ' < /proc/$p/cmdline; echo; done | grep -c "^[^ ]*drover node ")" -eq 3 ]
kill -9 $coord
wait $coord 2>/dev/null
check "ssh-t03 no ssh or node outlives the coordinator by 15 s" wait_none 15 "$dir"
# Cleanup after a failure: only the ssh clients this run's events.log names,
# and only while they still are ssh clients of this run.
for p in $(sed -n 's/.*node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$dir/events.log" 2>/dev/null); do
  c=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)
  case "$c" in "ssh "*"$dir"*) kill -9 "$p" 2>/dev/null ;; esac
done
