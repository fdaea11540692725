# test_feed_dash.sh - the dashboard during a feed, through tmux: the
# header shows the feed's rate and each worker's BKLG column its queue
# depth (fed batches held, at most the window of 3); ps:0 shows "-".
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-feed-$$
LIMIT=200 # tenths of a second
TMUX_CASE=feed-dash-00
. tests/cli/tmux.sh
export RUNS="$TMP/runs"
S="$PWD/tests/cli/feed_train.lua"

tm new-session -d -s run -x 170 -y 45 \
  "cd '$TMP' && DROVER_FAULT=slow:worker:1:40 LANG=C.UTF-8 '$DROVER' run --dash '$S' slow 12; echo \$? >'$TMP/run.status'; sleep 60"
expect run "feed-dash-01 the dashboard shows the fed workers" wait_re run "worker:1 .* (busy|ready) "
expect run "feed-dash-01 the header shows the feed rate" wait_re run "feed [0-9.]+[kM]? b/s"
expect run "feed-dash-02 the slow worker's backlog is its queue depth (1-3)" wait_re run "worker:1 .*s +[0-9]+ +[1-3] "
expect run "feed-dash-02 a ps has no backlog" wait_re run "ps:0 .*s +[0-9]+ +- "
expect run "feed-dash-02 the input backlog panel lists the workers" wait_re run "worker:1 +█+ +[1-3] "
key run q
n=$((LIMIT * 3))
until [ -f "$TMP/run.status" ] || [ "$n" -le 0 ]; do n=$((n - 1)); sleep 0.1; done
check "feed-dash-03 the run ends with status 0" [ "$(cat "$TMP/run.status" 2>/dev/null)" = 0 ]
