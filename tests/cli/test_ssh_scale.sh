# test_ssh_scale.sh - c:scale on the ssh launcher against the suite's own
# sshd (tests/ssh/start.sh; hosts "a:3" and "b:2", 5 slots): 1 ps and 2
# workers grown 2 -> 4 and shrunk 4 -> 1 during an async fit and a sync
# fit (tests/cli/scale_engine.lua), each added worker an ssh session on a
# free slot, a removed one's session ending with status 0 and no loss, the
# step counts exact; worker = 5 refused: a removed worker keeps its slot
# for its return, so a fifth needs a sixth slot. No ssh or node is left.
. tests/cli/lib.sh
[ -x "$DROVER" ] || { fail "ssh-sc-00 the binary" "DROVER=$DROVER is not executable"; exit 1; }
SSHD=$TMP/sshd
at_exit 'sh tests/ssh/stop.sh "$SSHD"'
out=$(sh tests/ssh/start.sh "$SSHD" 2>&1)
rc=$?
if [ $rc -eq 77 ]; then echo "$out" | sed 's/^SKIP /SKIP test_ssh_scale.sh: /'; exit 0; fi
if [ $rc -ne 0 ]; then fail "ssh-sc-00 sshd starts" "$out"; exit 1; fi
RUNS=$TMP/runs

cat >"$TMP/spec.lua" <<LUA
return { cluster = { launcher = "ssh", hosts = { "a:3", "b:2" }, ssh_config = "$SSHD/ssh_config" },
         max = 5, over = 5 }
LUA
timeout 200 "$DROVER" run tests/cli/scale_engine.lua "$TMP/spec.lua" "$RUNS" sc >"$TMP/sc.out" 2>&1
rc=$?
check "ssh-sc-01 the run ends cleanly (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done' '$TMP/sc.out'"
DIR=$(sed -n 's/^run_dir //p' "$TMP/sc.out")
check "ssh-sc-02 async 2 -> 4 -> 1: 3000 steps, each counted once, 1 worker left, the new ones trained" \
  sh -c "grep -Eq '^async steps 3000 sum 3000 live 1 new [1-9][0-9]* [1-9][0-9]*$' '$TMP/sc.out'"
check "ssh-sc-02 workers 2 and 3 ran over ssh" \
  sh -c "grep -Eq 'node got worker:2 on .*where ssh @ ' '$DIR/events.log' && grep -Eq 'node got worker:3 on .*where ssh @ ' '$DIR/events.log'"
check "ssh-sc-03 1 -> 2 between fits" grep -q '^between live 2 up 2$' "$TMP/sc.out"
check "ssh-sc-04 sync 2 -> 4 -> 1: 800 global steps, the gradients of the workers each had" \
  sh -c "grep -Eq '^sync global 800 steps ([0-9]+) want \1 changes 2 live 1$' '$TMP/sc.out'"
check "ssh-sc-04 removed workers exited with status 0, no loss" \
  sh -c "grep -q 'node removed worker:3: exited with status 0' '$DIR/events.log' && ! grep -q 'node lost' '$DIR/events.log'"
check "ssh-sc-05 worker = 5 refused: no free slot" \
  grep -q "^over refused .*c:scale: launcher 'ssh': 1 more worker needs a free slot and the hosts have 0 free of 5" "$TMP/sc.out"
# pids of the processes whose command line mentions the run directory
procs_with() {
  for f in /proc/[0-9]*/cmdline; do
    c=$({ tr '\0' ' ' < "$f"; } 2>/dev/null)
    case "$c" in *"$1"*) p=${f#/proc/}; echo "${p%/cmdline}" ;; esac
  done
}
none_left() { [ -n "$DIR" ] && [ -z "$(procs_with "$DIR")" ]; }
check "ssh-sc-06 no node or ssh outlives the run" wait_for 10 none_left
