# noshare_cases.sh - what test_noshare.sh (Spark) and test_noshare_yarn.sh
# (YARN) share, sourced after tests/cli/lib.sh: the coordinator's side
# $COORD (noshare_dir) with the runs, the data and the scripts' working
# directory; the test HDFS, started once for the file (engine_try hdfs:
# where it cannot run, the HDFS cases are skipped with the reason) with
# the data the nodes read from it (digits as CSV and as IDX, made under
# $COORD: no node can see them there); the probe; and the checkpoint
# cases (noshare_ckpt_failover, noshare_ckpt_resume) each engine runs with
# its own cluster options, against one reference fit.

noshare_dir
RUNS=$COORD/runs
mkdir -p "$RUNS" "$COORD/work" "$COORD/data"
cp examples/data/digits.csv "$COORD/work/train.csv"
cp examples/data/digits.csv "$COORD/data/digits.csv"

# noshare_run NAME SECONDS: runs $TMP/NAME.lua from $COORD/work (the
# coordinator's working directory: relative `files` and data paths are
# there) for at most SECONDS, output in $TMP/NAME.out; sets rc, and on a
# failure prints the output's last 30 lines.
noshare_run() {
  (cd "$COORD/work" && timeout "$2" "$DROVER" run "$TMP/$1.lua" >"$TMP/$1.out" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "---- $TMP/$1.out (last 30 lines)"
    tail -n 30 "$TMP/$1.out"
  fi
}

# noshare_manifests_ok RUN: every checkpoint of RUN has its ps-0 file, whose
# sha256 its manifest.json names; false when there is none.
noshare_manifests_ok() {
  set -- "$1" "$(ls -d "$1"/checkpoints/step-* 2>/dev/null)"
  [ -n "$2" ] || return 1
  for d in $2; do
    [ -f "$d/ps-0.safetensors" ] &&
      grep -q "\"$(sha256sum "$d/ps-0.safetensors" | cut -d' ' -f1)\"" "$d/manifest.json" || return 1
  done
}

# The probe every engine runs first, on a worker: what it sees of the
# coordinator's paths (the run directory's events.log, the marker, the
# data by its absolute path) and of the shipped copy (train.csv in its own
# directory), and a file it writes under $COORD.
cat >"$TMP/probe.lua" <<LUA
return function(c)
  local paths = { c.run_dir .. "/events.log", "$NOSHARE_MARK", "$COORD/work/train.csv" }
  for _, p in ipairs(paths) do assert(io.open(p), "the coordinator cannot read " .. p):close() end
  local function probe(w, ps, coord)
    local seen = {}
    for i, p in ipairs(ps) do
      local f = io.open(p)
      seen[i] = f and "visible" or "hidden"
      if f then f:close() end
    end
    local shipped = io.open("train.csv")
    if shipped then shipped:close() end
    local f = io.open(coord .. "/from-" .. w.name:gsub(":", "-"), "w")
    if f then f:write("written by a node\n") f:close() end
    return w.name, table.concat(seen, " "), shipped and "shipped" or "not-shipped",
      f and "wrote" or "no-write"
  end
  local rvs = {}
  for i = 1, 4 do rvs[i] = c:schedule(probe, paths, "$COORD") end
  for _, rv in ipairs(rvs) do print("probe", rv:fetch()) end
end
LUA

# noshare_probe_checks ENGINE OUT: the probe's lines in OUT: every worker
# sees none of the coordinator's paths, its shipped copy of the data, and
# what it wrote under $COORD stayed on its side.
noshare_probe_checks() {
  check "noshare-${1}01 the probe ran on the workers" grep -q "^probe	worker:" "$2"
  check "noshare-${1}01 no worker sees the run directory, the marker or the data by the coordinator's paths" \
    sh -c "grep -q '^probe	' '$2' && ! grep '^probe	' '$2' | grep -qv '^probe	worker:[01]	hidden hidden hidden	'"
  check "noshare-${1}01 each worker has its shipped copy of train.csv" \
    sh -c "grep -q '^probe	' '$2' && ! grep '^probe	' '$2' | grep -qv '	shipped	'"
  check "noshare-${1}01 what a worker wrote under \$COORD stayed in its namespace" \
    sh -c "grep -q '	wrote$' '$2' && ! ls '$COORD' | grep -q '^from-'"
}

# The test HDFS, one for the file, outside $COORD (the nodes reach it over
# loopback as a cluster's nodes reach their NameNode). NOSHARE_H is the
# directory of the data on it, empty when there is no HDFS here.
NOSHARE_H=
: "${DROVER_HDFS_DIR:=$TMP/hdfs}"
export DROVER_HDFS_DIR
unset HADOOP_USER_NAME
if engine_try hdfs "noshare-h00 tests/hdfs/start.sh starts the test HDFS"; then
  . "$DROVER_HDFS_DIR/env"
  # digits as IDX (8x8 uint8 images, uint8 labels), made on our side only
  cat >"$TMP/idx.lua" <<'LUA'
local d = drover.data.csv(arg[1], { label = -1 })
local x, y = d.x:totable(), d.y:totable()
local fi, fl = assert(io.open(arg[2], "wb")), assert(io.open(arg[3], "wb"))
fi:write(string.pack(">I4I4I4I4", 0x803, d.n, 8, 8))
fl:write(string.pack(">I4I4", 0x801, d.n))
for i = 1, d.n do
  for j = 1, 64 do fi:write(string.char(math.tointeger(x[i][j]))) end
  fl:write(string.char(math.tointeger(y[i])))
end
fi:close() fl:close()
LUA
  ok=1
  timeout 120 "$DROVER" run "$TMP/idx.lua" "$COORD/data/digits.csv" "$COORD/data/images.idx" \
    "$COORD/data/labels.idx" >"$TMP/idx.out" 2>&1 || ok=0
  for f in digits.csv images.idx labels.idx; do
    [ $ok = 1 ] && timeout 120 "$DROVER" hdfs put "$COORD/data/$f" "$DROVER_HDFS/noshare/$f" >>"$TMP/put.out" 2>&1 || ok=0
  done
  check "noshare-h00 the digits (CSV, IDX) are on the test HDFS (drover hdfs put)" [ $ok = 1 ]
  [ $ok = 1 ] && NOSHARE_H=$DROVER_HDFS/noshare
fi


# ---- checkpoints, failover, --resume, the chief's summaries (both engines)
# The fit of noshare_ckpt_*: arg[1] = the cluster's options (a Lua file
# returning launcher, bind, ... for the engine; "local" for the local
# launcher), arg[2] = where c:save writes the final parameters, arg[3] =
# the run's name, arg[4] = checkpoint.dir ("local": the run directory's),
# arg[5] = what to kill once events.log has a committed checkpoint:
# "ps" (ps:0, by the pid it registered with) or "coord" (this process,
# having written the pids of its descendants, the engine's clients, to
# $TMP/NAME.kids and of its nodes to $TMP/NAME.nodes), once per run
# ($TMP/NAME.killed, holding the step: the resumed run kills nothing).
# With a kill, a pause every 2 steps makes the fit last a few seconds (the
# fit does not depend on timing). Sync, a chief as the
# only trainer, whole epochs: deterministic, so every way of getting to
# its end must give the reference's parameters.
cat >"$TMP/ck.lua" <<LUA
local nn, optim = drover.nn, drover.optim
local where, out, name, dir, kill = arg[1], arg[2], arg[3], arg[4], arg[5]
local mark = "$TMP/" .. name
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function slurp(p) local f = io.open(p) if not f then return "" end local s = f:read("a") f:close() return s end
local function put(p, s) local f = assert(io.open(p, "w")) f:write(s) f:close() end
-- the descendants of process PID, from /proc
local function desc(pid, acc)
  for k in slurp("/proc/" .. pid .. "/task/" .. pid .. "/children"):gmatch("%d+") do
    acc[#acc + 1] = k
    desc(k, acc)
  end
  return acc
end
drover.seed(3)
local data = drover.data.synthetic { n = 1024, features = 16, classes = 4, seed = 1 }
local model = nn.Sequential { nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4) }
local ck = { every = 16, keep = 2 }
if dir ~= "local" then ck.dir = dir end
local opts = where == "local" and {} or dofile(where)
opts.ps, opts.chief, opts.worker, opts.runs, opts.name = 1, 1, 0, "$RUNS", name
local c = drover.cluster(opts)
io.stdout:write("run_dir ", c.run_dir, "\n")
local function progress(p)
  if not kill then return end
  -- the progress function runs on the coordinator's loop: pausing it keeps
  -- the fit going for a few seconds, the kill mid-fit
  if p.step % 2 == 0 then os.execute("sleep 0.05") end
  if exists(mark .. ".killed") then return end
  if not slurp(c.run_dir .. "/events.log"):find(" checkpoint step %d+: ") then return end
  put(mark .. ".killed", p.step .. "\n")
  local pids = {}
  for _, n in ipairs(c:nodes()) do pids[n.role] = n.pid end
  if kill == "ps" then
    io.stdout:write("killing ps:0 pid ", pids.ps, " at step ", p.step, "\n")
    os.execute("kill -9 " .. pids.ps)
  else
    local self = slurp("/proc/self/stat"):match("^%d+")
    put(mark .. ".kids", table.concat(desc(self, {}), " ") .. "\n")
    put(mark .. ".nodes", pids.ps .. " " .. pids.chief .. "\n")
    io.stdout:write("killing the coordinator pid ", self, " at step ", p.step, "\n")
    io.stdout:flush()
    os.execute("kill -9 " .. self)
  end
end
local exp = drover.experiment { name = "ck", model = model, loss = nn.CrossEntropy(),
  optimizer = optim.Adam { lr = 0.01 }, train = { data = data, batch = 16, epochs = 2 },
  verbose = false, seed = 5, mode = "sync", checkpoint = ck, progress = progress }
local r = c:fit(exp)
print("steps " .. r.global_steps .. " run " .. c.run_dir)
c:save(out)
c:shutdown()
io.stdout:write("shut down\n")
LUA
ck_run_of() { sed -n 's/^run_dir //p' "$1"; }
ck_sha() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
# ck_gone PID: the process has ended (or is a zombie nobody reaped yet).
ck_gone() { [ ! -d "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# The reference: the same fit on the local launcher, its nodes seeing the
# run directory, no kill.
ck_ref() {
  [ -s "$TMP/ref.st" ] && return 0
  (cd "$COORD/work" && timeout 300 "$DROVER" run "$TMP/ck.lua" local "$TMP/ref.st" ref local >"$TMP/ref.out" 2>&1)
  check "noshare-ref the reference fit (local launcher, no kill) ran" [ -s "$TMP/ref.st" ]
}

# noshare_ckpt_failover E NN OPTS CKDIR WHAT: ps:0 SIGKILLed (by the pid it
# registered with) once a checkpoint is committed; the engine relaunches
# it, it is restored from the newest checkpoint and the fit ends with the
# reference's parameters. Also asserts the chief's summaries and the
# nodes' logs of that run.
noshare_ckpt_failover() {
  ck_e=$1 ck_n=$2 ck_o=$3 ck_d=$4 ck_w=$5
  ck=fo$ck_e$ck_n
  (cd "$COORD/work" && exec "$DROVER" run "$TMP/ck.lua" "$ck_o" "$TMP/$ck.st" "$ck" "$ck_d" ps) \
    >"$TMP/$ck.out" 2>&1 &
  fo=$!
  kill_at_exit $fo
  wait_for 400 ck_gone $fo || kill -9 $fo
  wait $fo
  rc=$?
  FO=$(ck_run_of "$TMP/$ck.out")
  [ $rc -eq 0 ] || { echo "---- $TMP/$ck.out (last 30 lines)"; tail -n 30 "$TMP/$ck.out"; }
  check "noshare-$ck_e$ck_n ($ck_w) ps:0 was SIGKILLed once a checkpoint was committed ($(grep '^killing' "$TMP/$ck.out"))" \
    grep -q "^killing ps:0 pid [0-9]* at step" "$TMP/$ck.out"
  check "noshare-$ck_e$ck_n ($ck_w) mid-fit: at step $(cat "$TMP/$ck.killed" 2>/dev/null) of 128" \
    sh -c "[ \"\$(cat '$TMP/$ck.killed' 2>/dev/null)\" -lt 110 ] 2>/dev/null"
  check "noshare-$ck_e$ck_n ($ck_w) the fit ended well all the same (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^steps 128 run' '$TMP/$ck.out' && grep -q '^shut down' '$TMP/$ck.out'"
  check "noshare-$ck_e$ck_n ($ck_w) ps:0 was restored from a checkpoint ($(grep -o 'restoring from step [0-9]* ([^ ]*' "$FO/events.log" 2>/dev/null | head -n 1))" \
    grep -q "restoring from step [1-9][0-9]* (" "$FO/events.log"
  check "noshare-$ck_e$ck_n ($ck_w) and training went on" grep -q "restored from step [1-9][0-9]*: training goes on" "$FO/events.log"
  check "noshare-$ck_e$ck_n ($ck_w) no checkpoint failed" sh -c "! grep -q 'checkpoint.*failed' '$FO/events.log'"
  check "noshare-$ck_e$ck_n ($ck_w) the final parameters are bit-identical to the uninterrupted reference's" \
    sh -c "[ -n '$(ck_sha "$TMP/$ck.st")' ] && [ '$(ck_sha "$TMP/$ck.st")' = '$(ck_sha "$TMP/ref.st")' ]"
}

# noshare_ckpt_resume E NN OPTS CKDIR WHAT: the coordinator (drover run)
# SIGKILLed once a checkpoint is committed; its nodes end (their
# connection is gone), so do the engine's clients it had started; then
# `drover run --resume RUN` on the same engine ends with the reference's
# parameters.
noshare_ckpt_resume() {
  ck_e=$1 ck_n=$2 ck_o=$3 ck_d=$4 ck_w=$5
  ck=rs$ck_e$ck_n
  (cd "$COORD/work" && exec "$DROVER" run "$TMP/ck.lua" "$ck_o" "$TMP/$ck.st" "$ck" "$ck_d" coord) \
    >"$TMP/$ck.out" 2>&1 &
  kl=$!
  kill_at_exit $kl
  wait_for 400 ck_gone $kl || kill -9 $kl
  wait $kl
  rc=$?
  KL=$(ck_run_of "$TMP/$ck.out")
  kids=$(cat "$TMP/$ck.kids" 2>/dev/null) nodes=$(cat "$TMP/$ck.nodes" 2>/dev/null)
  kill_at_exit $kids $nodes
  check "noshare-$ck_e$ck_n ($ck_w) the coordinator SIGKILLed itself once a checkpoint was committed (status $rc; $(grep '^killing' "$TMP/$ck.out"))" \
    sh -c "[ $rc -eq 137 ] && grep -q '^killing the coordinator' '$TMP/$ck.out'"
  check "noshare-$ck_e$ck_n ($ck_w) mid-fit: at step $(cat "$TMP/$ck.killed" 2>/dev/null) of 128" \
    sh -c "[ \"\$(cat '$TMP/$ck.killed' 2>/dev/null)\" -lt 110 ] 2>/dev/null"
  left=
  for p in $kids $nodes; do wait_for 60 ck_gone "$p" || left="$left $p"; done
  check "noshare-$ck_e$ck_n ($ck_w) its nodes ($nodes) and the engine's clients it started ($kids) ended by themselves within 60 s (left:$left)" \
    sh -c "[ -n '$nodes' ] && [ -z '$left' ]"
  [ -z "$left" ] || kill -9 $left 2>/dev/null
  (cd "$COORD/work" && exec "$DROVER" run --resume "$KL") >"$TMP/$ck-2.out" 2>&1 &
  kl=$!
  kill_at_exit $kl
  wait_for 400 ck_gone $kl || kill -9 $kl
  wait $kl
  rc=$?
  [ $rc -eq 0 ] || { echo "---- $TMP/$ck-2.out (last 30 lines)"; tail -n 30 "$TMP/$ck-2.out"; }
  check "noshare-$ck_e$ck_n ($ck_w) drover run --resume finished the run (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^steps 128 run $KL\$' '$TMP/$ck-2.out'"
  check "noshare-$ck_e$ck_n ($ck_w) it resumed from a checkpoint ($(grep -o 'resuming fit 1 from step [0-9]* ([^ ]*' "$KL/events.log" 2>/dev/null | head -n 1))" \
    grep -q "resuming fit 1 from step [1-9][0-9]* (" "$KL/events.log"
  check "noshare-$ck_e$ck_n ($ck_w) the final parameters are bit-identical to the uninterrupted reference's" \
    sh -c "[ -n '$(ck_sha "$TMP/$ck.st")' ] && [ '$(ck_sha "$TMP/$ck.st")' = '$(ck_sha "$TMP/ref.st")' ]"
}

# noshare_ckpt_cases LETTER OPTS: cases LETTER07-11 on the engine whose
# cluster options are in the Lua file OPTS: failover and resume with
# checkpoints through the coordinator, then with checkpoint.dir on HDFS
# (when the file's test HDFS came up), and the logs and summaries that
# reach the run directory without a shared file system.
noshare_ckpt_cases() {
  noshare_ckpt_failover "$1" 07 "$2" local "checkpoints through the coordinator"
  check "noshare-${1}07 events.log says ps:0's checkpoints went through the coordinator" \
    grep -q "checkpoints: ps:0 through the coordinator (the run directory is not visible on its host)" "$FO/events.log"
  check "noshare-${1}07 the relaunched ps restored its shard sent by the coordinator" \
    grep -q "ps:0 I restored from " "$FO/logs/ps-0.log"
  check "noshare-${1}08 events.log says the chief's summaries go through the coordinator" \
    grep -q "summaries: the chief's through the coordinator (the run directory is not visible on its host)" "$FO/events.log"
  check "noshare-${1}08 the chief's summaries are in events/chief/ ($(ls "$FO/events/chief" 2>/dev/null | tr '\n' ' '))" \
    [ "$(ls "$FO/events/chief" 2>/dev/null | wc -l)" -ge 1 ]
  for n in ps-0 chief-0; do
    check "noshare-${1}08 $n's own lines are in logs/$n.log in the run directory" grep -q "Z ${n%-*}:${n#*-} I registered" "$FO/logs/$n.log"
  done
  check "noshare-${1}08 ps-0.log has both of its lives" [ "$(grep -c 'Z ps:0 I registered' "$FO/logs/ps-0.log")" -ge 2 ]
  noshare_ckpt_resume "$1" 09 "$2" local "checkpoints through the coordinator"
  if [ -n "$NOSHARE_H" ]; then
    noshare_ckpt_failover "$1" 10 "$2" "$DROVER_HDFS/ck" "checkpoint.dir on HDFS"
    check "noshare-${1}10 events.log says every ps writes HDFS itself" grep -q "checkpoints: every ps writes HDFS itself, to webhdfs://" "$FO/events.log"
    check "noshare-${1}10 restored from HDFS" grep -q "restoring from step [1-9][0-9]* (webhdfs://" "$FO/events.log"
    check "noshare-${1}10 nothing is in the run directory's checkpoints/" [ -z "$(ls "$FO/checkpoints" 2>/dev/null)" ]
    noshare_ckpt_resume "$1" 11 "$2" "$DROVER_HDFS/ck" "checkpoint.dir on HDFS"
    check "noshare-${1}11 resumed from HDFS" grep -q "resuming fit 1 from step [1-9][0-9]* (webhdfs://" "$KL/events.log"
  else
    echo "SKIP noshare-${1}10, noshare-${1}11: no test HDFS here (noshare-h00)"
  fi
}
