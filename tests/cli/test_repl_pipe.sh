# test_repl_pipe.sh - the REPL whose input is not a terminal: between two
# lines the coordinator's loop keeps turning. A cluster the REPL hosts,
# fed through a FIFO this test holds open, lives through idle input three
# times longer than its timeouts (the nodes' own silence limit shortened to
# 2 s by a wrapper named in DROVER_LAUNCH_EXE, the coordinator's
# heartbeat_timeout = 1), answers an attach client's ':' line meanwhile,
# and trains afterwards. Lines keep their meaning: continuation, io.read()
# taking the next input line, a line split across slow writes, a last line
# without '\n', from a FIFO, a pipe and a regular file.
# Every process this test starts is ended by pid; every wait is bounded.
. tests/cli/lib.sh
RUNS=$TMP/runs
mkdir -p "$RUNS"

# The nodes' wrapper: drover node with --timeout-ms 2000 (coord_launch.c
# gives them at least 60 s, too long to wait for here).
cat >"$TMP/node.sh" <<'SH'
#!/bin/sh
prev=
for a in "$@"; do
  shift
  [ "$prev" = --timeout-ms ] && a=2000
  set -- "$@" "$a"
  prev=$a
done
exec "$DROVER_REAL" "$@"
SH
chmod +x "$TMP/node.sh"

mkfifo "$TMP/repl.in"
DROVER_REAL="$DROVER" DROVER_LAUNCH_EXE="$TMP/node.sh" "$DROVER" repl <"$TMP/repl.in" \
  >"$TMP/repl.out" 2>&1 &
rp=$!
kill_at_exit $rp
exec 3>"$TMP/repl.in"
cat >&3 <<LUA
c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "idle", heartbeat = 0.2, heartbeat_timeout = 1 }
for _, n in ipairs(c:nodes()) do print("NODE", n.role, n.pid) end
LUA
wait_for 60 sh -c "[ \$(grep -c '^NODE' '$TMP/repl.out') -eq 2 ]"
NODES=$(awk '$1 == "NODE" { print $3 }' "$TMP/repl.out")
kill_at_exit $NODES
RUN=$(ls -d "$RUNS"/idle-* 2>/dev/null | head -n 1)
check "replpipe-01 the REPL started a cluster of two nodes ($(echo $NODES))" \
  [ -n "$RUN" -a "$(echo $NODES | wc -w)" -eq 2 ]

# replpipe-02: while the input is idle, an attach client's ':' line is
# answered and the coordinator hears the nodes' heartbeats
sleep 2
timeout 20 "$DROVER" attach "$RUN" --control --command "return #c:nodes() * 21" >"$TMP/cmd.out" 2>&1
check "replpipe-02 a ':' line is answered while the REPL waits for input" grep -q "^42$" "$TMP/cmd.out"
timeout 20 "$DROVER" attach "$RUN" --print >"$TMP/p.txt" 2>&1
# fresh NODE: its heartbeat age (column HB) in the --print table is under 1 s
fresh() { awk -v n="$1" '$1 == n { sub(/s$/, "", $10); ok = $10 < 1 } END { exit !ok }' "$TMP/p.txt"; }
check "replpipe-02 the coordinator has heard ps:0 lately" fresh ps:0
check "replpipe-02 and worker:0" fresh worker:0

# replpipe-03: 6 s of idle input in all (3x the nodes' 2 s): nothing lost
sleep 4
# running PID: the process exists and is no zombie (the REPL reaps its
# nodes only while its loop turns)
running() { [ -n "$(sed -n 's/.*) \([^Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null)" ]; }
alive=0
for p in $NODES; do running "$p" && alive=$((alive + 1)); done
check "replpipe-03 both nodes are alive after 6 s of idle input" [ "$alive" -eq 2 ]
check "replpipe-03 no node was lost" sh -c "! grep -q 'node lost' '$RUN/events.log'"
check "replpipe-03 no node lost the coordinator" \
  sh -c "! grep -q 'no word from the coordinator' '$RUN'/logs/*.log"
cat >&3 <<LUA
exp = drover.experiment { name = "idle", model = drover.nn.Sequential { drover.nn.Linear(8, 2) }, loss = drover.nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.01 }, train = { data = drover.data.synthetic { n = 64, features = 8, classes = 2, seed = 1 }, batch = 8, epochs = 1 }, verbose = false, runs = "$RUNS" }
ok, r = pcall(c.fit, c, exp)
print("FIT", ok, ok and r.steps or r)
LUA
wait_for 60 grep -q "^FIT" "$TMP/repl.out"
check "replpipe-03 a fit afterwards trains ($(grep '^FIT' "$TMP/repl.out"))" \
  grep -q "^FIT	true	[1-9]" "$TMP/repl.out"
exec 3>&-
wait_for 30 sh -c "! kill -0 $rp 2>/dev/null"
check "replpipe-03 end of input ends the REPL" sh -c "! kill -0 $rp 2>/dev/null"

# replpipe-04: line semantics, through a FIFO written slowly
mkfifo "$TMP/lines.in"
"$DROVER" <"$TMP/lines.in" >"$TMP/lines.out" 2>&1 &
lp=$!
kill_at_exit $lp
exec 4>"$TMP/lines.in"
printf 'print("got " .. io.read())\nthis line is data\nprint("sum", 1 +\n' >&4
sleep 0.3
printf '2)\nprint("sp' >&4
sleep 0.3
printf 'lit")\nprint("no newline")' >&4
exec 4>&-
wait_for 30 sh -c "! kill -0 $lp 2>/dev/null"
wait $lp; st=$?
printf 'got this line is data\nsum\t3\nsplit\nno newline\n' >"$TMP/lines.want"
check "replpipe-04 FIFO: continuation, io.read, split writes, a last line without newline" \
  cmp -s "$TMP/lines.want" "$TMP/lines.out"
check "replpipe-04 exit status 0" [ "$st" -eq 0 ]

# replpipe-05: the same from a pipe and from a regular file; a failing
# chunk gives status 1, an unfinished one is reported
printf 'print("got " .. io.read())\nthis line is data\nprint("sum", 1 +\n2)\nprint("split")\nprint("no newline")' >"$TMP/lines.lua"
timeout 30 "$DROVER" <"$TMP/lines.lua" >"$TMP/file.out" 2>&1
st=$?
check "replpipe-05 regular file: the same output, status 0" \
  sh -c "[ $st -eq 0 ] && cmp -s '$TMP/lines.want' '$TMP/file.out'"
timeout 30 sh -c "cat '$TMP/lines.lua' | '$DROVER'" >"$TMP/pipe.out" 2>&1
st=$?
check "replpipe-05 pipe: the same output, status 0" \
  sh -c "[ $st -eq 0 ] && cmp -s '$TMP/lines.want' '$TMP/pipe.out'"
printf 'error("boom")\nprint("after")\nt = {\n' | timeout 30 "$DROVER" >"$TMP/fail.out" 2>&1
st=$?
check "replpipe-05 a failing chunk: status 1, the next line still runs" \
  sh -c "[ $st -eq 1 ] && grep -q boom '$TMP/fail.out' && grep -q '^after$' '$TMP/fail.out'"
check "replpipe-05 input ending inside a chunk is reported" grep -q "unexpected symbol near <eof>\|'}' expected" "$TMP/fail.out"
