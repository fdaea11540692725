# test_cnn.sh - examples/cnn.lua runs and its CNN beats the MLP on the
# bundled digits (the script asserts it; its last line names both).
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh
if timeout 120 "$DROVER" run examples/cnn.lua >"$TMP/out" 2>&1 &&
  tail -n 1 "$TMP/out" | grep -Eq '^MLP 0\.[0-9]+, CNN 0\.[0-9]+$'; then
  pass "cnn $(tail -n 1 "$TMP/out")"
else
  fail cnn "$(tail -n 6 "$TMP/out" | tr '\n' ' ')"
fi
