# test_doctor.sh - `drover doctor`: one line per check in plain words, a
# warning for what would hurt (too many BLAS threads, no terminal type, no
# UTF-8), a failure for what stops a run (an unwritable runs directory, an
# unreachable ssh host), and the exit status that says so.
. tests/cli/lib.sh
"$DROVER" doctor --runs "$TMP/runs" >"$TMP/d.out" 2>&1
rc=$?
check "doctor-01 one line per check" sh -c "for w in 'BLAS:' 'terminal:' 'UTF-8:' 'runs:' 'TMPDIR:' 'network:' 'ssh:' 'Slurm:'; do grep -q \"^[a-zA-Z-]* *\$w\" '$TMP/d.out' || exit 1; done"
check "doctor-01 each says ok, warn, FAIL or --" sh -c "! grep -qv '^\\(ok  \\|warn\\|FAIL\\|--  \\)' '$TMP/d.out'"
check "doctor-01 nothing failed: status 0" [ $rc -eq 0 ]
check "doctor-01 a runs directory still to make is fine" grep -q "^ok  *runs: $TMP/runs will be made on the first run" "$TMP/d.out"

OPENBLAS_NUM_THREADS=$(( $(nproc) * 4 )) "$DROVER" doctor >"$TMP/b.out" 2>&1
check "doctor-02 OPENBLAS_NUM_THREADS above the CPUs: a warning" grep -q "^warn  BLAS: OPENBLAS_NUM_THREADS=$(( $(nproc) * 4 )) asks for more threads than there are CPUs" "$TMP/b.out"

# With a terminal (script(1) gives one): TERM and the character set.
if command -v script >/dev/null 2>&1; then
  TERM=dumb LANG=C LC_ALL=C script -qec "'$DROVER' doctor" /dev/null >"$TMP/t.out" 2>&1
  check "doctor-03 TERM=dumb: a warning" grep -q "warn  terminal: TERM is \"dumb\"" "$TMP/t.out"
  check "doctor-03 no UTF-8: a warning naming the fix" grep -q "warn  UTF-8: .*LANG=C.UTF-8" "$TMP/t.out"
  TERM=xterm-256color LC_ALL=C.UTF-8 script -qec "'$DROVER' doctor" /dev/null >"$TMP/t2.out" 2>&1
  check "doctor-03 xterm-256color: its colours" grep -q "ok    terminal: xterm-256color, 256 colours" "$TMP/t2.out"
  check "doctor-03 UTF-8: yes" grep -q "ok    UTF-8: yes" "$TMP/t2.out"
else
  echo "SKIP doctor-03: no script(1)"
fi

touch "$TMP/file"
"$DROVER" doctor --runs "$TMP/file/runs" >"$TMP/r.out" 2>&1
check "doctor-04 an unwritable runs directory fails: status 1" [ $? -eq 1 ]
check "doctor-04 saying where" grep -q "^FAIL  runs: cannot make $TMP/file/runs: $TMP/file is not writable" "$TMP/r.out"
check "doctor-04 and counting" grep -q "^1 check failed$" "$TMP/r.out"

if command -v ssh >/dev/null 2>&1; then
  "$DROVER" doctor --timeout 3 nosuchhost.invalid 'bad;host' >"$TMP/s.out" 2>&1
  check "doctor-05 an unreachable host fails with ssh's reason" grep -q "^FAIL  ssh nosuchhost.invalid: .*resolve" "$TMP/s.out"
  check "doctor-05 a host name that is not one" grep -q "^FAIL  ssh bad;host: not a host name" "$TMP/s.out"
fi
"$DROVER" doctor --nope >/dev/null 2>&1
check "doctor-06 an unknown option is a usage error" [ $? -eq 2 ]
