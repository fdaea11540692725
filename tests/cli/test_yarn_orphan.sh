# test_yarn_orphan.sh - the YARN application and drover's life, on the test
# YARN (tests/yarn/start.sh, as test_yarn.sh): drover SIGKILLed mid-fit
# leaves no application, container or staging directory behind once
# yarn.orphan_timeout has passed (the AM ends it as FAILED, saying why); a
# healthy run longer than that timeout, computing or in the REPL waiting
# for input (at its prompt or on a quiet pipe), is not ended; the application runs as the local user, or as
# yarn.user; a node's log reaches the run directory over its connection,
# its container's own output stays in YARN's log directory; its key file
# comes with its container, not from the run directory.
# Skipped, with the reason, where Java or the built jars are missing;
# DROVER_YARN_REQUIRED=1 (CI) makes that a failure.
. tests/cli/lib.sh
# Under `make asan` (SANITIZED=1) the launcher's C paths run in test_yarn.sh;
# this file's JVM-bound cases would only double CI's time.
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_YARN_ASAN:-0}" != 1 ]; then
  echo "SKIP test_yarn_orphan: the YARN runs under ASan (SANITIZED=1; DROVER_YARN_ASAN=1 runs them)"
  exit 0
fi
RUNS=$TMP/runs
yarn_start "yarn-o00 tests/yarn/start.sh starts the test YARN"

app_of() { sed -n 's/^application\t//p' "$1/yarn"; }
# app_field APP FIELD: a string field of the RM's report of APP
app_field() {
  curl -s -m 5 "$RM/ws/v1/cluster/apps/$1" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['app'].get('$2', ''))" 2>/dev/null
}
# A stopped application's end on the NodeManagers too: no NM lists it running.
nm_clean() {
  for nm in $(curl -s -m 5 "$RM/ws/v1/cluster/nodes" | grep -o '"nodeHTTPAddress":"[^"]*"' |
              sed 's/.*:"\(.*\)"/\1/'); do
    curl -s -m 5 "http://$nm/ws/v1/node/apps?state=RUNNING" | grep -q "$1" && return 1
  done
  return 0
}
me=$(id -un)

cat > "$TMP/exp.lua" <<'LUA'
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train = digits:split(0.8, { seed = 1 })
local train_std = train:standardize()
drover.seed(1)
return function(epochs, progress)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train_std, batch = 32, epochs = epochs }, seed = 1, verbose = false,
    progress = progress,
  }
end
LUA

# yarn-o01: a healthy run fits for 3x yarn.orphan_timeout (3 s): the AM
# keeps it; the application's user is the local user; a node's log is in
# the run directory (forwarded), `drover logs` shows it, its container's
# output files are in YARN's log directory; its key file came with the
# container (DROVER_SECRET_FILE in the container), not from the run directory
cat > "$TMP/long.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  yarn = { orphan_timeout = 3 }, runs = "$RUNS", name = "long" }
for _, n in ipairs(c:nodes()) do
  local f = io.open("/proc/" .. n.pid .. "/environ") local env = f and f:read("a") or "" if f then f:close() end
  local p = io.popen("readlink /proc/" .. n.pid .. "/cwd") local cwd = p:read("l") p:close()
  print("node", n.role .. "-" .. n.index, env:match("DROVER_SECRET_FILE=([^%z]*)"), cwd)
end
local t0, fits = os.time(), 0
while os.time() - t0 < 10 do c:fit(exp(1)) fits = fits + 1 end
print("fitted", os.time() - t0, fits)
print("state", io.popen("curl -s -m 5 '$RM/ws/v1/cluster/apps/" ..
  io.open(c.run_dir .. "/yarn"):read("a"):match("application\t(%S+)") .. "/state'"):read("a"))
c:shutdown()
LUA
timeout 240 "$DROVER" run "$TMP/long.lua" >"$TMP/long.out" 2>&1
check "yarn-o01 a run of 3x orphan_timeout succeeds" [ $? -eq 0 ]
check "yarn-o01 it fitted for 10 s" grep -q "^fitted	1[0-9]	" "$TMP/long.out"
check "yarn-o01 its application was RUNNING after that" grep -q '^state.*"RUNNING"' "$TMP/long.out"
dir=$(ls -d "$RUNS"/long-* | head -n 1)
app=$(app_of "$dir")
check "yarn-o01 the application's user is the local user ($me)" [ "$(app_field "$app" user)" = "$me" ]
check "yarn-o01 it FINISHED as SUCCEEDED" [ "$(app_field "$app" finalStatus)" = SUCCEEDED ]
check "yarn-o01 worker-0's log in the run directory holds its node's own lines (forwarded)" \
  grep -q "registered" "$dir/logs/worker-0.log"
