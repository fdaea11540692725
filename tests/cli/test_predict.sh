#!/bin/sh
# test_predict.sh - c:predict with a worker SIGKILLed in the middle
# (DROVER_FAULT=die:worker:1:predict:N): every row once, in order.
. "$(dirname "$0")/lib.sh"
out=$(PREDICT_KILL=1 DROVER_FAULT=die:worker:1:predict:3 DROVER_FAULT_ONCE="$TMP/died" timeout 120 "$DROVER" run tests/lua/test_predict.lua 2>"$TMP/err")
echo "$out" | grep -E '^(PASS|FAIL) '
echo "$out" | grep -q '^PASS predict-04' || { echo "--- stderr:"; tail -20 "$TMP/err"; }
