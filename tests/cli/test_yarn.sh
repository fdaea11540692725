# test_yarn.sh - the YARN launcher against a real YARN: Hadoop's
# MiniYARNCluster (a ResourceManager and two NodeManagers, the second
# labelled "gpu", in one JVM on loopback) started by tests/yarn/start.sh
# and stopped by stop.sh on exit: training with every node a container,
# a worker's container killed mid-fit and replaced, resources YARN cannot
# give and a label it does not have failing the start with YARN's reason,
# a ps killed mid-fit replaced by its replica and started again, a node
# that never registers ending the run with the node named, the
# binary and the script's files localised by YARN, the AM killed and its
# next attempt adopting the nodes, an installed drover finding its AM jar,
# and no application or container left in the RM after each case.
# Skipped, with the reason, where Java or the built jars are missing
# (start.sh exits 77; `make test` builds them with `make yarn-deps`);
# DROVER_YARN_REQUIRED=1 (CI) makes that a failure.
. tests/cli/lib.sh
RUNS=$TMP/runs
# The AM's staging directory, $DROVER_YARN_STAGING: the tests check it is emptied.
yarn_start "yarn-t00 tests/yarn/start.sh starts the test YARN"

app_state() { # the final state of the run's application (RUN_DIR/yarn names it)
  id=$(sed -n 's/^application\t//p' "$1/yarn")
  curl -s -m 5 "$RM/ws/v1/cluster/apps/$id/state" | sed -n 's/.*"state":"\([A-Z]*\)".*/\1/p'
}

cat > "$TMP/exp.lua" <<'LUA'
local nn, optim, data = drover.nn, drover.optim, drover.data
local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_ds = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
drover.seed(1)
return function(epochs, progress)
  return drover.experiment {
    name = "t", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    train = { data = train_std, batch = 32, epochs = epochs },
    eval = { data = test_ds:standardize(stats), every = 100 }, seed = 1, verbose = false,
    progress = progress,
  }
end
LUA

# yarn-t01: 1 ps + 2 workers (512M, 1 vcore, on the "gpu" node) learn digits;
# the binary and the script's files are YARN local resources: each node runs
# the NodeManager's localised copy of drover, and reads the files from its
# container's working directory; the RM's tracking URL shows the AM's page
mkdir -p "$TMP/ship/sub" "$TMP/abs"
printf 'x-contents' > "$TMP/ship/x.txt"
printf 'y-contents' > "$TMP/ship/sub/y.txt"
printf 'z-contents' > "$TMP/abs/z.txt"
ln -s "$PWD/examples" "$TMP/ship/examples" # the script runs in $TMP/ship
cat > "$TMP/fit.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1,
  worker = { instances = 2, cpus = 1, memory = "512M", label = "gpu" },
  yarn = { queue = "default", name = "drover-t01", max_attempts = 1 },
  files = { "x.txt", "sub/y.txt", "$TMP/abs/z.txt" }, runs = "$RUNS", name = "fit" }
local r = c:fit(exp(10))
io.stdout:write(string.format("eval_accuracy %.4f\n", r.eval_accuracy))
local rvs = {}
for i = 1, 4 do
  rvs[i] = c:schedule(function(w)
    local function read(p) local f = assert(io.open(p)) local s = f:read("a") f:close() return s end
    return w.name, read("x.txt"), read("sub/y.txt"), read("z.txt")
  end)
end
for _, rv in ipairs(rvs) do print("got", rv:fetch()) end
for _, n in ipairs(c:nodes()) do
  local p = io.popen("readlink /proc/" .. n.pid .. "/exe") print("exe", n.role, p:read("l")) p:close()
end
-- attach in the background: the coordinator answers it while drover.sleep runs its loop
os.execute("$DROVER attach '" .. c.run_dir .. "' --print >'$TMP/dash.txt' 2>&1 &")
for _ = 1, 200 do
  local f = io.open("$TMP/dash.txt") local s = f and f:read("a") or "" if f then f:close() end
  if s:find("\n") then break end
  drover.sleep(0.05)
