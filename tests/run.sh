#!/bin/sh
# run.sh - runs every test and prints the closing line
# "N passed, N failed, N skipped".
#
# Running one test, from the repository root after `make all unit`:
#   a whole file     ONLY=test_attach.sh sh tests/run.sh
#                    ONLY is a substring of the path: ONLY=tests/lua/test_cluster.lua,
#                    ONLY=unit (every unit case), ONLY=layers, ONLY=funclen.
#                    `make test ONLY=...` does the same after installing what is
#                    missing (a file's own set-up is in its header comment:
#                    VENV=build/venv for the Python ones, SPARK_VENV=build/spark-venv).
#   one unit case    ./build/unit_tests NAME...       (cases whose name contains NAME)
#   one Lua test     ONLY_CASE=cluster-05 ./drover run tests/lua/test_cluster.lua
#                    (tests/lua/t.lua runs only the tests whose name contains it;
#                    ONLY=test_cluster.lua ONLY_CASE=cluster-05 sh tests/run.sh too)
#   a CLI test       sh tests/cli/test_attach.sh      (PASS/FAIL lines; KEEP_TMP=1
#                    keeps its temporary directory)
#   under ASan       make asan ONLY=test_attach.sh    (builds build/asan, runs the
#                    file on it); once built, without make:
#                    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 SANITIZED=1 \
#                    DROVER=$PWD/build/asan/drover UNIT=$PWD/build/asan/unit_tests \
#                    ONLY=test_attach.sh sh tests/run.sh
#                    (or build/asan/unit_tests NAME..., build/asan/drover run FILE.lua)
#
# Lanes: with LANES=3 (the default) the JVM engine tests run in two more
# lanes beside the rest (Spark; YARN and HDFS) and report at the end;
# LANES=1 runs every file in turn. Under ASan the Spark
# and YARN ones skip unless DROVER_ENGINES_ASAN=1.
#
# The cluster suite runs twice (issue 27): first as everything else, where
# co-located nodes talk through shared memory (the default transport, auto),
# then again over TCP, with DROVER_TRANSPORT=tcp exported to every process
# (nodes included): the Lua cluster tests and the CLI tests that start
# local clusters (not the Spark/YARN/Slurm/ssh/HDFS engines nor the
# dashboards), each named "tcp:FILE" (ONLY=tcp: runs that pass alone;
# ONLY=test_cluster.lua runs the file both ways), beside the JVM lanes.
# TCP_PASS=0 leaves it out; under a sanitizer (SANITIZED=1, make asan) it
# runs only with TCP_PASS=1: the sanitized pass is about memory, TCP's path
# is the conn code every cross-host link runs, and CI's budget is 40 minutes.
#
# Each test program prints "PASS name" / "FAIL name: why" / "SKIP name: why"
# lines; this script counts them. A program that exits non-zero without
# printing a FAIL line counts as one failure under its own name, so a crash
# is never a pass. A SKIP says what did not run and why (no Java for the
# YARN tests...): it is neither a pass nor a failure.
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
skip=0

outfile() { echo "$log/$(echo "$1" | tr '/ ' '__').out"; }

# Runs one test program into its .out file, its exit status into .rc.
execute() { # name timeout cmd...
  name=$1; limit=$2; shift 2
  out=$(outfile "$name")
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@" </dev/null >"$out" 2>&1
  echo $? >"$out.rc"
  echo "$(($(date +%s) - t0)) $name" >>"$log/times"
}

# Prints and counts what one test program said.
report() { # name
  name=$1
  out=$(outfile "$name")
  rc=$(cat "$out.rc" 2>/dev/null || echo 125)
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  s=$(grep -c '^SKIP ' "$out")
  grep -E '^(PASS|FAIL|SKIP) ' "$out" | sed "s|^|[$name] |"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1
    echo "[$name] FAIL $name: exit status $rc$( [ "$rc" -eq 124 ] && echo ' (timeout)')" |
      tee -a "$log/failed"
  fi
  grep '^FAIL ' "$out" | sed "s|^|[$name] |" >>"$log/failed"
  if [ "$f" -ne 0 ]; then
    echo "---- output of $name (last 40 lines) ----"
    tail -n 40 "$out"
    echo "----"
  fi
  pass=$((pass + p))
  fail=$((fail + f))
  skip=$((skip + s))
}

run() { # name timeout cmd...
  execute "$@"
  report "$1"
}

want() { [ -z "${ONLY:-}" ] || case "$1" in *"$ONLY"*) return 0 ;; *) return 1 ;; esac; }

