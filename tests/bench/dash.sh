#!/bin/sh
# dash.sh - CPU used by the dashboard process: `drover _dash-sim --nodes 256
# --hz 10 --warp 600` (charts full: thousands of points each, decimated) in
# a 200x60 tmux pane, measured over DASH_SECONDS (5) after a
# 2 s warm-up from /proc/<pid>/stat (utime + stime), as percent of one core.
# The target is < 5%. Run by tests/bench/run.sh; DROVER names the binary.
set -eu
cd "$(dirname "$0")/../.."
drover=${DROVER:-./drover}
secs=${DASH_SECONDS:-5}
if ! command -v tmux >/dev/null 2>&1; then
  echo "dash_cpu_percent skipped: tmux is not installed (make deps installs it)"
  exit 0
fi
SOCK=drover-bench-$$
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
# (The pane's drover quits on q, which ends the server: kill-server then
# fails, and the script's status must not be that.)
trap 'tm kill-server >/dev/null 2>&1 || true' EXIT

# cpu_ticks PID: utime + stime (fields 14 and 15, counted after the
# parenthesised command name).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

tm new-session -d -s bench -x 200 -y 60 \
  "exec env LANG=C.UTF-8 '$drover' _dash-sim --nodes 256 --hz 10 --warp 600 --seconds $((secs + 30))"
sleep 2
pid=$(tm list-panes -t bench -F '#{pane_pid}')
if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != drover ]; then
  echo "dash_cpu_percent failed: the pane does not run drover"
  exit 1
fi
hz=$(getconf CLK_TCK)
t0=$(cpu_ticks "$pid")
sleep "$secs"
t1=$(cpu_ticks "$pid")
tm send-keys -t bench q
awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$secs" \
  'BEGIN { printf "dash_cpu_percent_256nodes_10hz_200x60 %.2f (target < 5)\n", 100 * d / hz / s }'