end
drover.sleep(0.2)
c:shutdown() -- raises if a node failed
LUA
(cd "$TMP/ship" && timeout 180 "$DROVER" run "$TMP/fit.lua" >"$TMP/fit.out" 2>&1)
check "yarn-t01 a run with launcher = \"yarn\" succeeds" [ $? -eq 0 ]
acc=$(sed -n 's/^eval_accuracy //p' "$TMP/fit.out")
check "yarn-t01 it learns digits to >= 0.95 (got '$acc')" \
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
dir=$(ls -d "$RUNS"/fit-* | head -n 1)
check "yarn-t01 the run directory names the application and its tracking URL" \
  grep -q "^tracking_url	http://.*application_" "$dir/yarn"
for n in ps-0 worker-0 worker-1; do
  check "yarn-t01 $n ran in a YARN container" grep -q "YARN container of $n ended with status 0" \
    "$dir/logs/$n.log"
done
check "yarn-t01 the nodes read the script's files from their working directory" \
  [ "$(grep -c "^got	worker:[01]	x-contents	y-contents	z-contents$" "$TMP/fit.out")" -eq 4 ]
check "yarn-t01 every node runs the NodeManager's localised drover, not the build's" \
  sh -c "[ \$(grep -c '^exe	.*	$DROVER_YARN_DIR/work/.*/usercache/.*/filecache/.*/drover$' '$TMP/fit.out') -eq 3 ]"
check "yarn-t01 the AM ran the java of the NodeManager's JAVA_HOME (tests/yarn/start.sh's)" \
  test -s "$DROVER_YARN_DIR/jdk/used"
check "yarn-t01 the dashboard's header shows the application and the tracking URL" \
  grep -q "yarn application_.* http://.*/proxy/application_" "$TMP/dash.txt"
tracking=$(sed -n 's/^tracking_url	//p' "$dir/yarn")
check "yarn-t01 the tracking URL is the RM's proxy on its real port ($tracking)" \
  sh -c "case '$tracking' in *:0/*|'') exit 1;; esac"
check "yarn-t01 the staging directory is removed" \
  sh -c "[ -z \"\$(ls -A '$DROVER_YARN_STAGING')\" ]"
finished() { [ "$(app_state "$dir")" = FINISHED ]; }
check "yarn-t01 the application FINISHED" wait_for 20 finished
check "yarn-t01 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t02: a worker's container killed mid-fit is replaced; the fit ends
cat > "$TMP/kill.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  runs = "$RUNS", name = "kill" }
local node = dofile("$PWD/tests/lua/t.lua").node
local victim, killed = node(c, "worker", 1)
local r = c:fit(exp(20, function(p)
  if killed or p.step < 100 then return end
  killed = p.step
  os.execute("kill -9 " .. victim.pid)
  local back
  for _ = 1, 600 do
    local n = node(c, "worker", 1)
    if n.pid ~= victim.pid and (n.state == "ready" or n.state == "busy") then back = true break end
    drover.sleep(0.05)
  end
  io.stdout:write("worker:1 back ", tostring(back), "\n")
end))
io.stdout:write(string.format("killed at %s, steps %d, eval_accuracy %.4f\n", tostring(killed),
  r.steps, r.eval_accuracy))
io.stdout:write("restarts ", node(c, "worker", 1).restarts, "\n")
c:shutdown()
LUA
timeout 180 "$DROVER" run "$TMP/kill.lua" >"$TMP/kill.out" 2>&1
check "yarn-t02 the run succeeds" [ $? -eq 0 ]
check "yarn-t02 worker:1 was killed mid-fit and came back" grep -q "^worker:1 back true" "$TMP/kill.out"
check "yarn-t02 the fit finished" grep -q "^killed at [0-9]*, steps" "$TMP/kill.out"
check "yarn-t02 worker:1 restarted once" grep -q "^restarts 1" "$TMP/kill.out"
dir=$(ls -d "$RUNS"/kill-* | head -n 1)
check "yarn-t02 a new container ran worker-1" \
  sh -c "[ \$(grep -c 'YARN container of worker-1 ended' '$dir/logs/worker-1.log') -eq 2 ]"