# A test file may ask for a longer bound with a line "# run.sh timeout: S"
# (the Spark tests: several JVMs each on a loaded machine).
limit_of() { l=$(sed -n 's/^# run.sh timeout: \([0-9][0-9]*\)$/\1/p' "$1" | head -n 1); echo "${l:-300}"; }

# The tests of the JVM engines spend their time waiting for JVMs (CI's
# whole run used under half a core on average): with LANES=3 (the
# default) the Spark ones and the YARN and HDFS ones each run in a lane of
# their own, one after the other, beside the rest, and report at the end.
# LANES=1 runs everything in turn.
lane_of() { # 1 Spark (and the no-shared-filesystem cases on it), 2 YARN and HDFS, 0 the rest
  case "$1" in
    *noshare_yarn*|*yarn*|*hdfs*) echo 2 ;;
    *spark*|*noshare*) echo 1 ;;
    *) echo 0 ;;
  esac
}
# Under ASan the Spark and YARN tests skip (a JVM starting sanitized nodes
# by the dozen costs CI minutes for launcher code the unit tests cover);
# DROVER_ENGINES_ASAN=1 runs them. The HDFS tests (drover's own WebHDFS
# client) still run.
asan_skips() {
  [ -n "${SANITIZED:-}" ] && [ -z "${DROVER_ENGINES_ASAN:-}" ] && [ "$(lane_of "$1")" != 0 ] &&
    case "$1" in *hdfs*) return 1 ;; esac
}
lanes=
for n in 1 2; do
  [ "${LANES:-3}" -gt "$n" ] || continue
  for t in tests/cli/test_*.sh; do
    [ -e "$t" ] && want "$t" && [ "$(lane_of "$t")" = "$n" ] && ! asan_skips "$t" && echo "$t"
  done >"$log/lane$n"
  [ -s "$log/lane$n" ] || continue
  while read -r t; do execute "$t" "$(limit_of "$t")" sh "$t"; done <"$log/lane$n" &
  lanes="$lanes $n:$!"
done
in_lane() { [ "${LANES:-3}" -gt "$(lane_of "$1")" ] && [ "$(lane_of "$1")" != 0 ]; }
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

for t in tests/cli/test_*.sh; do
  [ -e "$t" ] && want "$t" || continue
  if asan_skips "$t"; then
    echo "[$t] SKIP $t: a Spark/YARN test under ASan (DROVER_ENGINES_ASAN=1 runs it)"
    skip=$((skip + 1))
  elif ! in_lane "$t"; then
    run "$t" "$(limit_of "$t")" sh "$t"
  fi
done
# The cluster suite again over TCP (see the top), while the lanes run.
TCP_FILES="tests/lua/test_cluster*.lua tests/lua/test_replica.lua tests/lua/test_sync_steps.lua
  tests/lua/test_feed_ps.lua tests/cli/test_cluster.sh tests/cli/test_flood.sh
  tests/cli/test_resume.sh tests/cli/test_caps.sh tests/cli/test_predict.sh
  tests/cli/test_keyfiles.sh tests/cli/test_replica.sh tests/cli/test_logfwd.sh
  tests/cli/test_checkpoint.sh tests/cli/test_feed.sh tests/cli/test_feed_direct.sh
  tests/cli/test_feed_keys.sh tests/cli/test_attach.sh tests/cli/test_ckpt_remote.sh"
tcp_pass=${TCP_PASS:-$([ -n "${SANITIZED:-}" ] && echo 0 || echo 1)}
if [ "$tcp_pass" = 1 ]; then
  DROVER_TRANSPORT=tcp
  export DROVER_TRANSPORT
  for t in $TCP_FILES; do
    [ -e "$t" ] && want "tcp:$t" || continue
    case $t in
      *.lua) run "tcp:$t" 300 "$DROVER" run "$t" ;;
      *) run "tcp:$t" "$(limit_of "$t")" sh "$t" ;;
    esac
  done
  unset DROVER_TRANSPORT
fi

# The lanes: each of their tests is bounded by its own timeout.
for l in $lanes; do
  wait "${l#*:}"
  while read -r t; do report "$t"; done <"$log/lane${l%%:*}"
done

# Where the time went: the ten slowest files (CI's budget is 40 minutes).
echo "slowest: $(sort -rn "$log/times" 2>/dev/null | head -n 10 | awk '{printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1}')"
# TIMES=FILE: every file's seconds are appended to FILE.
[ -z "${TIMES:-}" ] || cat "$log/times" >>"$TIMES"
# The failures again, together: a CI log keeps only its tail.
[ ! -s "$log/failed" ] || head -n 20 "$log/failed" | sed 's/^/failed: /'
rm -rf "$log"
# CI (.ci/run) reads fields 1 and 3 of this line: keep their places.
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