"$DROVER" logs "$dir" worker:0 >"$TMP/logs.out" 2>&1
check "yarn-o01 drover logs RUN worker:0 shows them" grep -q "registered" "$TMP/logs.out"
cdir=$(find "$DROVER_YARN_DIR/work" -path "*$app*" -type d -name 'container_*' 2>/dev/null |
  while read -r d; do [ -f "$d/stderr" ] && echo "$d"; done | head -n 1)
check "yarn-o01 a node's container output files are in YARN's log directory ($cdir)" \
  [ -n "$cdir" ] && [ -f "$cdir/stdout" ]
for n in ps-0 worker-0 worker-1; do
  line=$(grep "^node	$n	" "$TMP/long.out")
  key=$(echo "$line" | cut -f 3)
  cwd=$(echo "$line" | cut -f 4)
  check "yarn-o01 $n's key file comes with its container, not from the run directory ($key)" \
    sh -c "case '$key' in '$DROVER_YARN_DIR'/work/*/appcache/$app/filecache/*/$n) exit 0;; *) exit 1;; esac"
  check "yarn-o01 $n runs in its container's working directory" \
    sh -c "case '$cwd' in '$DROVER_YARN_DIR'/work/*/$app/container_*) exit 0;; *) exit 1;; esac"
  check "yarn-o01 $n's key file is gone from its container once it registered" \
    sh -c "[ ! -e '$key' ] && [ ! -e '$cwd/drover-node.key' ]"
done
check "yarn-o01 the staging directory is removed" sh -c "[ -z \"\$(ls -A '$DROVER_YARN_STAGING')\" ]"
check "yarn-o01 nothing is left in the RM" wait_for 20 nothing_left

# yarn-o02: the REPL at its prompt (a terminal: tmux) keeps the application
# (orphan_timeout 3 s, 9 s of waiting for input), and the cluster answers
# afterwards
SOCK=drover-yarn-o-$$ TMUX_CASE=yarn-o02
. tests/cli/tmux.sh
tm new-session -d -s r -x 200 -y 50 "exec env DROVER_YARN_RM='$DROVER_YARN_RM' \
  DROVER_YARN_AM_CLASSPATH='$DROVER_YARN_AM_CLASSPATH' DROVER_YARN_STAGING='$DROVER_YARN_STAGING' \
  '$DROVER' repl"
rp=$(tm display -p -t r '#{pane_pid}')
kill_at_exit "$rp"
wait_text r "Ctrl-D to leave"
send r "c = drover.cluster { launcher = 'yarn', bind = '127.0.0.1', ps = 1, worker = 1, yarn = { orphan_timeout = 3 }, runs = '$RUNS', name = 'repl' }" Enter
send r "f = io.open('$TMP/repl.up', 'w') f:write(c.run_dir) f:close()" Enter
wait_for 120 test -s "$TMP/repl.up"
dir=$(cat "$TMP/repl.up")
sleep 9
app=$(app_of "$dir")
check "yarn-o02 the application still runs after 3x orphan_timeout at the REPL's prompt" \
  [ "$(app_field "$app" state)" = RUNNING ]
send r "print('answer ' .. c:schedule(function() return 6 * 7 end):fetch())" Enter
expect r "yarn-o02 its nodes still answer" wait_line r "answer 42"
send r "c:shutdown()" Enter
key r C-d
wait_for 60 sh -c "! kill -0 $rp 2>/dev/null"
check "yarn-o02 nothing is left in the RM" wait_for 20 nothing_left

# yarn-o05: the same with the REPL's input a FIFO this test holds open:
# between lines its loop turns too, so the AM keeps hearing from drover
mkfifo "$TMP/repl.in"
DROVER_YARN_RM=$DROVER_YARN_RM DROVER_YARN_AM_CLASSPATH=$DROVER_YARN_AM_CLASSPATH \
  "$DROVER" repl <"$TMP/repl.in" >"$TMP/pipe.out" 2>&1 &
pp=$!
kill_at_exit "$pp"
exec 3>"$TMP/repl.in"
echo "c = drover.cluster { launcher = 'yarn', bind = '127.0.0.1', ps = 1, worker = 1, yarn = { orphan_timeout = 3 }, runs = '$RUNS', name = 'pipe' }" >&3
echo "f = io.open('$TMP/pipe.up', 'w') f:write(c.run_dir) f:close()" >&3
wait_for 120 test -s "$TMP/pipe.up"
dir=$(cat "$TMP/pipe.up")
sleep 9
app=$(app_of "$dir")
check "yarn-o05 the application still runs after 3x orphan_timeout of idle piped input" \
  [ "$(app_field "$app" state)" = RUNNING ]