check "yarn-t02 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t03: resources YARN cannot give fail the start with YARN's reason
cat > "$TMP/big.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "yarn", bind = "127.0.0.1", ps = 1,
  worker = { instances = 1, memory = "64G" }, runs = "$RUNS", name = "big" })
io.stdout:write(tostring(ok), " ", tostring(err), "\n")
LUA
timeout 60 "$DROVER" run "$TMP/big.lua" >"$TMP/big.out" 2>&1
check "yarn-t03 the start fails with YARN's maximum allocation" \
  grep -q "^false .*worker.*YARN's maximum allocation is <memory:4096" "$TMP/big.out"
check "yarn-t03 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t04: a node label YARN does not have: the start fails with YARN's words
cat > "$TMP/label.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "yarn", bind = "127.0.0.1", ps = 1,
  worker = { instances = 1, label = "tpu" }, reservation_timeout = 30, runs = "$RUNS", name = "label" })
io.stdout:write(tostring(ok), " ", tostring(err), "\n")
LUA
timeout 90 "$DROVER" run "$TMP/label.lua" >"$TMP/label.out" 2>&1
check "yarn-t04 the start fails" grep -q "^false " "$TMP/label.out"
dir=$(ls -d "$RUNS"/label-* | head -n 1)
check "yarn-t04 YARN's reason names the label" grep -qi "YARN refused its container.*tpu" \
  "$dir/events.log"
check "yarn-t04 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t05: a worker that never registers ends the start, the node named
cat > "$TMP/hang.lua" <<LUA
local ok, err = pcall(drover.cluster, { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  reservation_timeout = 10, runs = "$RUNS", name = "hang" })
io.stdout:write(tostring(ok), " ", tostring(err), "\n")
LUA
DROVER_FAULT=hang:worker:1 timeout 90 "$DROVER" run "$TMP/hang.lua" >"$TMP/hang.out" 2>&1
check "yarn-t05 the start fails naming worker:1" grep -q "^false .*missing worker:1" "$TMP/hang.out"
check "yarn-t05 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t06: options YARN does not honour are refused
cat > "$TMP/bad.lua" <<LUA
local ok1, e1 = pcall(drover.cluster, { launcher = "yarn", worker = { instances = 1, gpus = 1 },
  runs = "$RUNS", name = "bad" })
local ok2, e2 = pcall(drover.cluster, { launcher = "local", worker = { instances = 1, label = "x" } })
local ok3, e3 = pcall(drover.cluster, { launcher = "local", yarn = { queue = "q" } })
local ok4, e4 = pcall(drover.cluster, { launcher = "yarn", yarn = { max_attempts = 0 } })
local ok5, e5 = pcall(drover.cluster, { launcher = "yarn", bind = "127.0.0.1", worker = 1,
  files = { "$TMP/abs/drover" }, runs = "$RUNS", name = "bad" })
io.stdout:write(tostring(ok1), " ", tostring(e1), "\n", tostring(ok2), " ", tostring(e2), "\n",
  tostring(ok3), " ", tostring(e3), "\n", tostring(ok4), " ", tostring(e4), "\n",
  tostring(ok5), " ", tostring(e5), "\n")
LUA
: > "$TMP/abs/drover"
timeout 90 "$DROVER" run "$TMP/bad.lua" >"$TMP/bad.out" 2>&1
check "yarn-t06 gpus is refused" grep -q "^false .*gpus is not supported" "$TMP/bad.out"
check "yarn-t06 label is refused by other launchers" grep -q "^false .*label is for launcher" "$TMP/bad.out"
check "yarn-t06 yarn = {...} is refused by other launchers" grep -q "^false .*yarn is for launcher" "$TMP/bad.out"
check "yarn-t06 max_attempts below 1 is refused" grep -q "^false .*cluster: yarn.max_attempts must be a positive integer (got 0)" "$TMP/bad.out"
check "yarn-t06 a file named like the binary is refused" grep -q "^false .*would hide the drover binary" "$TMP/bad.out"
check "yarn-t06 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t07: with max_attempts = 2, the AM killed mid-fit (SIGKILL to the pid
# its page shows through the RM's tracking URL) is followed by YARN's second
# attempt, which adopts the running containers: the fit finishes with no
# node restarted, and drover follows the AM to its new address; the new
# attempt counts drover's silence from its own registration, so a short
# yarn.orphan_timeout (5 s, less than YARN takes to start it) ends nothing
cat > "$TMP/am.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  yarn = { max_attempts = 2, orphan_timeout = 5 }, runs = "$RUNS", name = "am" }
local function info(k)
  for line in io.lines(c.run_dir .. "/yarn") do
    local key, v = line:match("^(%S+)\t(.*)$") if key == k then return v end
  end
