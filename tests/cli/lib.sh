# lib.sh - helpers for CLI tests (sourced). Each case prints PASS/FAIL lines
# that tests/run.sh counts.
: "${DROVER:=$PWD/drover}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-cli-XXXXXX")
trap '[ -n "$KEEP_TMP" ] || rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# check NAME CONDITION-COMMAND... : PASS when the command succeeds.
check() { name=$1; shift; if "$@"; then pass "$name"; else fail "$name" "$*"; fi; }

# wait_for SECONDS CMD...: true once CMD succeeds (polled every 0.1 s).
wait_for() {
  limit=$(( $1 * 10 )); shift
  i=0
  while [ $i -lt $limit ]; do
    "$@" && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}
