# test_feed_resume.sh - checkpoints of a fed fit record the feed's position
# (batches read, those still pending), and `drover run --resume` of a run
# whose coordinator was SIGKILLed mid-feed reads a dataset or a file again,
# passes over what the checkpoint trained and trains the rest (the pending
# ones again: none lost). A stdin feed cannot be read again: its resume is
# refused, saying so. Real processes on loopback; every wait bounded.
. tests/cli/lib.sh
RUNS=$TMP/runs

# arg[1] = "ds", a CSV path or "-"; arg[2] = runs. Slow (a sleep every 4
# steps) so that it is killed mid-feed after a checkpoint.
cat >"$TMP/fed.lua" <<'EOF'
local nn, optim = drover.nn, drover.optim
local src, runs = arg[1], arg[2]
drover.seed(3)
local feed, epochs = src, 1
if src == "ds" then
  feed, epochs = drover.data.synthetic { n = 512, features = 16, classes = 4, seed = 1 }, 2
end
local slept = -1
local exp = drover.experiment { name = "fr", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 0.01 },
  model = nn.Sequential { nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4) },
  train = { feed = feed, batch = 16, epochs = epochs, feed_timeout = 60 },
  verbose = false, seed = 5, checkpoint = { every = 8 },
  progress = function(p)
    if not os.getenv("FR_FAST") and p.step % 4 == 0 and p.step ~= slept then
      slept = p.step
      os.execute("sleep 0.1")
    end
  end }
local c = drover.cluster { ps = 1, worker = 2, runs = runs, name = "fr" }
local r = c:fit(exp)
print("fed " .. r.fed .. " trained " .. r.batches .. " run " .. c.run_dir)
c:shutdown()
EOF
awk 'BEGIN { srand(7); for (i = 0; i < 1024; i++) { s = ""; for (j = 0; j < 16; j++) s = s sprintf("%.3f,", rand()); print s (i % 4) } }' >"$TMP/rows.csv"

ckpt_in() { RUN=$(ls -d "$1"/fr-* 2>/dev/null); [ -n "$RUN" ] && grep -q " checkpoint step [0-9]*: " "$RUN/events.log"; }
gone() { [ ! -d "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
all_gone() { for p in "$@"; do gone "$p" || return 1; done; }

# kill_mid NAME SRC: runs fed.lua, SIGKILLs its coordinator after a
# checkpoint committed, waits for its nodes to go. Sets RUN.
kill_mid() {
  "$DROVER" run "$TMP/fed.lua" "$2" "$RUNS/$1" >"$TMP/$1.out" 2>&1 &
  pid=$!
  check "$1 a checkpoint was committed mid-feed" wait_for 60 ckpt_in "$RUNS/$1"
  kill -9 $pid; wait $pid 2>/dev/null
  PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log")
  wait_for 15 all_gone $PIDS
}

# check_resumed NAME TOTAL: the resumed run passed over batches and, with
# them, trained every batch of the source (the pending ones again).
check_resumed() {
  out=$TMP/$1.res
  check "$1 the resumed run finished" grep -q "^fed $2 trained [0-9]* run $RUN\$" "$out"
  check "$1 it resumed the fed fit from a checkpoint" grep -q "resuming fit 1 from step [1-9][0-9]* " "$RUN/events.log"
  skipped=$(sed -n 's/.*feed: \([0-9]*\) batches passed over.*/\1/p' "$RUN/events.log" | tail -n 1)
  trained=$(sed -n 's/^fed [0-9]* trained \([0-9]*\) run .*/\1/p' "$out")
  check "$1 batches trained before the checkpoint were passed over" [ "${skipped:-0}" -gt 0 ]
  check "$1 none lost: passed over + trained >= $2, and only the pending twice" \
    sh -c "[ $((${skipped:-0} + ${trained:-0})) -ge $2 ] && [ $((${skipped:-0} + ${trained:-0})) -le $(($2 + 12)) ]"
}

# feed-resume-01: a dataset, 2 epochs of 32 batches.
kill_mid feed-resume-01 ds
FR_FAST=1 "$DROVER" run --resume "$RUN" >"$TMP/feed-resume-01.res" 2>&1
check_resumed feed-resume-01 64

# feed-resume-02: a CSV file, 64 batches.
kill_mid feed-resume-02 "$TMP/rows.csv"
FR_FAST=1 "$DROVER" run --resume "$RUN" >"$TMP/feed-resume-02.res" 2>&1
check_resumed feed-resume-02 64

# feed-resume-03: stdin (a pipe that stays open) cannot be read again.
mkfifo "$TMP/fifo"
"$DROVER" run "$TMP/fed.lua" - "$RUNS/feed-resume-03" <"$TMP/fifo" >"$TMP/feed-resume-03.out" 2>&1 &
pid=$!
( cat "$TMP/rows.csv"; sleep 60 ) >"$TMP/fifo" &
writer=$!
check "feed-resume-03 a checkpoint was committed mid-feed" wait_for 60 ckpt_in "$RUNS/feed-resume-03"
kill -9 $pid; wait $pid 2>/dev/null
kill $writer 2>/dev/null; wait $writer 2>/dev/null
PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log")
wait_for 15 all_gone $PIDS
FR_FAST=1 timeout 60 "$DROVER" run --resume "$RUN" </dev/null >"$TMP/feed-resume-03.res" 2>&1
check "feed-resume-03 the resume is refused: stdin cannot be read again" \
  grep -q "cannot resume this fit: its feed is stdin, which cannot be read again from its start" "$TMP/feed-resume-03.res"
PIDS=$(sed -n 's/.* node start [a-z]*:[0-9]* pid \([0-9]*\).*/\1/p' "$RUN/events.log")
check "feed-resume-03 the refused resume leaves no node behind" wait_for 15 all_gone $PIDS
