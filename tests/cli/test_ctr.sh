# test_ctr.sh - sparse features end to end, in process: examples/gen_ctr.lua
# writes 500,000 Criteo-format rows from a planted logistic model and prints
# its AUC; examples/ctr.lua reads them (26 hashed categorical columns),
# trains the wide part (the planted model's own form) and its wide & deep
# model on 80% and reports held-out AUC. ctr-01: the wide model within 0.01
# of the planted AUC; ctr-02: the wide & deep one too, and only the touched
# rows of its 2^20-row tables are held.
. tests/cli/lib.sh
"$DROVER" run examples/gen_ctr.lua "$TMP/ctr.tsv" 500000 1 >"$TMP/gen.out" 2>&1
planted=$(sed -n 's/^planted_auc=\([0-9.]*\) .*/\1/p' "$TMP/gen.out")
check "ctr-00 the generator prints the planted AUC ($planted)" [ -n "$planted" ]
timeout 300 "$DROVER" run examples/ctr.lua "$TMP/ctr.tsv" 1 wide >"$TMP/wide.out" 2>&1
auc=$(sed -n 's/^held-out AUC \([0-9.]*\),.*/\1/p' "$TMP/wide.out")
check "ctr-01 the wide model's held-out AUC ($auc) is within 0.01 of the planted one ($planted)" \
  awk -v a="${auc:-0}" -v p="${planted:-1}" 'BEGIN { exit !(a > p - 0.01) }'
timeout 300 "$DROVER" run examples/ctr.lua "$TMP/ctr.tsv" 2 >"$TMP/wd.out" 2>&1
auc2=$(sed -n 's/^held-out AUC \([0-9.]*\),.*/\1/p' "$TMP/wd.out")
check "ctr-02 the wide & deep model's AUC ($auc2) is within 0.01 of the planted one" \
  awk -v a="${auc2:-0}" -v p="${planted:-1}" 'BEGIN { exit !(a > p - 0.01) }'
held=$(sed -n 's/^table 1.weight: \([0-9]*\) of 1048576 rows held.*/\1/p' "$TMP/wd.out")
check "ctr-02 its wide table holds only touched rows ($held of 1048576)" \
  sh -c "[ '${held:-0}' -gt 1000 ] && [ '${held:-0}' -lt 100000 ]"
grep -q "^held-out AUC" "$TMP/wd.out" "$TMP/wide.out" || cat "$TMP/gen.out" "$TMP/wide.out" "$TMP/wd.out"
