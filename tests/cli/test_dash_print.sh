# test_dash_print.sh - print() under `drover run --dash`, through tmux: a
# multi-line string and a printed tensor are one event line each in the
# events pane, which keeps its border; events.log has them line by line;
# after q the output held back is printed as the script wrote it. An
# in-process fit, then a cluster's (the coordinator notes each line).
# Each fit trains until the test creates its stop file.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

SOCK=drover-print-$$
LIMIT=200 # tenths of a second
TMUX_CASE=print-00
. tests/cli/tmux.sh
export RUNS="$TMP/runs"
# Each script writes its drover's pid (the coordinator's, on a cluster)
# into $TMP/NAME.pid: ended at exit when the test did not get that far.
at_exit 'for f in "$TMP"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done'

# fit_script NAME CLUSTER: a digits fit that prints three lines and a
# tensor once $TMP/NAME.say exists (the dashboard is up then: before it,
# print is plain) and trains until $TMP/NAME.stop exists; on a cluster of
# 1 ps + 1 worker when CLUSTER is 1, else in process.
fit_script() {
  cat >"$TMP/$1.lua" <<LUA
local nn, optim, data = drover.nn, drover.optim, drover.data
local pid = assert(io.open("/proc/self/stat")):read("n")
assert(io.open("$TMP/$1.pid", "w")):write(pid, "\n"):close()
local d = data.csv("$PWD/examples/data/digits.csv", { label = -1 }):standardize()
local said = false
local exp = drover.experiment {
  name = "$1", loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
  model = nn.Sequential { nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10) },
  train = { data = d, batch = 32, epochs = 100000 }, seed = 1,
  progress = function()
    local say = not said and io.open("$TMP/$1.say")
    if say then
      say:close()
      said = true
      print("LINE one\nLINE two\nLINE three")
      print(drover.tensor { { 11, 12, 13 }, { 14, 15, 16 } })
    end
    drover.sleep(0.01)
    local f = io.open("$TMP/$1.stop")
    if f then f:close() return false end
  end,
}
local r
if $2 == 1 then
  local c = drover.cluster { ps = 1, worker = 1, name = "$1", runs = "$RUNS" }
  r = c:fit(exp)
  c:shutdown()
else
  r = exp:fit()
end
print("RESULT " .. r.steps)
LUA
}

# pane_intact NAME: the events pane, from its top border to its bottom
# one, has every row between "│" and "│" (a newline drawn in it ended a
# row early and pushed the rest over the border below).
pane_intact() {
  screen "$1" | awk '
    /^┌─ events/ { inside = 1; next }
    inside && /^└.*┘$/ { bottom = 1; exit }
    inside && !/^│.*│$/ { bad = 1; exit }
    END { exit !(bottom && !bad) }'
}

# as_written NAME: the two prints on the screen, line after line.
as_written() {
  screen "$1" | grep -A5 -x 'LINE one' | tr '\n' '|' |
    grep -Eq '^LINE one\|LINE two\|LINE three\|drover.tensor \[2, 3\]\| +11 +12 +13\| +14 +15 +16\|'
}

# ev NAME TEXT: TEXT is a whole event line: time, text, blanks, border
# (a cluster's coordinator notes it as "print TEXT").
ev() { wait_re "$1" "^│ +[0-9]+:[0-9]+ (print )?$2 *│$"; }

# run_case NAME CLUSTER CASE: the checks on one fit under --dash.
run_case() {
  fit_script "$1" "$2"
  tm new-session -d -s "$1" -x 140 -y 60 \
    "cd '$TMP' && LANG=C.UTF-8 '$DROVER' run --dash '$TMP/$1.lua'; echo \$? >'$TMP/$1.status'; sleep 60"
  expect "$1" "$3 the dashboard shows the fit" wait_text "$1" "train/loss"
  : >"$TMP/$1.say"
  expect "$1" "$3 the first line of the string is an event line" ev "$1" "LINE one"
  expect "$1" "$3 its second line one too" ev "$1" "LINE two"
  expect "$1" "$3 its last line one too" ev "$1" "LINE three"
  expect "$1" "$3 the tensor's header an event line" ev "$1" "drover.tensor \[2, 3\]"
  expect "$1" "$3 its rows one each" ev "$1" " +14 +15 +16"
  expect "$1" "$3 the events pane keeps its border" pane_intact "$1"
  : >"$TMP/$1.stop"
  expect "$1" "$3 the last frame stays" wait_re "$1" "run finished . q to leave"
  expect "$1" "$3 with the border still whole" pane_intact "$1"
  key "$1" q
  expect "$1" "$3 after q, the output held back is printed" wait_re "$1" "^RESULT [0-9]+$"
  expect "$1" "$3 as the script wrote it" as_written "$1"
  wait_for 20 test -f "$TMP/$1.status"
  check "$3 exit status 0" [ "$(cat "$TMP/$1.status" 2>/dev/null)" = 0 ]
  [ -f "$TMP/$1.status" ] && rm -f "$TMP/$1.pid"
}

run_case inproc 0 print-01
run_case clus 1 print-02
log=$(ls "$RUNS"/clus-*/events.log 2>/dev/null | head -n 1)
check "print-02 events.log has each line its own event" \
  sh -c "grep -q ' print LINE two\$' '$log' && grep -q ' print LINE three\$' '$log' && grep -Eq ' print +14 +15 +16\$' '$log'"