end
local page = io.popen("curl -s -m 10 '" .. info("tracking_url") .. "'"):read("a")
io.stdout:write("page ", (page:gsub("\n", "|")), "\n")
local am = tonumber(page:match("\npid (%d+)\n"))
-- YARN keeps across attempts the containers its RM has seen running (the
-- NodeManagers report them on their heartbeats); one the AM started a
-- moment before its death is aborted, and drover restarts that node (seen
-- under ASan, where the fit reached the kill a second after the last
-- container started). This test is about kept containers: give the
-- reports time to arrive.
drover.sleep(3)
local killed
local r = c:fit(exp(20, function(p)
  if killed or p.step < 100 then return end
  killed = p.step
  local cmd = io.open("/proc/" .. am .. "/cmdline"):read("a")
  assert(cmd:find("drover.yarn.DroverAM", 1, true), "pid " .. am .. " is not the AM")
  os.execute("kill -9 " .. am)
end))
local attempt
for _ = 1, 600 do -- the second attempt may come up after the fit
  attempt = info("attempt") if attempt == "2" then break end
  drover.sleep(0.05)
end
io.stdout:write(string.format("killed at %s, steps %d, eval_accuracy %.4f\n", tostring(killed),
  r.steps, r.eval_accuracy))
io.stdout:write("attempt ", attempt, "\n")
local restarts = 0
for _, n in ipairs(c:nodes()) do restarts = restarts + n.restarts end
io.stdout:write("restarts ", restarts, "\n")
page = io.popen("curl -s -m 10 '" .. info("tracking_url") .. "'"):read("a")
io.stdout:write("page2 ", (page:gsub("\n", "|")), "\n")
c:shutdown()
LUA
timeout 180 "$DROVER" run "$TMP/am.lua" >"$TMP/am.out" 2>&1
check "yarn-t07 the run succeeds" [ $? -eq 0 ]
check "yarn-t07 the RM's tracking URL shows the AM's page" \
  grep -q "^page drover ApplicationMaster|application application_.*|attempt 1|pid [0-9]*|nodes|ps-0 container_" "$TMP/am.out"
check "yarn-t07 the AM was killed mid-fit and the fit finished" grep -q "^killed at [0-9]*, steps" "$TMP/am.out"
check "yarn-t07 drover followed the AM's second attempt" grep -q "^attempt 2$" "$TMP/am.out"
check "yarn-t07 no node was restarted (the containers were kept)" grep -q "^restarts 0$" "$TMP/am.out"
check "yarn-t07 the second attempt adopted all three nodes" \
  sh -c "grep '^page2 ' '$TMP/am.out' | grep 'attempt 2' | grep 'ps-0 container_' | grep 'worker-0 container_' | grep -q 'worker-1 container_'"
dir=$(ls -d "$RUNS"/am-* | head -n 1)
check "yarn-t07 events.log tells of the new attempt" grep -q "attempt 2 runs at" "$dir/events.log"
finished() { [ "$(app_state "$dir")" = FINISHED ]; }
check "yarn-t07 the application FINISHED" wait_for 20 finished
check "yarn-t07 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t08: a ps killed mid-fit (ps_replicas = 1): its replica takes over,
# the lost ps comes back in a new container as the new replica, the fit ends
cat > "$TMP/ps.lua" <<LUA
local exp = dofile("$TMP/exp.lua")
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 2,
  ps_replicas = 1, runs = "$RUNS", name = "ps" }