echo "print('answer ' .. c:schedule(function() return 6 * 7 end):fetch())" >&3
echo "c:shutdown()" >&3
exec 3>&-
wait_for 60 sh -c "! kill -0 $pp 2>/dev/null"
check "yarn-o05 its nodes still answer" grep -q "^answer 42$" "$TMP/pipe.out"
check "yarn-o05 nothing is left in the RM" wait_for 20 nothing_left

# yarn-o03: drover SIGKILLed mid-fit (1 ps + 2 workers, orphan_timeout 10):
# within 20 s the application has ended as FAILED, its diagnostics saying
# why, no container is left (RM and NodeManagers), the staging directory is gone
cat > "$TMP/orphan.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  yarn = { orphan_timeout = 10 }, runs = "$RUNS", name = "orphan" }
local said
c:fit(exp(1000, function(p)
  if not said and p.step >= 20 then said = true print("fitting") io.stdout:flush() end
end))
print("the fit ended")
LUA
timeout 300 "$DROVER" run "$TMP/orphan.lua" >"$TMP/orphan.out" 2>&1 &
op=$!
kill_at_exit "$op"
wait_for 180 grep -q "^fitting" "$TMP/orphan.out"
check "yarn-o03 the fit is in progress" sh -c "grep -q '^fitting' '$TMP/orphan.out' && ! grep -q '^the fit ended' '$TMP/orphan.out'"
dir=$(ls -d "$RUNS"/orphan-* | head -n 1)
app=$(app_of "$dir")
check "yarn-o03 the staging directory holds the application's files" [ -d "$DROVER_YARN_STAGING/$app" ]
# drover's own process: timeout's child
dp=$(pgrep -P "$op" | head -n 1)
kill -9 "$dp"
t0=$(date +%s)
ended() { case $(app_field "$app" state) in FINISHED|FAILED|KILLED) return 0;; esac; return 1; }
wait_for 40 ended
t=$(( $(date +%s) - t0 ))
check "yarn-o03 the application ended ${t} s after drover's SIGKILL (<= 20)" \
  sh -c "[ $t -le 20 ] && case '$(app_field "$app" state)' in FINISHED|FAILED) exit 0;; *) exit 1;; esac"
check "yarn-o03 its final status is FAILED" [ "$(app_field "$app" finalStatus)" = FAILED ]
diag=$(app_field "$app" diagnostics)
check "yarn-o03 its diagnostics say why ($diag)" \
  sh -c "echo '$diag' | grep -q 'drover (the coordinator) stopped answering for 10 s (yarn.orphan_timeout)'"
check "yarn-o03 no container is left in the RM" wait_for 10 nothing_left
check "yarn-o03 no NodeManager runs the application" wait_for 10 nm_clean "$app"
check "yarn-o03 the staging directory is gone" [ ! -e "$DROVER_YARN_STAGING/$app" ]

# yarn-o04: yarn.orphan_timeout and yarn.user are checked; yarn.user names
# the application's user
cat > "$TMP/opts.lua" <<LUA
for _, v in ipairs { 0, -1, "x" } do
  local ok, e = pcall(drover.cluster, { launcher = "yarn", yarn = { orphan_timeout = v } })
  print("orphan", v, ok, e)
end
local ok, e = pcall(drover.cluster, { launcher = "yarn", bind = "127.0.0.1", worker = 1,
  yarn = { user = "a b" }, runs = "$RUNS", name = "baduser" })
print("baduser", ok, e)
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", worker = 1,
  yarn = { user = "alice" }, runs = "$RUNS", name = "alice" }
print("answer", c:schedule(function() return 6 * 7 end):fetch())
c:shutdown()
LUA
timeout 180 "$DROVER" run "$TMP/opts.lua" >"$TMP/opts.out" 2>&1
check "yarn-o04 orphan_timeout = 0 is refused" grep -q "^orphan	0	false	.*orphan_timeout must be a positive number" "$TMP/opts.out"
check "yarn-o04 orphan_timeout = -1 is refused" grep -q "^orphan	-1	false	.*orphan_timeout must be a positive number" "$TMP/opts.out"
check "yarn-o04 orphan_timeout = 'x' is refused" grep -q "^orphan	x	false	.*orphan_timeout must be" "$TMP/opts.out"
check "yarn-o04 a user name with a space is refused" grep -q "^baduser	false	.*yarn.user: 'a b' is not a user name" "$TMP/opts.out"
check "yarn-o04 the run as alice works" grep -q "^answer	42" "$TMP/opts.out"
dir=$(ls -d "$RUNS"/alice-* | head -n 1)
check "yarn-o04 the RM shows alice as the application's user" [ "$(app_field "$(app_of "$dir")" user)" = alice ]
check "yarn-o04 nothing is left in the RM" wait_for 20 nothing_left
