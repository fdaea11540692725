# test_dash.sh - the dashboard on a real terminal, driven through tmux, on
# the simulated run of `drover _dash-sim`: nodes and their states (a lost
# worker coming back), help, resizing below the minimum and back, themes,
# the filter, the detail view with a log, stopping a node, ':' commands,
# NO_COLOR, a read-only source, ASCII charts without UTF-8, and q giving
# the terminal back.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-dash-$$
LIMIT=100 # tenths of a second to wait for something to appear
TMUX_CASE=dash-00
. tests/cli/tmux.sh
ESC=$(printf '\033')
mkdir -p "$TMP/logs"

# start NAME ENV ARGS: a 120x40 session running `drover _dash-sim ARGS`
# with the environment ENV. When drover ends, its status goes to
# NAME.status, the terminal settings before and after to NAME.stty0/1,
# and the pane shows "PROMPT$ " as a shell would.
# A new session right after the server's last one was killed can meet the
# server on its way out (CI saw session 2 never start): try three times.
start() {
  rm -f "$TMP/$1.status"
  for try in 1 2 3; do
    tm new-session -d -s "$1" -x 120 -y 40 \
      "stty -g >'$TMP/$1.stty0'; env $2 '$DROVER' _dash-sim $3;
       s=\$?; stty -g >'$TMP/$1.stty1'; echo \$s >'$TMP/$1.status'; printf 'PROMPT\$ '; sleep 60" \
      2>/dev/null && tm has-session -t "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}


type_text() { tm send-keys -t "$1" -l "$2" 2>/dev/null; }

# sgr NAME: the parameters of the SGR sequences on the screen, one a line.
sgr() {
  tm capture-pane -p -e -t "$1" 2>/dev/null | grep -o "$ESC\[[0-9;:]*m" |
    sed "s/^$ESC\[//; s/m\$//" | tr ';:' '\n\n' | grep -v '^$'
}
# Colours are SGR 30-48 and 90-107 (38 and 48 start 256 and RGB ones);
# 39 and 49 are the terminal's default colours, which tmux writes out.
colours() {
  sgr "$1" | awk '($0 >= 30 && $0 <= 48 && $0 != 39) || ($0 >= 90 && $0 <= 107)'
}
has_colours() { [ -n "$(colours "$1")" ]; }
no_colours() { [ -z "$(colours "$1")" ]; }
has_reverse() { sgr "$1" | grep -qx 7; }
# Braille is U+2800-U+28FF: the bytes E2 A0..A3 xx in UTF-8.
BRAILLE=$(printf '\342[\240-\243]')
has_braille() { screen "$1" | LC_ALL=C grep -q "$BRAILLE"; }
no_braille() { ! has_braille "$1"; }
# lacks NAME REGEX: no line of the screen matches now.
lacks() { ! screen "$1" | grep -qE -- "$2"; }

# ---------------------------------------------------------------- session 1
start s1 "LANG=C.UTF-8" "--nodes 8 --log-dir '$TMP/logs'"
expect s1 "dash-01 the nodes appear with their states" wait_re s1 "worker:3 .* busy "
expect s1 "dash-01 ps:0 is ready" wait_re s1 "ps:0 +node00.sim .* ready "
expect s1 "dash-01 the header names the run" wait_re s1 "drover sim-8-nodes"
expect s1 "dash-01 charts are drawn in Braille" has_braille s1
# The simulation loses worker:1 at 6 s; it restarts at 8 s, is back at 10.
expect s1 "dash-02 worker:1 shows as lost" wait_re s1 "worker:1 .* lost "
expect s1 "dash-02 the events pane says why" wait_re s1 "node lost worker:1: killed by signal 9"
expect s1 "dash-02 then restarting" wait_re s1 "worker:1 .* restarting +1 "
expect s1 "dash-02 then busy again, one restart" wait_re s1 "worker:1 .* busy +1 "

key s1 '?'
expect s1 "dash-03 ? shows the help" wait_re s1 "keys - any key closes this help"
expect s1 "dash-03 the help lists the keys" wait_re s1 "/ +filter nodes by name"
key s1 Space
expect s1 "dash-03 any key closes it" gone s1 "any key closes this help"

tm resize-window -t s1 -x 60 -y 15
expect s1 "dash-04 60x15 says the terminal is too small" wait_re s1 "terminal too small \(need 64×18\)"
expect s1 "dash-04 and draws nothing else" lacks s1 "worker:"
tm resize-window -t s1 -x 120 -y 40
expect s1 "dash-04 back at 120x40 the table returns" wait_re s1 "worker:0 .* busy"
expect s1 "dash-04 without the message" gone s1 "terminal too small"

expect s1 "dash-05 the default theme has colours" has_colours s1
key s1 t
expect s1 "dash-05 t switches to the next theme (status line)" wait_re s1 "theme: light"
key s1 t
expect s1 "dash-05 and the next" wait_re s1 "theme mono "
key s1 t
key s1 t
expect s1 "dash-05 and round to default" wait_re s1 "theme default "

