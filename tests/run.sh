#!/bin/sh
# run.sh - runs every test and prints the closing line "N passed, N failed".
#
# Each test program prints "PASS name" / "FAIL name: why" lines; this script
# counts them. A program that exits non-zero without printing a FAIL line
# counts as one failure under its own name, so a crash is never a pass.
# Environment: DROVER (binary under test), UNIT (unit test binary),
# ONLY (substring: run only test files whose path contains it).
# Sets DROVER_STRICT_STATES=1: an illegal node state change is fatal.
set -u
cd "$(dirname "$0")/.." || exit 2
: "${DROVER:=$PWD/drover}" "${UNIT:=$PWD/build/unit_tests}"
export DROVER
# An illegal node state change aborts the coordinator (coord_nodes.c).
DROVER_STRICT_STATES=1
export DROVER_STRICT_STATES
log=$(mktemp -d "${TMPDIR:-/tmp}/drover-tests-XXXXXX")
pass=0
fail=0

run() { # name timeout cmd...
  name=$1; limit=$2; shift 2
  out="$log/$(echo "$name" | tr '/ ' '__').out"
  timeout -k 5 "$limit" "$@" >"$out" 2>&1
  rc=$?
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  grep -E '^(PASS|FAIL|SKIP) ' "$out" | sed "s|^|[$name] |"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1
    echo "[$name] FAIL $name: exit status $rc$( [ "$rc" -eq 124 ] && echo ' (timeout)')"
  fi
  if [ "$f" -ne 0 ]; then
    echo "---- output of $name (last 40 lines) ----"
    tail -n 40 "$out"
    echo "----"
  fi
  pass=$((pass + p))
  fail=$((fail + f))
}

want() { [ -z "${ONLY:-}" ] || case "$1" in *"$ONLY"*) return 0 ;; *) return 1 ;; esac; }

# The include layering (Makefile LAYERS): one PASS/FAIL line.
if want layers; then run layers 60 make -s --no-print-directory layers; fi
# No function in src/ over 80 lines without a "Long:" comment saying why.
if want funclen; then run funclen 60 sh tools/funclen.sh; fi
# docs/ARCHITECTURE.md names every folder and module of src/, and the docs
# name no source file that is gone (tools/archmap.sh).
if want archmap; then run archmap 60 sh tools/archmap.sh; fi
if want unit; then run unit 900 "$UNIT"; fi
for t in tests/lua/test_*.lua; do
  [ -e "$t" ] && want "$t" && run "$t" 300 "$DROVER" run "$t"
done
# Random calls of the Lua API with hostile arguments (a fixed seed, so a
# crash repeats). Under ASan a huge allocation must fail as it does
# outside it (an error), not abort.
if want lua_fuzz; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
    run tests/fuzz/lua_fuzz.lua 600 "$DROVER" run tests/fuzz/lua_fuzz.lua 14 3000
fi
# A test file may ask for a longer bound with a line "# run.sh timeout: S"
# (the Spark tests: several JVMs each on a loaded machine).
limit_of() { sed -n 's/^# run.sh timeout: \([0-9][0-9]*\)$/\1/p' "$1" | head -n 1; }
for t in tests/cli/test_*.sh; do
  [ -e "$t" ] && want "$t" && run "$t" "$(l=$(limit_of "$t"); echo "${l:-300}")" sh "$t"
done

rm -rf "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
