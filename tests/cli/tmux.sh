# tmux.sh - the screen tests' prelude and helpers (sourced after lib.sh):
# a private tmux server named $SOCK, so that no user session is touched,
# always killed on exit; reading the screen, bounded waits for what it
# shows, typing.
#
# The caller sets before sourcing: SOCK (the server's name), LIMIT (tenths
# of a second a wait may take; 100 when unset, three times that under
# sanitizers) and TMUX_CASE (the case that fails when tmux is missing; the
# script's name when unset). Without tmux the test FAILs and ends: a
# screen test that cannot run is not a pass. tmux_cleanup (server, socket)
# runs at exit through lib.sh's at_exit, after whatever the caller adds
# there (kill_at_exit, note_coords).
if ! command -v tmux >/dev/null 2>&1; then
  fail "${TMUX_CASE:-${0##*/}} tmux" "tmux is not installed (make deps installs it)"
  exit 0
fi

tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
SOCKPATH="${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"
tmux_cleanup() {
  tm kill-server >/dev/null 2>&1
  rm -f "$SOCKPATH"
}
at_exit tmux_cleanup
trap 'exit 1' INT TERM HUP

: "${LIMIT:=100}"
[ -n "${SANITIZED:-}" ] && LIMIT=$((LIMIT * 3))

# screen NAME: the visible pane (a test may redefine it, e.g. with history).
screen() { tm capture-pane -p -t "$1" 2>/dev/null; }

# until_grep NAME GREP-FLAGS PATTERN: waits until grep finds PATTERN.
until_grep() {
  n=$LIMIT
  until screen "$1" | grep -q"$2" -- "$3"; do
    n=$((n - 1))
    [ "$n" -le 0 ] && return 1
    sleep 0.1
  done
}
wait_re() { until_grep "$1" E "$2"; }    # a line matches REGEX
wait_text() { until_grep "$1" F "$2"; }  # TEXT appears anywhere
wait_line() { until_grep "$1" xF "$2"; } # LINE is a whole line

# gone NAME REGEX: waits until no line matches REGEX.
gone() {
  n=$LIMIT
  while screen "$1" | grep -qE -- "$2"; do
    n=$((n - 1))
    [ "$n" -le 0 ] && return 1
    sleep 0.1
  done
}

# expect NAME CASE CONDITION...: PASS when the command succeeds, else FAIL
# with the end of the screen attached.
expect() {
  s=$1 c=$2
  shift 2
  if "$@"; then
    pass "$c"
  else
    fail "$c" "$* -- screen: $(screen "$s" | grep -v '^ *$' | tail -n 14 | tr '\n' '|')"
  fi
}

# key NAME KEY...: presses tmux keys. send NAME TEXT [KEY...]: types TEXT
# literally (tmux would read "end" as the End key), then presses the keys.
key() { t=$1; shift; tm send-keys -t "$t" "$@" 2>/dev/null; }
send() {
  t=$1
  tm send-keys -t "$t" -l "$2" 2>/dev/null
  shift 2
  if [ $# -gt 0 ]; then tm send-keys -t "$t" "$@" 2>/dev/null; fi
}
