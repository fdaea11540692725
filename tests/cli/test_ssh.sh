# test_ssh.sh - the ssh launcher against a real sshd that tests/ssh/start.sh
# starts on loopback (hosts "a" = 127.0.0.1 and "b" = 127.0.0.2, one
# sshd): training over ssh, placement by slots, a refusing host, the secret
# kept off every command line, and no node left once the coordinator dies.
# As root, also host "c" in a network namespace of its own (10.77.X.2, its
# own sshd, and no view of $TMP/bin, where the binary under test is copied)
# with "r" (10.77.X.1, this machine as c sees it): routable addresses,
# shipping the binary and `files`, a restart on the remote host. A local
# run still listens on loopback only.
# Skips with the reason when sshd (or the namespace) cannot be had;
# DROVER_SSH_REQUIRED=1 makes that a failure. Only processes this test
# started are signalled, by pid; every wait is bounded.
. tests/cli/lib.sh
[ -x "$DROVER" ] || { fail "ssh-t00 the binary" "DROVER=$DROVER is not executable"; exit 1; }
SSHD=$TMP/sshd
trap 'sh tests/ssh/stop.sh "$SSHD"; rm -rf "$TMP"' EXIT
# The binary under test, copied where host c cannot see it.
mkdir -p "$TMP/bin" && cp "$DROVER" "$TMP/bin/drover"
out=$(sh tests/ssh/start.sh "$SSHD" "$TMP/bin" 2>&1)
rc=$?
if [ $rc -eq 77 ]; then echo "$out" | sed 's/^SKIP /SKIP test_ssh.sh: /'; exit 0; fi
if [ $rc -ne 0 ]; then fail "ssh-t00 sshd starts" "$out"; exit 1; fi
echo "$out" | sed -n 's/^SKIP /SKIP test_ssh.sh: /p'
case " $(cat "$SSHD/hosts") " in *" c "*) have_c=1 ;; *) have_c=0 ;; esac
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
leaks=""
# The secret and every node's keys (keys/*.key: a line each, the hex last)
for secret in $(cat "$dir/secret" "$dir"/keys/*.key | sed 's/.* //'); do
  for p in $(procs_with "$dir"); do
    tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | grep -qF "$secret" && leaks="$leaks $p"
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qF "$secret" && leaks="$leaks $p"
  done
done
check "ssh-t03 $(procs_with "$dir" | wc -l) processes of the run, none with a key in argv or environ" [ -z "$leaks" ]
# A remote node's key file (the wrapper's copy of keys/<role>-<i>.key) is
# gone once the node read it, and so is the one the launcher sent
kf=""
for p in $(procs_with "$dir"); do
  f=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^DROVER_SECRET_FILE=//p')
  case "$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)" in
    *"drover node "*"--role ps "*) [ -n "$f" ] && [ ! -e "$f" ] && kf="${kf}p" ;;
    *"drover node "*"--role worker --index 1 "*) [ -n "$f" ] && [ ! -e "$f" ] && kf="${kf}w" ;;
  esac
done
check "ssh-t03 the remote ps's and worker:1's key files are gone once read" \
  sh -c "[ '$kf' = pw ] || [ '$kf' = wp ]"
check "ssh-t03 and so are the run's keys/ files the launcher sent" [ -z "$(ls -A "$dir/keys")" ]
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

# Local IPv4/IPv6 addresses (hex, as /proc/net/tcp* has them) of the
# sockets listening on port $1 in this network namespace.
listen_addrs() {
  hex=$(printf '%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { sub(/:.*/, "", $2); print $2 }' |
    sort -u | tr '\n' ' '
}
# wait_for SECONDS FILE PATTERN: true once FILE has a line matching PATTERN.
wait_for() {
  i=0
  while [ $i -lt $(( $1 * 10 )) ]; do
    grep -q "$3" "$2" 2>/dev/null && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# ssh-t06: a local run listens on 127.0.0.1 only (nodes too)
cat > "$TMP/local.lua" <<LUA
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "local" }
io.stdout:write("ready\\n"); io.stdout:flush()
for _ = 1, 600 do
  local f = io.open("$TMP/local.go") if f then f:close() break end
  drover.sleep(0.1)
