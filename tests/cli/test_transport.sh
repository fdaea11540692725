# test_transport.sh - drover.cluster's transport and the links shown: local
# clusters (2 ps + 2 workers) whose every link is shared memory by default
# (ps replicas too: a primary's link to its replica), a Unix socket with
# transport = "unix" even under DROVER_TRANSPORT=tcp (the cluster's choice
# wins for its nodes), TCP with transport = "tcp" and with DROVER_TRANSPORT=tcp
# alone; checked in `drover attach --print`'s LINKS column, the node logs and
# events.log. A bad value is refused with the choices named, before any run
# directory. Last, the dashboard's node detail shows a worker's links
# (through tmux). Every wait is bounded; processes are ended by pid.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh
unset DROVER_TRANSPORT # the default case must see the default
RUNS=$TMP/runs
mkdir -p "$RUNS"

# A cluster that waits, doing nothing, until $RUNS/stop-NAME exists (90 s at
# most): arg NAME TRANSPORT ("default": the option not given) REPLICAS.
cat >"$TMP/links.lua" <<'LUA'
local runs, name, tr, replicas = arg[1], arg[2], arg[3], tonumber(arg[4])
local function exists(p) local h = io.open(p) if h then h:close() return true end return false end
local c = drover.cluster { ps = 2, worker = 2, runs = runs, name = name, ps_replicas = replicas,
                           transport = tr ~= "default" and tr or nil }
local f = io.open(runs .. "/" .. name, "w"); f:write(c.run_dir, "\n"); f:close()
local t0 = drover.clock()
while not exists(runs .. "/stop-" .. name) and drover.clock() - t0 < 90 do drover.sleep(0.1) end
c:shutdown()
print("done")
LUA

# start NAME TRANSPORT REPLICAS [VAR=VALUE]: the script above in the
# background (with VAR=VALUE in its environment); RUN its run directory.
start() {
  env ${4:+"$4"} "$DROVER" run "$TMP/links.lua" "$RUNS" "$1" "$2" "$3" >"$TMP/$1.out" 2>&1 &
  eval "pid_$1=$!"
  kill_at_exit $!
  wait_for 60 test -s "$RUNS/$1"
  RUN=$(cat "$RUNS/$1" 2>/dev/null)
}

# stop NAME: ends start's run (its own shutdown, else SIGKILL after 30 s).
stop() {
  touch "$RUNS/stop-$1"
  eval "p=\$pid_$1"
  wait_for 30 sh -c "! kill -0 $p 2>/dev/null" || kill -9 "$p" 2>/dev/null
  return 0
}

# field NODE COLUMN FILE: a column of NODE's row in a --print table (12 LINKS).
field() { awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$3"; }

# links_up NAME: --print into $TMP/NAME.txt shows both workers' ps links.
links_up() {
  "$DROVER" attach "$RUN" --print >"$TMP/$1.txt" 2>&1 &&
    field worker:0 12 "$TMP/$1.txt" | grep -q ',ps:0-1=' &&
    field worker:1 12 "$TMP/$1.txt" | grep -q ',ps:0-1='
}

# every_link NAME T NODES: each of the NODES rows has LINKS of T only,
# and it names the coordinator's link.
every_link() {
  for n in $3; do
    l=$(field "$n" 12 "$TMP/$1.txt")
    case "$l" in coord=$2*) ;; *) return 1 ;; esac
    [ -z "$(echo "$l" | tr ',' '\n' | grep -v "=$2\$")" ] || return 1
  done
}

# logs_say RUN TEXT: every node log of RUN has TEXT; logs_lack: none has it.
logs_say() { for f in "$1"/logs/ps-*.log "$1"/logs/worker-*.log; do grep -qF "$2" "$f" || return 1; done; }
logs_lack() { ! cat "$1"/logs/ps-*.log "$1"/logs/worker-*.log | grep -qF "$2"; }

# ------------------------------------------------ the default: shared memory
start shm default 1
check "transport-01 the default run started" test -n "$RUN" -a -d "$RUN"
SHM_RUN=$RUN
check "transport-01 --print shows the workers' ps links" wait_for 30 links_up shm
check "transport-01 the header has a LINKS column before WHERE" \
  grep -q "INFLIGHT LINKS  *WHERE\$" "$TMP/shm.txt"
check "transport-01 every link of every node is shared memory" \
  every_link shm shm "ps:0 ps:1 ps:2 ps:3 worker:0 worker:1"
check "transport-01 a worker's: the coordinator, then ps:0-1" \
  [ "$(field worker:0 12 "$TMP/shm.txt")" = "coord=shm,ps:0-1=shm" ]
# a primary's link to its replica (ps:k is served by ps:k and ps:2+k)
primaries=$(awk '$1 ~ /^ps:/ && $12 ~ /,ps:[23]=shm$/' "$TMP/shm.txt" | wc -l)
check "transport-01 the primaries show their links to their replicas ($primaries)" [ "$primaries" -eq 2 ]
check "transport-01 events.log says the transport" \
  grep -q "transport: auto (shared memory between nodes on one host" "$RUN/events.log"
check "transport-01 every node follows the cluster's transport" \
  logs_say "$RUN" "the cluster's transport: auto; the coordinator's link: shm"
check "transport-01 the workers' logs name their shared-memory links" \
  [ "$(grep -c 'shared memory (same host)' "$RUN/logs/worker-0.log")" -ge 3 ]
check "transport-01 no node took a Unix socket" logs_lack "$RUN" "Unix socket (same host)"

