# test_examples.sh - every example in help() and in the README's ```lua
# blocks works run as a script and typed line by line into the REPL (fed
# on stdin: each line its own chunk, statements continued while
# incomplete). Blocks that need ssh hosts or Slurm are compiled only;
# reference blocks (signatures) are skipped; local clusters run. Also:
# results print their fields, and dashboard commands see the cluster as
# `c` and `cluster` whatever the script named it.
. tests/cli/lib.sh
REPO=$PWD
mkdir -p "$TMP/ex" "$TMP/work"
ln -s "$REPO/examples" "$TMP/work/examples" # the examples' data paths are relative

"$DROVER" run tests/cli/extract_examples.lua README.md "$TMP/ex" >"$TMP/extract.out" 2>&1
check "examples-01 every README lua block is marked, and they extract" [ $? -eq 0 ]
check "examples-01 help() has examples" [ -s "$TMP/ex/help-chain.lua" ]

for f in "$TMP"/ex/*.lua; do
  ex=$(basename "$f" .lua)
  case $ex in
    compile-*)
      "$DROVER" run - >"$TMP/$ex.out" 2>&1 <<LUA
assert(load(assert(io.open("$f")):read("a"), "=$ex"))
LUA
      check "examples-02 $ex compiles" [ $? -eq 0 ]
      continue ;;
  esac
  rm -rf "$TMP/work/runs" "$TMP/work/keep"
  (cd "$TMP/work" && timeout 240 "$DROVER" run "$f") >"$TMP/$ex.script.out" 2>&1
  rc=$?
  check "examples-03 $ex runs as a script" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || tail -5 "$TMP/$ex.script.out"
  rm -rf "$TMP/work/runs" "$TMP/work/keep"
  (cd "$TMP/work" && timeout 240 "$DROVER" <"$f") >"$TMP/$ex.repl.out" 2>"$TMP/$ex.repl.err"
  rc=$?
  check "examples-04 $ex works typed line by line into the REPL" sh -c "[ $rc -eq 0 ] && ! grep -q 'stack traceback' '$TMP/$ex.repl.err'"
  [ $rc -eq 0 ] || tail -5 "$TMP/$ex.repl.err"
done

# Results print as their fields, in a script and in the REPL.
check "examples-05 print(exp:fit()) shows the fields" grep -q "^  eval_accuracy = 0\.9" "$TMP/help-chain.script.out"
check "examples-05 print(c:evaluate(exp, test)) too" grep -q "^{ accuracy = 0\.9[0-9]*, loss = " "$TMP/help-chain.script.out"
check "examples-05 no table addresses" sh -c "! grep -q 'table: 0x' '$TMP/help-chain.script.out' '$TMP/help-chain.repl.out'"
check "examples-06 drover.pretty(x) prints it" grep -q '^{ layers = { 64, 128, 10 }, lr = 0.001, name = "digits" }$' "$TMP/help-chain.script.out"

# Commands (attach --command, the dashboard's ':') see the cluster as c
# and cluster, whatever the script called it.
# (Commands run while the coordinator works: here, during a fit.)
cat >"$TMP/named.lua" <<LUA
local nn = drover.nn
local mine = drover.cluster { ps = 1, worker = 1, runs = "$TMP/runs", name = "named" }
local f = assert(io.open("$TMP/named.ready", "w")); f:close()
local t0 = drover.clock()
mine:fit(drover.experiment { verbose = false, model = nn.Linear(4, 2), loss = nn.CrossEntropy(),
  optimizer = drover.optim.SGD { lr = 0.1 },
  train = { data = drover.data.synthetic { n = 64, features = 4, classes = 2 }, batch = 8, epochs = 1000000 },
  progress = function()
    drover.sleep(0.01)
    local stop = io.open("$TMP/named.stop")
    if stop then stop:close() end
    return not stop and drover.clock() - t0 < 60
  end })
mine:shutdown()
LUA
"$DROVER" run "$TMP/named.lua" >"$TMP/named.out" 2>&1 &
pid=$!
i=0
while [ ! -e "$TMP/named.ready" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
RUN=$(ls -d "$TMP"/runs/named-* 2>/dev/null)
"$DROVER" attach "$RUN" --control --command "c:nodes()[2].role" >"$TMP/c.out" 2>&1
check "examples-07 a command sees the cluster as c" grep -q "worker" "$TMP/c.out"
"$DROVER" attach "$RUN" --control --command "cluster.run_dir" >"$TMP/cl.out" 2>&1
check "examples-07 and as cluster" grep -qF "$RUN" "$TMP/cl.out"
"$DROVER" attach "$RUN" --control --command "answer = 42" >/dev/null 2>&1
"$DROVER" attach "$RUN" --control --command "answer" >"$TMP/g.out" 2>&1
check "examples-07 globals are still the script's" grep -q "42" "$TMP/g.out"
touch "$TMP/named.stop"
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; wait $pid