end
c:shutdown()
LUA
timeout 90 "$DROVER" run "$TMP/local.lua" >"$TMP/local.out" 2>&1 &
coord=$!
wait_for 30 "$TMP/local.out" ready
dir=$(ls -d "$RUNS"/local-* | head -n 1)
port=$(sed -n 's/^127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$dir/coordinator" 2>/dev/null)
check "ssh-t06 the local coordinator file names 127.0.0.1 (got '$(cat "$dir/coordinator" 2>/dev/null)')" [ -n "$port" ]
check "ssh-t06 the local coordinator listens on 127.0.0.1 only (got '$(listen_addrs "${port:-0}")')" \
  [ "$(listen_addrs "${port:-0}")" = "0100007F " ]
psport=$(sed -n 's/.*node up ps:0 pid [0-9]* host \([^ ]*\) port \([0-9]*\).*/\1 \2/p' "$dir/events.log")
check "ssh-t06 the local ps advertises 127.0.0.1 (got '$psport')" [ "${psport% *}" = 127.0.0.1 ]
check "ssh-t06 the local ps listens on 127.0.0.1 only (got '$(listen_addrs "${psport#* }")')" \
  [ "$(listen_addrs "${psport#* }")" = "0100007F " ]
touch "$TMP/local.go"
wait $coord
check "ssh-t06 the local run ends cleanly" [ $? -eq 0 ]

# ssh-t07: ps replicas over two hosts: the launcher alternates a, b, a, b
# over ps:0..3, which would pair ps:0 with ps:2 on a; each replica goes to
# the other host than its primary's
cat > "$TMP/repl.lua" <<LUA
local c = drover.cluster { launcher = "ssh", hosts = { "a:3", "b:3" }, ssh_config = "$CFG",
                           ps = 2, ps_replicas = 1, worker = 2, runs = "$RUNS", name = "repl",
                           reservation_timeout = 30 }
c:shutdown()
LUA
timeout 90 "$DROVER" run "$TMP/repl.lua" >"$TMP/repl.out" 2>&1
check "ssh-t07 the run succeeds" [ $? -eq 0 ]
dir=$(ls -d "$RUNS"/repl-* | head -n 1)
# the ssh host a node was started on (the first line of its log says)
host_of() { sed -n "s/^drover: starting ps-${1#ps:} on host '\([^']*\)'.*/\1/p" "$dir/logs/ps-${1#ps:}.log" | head -n 1; }
pairs=$(sed -n 's/.*node syncing \(ps:[0-9]*\): replica of \(ps:[0-9]*\).*/\1 \2/p' "$dir/events.log")
check "ssh-t07 two groups paired (got '$pairs')" [ "$(echo "$pairs" | grep -c .)" -eq 2 ]
echo "$pairs" | while read -r r p; do
  check "ssh-t07 replica $r ($(host_of "$r")) on another host than its primary $p ($(host_of "$p"))" \
    [ -n "$(host_of "$r")" -a "$(host_of "$r")" != "$(host_of "$p")" ]
done
check "ssh-t07 no group said to share a host" sh -c "! grep -q 'on the same machine' '$dir/events.log'"
check "ssh-t07 no node or ssh outlives the run" wait_none 10 "$dir"

# ssh-t10: nodes run with --log-forward: their records and output reach
# logs/<role>-<i>.log over the connection (stamped, once); a node that
# prints and then crashes has its last lines there too (the wrapper quotes
# the tail of the node's raw output on the host after an abnormal end)
cat > "$TMP/logs.lua" <<LUA
local c = drover.cluster { launcher = "ssh", hosts = { "a", "b:2" }, ssh_config = "$CFG",
                           ps = 1, worker = 1, runs = "$RUNS", name = "logs", reservation_timeout = 30 }
c:schedule(function() print("hello over ssh") io.stderr:write("stderr over ssh\n") return true end):fetch()
-- forwarding is asynchronous: let the lines arrive before the crash (output
-- a node never got to forward is in the wrapper's quote of its raw tail)
for _ = 1, 100 do
  local f = io.open(c.run_dir .. "/logs/worker-0.log")
  local t = f and f:read("a") or ""
  if f then f:close() end
  if t:find("stderr over ssh", 1, true) and t:find("hello over ssh", 1, true) then break end
  drover.sleep(0.1)
end
print(pcall(function() c:schedule(function()
  io.stdout:write("last words over ssh\n") io.stdout:flush()
  local f = io.open("/proc/self/stat") local pid = f:read("n") f:close()
  os.execute("kill -SEGV " .. pid)
  return true
end):fetch() end))
c:shutdown()
LUA
timeout 120 "$DROVER" run "$TMP/logs.lua" >"$TMP/logs.out" 2>&1
dir=$(ls -d "$RUNS"/logs-* | head -n 1)
w=$dir/logs/worker-0.log
check "ssh-t10 a closure's print() reached the worker's log over the connection" \
  grep -q '^[0-9T:.-]*Z worker:0 stdout hello over ssh$' "$w"
check "ssh-t10 and its stderr line" grep -q '^[0-9T:.-]*Z worker:0 stderr stderr over ssh$' "$w"
# (up to the crash: its quote of the raw output has it again, and the
# restarted worker:0 registers again)
check "ssh-t10 the node's records are there once, stamped (not through ssh's stream too)" \
  sh -c "sed '/^drover: the node ended/q' '$w' > '$TMP/w0' && [ \$(grep -c 'worker:0 I registered\$' '$TMP/w0') -eq 1 ] && ! grep -q '^hello over ssh\$' '$TMP/w0'"
check "ssh-t10 the crashed node's status and last lines are in its log" \
  awk '/drover: the node ended with status [0-9]*; the last lines of its own output/ { t = 1 } t && /^last words over ssh$/ { ok = 1 } END { exit !ok }' "$w"
check "ssh-t10 the ps's records are in its log" grep -q '^[0-9T:.-]*Z ps:0 I registered$' "$dir/logs/ps-0.log"
check "ssh-t10 no node or ssh outlives the run" wait_none 10 "$dir"

# ssh-t11: a node's key file is gone on the host once it registered (the
# wrapper's copy, read by the node; the run's keys/ file, sent on ssh's
# stdin); worker:1 SIGKILLed comes back with a fresh one, gone as well
cat > "$TMP/kspec.lua" <<LUA
return { launcher = "ssh", hosts = { "a", "b:2" }, ssh_config = "$CFG", reservation_timeout = 30 }
LUA
mkdir -p "$TMP/k"
timeout 150 "$DROVER" run tests/cli/keyfiles.lua "$TMP/kspec.lua" "$RUNS" keys "$TMP/k" >"$TMP/k/out" 2>&1 &
kc=$!
kill_at_exit $kc
wait_for 60 test -s "$TMP/k/victim"
read vpid parent vcwd <"$TMP/k/victim"
check "ssh-t11 every node's key file is gone on its host" \
  [ "$(grep -c '^up	[a-z]*:[0-9]	[0-9]*	gone	/.*/drover-node-[^/]*/key$' "$TMP/k/out")" -eq 3 ]
check "ssh-t11 the run's keys/ is empty" grep -q '^up	keys \[\]$' "$TMP/k/out"
kill -9 "${vpid:-0}"
touch "$TMP/k/killed"
wait $kc
check "ssh-t11 the run ends (status $?) after worker:1's SIGKILL" grep -q '^finished' "$TMP/k/out"
check "ssh-t11 worker:1 came back with a key file, gone too" \
  grep -q '^again	worker:1	[0-9]*	gone	/.*/drover-node-[^/]*/key$' "$TMP/k/out"

if [ "$have_c" != 1 ]; then
  echo "SKIP test_ssh.sh: ssh-t04/t05 (host c): $(cat "$SSHD/no_c" 2>/dev/null)"
  exit 0
fi
net=$(sed -n 's/^Host c$//; /HostName 10\.77\./{s/.*HostName \(10\.77\.[0-9]*\)\.2$/\1/p}' "$CFG" | head -n 1)
BIN=$TMP/bin/drover

# ssh-t04: 1 ps + 2 workers over c (own namespace, lacks the binary) and
# r: the coordinator listens on 0.0.0.0, c's nodes find it from
# $SSH_CONNECTION and advertise 10.77.X.2, worker:0 on r reaches the ps on c
sed 's/hosts = { "a", "b:2" }/hosts = { "c:2", "r" }/; s/name = "fit"/name = "ns"/' "$TMP/fit.lua" > "$TMP/ns.lua"
timeout 120 "$BIN" run "$TMP/ns.lua" >"$TMP/ns.out" 2>&1
check "ssh-t04 the run over hosts c and r succeeds" [ $? -eq 0 ]
acc=$(sed -n 's/^accuracy //p' "$TMP/ns.out")
check "ssh-t04 eval accuracy >= 0.95 (got ${acc:-none})" awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.95) }'
dir=$(ls -d "$RUNS"/ns-* | head -n 1)
ev=$dir/events.log
check "ssh-t04 the coordinator listened on 0.0.0.0" grep -q "coordinator listening on 0.0.0.0:" "$ev"
check "ssh-t04 the ps registered from c, advertising $net.2" grep -q "node up ps:0 pid [0-9]* host $net.2 port [0-9]" "$ev"
check "ssh-t04 worker:1 registered from c ($net.2)" grep -q "node up worker:1 pid [0-9]* host $net.2$" "$ev"
check "ssh-t04 worker:0 registered from r ($net.1)" grep -q "node up worker:0 pid [0-9]* host $net.1$" "$ev"
check "ssh-t04 host c lacked drover: shipped" grep -q "host 'c' lacks this drover: shipped it to /" "$ev"
check "ssh-t04 host r has the same drover: not shipped" grep -q "host 'r' has this drover at $BIN" "$ev"
check "ssh-t04 r's node ran the host's own binary" grep -q "on host 'r': $BIN (the host's own)" "$dir/logs/worker-0.log"
check "ssh-t04 c's ps ran the shipped copy" grep -q "on host 'c': /.*/drover-run-[^/]*/drover (shipped)" "$dir/logs/ps-0.log"
shipped=$(sed -n "s/.*host 'c' lacks this drover: shipped it to \(.*\)/\1/p" "$ev")
check "ssh-t04 c's per-run directory is gone after the run" \
  timeout 20 ssh -F "$CFG" c "test -n '$shipped' && test ! -e '$shipped'"
check "ssh-t04 every node exited with status 0" [ "$(grep -c 'exited with status 0' "$ev")" -eq 3 ]
check "ssh-t04 no node or ssh outlives the run" wait_none 10 "$dir"

# ssh-t05: `files` reach both hosts' per-run directories (relative paths
# in closures read them); worker:1, killed on c by its pid there, comes back
# (the shipped binary is still there for it) and the run finishes
mkdir -p "$TMP/ship/sub" "$TMP/abs"
printf 'x-contents' > "$TMP/ship/x.txt"
printf 'y-contents' > "$TMP/ship/sub/y.txt"
printf 'z-contents' > "$TMP/abs/z.txt"
cat > "$TMP/ship.lua" <<LUA
local cfg = "$CFG"
local c = drover.cluster { launcher = "ssh", hosts = { "c:2", "r" }, ssh_config = cfg,
  ps = 1, worker = 2, runs = "$RUNS", name = "ship", reservation_timeout = 30,
  files = { "x.txt", "sub/y.txt", "$TMP/abs/z.txt" } }
local node = dofile("$PWD/tests/lua/t.lua").node
local function wait_file(path)
  for _ = 1, 600 do
    local f = io.open(path) if f then f:close() return end
    drover.sleep(0.1)
  end
  error("no " .. path .. " within 60 s")
end
local victim = node(c, "worker", 1)
print("victim " .. victim.pid .. " " .. victim.host)
io.stdout:write("ready\\n"); io.stdout:flush()
wait_file("$TMP/ship.go")
assert(os.execute("timeout 20 ssh -F " .. cfg .. " c kill -9 " .. victim.pid))
local back
for _ = 1, 300 do
  local n = node(c, "worker", 1)
  if n.pid ~= victim.pid and n.state == "ready" then back = n break end
  drover.sleep(0.1)
end
assert(back, "worker:1 is not back within 30 s")
print("back " .. back.pid .. " " .. back.host .. " restarts " .. back.restarts)
local rvs = {}
for i = 1, 8 do
  rvs[i] = c:schedule(function(w)
    local function read(p) local f = assert(io.open(p)) local s = f:read("a") f:close() return s end
    return w.name, read("x.txt"), read("sub/y.txt"), read("z.txt"), os.getenv("SSH_CONNECTION")
  end)
end
for _, rv in ipairs(rvs) do print("got", rv:fetch()) end
c:shutdown()
print("finished")
LUA
( cd "$TMP/ship" && exec timeout 120 "$BIN" run "$TMP/ship.lua" ) >"$TMP/ship.out" 2>&1 &
coord=$!
wait_for 40 "$TMP/ship.out" '^ready'
check "ssh-t05 the cluster with files came up" grep -q '^ready' "$TMP/ship.out"
dir=$(ls -d "$RUNS"/ship-* | head -n 1)
ev=$dir/events.log
cdir=$(sed -n "s/.*host 'c' lacks this drover: shipped it to \(.*\)/\1/p" "$ev")
rdir=$(sed -n "s/.*host 'r': the run's files shipped to \(.*\)/\1/p" "$ev")
check "ssh-t05 c got the binary ('$cdir')" [ -n "$cdir" ]
check "ssh-t05 r, with the same binary, got only the files ('$rdir')" [ -n "$rdir" ]
check "ssh-t05 c does not see the binary under test at its own path" \
  timeout 20 ssh -F "$CFG" c "test ! -e '$BIN'"
sum=$(sha256sum "$BIN" | cut -d' ' -f1)
check "ssh-t05 c's per-run directory holds the same binary, 0755, in a 0700 directory" \
  timeout 20 ssh -F "$CFG" c "sha256sum '$cdir/drover' | grep -q '^$sum ' && test \"\$(stat -c %a '$cdir/drover')\" = 755 && test \"\$(stat -c %a '$cdir')\" = 700"
check "ssh-t05 r's per-run directory has no binary" timeout 20 ssh -F "$CFG" r "test -f '$rdir/x.txt' && test ! -e '$rdir/drover'"
vpid=$(sed -n 's/^victim \([0-9]*\) .*/\1/p' "$TMP/ship.out")
check "ssh-t05 worker:1 on c runs the shipped binary in its directory (pid ${vpid:-none})" \
  timeout 20 ssh -F "$CFG" c "test \"\$(readlink /proc/${vpid:-0}/exe)\" = '$cdir/drover' && test \"\$(readlink /proc/${vpid:-0}/cwd)\" = '$cdir'"
cport=$(sed -n 's/^[^ ]*:\([0-9]*\) .*/\1/p' "$dir/coordinator")
check "ssh-t05 the coordinator listens on 0.0.0.0 (got '$(listen_addrs "${cport:-0}")')" \
  [ "$(listen_addrs "${cport:-0}")" = "00000000 " ]
touch "$TMP/ship.go"
wait $coord
check "ssh-t05 the run exits with status 0 after the kill" [ $? -eq 0 ]
check "ssh-t05 the script got to its end" grep -q '^finished' "$TMP/ship.out"
check "ssh-t05 worker:1 was lost to signal 9" grep -q "node lost worker:1: killed by signal 9" "$ev"
check "ssh-t05 and restarted" grep -q "node restart worker:1 (1 of" "$ev"
check "ssh-t05 the restarted worker:1 is on c again" grep -q "^back [0-9]* $net.2 restarts 1" "$TMP/ship.out"
got_ok() { # every closure read the three files; at least one ran on c
  [ "$(grep -c "^got	worker:[01]	x-contents	y-contents	z-contents	" "$TMP/ship.out")" -eq 8 ] &&
    grep -q "^got	worker:1	x-contents	y-contents	z-contents	$net.1 [0-9]* $net.2 " "$TMP/ship.out"
}
check "ssh-t05 closures read the shipped files by relative path, on c too" got_ok
check "ssh-t05 both per-run directories are removed at shutdown" \
  timeout 20 ssh -F "$CFG" c "test ! -e '$cdir' && test ! -e '$rdir'"
check "ssh-t05 no node or ssh outlives the run" wait_none 10 "$dir"

# ssh-t08: files mode where the data's directory is not there: the worker
# on c cannot see $TMP/bin (start.sh hid it), where the CSV is; shipped by
# `files`, it opens it under the name it was shipped under (its last
# component) in its per-run directory, and trains; r's worker reads the
# coordinator's path.
mkdir -p "$TMP/bin/data" && cp examples/data/digits.csv "$TMP/bin/data/digits.csv"
cat > "$TMP/shipname.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local ds = data.csv("$TMP/bin/data/digits.csv", { label = -1 })
local std = ds:standardize()
assert(std.files and not std.loaded, "files mode")
local c = drover.cluster { launcher = "ssh", hosts = { "c:2", "r" }, ssh_config = "$CFG",
  ps = 1, worker = 2, runs = "$RUNS", name = "shipname", reservation_timeout = 30,
  files = { "$TMP/bin/data/digits.csv" } }
local r = c:fit(drover.experiment {
  name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-2 },
  model = nn.Linear(64, 10), train = { data = std, batch = 32, epochs = 2 }, seed = 1, verbose = false })
print("steps " .. r.steps .. " accuracy " .. r.accuracy)
c:shutdown()
LUA
timeout 120 "$BIN" run "$TMP/shipname.lua" >"$TMP/shipname.out" 2>&1
check "ssh-t08 files mode with the data's directory hidden on c succeeds" [ $? -eq 0 ]
dir=$(ls -d "$RUNS"/shipname-* | head -n 1)
check "ssh-t08 c does not see the coordinator's path of the data" \
  timeout 20 ssh -F "$CFG" c "test ! -e '$TMP/bin/data/digits.csv'"
check "ssh-t08 worker:1 ran on c ($net.2)" grep -q "node up worker:1 pid [0-9]* host $net.2$" "$dir/events.log"
check "ssh-t08 both workers read their shards from the file" \
  sh -c "grep -q 'examples read from its file' '$dir/logs/worker-0.log' && grep -q 'examples read from its file' '$dir/logs/worker-1.log'"
check "ssh-t08 the fit learnt ($(grep '^steps' "$TMP/shipname.out"))" \
  awk '/^steps/ { ok = $4 >= 0.8 } END { exit !ok }' "$TMP/shipname.out"
check "ssh-t08 no node or ssh outlives the run" wait_none 10 "$dir"
