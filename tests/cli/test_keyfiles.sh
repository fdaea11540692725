# test_keyfiles.sh - a node removes its key file once it has read it; the
# coordinator writes a fresh one for a restart (a worker SIGKILLed comes
# back and registers with it), which goes too. Local nodes here; the ssh,
# Slurm and Spark tests run tests/cli/keyfiles.lua on their launchers. A
# node that cannot remove its file (a read-only directory) says so and
# runs. Only processes this test started are signalled, by pid; every wait
# is bounded.
. tests/cli/lib.sh
RUNS=$TMP/runs
echo 'return { reservation_timeout = 30 }' > "$TMP/spec.lua"
timeout 150 "$DROVER" run tests/cli/keyfiles.lua "$TMP/spec.lua" "$RUNS" keys "$TMP" >"$TMP/out" 2>"$TMP/err" &
coord=$!
kill_at_exit $coord
wait_for 60 test -s "$TMP/victim"
read vpid parent vcwd <"$TMP/victim"
check "keys-01 every node registered and read its key file: all gone" \
  [ "$(grep -c '^up	[a-z]*:[0-9]	[0-9]*	gone	/.*/keys/[a-z]*-[0-9].key$' "$TMP/out")" -eq 3 ]
check "keys-01 the run's keys/ is empty" grep -q '^up	keys \[\]$' "$TMP/out"
kill -9 "${vpid:-0}"
touch "$TMP/killed"
wait $coord
check "keys-02 the run ends (status 0) after worker:1's SIGKILL" [ $? -eq 0 ]
check "keys-02 worker:1 came back" grep -q '^back	[0-9]*	restarts	1$' "$TMP/out"
check "keys-02 its new key file (written again) is gone too" \
  grep -q '^again	worker:1	[0-9]*	gone	/.*/keys/worker-1.key$' "$TMP/out"
check "keys-02 and keys/ is empty again" grep -q '^again	keys \[\]$' "$TMP/out"

# keys-03: a key file in a directory the node may not write stays, with a
# warning, and the node runs (root writes anywhere: a file a wrapper
# makes immutable instead, when chattr can)
cat > "$TMP/ro.sh" <<EOF
#!/bin/sh
case " \$* " in *" --role worker "*) ;; *) exec "$DROVER" "\$@" ;; esac
mkdir -p "$TMP/ro"
cp -p "\$DROVER_SECRET_FILE" "$TMP/ro/key"
if [ "\$(id -u)" = 0 ]; then chattr +i "$TMP/ro" 2>/dev/null || exit 77; else chmod 500 "$TMP/ro"; fi
DROVER_SECRET_FILE=$TMP/ro/key exec "$DROVER" "\$@"
EOF
chmod +x "$TMP/ro.sh"
at_exit "chattr -i $TMP/ro 2>/dev/null; chmod 700 $TMP/ro 2>/dev/null"
cat > "$TMP/ro.lua" <<EOF
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "ro", reservation_timeout = 20 }
print("ran", c:schedule(function() return 6 * 7 end):fetch())
c:shutdown()
EOF
DROVER_LAUNCH_EXE="$TMP/ro.sh" timeout 60 "$DROVER" run "$TMP/ro.lua" >"$TMP/ro.out" 2>&1
rc=$?
chattr -i "$TMP/ro" 2>/dev/null; chmod 700 "$TMP/ro" 2>/dev/null
if grep -q "exited with status 77" "$RUNS"/ro-*/events.log 2>/dev/null; then
  echo "SKIP keys-03: no chattr here"
else
  check "keys-03 a node that cannot remove its key file runs (status $rc)" grep -q '^ran	42$' "$TMP/ro.out"
  check "keys-03 the file is still there" [ -f "$TMP/ro/key" ]
  check "keys-03 the node's log warns" grep -q "cannot remove the key file '$TMP/ro/key' after reading it" "$RUNS"/ro-*/logs/worker-0.log
fi

# keys-04: a duplicate worker:0 with worker:0's genuine keys (copied by a
# $DROVER_LAUNCH_EXE wrapper before the node read them) is refused, named
cat > "$TMP/dup.sh" <<EOF
#!/bin/sh
case " \$* " in *" --role worker --index 0 "*) cp -p "\$DROVER_SECRET_FILE" "$TMP/dup.key" ;; esac
exec "$DROVER" "\$@"
EOF
chmod +x "$TMP/dup.sh"
cat > "$TMP/dup.lua" <<EOF
local c = drover.cluster { ps = 1, worker = 1, runs = "$RUNS", name = "dup", reservation_timeout = 20 }
os.execute(string.format("(DROVER_SECRET_FILE=$TMP/dup.key timeout 20 $DROVER node --coord %s "
  .. "--role worker --index 0 --run-dir %s --bind 127.0.0.1 --heartbeat-ms 500 --timeout-ms 5000 >$TMP/dup.out 2>&1; echo \$? >$TMP/dup.rc) &",
  c.address, c.run_dir))
local t0 = drover.clock()
while drover.clock() - t0 < 30 and not io.open("$TMP/dup.rc") do drover.sleep(0.1) end
for _, n in ipairs(c:nodes()) do print("node", n.role .. ":" .. n.index, n.state, n.restarts) end
c:shutdown()
EOF
DROVER_LAUNCH_EXE="$TMP/dup.sh" timeout 90 "$DROVER" run "$TMP/dup.lua" >"$TMP/dup.lua.out" 2>&1
check "keys-04 the run with a duplicate attempt ends cleanly" [ $? -eq 0 ]
check "keys-04 the duplicate worker:0 exits 1" [ "$(cat "$TMP/dup.rc" 2>/dev/null)" = 1 ]
check "keys-04 named as a duplicate" grep -q "duplicate worker:0" "$TMP/dup.out"
check "keys-04 the real worker:0 is unaffected" grep -q "^node	worker:0	ready	0$" "$TMP/dup.lua.out"