type_text s1 "/worker:1"
expect s1 "dash-06 / opens the filter prompt" wait_re s1 "filter: worker:1_"
key s1 Enter
expect s1 "dash-06 /worker:1 leaves one node" wait_re s1 "nodes 1/8"
expect s1 "dash-06 the others are filtered out" lacks s1 "(worker:2|ps:0) +node"

key s1 Enter
expect s1 "dash-07 Enter opens the node's detail" wait_re s1 "node worker:1"
expect s1 "dash-07 with the tail of its log" wait_re s1 "t=[0-9.]+ worker:1 [a-z]+ steps="
expect s1 "dash-07 and what the node got where it runs" wait_re s1 "got +10\.1\.[0-9]+\.[0-9]+  2 threads, 2 cpus, 4\.0G, slurm 4242\.[0-9]+ on node0"
expect s1 "dash-07 and the transport of each of its links" wait_re s1 "links +coord=tcp,ps:0=shm"
key s1 Escape
expect s1 "dash-07 Esc goes back to the table" wait_re s1 "nodes 1/8"
key s1 Escape
expect s1 "dash-06 Esc clears the filter" wait_re s1 "nodes 8/8"

key s1 Home
key s1 Down
key s1 Down
key s1 Down
key s1 k
expect s1 "dash-08 k asks before stopping" wait_re s1 "stop worker:1\? \(y/n\)"
key s1 y
expect s1 "dash-08 y stops it" wait_re s1 "stopping worker:1"
expect s1 "dash-08 the node shows as lost" wait_re s1 "worker:1 .* (lost|restarting) "

type_text s1 ":step"
key s1 Enter
expect s1 "dash-09 a ':' command's reply is on the status line" wait_re s1 "^ [0-9]+ +theme "

key s1 q
n=$LIMIT
while [ ! -s "$TMP/s1.status" ] && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
expect s1 "dash-10 q leaves with status 0" grep -qx 0 "$TMP/s1.status"
expect s1 "dash-10 the shell prompt is back" wait_re s1 "^PROMPT\\$"
expect s1 "dash-10 the dashboard is gone from the screen" lacks s1 "nodes 8/8"
expect s1 "dash-10 the terminal settings are restored" cmp -s "$TMP/s1.stty0" "$TMP/s1.stty1"

# ---------------------------------------------------------------- session 2
# NO_COLOR, a read-only source, a plain C locale (ASCII charts). Session 1
# ends only once session 2 runs, so the server never goes away between them.
start s2 "LANG=C LC_ALL=C NO_COLOR=1" "--nodes 8 --read-only"
tm kill-session -t s1 2>/dev/null
expect s2 "dash-11 NO_COLOR: the dashboard draws" wait_re s2 "worker:3 .* busy "
sleep 1
expect s2 "dash-11 NO_COLOR: no colour escapes" no_colours s2
expect s2 "dash-11 NO_COLOR: the selection still shows (reverse video)" has_reverse s2
key s2 t
expect s2 "dash-11 NO_COLOR: themes say there are no colours" wait_re s2 "theme: light \(no colours"
expect s2 "dash-12 no Braille without UTF-8" no_braille s2
key s2 k
expect s2 "dash-13 read-only: k says so" wait_re s2 "read-only: attach with --control"
key s2 :
expect s2 "dash-13 read-only: so does :" wait_re s2 "read-only: attach with --control"
key s2 q
n=$LIMIT
while [ ! -s "$TMP/s2.status" ] && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
expect s2 "dash-14 q leaves the read-only dashboard" grep -qx 0 "$TMP/s2.status"

# ---------------------------------------------------------------- session 3
# A theme that does not exist, then Ctrl-C: the terminal comes back too.
start s3 "LANG=C.UTF-8" "--nodes 4 --theme nosuch"
expect s3 "dash-16 an unknown theme is named on the status line" wait_re s3 "no theme 'nosuch' \(have: default, "
expect s3 "dash-16 and the default theme is used" wait_re s3 "worker:0 .* (starting|ready|busy) "
key s3 C-c
n=$LIMIT
while [ ! -s "$TMP/s3.status" ] && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
expect s3 "dash-17 Ctrl-C leaves with status 0" grep -qx 0 "$TMP/s3.status"
expect s3 "dash-17 and restores the terminal settings" cmp -s "$TMP/s3.stty0" "$TMP/s3.stty1"
expect s3 "dash-17 and the screen" wait_re s3 "^PROMPT\\$"

# ---------------------------------------------------------------- no terminal
OUT=$("$DROVER" _dash-sim --seconds 1 </dev/null 2>&1)
RC=$?
if [ "$RC" -eq 1 ] && echo "$OUT" | grep -q "needs a terminal"; then
  pass "dash-15 without a terminal it says so"
else
  fail "dash-15 without a terminal it says so" "status $RC, output '$OUT'"
fi