# ------------------------------------------------ unix, though DROVER_TRANSPORT=tcp
start unix unix 0 DROVER_TRANSPORT=tcp
check "transport-02 the unix run started" test -n "$RUN" -a -d "$RUN"
check "transport-02 --print shows the workers' ps links" wait_for 30 links_up unix
check "transport-02 every link is a Unix socket (the cluster's choice wins)" \
  every_link unix unix "ps:0 ps:1 worker:0 worker:1"
check "transport-02 events.log says unix" grep -q "transport: unix (a Unix socket" "$RUN/events.log"
check "transport-02 every node follows it" \
  logs_say "$RUN" "the cluster's transport: unix; the coordinator's link: unix"
check "transport-02 the workers' logs name their Unix sockets" \
  [ "$(grep -c 'Unix socket (same host)' "$RUN/logs/worker-1.log")" -ge 3 ]
check "transport-02 no shared memory" logs_lack "$RUN" "shared memory (same host)"
stop unix

# ------------------------------------------------ tcp
start tcp tcp 0
check "transport-03 the tcp run started" test -n "$RUN" -a -d "$RUN"
check "transport-03 --print shows the workers' ps links" wait_for 30 links_up tcp
check "transport-03 every link is TCP" every_link tcp tcp "ps:0 ps:1 worker:0 worker:1"
check "transport-03 events.log says tcp" grep -q "transport: tcp (TCP between every two nodes" "$RUN/events.log"
check "transport-03 every node follows it" \
  logs_say "$RUN" "the cluster's transport: tcp; the coordinator's link: tcp"
check "transport-03 no node moved to a same-host link" logs_lack "$RUN" "(same host)"
stop tcp

# ------------------------------------------------ DROVER_TRANSPORT=tcp alone
start env default 0 DROVER_TRANSPORT=tcp
check "transport-04 the run started" test -n "$RUN" -a -d "$RUN"
check "transport-04 --print shows the workers' ps links" wait_for 30 links_up env
check "transport-04 without the option DROVER_TRANSPORT decides: TCP" \
  every_link env tcp "ps:0 ps:1 worker:0 worker:1"
check "transport-04 events.log says where it came from" \
  grep -q "transport: tcp (.*; from DROVER_TRANSPORT=tcp)" "$RUN/events.log"
stop env

# ------------------------------------------------ a bad value
cat >"$TMP/bad.lua" <<LUA
drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "bad", transport = "udp" }
LUA
"$DROVER" run "$TMP/bad.lua" >"$TMP/bad.out" 2>&1
check "transport-05 a bad transport fails the script" [ $? -ne 0 ]
check "transport-05 naming the choices" grep -qF \
  "cluster: transport 'udp': expected auto (shared memory between processes on one host, else TCP), unix or tcp" \
  "$TMP/bad.out"
check "transport-05 before any run directory" sh -c "! ls -d '$RUNS'/bad-* >/dev/null 2>&1"

# ------------------------------------------------ two clusters of one process
# Each keeps its own transport: a cluster made after another (with its own)
# changes neither the first's listener nor the data links its fits dial to
# its ps (shown as coord-data= in the ps rows' links).
cat >"$TMP/two.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local a = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "two-auto" }
local b = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "two-tcp", transport = "tcp" }
local ds = data.synthetic { n = 256, features = 8, classes = 2, seed = 1 }
for _, c in ipairs { a, b } do
  c:fit(drover.experiment { model = nn.Sequential { nn.Linear(8, 2) }, loss = nn.CrossEntropy(),
    optimizer = optim.SGD { lr = 0.1 }, train = { data = ds, batch = 32, max_steps = 10 },
    verbose = false })
end
-- a worker reports its ps links with a heartbeat: wait for them (10 s at most)
local function ps_links(c)
  for _, nd in ipairs(c:nodes()) do
    if nd.role == "worker" and not (nd.links or ""):find("ps:") then return false end
  end
  return true
end
local t0 = drover.clock()
while not (ps_links(a) and ps_links(b)) and drover.clock() - t0 < 10 do drover.sleep(0.1) end
for name, c in pairs { auto = a, tcp = b } do
  for _, nd in ipairs(c:nodes()) do
    print(string.format("LINKS %s %s:%d %s", name, nd.role, nd.index, nd.links or ""))
  end
end
a:shutdown()
b:shutdown()
LUA
"$DROVER" run "$TMP/two.lua" >"$TMP/two.out" 2>&1
check "transport-07 two clusters of one script ran" [ $? -eq 0 ]
check "transport-07 the first (auto): its fits' data link to its ps is shared memory" \
  grep -q "^LINKS auto ps:0 coord=shm,coord-data=shm" "$TMP/two.out"
check "transport-07 its worker's ps link too" grep -q "^LINKS auto worker:0 coord=shm,ps:0=shm" "$TMP/two.out"
check "transport-07 the second (tcp): TCP for each" \
  grep -q "^LINKS tcp ps:0 coord=tcp,coord-data=tcp" "$TMP/two.out"
check "transport-07 its worker's ps link too" grep -q "^LINKS tcp worker:0 coord=tcp,ps:0=tcp" "$TMP/two.out"

# ------------------------------------------------ the dashboard's node detail
SOCK=drover-transport-$$
TMUX_CASE=transport-06
. tests/cli/tmux.sh
tm new-session -d -s att -x 140 -y 45 "LANG=C.UTF-8 '$DROVER' attach '$SHM_RUN'; sleep 60"
expect att "transport-06 attach shows the nodes" wait_re att "worker:0 .* ready "
send att '/worker:0' Enter
key att Enter
expect att "transport-06 Enter opens worker:0's detail" wait_re att "node worker:0"
expect att "transport-06 which shows its links" wait_re att "links +coord=shm,ps:0-1=shm"
key att Escape
key att Escape
key att q
stop shm