local node = dofile("$PWD/tests/lua/t.lua").node
local victim, killed = node(c, "ps", 0)
local r = c:fit(exp(20, function(p)
  if killed or p.step < 100 then return end
  killed = p.step
  os.execute("kill -9 " .. victim.pid)
end))
local back
for _ = 1, 600 do
  local n = node(c, "ps", 0)
  if n.pid ~= victim.pid and n.state == "replica" then back = n break end
  drover.sleep(0.05)
end
io.stdout:write(string.format("killed at %s, steps %d, eval_accuracy %.4f\n", tostring(killed),
  r.steps, r.eval_accuracy))
io.stdout:write("ps:0 back as the replica ", tostring(back ~= nil), ", restarts ",
  back and back.restarts or -1, "; ps:1 ", node(c, "ps", 1).state, "\n")
c:shutdown()
LUA
timeout 180 "$DROVER" run "$TMP/ps.lua" >"$TMP/ps.out" 2>&1
check "yarn-t08 the run succeeds" [ $? -eq 0 ]
check "yarn-t08 the fit finished after the primary ps was killed" \
  grep -q "^killed at [0-9]*, steps" "$TMP/ps.out"
check "yarn-t08 ps:0 came back as the replica, ps:1 took over" \
  grep -q "^ps:0 back as the replica true, restarts 1; ps:1 ready" "$TMP/ps.out"
dir=$(ls -d "$RUNS"/ps-* | head -n 1)
check "yarn-t08 a new container ran ps-0" \
  sh -c "[ \$(grep -c 'YARN container of ps-0 ended' '$dir/logs/ps-0.log') -eq 2 ]"
check "yarn-t08 nothing is left in the RM" wait_for 20 nothing_left

# yarn-t09: with neither yarn.am_classpath nor $DROVER_YARN_AM_CLASSPATH, an
# installed drover (PREFIX/bin/drover) runs the AM from the jar `make
# install` puts in PREFIX/share/drover, with YARN's default application
# classpath, which each NodeManager expands from its own Hadoop (start.sh
# gives the test YARN's the HADOOP_* a cluster's have); a drover that is not
# installed, or installed without the jar, says where it looked
mkdir -p "$TMP/prefix/bin" "$TMP/prefix/share/drover" "$TMP/nojar/bin"
cp "$DROVER" "$TMP/prefix/bin/drover"
cp "$DROVER" "$TMP/nojar/bin/drover"
cp "$DROVER_YARN_AM_JAR" "$TMP/prefix/share/drover/drover-yarn-am.jar"
cat > "$TMP/inst.lua" <<LUA
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 1,
  runs = "$RUNS", name = "inst" }
io.stdout:write("answer ", c:schedule(function() return 6 * 7 end):fetch(), "\n")
c:shutdown()
LUA
env -u DROVER_YARN_AM_CLASSPATH timeout 180 "$TMP/prefix/bin/drover" run "$TMP/inst.lua" \
  >"$TMP/inst.out" 2>&1
check "yarn-t09 an installed drover runs with no AM classpath given" [ $? -eq 0 ]
check "yarn-t09 its nodes answer" grep -q "^answer 42$" "$TMP/inst.out"
dir=$(ls -d "$RUNS"/inst-* | head -n 1)
check "yarn-t09 events.log names the installed jar" \
  grep -q "ApplicationMaster: the installed $TMP/prefix/share/drover/drover-yarn-am.jar" "$dir/events.log"
check "yarn-t09 nothing is left in the RM" wait_for 20 nothing_left
for d in nojar build; do
  case $d in nojar) exe=$TMP/nojar/bin/drover ;; build) exe=$DROVER ;; esac
  env -u DROVER_YARN_AM_CLASSPATH timeout 60 "$exe" run "$TMP/inst.lua" >"$TMP/$d.out" 2>&1
  check "yarn-t09 no AM classpath and no installed jar ($d) fails the start" [ $? -ne 0 ]
done
check "yarn-t09 an installed drover without the jar names where it looked" \
  grep -q "no classpath for drover's ApplicationMaster.*there is no $TMP/nojar/share/drover/drover-yarn-am.jar" "$TMP/nojar.out"
check "yarn-t09 a drover that is not installed says so" \
  grep -q "no classpath for drover's ApplicationMaster.*this drover (.*) is not in an installed PREFIX/bin" "$TMP/build.out"
