# test_feed.sh - feed mode with real processes: a slow worker gets fewer
# batches and never holds more than the window; a stuck worker hits
# feed_timeout by name; CSV rows streamed through a pipe into
# `drover run script.lua -`, and a stalled pipe timing out.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh
export RUNS="$TMP/runs"
S="$PWD/tests/cli/feed_train.lua"
D="$PWD/examples/data/digits.csv"

# ------------------------------------------------ backpressure
out=$(DROVER_FAULT=slow:worker:1:40 "$DROVER" run "$S" slow 4 2>&1)
line=$(echo "$out" | grep '^FED ')
set -- $line # FED f TRAINED t W0 a W1 b MOST m
check "feed-cli-01 every batch read is trained" [ -n "$line" ] && [ "$2" = "$4" ]
check "feed-cli-01 the slow worker:1 gets fewer batches ($8 < $6)" [ "${8:-0}" -lt "${6:-0}" ]
check "feed-cli-01 no worker holds more than 3 batches (most ${10})" [ "${10:-9}" -le 3 ]

# ------------------------------------------------ a stuck worker
out=$(DROVER_FAULT=slow:worker:0:4000 "$DROVER" run "$S" stuck 2>&1)
check "feed-cli-02 the fit fails by feed_timeout" sh -c 'echo "$1" | grep -q "^STUCK false.*feed_timeout: no progress for 1 s"' - "$out"
check "feed-cli-02 naming the worker waited for" sh -c 'echo "$1" | grep -q "waited for worker:0, which holds batch"' - "$out"

# ------------------------------------------------ stdin streaming through a pipe
tail -n +2 "$D" | head -n 500 >"$TMP/rows.csv"
out=$(cat "$TMP/rows.csv" | "$DROVER" run "$S" stream - 2>&1)
check "feed-cli-03 rows piped into stdin train: 50 batches of 10" sh -c 'echo "$1" | grep -q "^STREAM 50 batches 500 rows"' - "$out"
# the same, arriving slowly (a growing pipe): every row still trained once
out=$( (head -n 100 "$TMP/rows.csv"; sleep 1; tail -n +101 "$TMP/rows.csv" | head -n 95) | "$DROVER" run "$S" stream - 2>&1)
check "feed-cli-03 rows arriving over time: 20 batches, 195 rows" sh -c 'echo "$1" | grep -q "^STREAM 20 batches 195 rows"' - "$out"
# a pipe whose writer stalls: feed_timeout (2 s) ends the fit, the workers named
out=$( (head -n 30 "$TMP/rows.csv"; sleep 6) | "$DROVER" run "$S" stream - 2 2>&1)
check "feed-cli-04 a stalled stream hits feed_timeout" sh -c 'echo "$1" | grep -q "STREAM FAILED.*feed_timeout: no progress for 2 s"' - "$out"
check "feed-cli-04 naming the workers waiting" sh -c 'echo "$1" | grep -q "waiting for one: worker:0 worker:1"' - "$out"

# ------------------------------------------------ external feeders (Python, standard library)
if command -v python3 >/dev/null 2>&1; then
  F="$PWD/tests/cli/feeder.py"
  "$DROVER" run "$S" external 2 2 >"$TMP/ext.out" 2>&1 &
  run_pid=$!
  wait_for 20 grep -q '^RUN ' "$TMP/ext.out"
  dir=$(sed -n 's/^RUN //p' "$TMP/ext.out")
  head -n 300 "$TMP/rows.csv" >"$TMP/300.csv"
  # fit 1: two feeders (feeders = 2), 30 batches each
  python3 "$F" "$dir" "$TMP/300.csv" 10 a >"$TMP/fa.out" 2>&1 &
  fa=$!
  python3 "$F" "$dir" "$TMP/300.csv" 10 b >"$TMP/fb.out" 2>&1
  wait $fa
  check "feed-cli-05 a Python feeder's batches are all trained" grep -q "^FEEDER sent 30 trained 30 status 0" "$TMP/fa.out"
  check "feed-cli-05 so are the second feeder's" grep -q "^FEEDER sent 30 trained 30 status 0" "$TMP/fb.out"
  wait_for 20 grep -q '^EXTERNAL' "$TMP/ext.out"
  check "feed-cli-05 the fit took both feeders' 60 batches" grep -q "^EXTERNAL 60 fed 60 trained" "$TMP/ext.out"
  # fit 2: a feeder that gives up fails the fit, with its reason
  python3 "$F" "$dir" "$TMP/300.csv" 10 quitter --give-up-after 5 >"$TMP/fq.out" 2>&1
  python3 "$F" "$dir" "$TMP/300.csv" 10 c >"$TMP/fc.out" 2>&1
  wait_for 20 grep -q '^EXTERNAL FAILED' "$TMP/ext.out"
  check "feed-cli-06 a feeder giving up fails the fit, named" grep -q "^EXTERNAL FAILED.*feeder quitter gave up: the source broke" "$TMP/ext.out"
  wait_for 20 sh -c '! kill -0 '"$run_pid"' 2>/dev/null'
  kill "$run_pid" 2>/dev/null || true
  # an external feed's length is not known: its progress says "step 30",
  # not "step 30/0", without an ETA; its accuracy is returned
  "$DROVER" run "$S" external 1 1 verbose >"$TMP/extv.out" 2>&1 &
  run_pid=$!
  wait_for 20 grep -q '^RUN ' "$TMP/extv.out"
  dir=$(sed -n 's/^RUN //p' "$TMP/extv.out")
  python3 "$F" "$dir" "$TMP/300.csv" 10 v >"$TMP/fv.out" 2>&1
  wait_for 20 grep -q '^EXTERNAL' "$TMP/extv.out"
  check "feed-cli-07 an external feed's progress has no total: step 30, no /0, no eta" \
    grep -Eqx "step 30 epoch 1/1 loss [0-9.]+ acc [0-9.]+ [0-9]+ ex/s" "$TMP/extv.out"
  check "feed-cli-07 its fit returns the accuracy" \
    grep -Eqx "EXTERNAL 30 fed 30 trained acc 0?\.[0-9]+|EXTERNAL 30 fed 30 trained acc 1\.0" "$TMP/extv.out"
  wait_for 20 sh -c '! kill -0 '"$run_pid"' 2>/dev/null'
  kill "$run_pid" 2>/dev/null || true
else
  fail "feed-cli-05 external feeders" "python3 is not installed"
fi
