# test_examples.sh - every example in help() and in the ```lua blocks of
# README.md and docs/*.md (not docs/notes/ or docs/design/) works run as a
# script and typed line by line into the REPL (fed on stdin: each line its
# own chunk, statements continued while incomplete). A failure names the
# page (and, from a script, the page's line: extract_examples.lua keeps
# each block at its page line). Blocks that need ssh hosts, Slurm, Spark
# or YARN are compiled only; reference blocks (signatures) are skipped;
# local clusters run. Also: results print their fields, and dashboard
# commands see the cluster as `c` and `cluster` whatever the script named
# it.
. tests/cli/lib.sh
REPO=$PWD
mkdir -p "$TMP/ex" "$TMP/work"
ln -s "$REPO/examples" "$TMP/work/examples" # the examples' data paths are relative

PAGES="README.md $(ls docs/*.md)"
"$DROVER" run tests/cli/extract_examples.lua "$TMP/ex" $PAGES >"$TMP/extract.out" 2>&1
rc=$?
check "examples-01 every lua block of README.md and docs/*.md is marked, and they extract" [ $rc -eq 0 ]
[ $rc -eq 0 ] || cat "$TMP/extract.out"
check "examples-01 help() has examples" [ -s "$TMP/ex/help-chain.lua" ]
check "examples-01 the README and the docs pages have examples that run" \
  sh -c "grep -q '^README--' '$TMP/ex/pages.tsv' && grep -q '^docs-' '$TMP/ex/pages.tsv'"

# The page an example file came from, and its name in the test lines.
page_of() { awk -F'\t' -v f="$1.lua" '$1 == f { print $2; exit }' "$TMP/ex/pages.tsv"; }
kind_of() { awk -F'\t' -v f="$1.lua" '$1 == f { print $3; exit }' "$TMP/ex/pages.tsv"; }
# What failed, its file names turned into the page (FILE:N is PAGE:N):
# the first error line, for the check's name, and the output's tail.
first_error() { # out-file example page
  grep -m1 -E '^drover: |^stdin:|error' "$1" | sed "s|$TMP/ex/$2.lua|$3|g"
}
tell() { # out-file example page
  tail -5 "$1" | sed "s|$TMP/ex/$2.lua|$3|g"
}

for f in "$TMP"/ex/*.lua; do
  ex=$(basename "$f" .lua)
  page=$(page_of "$ex")
  what="$ex"
  [ -n "$page" ] && what="$page ($(kind_of "$ex"))"
  case $ex in
    compile-*)
      "$DROVER" run - >"$TMP/$ex.out" 2>&1 <<LUA
assert(load(assert(io.open("$f")):read("a"), "@$page"))
LUA
      rc=$?
      check "examples-02 $what compiles" [ $rc -eq 0 ]
      [ $rc -eq 0 ] || tail -5 "$TMP/$ex.out"
      continue ;;
  esac
  rm -rf "$TMP/work/runs" "$TMP/work/keep"
  (cd "$TMP/work" && timeout 240 "$DROVER" run "$f") >"$TMP/$ex.script.out" 2>&1
  rc=$?
  why=""
  [ $rc -eq 0 ] || why=" ($(first_error "$TMP/$ex.script.out" "$ex" "$page"))"
  check "examples-03 $what runs as a script$why" [ $rc -eq 0 ]
  [ $rc -eq 0 ] || tell "$TMP/$ex.script.out" "$ex" "$page"
  rm -rf "$TMP/work/runs" "$TMP/work/keep"
  (cd "$TMP/work" && timeout 240 "$DROVER" <"$f") >"$TMP/$ex.repl.out" 2>"$TMP/$ex.repl.err"
  rc=$?
  why=""
  grep -q 'stack traceback' "$TMP/$ex.repl.err" && why=" ($(first_error "$TMP/$ex.repl.err" "$ex" "$page"))"
  check "examples-04 $what works typed line by line into the REPL$why" sh -c "[ $rc -eq 0 ] && ! grep -q 'stack traceback' '$TMP/$ex.repl.err'"
  [ $rc -eq 0 ] || tell "$TMP/$ex.repl.err" "$ex" "$page"
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
