# test_repl.sh - the REPL on a real terminal, driven through tmux: results,
# continuation lines, Ctrl-C (running and at the prompt), completion,
# syntax errors, the history file, Ctrl-D.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-test-$$
LIMIT=100 # tenths of a second to wait for something to appear
TMUX_CASE=repl-00
. tests/cli/tmux.sh
export DROVER_HISTORY="$TMP/history"

# start NAME: a session running the REPL at a fixed size; when drover ends
# its exit status goes to $TMP/NAME.status and the pane closes. The
# terminal settings before and after go to NAME.stty0 and NAME.stty1.
start() {
  rm -f "$TMP/$1.status"
  tm new-session -d -s "$1" -x 100 -y 40 \
    "stty -g >'$TMP/$1.stty0'; env DROVER_HISTORY='$DROVER_HISTORY' '$DROVER';
     s=\$?; stty -g >'$TMP/$1.stty1'; echo \$s >'$TMP/$1.status'"
}

# The REPL scrolls: read the history too (tmux.sh reads the visible pane).
screen() { tm capture-pane -p -t "$1" -S -1000 2>/dev/null; }

# ---------------------------------------------------------------- session 1
start s1
expect s1 "repl-01 banner and prompt" wait_text s1 "help() for help, Ctrl-D to leave"
wait_line s1 ">" >/dev/null

send s1 '1+1' Enter
expect s1 "repl-02 an expression prints its value" wait_line s1 "2"

send s1 'function f()' Enter
expect s1 "repl-03 an incomplete chunk continues with >>" wait_line s1 ">>"
send s1 '  return 6 * 7' Enter
send s1 'end' Enter
send s1 'f()' Enter
expect s1 "repl-03 the continued chunk was defined and runs" wait_line s1 "42"

send s1 'math.max(1,' Enter
send s1 '99)' Enter
expect s1 "repl-04 an incomplete expression continues and prints" wait_line s1 "99"

send s1 'print("spinning") while true do end' Enter
wait_line s1 "spinning" >/dev/null
key s1 C-c
expect s1 "repl-05 Ctrl-C stops a running command" wait_line s1 "interrupted"
send s1 '1000 + 234' Enter
expect s1 "repl-05 the REPL survives Ctrl-C" wait_line s1 "1234"

send s1 'error("must not run")'
wait_text s1 'error("must not run")' >/dev/null
key s1 C-c
wait_text s1 '"must not run")^C' >/dev/null
send s1 '300 + 33' Enter
expect s1 "repl-06 Ctrl-C at the prompt drops the line" wait_line s1 "333"
expect s1 "repl-06 the dropped line did not run" sh -c "! tmux -L '$SOCK' capture-pane -p -t s1 -S -1000 | grep -qF 'stdin:1: must not run'"

send s1 'drover.nn.Li' Tab
expect s1 "repl-07 Tab completes drover.nn.Li to drover.nn.Linear" wait_text s1 "drover.nn.Linear"
key s1 C-u
send s1 'lin = drover.nn.Linear(3, 2)' Enter
send s1 'lin:for' Tab
expect s1 "repl-07 Tab completes lin:for to lin:forward on an nn module" wait_text s1 "lin:forward"
key s1 C-u
send s1 'obj = setmetatable({}, { __index = { forward = function() return 4321 end } })' Enter
send s1 'obj:for' Tab
send s1 '()' Enter
expect s1 "repl-07 Tab completes a method through __index" wait_line s1 "4321"
expect s1 "repl-07 the completed method call was echoed" wait_text s1 "obj:forward()"

send s1 'x = = 1' Enter
expect s1 "repl-08 a syntax error is reported" wait_text s1 "unexpected symbol near '='"
send s1 '2 * 50' Enter
expect s1 "repl-08 the REPL stays after a syntax error" wait_line s1 "100"

send s1 'error("deliberate")' Enter
expect s1 "repl-09 a runtime error is reported" wait_text s1 "stdin:1: deliberate"
send s1 '7 * 11' Enter
expect s1 "repl-09 the REPL stays after a runtime error" wait_line s1 "77"

expect s1 "repl-10 the history file has single entries" grep -qxF '1+1' "$DROVER_HISTORY"
expect s1 "repl-10 a multi-line chunk is one entry" grep -qxF 'function f()\n  return 6 * 7\nend' "$DROVER_HISTORY"
expect s1 "repl-10 a dropped line is not in the history" sh -c "! grep -qF 'must not run' '$DROVER_HISTORY'"

key s1 C-d
n=$LIMIT
while [ ! -s "$TMP/s1.status" ] && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
expect s1 "repl-11 Ctrl-D exits with status 0" grep -qx 0 "$TMP/s1.status"
sleep 0.2
expect s1 "repl-11 the pane is gone" sh -c "! tmux -L '$SOCK' has-session -t s1 2>/dev/null"
expect s1 "repl-11 the terminal settings are restored" cmp -s "$TMP/s1.stty0" "$TMP/s1.stty1"

# ---------------------------------------------------------------- session 2
# The history is loaded at start: Up recalls the last entry of session 1.
start s2
wait_line s2 ">" >/dev/null
key s2 Up
expect s2 "repl-12 Up recalls the previous session's last entry" wait_text s2 "> 7 * 11"
key s2 Enter
expect s2 "repl-12 the recalled entry runs" wait_line s2 "77"
key s2 C-d
n=$LIMIT
while [ ! -s "$TMP/s2.status" ] && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
expect s2 "repl-12 the second session exits with status 0" grep -qx 0 "$TMP/s2.status"

# ---------------------------------------------------------------- no terminal
# Piped input is evaluated line by line without prompts; a failure shows
# in the exit status.
OUT=$(printf 'x = 20\nx +\n22\n' | "$DROVER" 2>"$TMP/err")
RC=$?
if [ "$RC" -eq 0 ] && [ "$OUT" = 42 ]; then pass "repl-13 piped input evaluates"; else fail "repl-13 piped input evaluates" "status $RC, output '$OUT'"; fi
OUT=$(printf 'error("piped failure")\nprint("went on")\n' | "$DROVER" 2>"$TMP/err")
RC=$?
if [ "$RC" -eq 1 ] && [ "$OUT" = "went on" ] && grep -qF 'stdin:1: piped failure' "$TMP/err"; then
  pass "repl-13 a piped failure is reported and sets the status"
else
  fail "repl-13 a piped failure is reported and sets the status" "status $RC, output '$OUT'"
fi
