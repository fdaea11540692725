# mixed_checks.sh - what test_spark_mixed.sh and test_yarn_mixed.sh check
# of a run of mixed_fit.lua (sourced after lib.sh): mixed_checks CASE OUT
# ENGINE WHERE_RE, with RUNS set; WHERE_RE matches a worker's `where`.
mixed_checks() {
  out=$2
  acc=$(sed -n 's/^eval_accuracy \([0-9.]*\) .*/\1/p' "$out")
  check "$1 1 local ps + 2 $3 workers learn digits to >= 0.95 (got '$acc')" \
    awk -v a="$acc" 'BEGIN { exit !(a != "" && a + 0 >= 0.95) }'
  me=$(sed -n 's/^coordinator pid //p' "$out")
  check "$1 the ps is a process of this machine, a child of the coordinator ($me)" \
    grep -q "^node ps:0 pid [0-9]* ppid $me .*launcher local where local\$" "$out"
  check "$1 the workers are not (their processes are the engine's)" \
    sh -c "[ \$(grep -c '^node worker:[01] pid [0-9]* ppid $me ' '$out') -eq 0 ]"
  check "$1 each worker's where names $3 and its place ($4)" \
    [ "$(grep -Ec "^after worker:[01] .* launcher $3 where $3 $4" "$out")" -eq 2 ]
  check "$1 the ps was SIGKILLed mid-fit" grep -q "^killing ps:0 pid [0-9]* at step" "$out"
  acc2=$(sed -n 's/^second fit: eval_accuracy \([0-9.]*\) .*/\1/p' "$out")
  check "$1 the fit completes after it (got '$acc2')" \
    awk -v a="$acc2" 'BEGIN { exit !(a != "" && a + 0 >= 0.9) }'
  check "$1 the ps was restarted locally, a child of the coordinator again" \
    grep -q "^after ps:0 pid [0-9]* ppid $me .* restarts 1 launcher local where local\$" "$out"
  dir=$(sed -n 's/^run_dir //p' "$out")
  check "$1 events.log: the ps restored from a checkpoint" \
    grep -q "restored from step [0-9]*: training goes on" "$dir/events.log"
  check "$1 events.log says the placement is mixed" \
    grep -q "mixed placement: local+$3 (ps on local, worker on $3)\$" "$dir/events.log"
  "$DROVER" ls "$RUNS" >"$RUNS/$5.ls" 2>&1
  check "$1 drover ls shows the run's launchers" grep -Eq "^$5-[0-9-]+ +done +3 local\+$3 " "$RUNS/$5.ls"
  check "$1 nodes.tsv has where each node runs" \
    sh -c "grep -q '^ps:0	.*	local\$' '$dir/nodes.tsv' && \
           [ \$(grep -Ec '^worker:[01]	.*	$3 $4' '$dir/nodes.tsv') -eq 2 ]"
  check "$1 the dashboard's snapshot shows it" \
    sh -c "grep -q ' WHERE\$' '$RUNS/$5.dash' && grep -Eq '^worker:0 .* $3 $4' '$RUNS/$5.dash'"
  check "$1 the run shut down cleanly" grep -q "^shut down\$" "$out"
}
