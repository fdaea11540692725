# test_run.sh - the command line and `drover run`: exit statuses, error
# messages (file:line, traceback), `arg`, --help/--version, SIGINT.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary).
. tests/cli/lib.sh

# ok NAME CONDITION: PASS when the shell condition (a string for `eval`)
# holds, else FAIL with the condition and the captured stderr.
ok() {
  if eval "$2"; then pass "$1"; else fail "$1" "$2; stderr: $(head -c 600 "$TMP/err" 2>/dev/null)"; fi
}

# run_drover ARGS...: runs the binary, stdout to $OUT, stderr to $TMP/err,
# exit status to $RC.
run_drover() {
  OUT=$("$DROVER" "$@" 2>"$TMP/err")
  RC=$?
}

has_err() { grep -qF -- "$1" "$TMP/err"; }

# wait_exit PID SECONDS: waits (polling) until PID exits; 1 on timeout.
wait_exit() {
  n=$(($2 * 10))
  while kill -0 "$1" 2>/dev/null; do
    n=$((n - 1))
    [ "$n" -le 0 ] && return 1
    sleep 0.1
  done
  return 0
}

# wait_file_line FILE LINE SECONDS: waits until FILE holds the exact LINE.
wait_file_line() {
  n=$(($3 * 10))
  until grep -qxF -- "$2" "$1" 2>/dev/null; do
    n=$((n - 1))
    [ "$n" -le 0 ] && return 1
    sleep 0.1
  done
  return 0
}

# ---------------------------------------------------------------- 01 success
printf 'local t = {}\nfor i = 1, 3 do t[#t + 1] = i * i end\nprint("squares", table.concat(t, ","))\n' >"$TMP/ok.lua"
run_drover run "$TMP/ok.lua"
ok "run-01 a good script exits 0" '[ "$RC" -eq 0 ]'
ok "run-01 a good script prints" '[ "$OUT" = "$(printf "squares\t1,4,9")" ]'

# ---------------------------------------------------------------- 02 runtime error
cat >"$TMP/boom.lua" <<'EOF'
local function inner(x)
  if x > 1 then
    error("boom at " .. x)
  end
end
local function outer() inner(2) end
outer()
EOF
run_drover run "$TMP/boom.lua"
ok "run-02 a runtime error exits 1" '[ "$RC" -eq 1 ]'
ok "run-02 the message names file:line" 'has_err "drover: $TMP/boom.lua:3: boom at 2"'
ok "run-02 a traceback follows" 'has_err "stack traceback:" && has_err "$TMP/boom.lua:6: in " && has_err "$TMP/boom.lua:7: in main chunk"'

# a library error raised from C also names the script's line
printf 'local x = 1\nlocal t = nil\nprint(t.field)\n' >"$TMP/nil.lua"
run_drover run "$TMP/nil.lua"
ok "run-03 indexing nil exits 1 naming the line" '[ "$RC" -eq 1 ] && has_err "$TMP/nil.lua:3: attempt to index a nil value"'

# ---------------------------------------------------------------- 04 syntax error
printf 'local a = 1\nlocal b = 2\nif a then\n  b = = 3\nend\n' >"$TMP/syntax.lua"
run_drover run "$TMP/syntax.lua"
ok "run-04 a syntax error exits 1" '[ "$RC" -eq 1 ]'
ok "run-04 the syntax error names its line" 'has_err "$TMP/syntax.lua:4:" && has_err "near"'
ok "run-04 nothing ran" '[ -z "$OUT" ]'

# ---------------------------------------------------------------- 05 missing file
run_drover run "$TMP/no-such-script.lua"
ok "run-05 a missing script exits 1" '[ "$RC" -eq 1 ]'
ok "run-05 the message names the missing file" 'has_err "cannot open $TMP/no-such-script.lua" && has_err "No such file"'

# ---------------------------------------------------------------- 06 arg
cat >"$TMP/args.lua" <<'EOF'
print(#arg, arg[0], arg[1], arg[2], arg[-1], select("#", ...), (select(2, ...)))
EOF
run_drover run "$TMP/args.lua" first "second arg"
ok "run-06 arg holds the script and its arguments" \
  '[ "$OUT" = "$(printf "2\t%s\tfirst\tsecond arg\trun\t2\tsecond arg" "$TMP/args.lua")" ]'
run_drover run "$TMP/args.lua"
ok "run-06 no arguments: an empty arg" '[ "$OUT" = "$(printf "0\t%s\tnil\tnil\trun\t0\tnil" "$TMP/args.lua")" ]'
OUT=$(printf 'print(arg[0], ...)\n' | "$DROVER" run - x 2>"$TMP/err")
ok "run-06 'run -' reads the script from stdin" '[ "$OUT" = "$(printf -- "-\tx")" ]'

# ---------------------------------------------------------------- 07 os.exit
printf 'io.write("before ")\nos.exit(7)\nprint("after")\n' >"$TMP/exit7.lua"
run_drover run "$TMP/exit7.lua"
ok "run-07 os.exit(7) exits 7 and flushes" '[ "$RC" -eq 7 ] && [ "$OUT" = "before " ]'
printf 'os.exit(false)\n' >"$TMP/exitf.lua"
run_drover run "$TMP/exitf.lua"
ok "run-07 os.exit(false) exits 1" '[ "$RC" -eq 1 ]'
printf 'os.exit(true, true)\n' >"$TMP/exitt.lua"
run_drover run "$TMP/exitt.lua"
ok "run-07 os.exit(true, true) exits 0" '[ "$RC" -eq 0 ]'

# ---------------------------------------------------------------- 08 the library
printf 'assert(type(drover) == "table" and drover == require("drover"))\nassert(drover.nn and drover.optim and drover.data and drover.tensor)\nprint(drover.version)\n' >"$TMP/lib.lua"
run_drover run "$TMP/lib.lua"
ok "run-08 scripts see the drover library" '[ "$RC" -eq 0 ] && [ -n "$OUT" ]'
LIBVERSION=$OUT

# ---------------------------------------------------------------- 09 usage errors
run_drover frobnicate
ok "run-09 an unknown command exits 2" '[ "$RC" -eq 2 ]'
ok "run-09 it is named, with the usage" 'has_err "unknown command '"'"'frobnicate'"'"'" && has_err "usage: drover"'
run_drover --frobnicate
ok "run-09 an unknown option exits 2" '[ "$RC" -eq 2 ] && has_err "unknown option '"'"'--frobnicate'"'"'"'
run_drover run
ok "run-09 run without a script exits 2" '[ "$RC" -eq 2 ] && has_err "usage: drover run"'
run_drover run --bogus x.lua
ok "run-09 run with an unknown option exits 2" '[ "$RC" -eq 2 ] && has_err "unknown option '"'"'--bogus'"'"'"'
run_drover repl extra
ok "run-09 repl takes no arguments" '[ "$RC" -eq 2 ] && has_err "usage: drover repl"'

# ---------------------------------------------------------------- 10 help and version
run_drover --help
ok "run-10 --help exits 0 and lists the commands" \
  '[ "$RC" -eq 0 ] && echo "$OUT" | grep -q "^  run " && echo "$OUT" | grep -q "^  repl "'
run_drover run --help
ok "run-10 run --help shows run's usage" '[ "$RC" -eq 0 ] && echo "$OUT" | grep -q "^usage: drover run FILE.lua"'
run_drover repl --help
ok "run-10 repl --help shows repl's usage" '[ "$RC" -eq 0 ] && echo "$OUT" | grep -q "^usage: drover repl"'
run_drover help run
ok "run-10 help run is run --help" '[ "$RC" -eq 0 ] && echo "$OUT" | grep -q "^usage: drover run FILE.lua"'
run_drover --version
ok "run-10 --version names the same version as drover.version" \
  '[ "$RC" -eq 0 ] && [ "$(echo "$OUT" | head -n 1)" = "drover $LIBVERSION" ]'
ok "run-10 --version names Lua and OpenBLAS" 'echo "$OUT" | grep -q "Lua 5\.4" && echo "$OUT" | grep -q "OpenBLAS"'

# ---------------------------------------------------------------- 11 SIGINT in Lua
# The script signals readiness through a file, then spins in Lua; SIGINT
# must end it with status 130 and "interrupted" within a bounded time.
limit=10
[ -n "${SANITIZED:-}" ] && limit=30
cat >"$TMP/spin.lua" <<EOF
local f = assert(io.open("$TMP/spin.ready", "w")); f:write("ready\n"); f:close()
local n = 0
while true do n = n + 1 end
EOF
"$DROVER" run "$TMP/spin.lua" >"$TMP/spin.out" 2>"$TMP/err" &
pid=$!
if wait_file_line "$TMP/spin.ready" ready "$limit"; then
  kill -INT "$pid"
  if wait_exit "$pid" "$limit"; then
    wait "$pid"
    RC=$?
    ok "run-11 SIGINT stops a Lua loop with status 130" '[ "$RC" -eq 130 ]'
    ok "run-11 it says interrupted, with a traceback" 'has_err "drover: interrupted" && has_err "spin.lua:3: in main chunk"'
    ok "run-11 and nothing of drover's insides (no [C] frame)" '! has_err "[C]"'
  else
    kill -KILL "$pid" 2>/dev/null
    fail "run-11 SIGINT stops a Lua loop" "still running ${limit}s after SIGINT"
  fi
else
  kill -KILL "$pid" 2>/dev/null
  fail "run-11 SIGINT stops a Lua loop" "the script never started"
fi

# ---------------------------------------------------------------- 15 SIGINT in a coroutine
# A coroutine has its own hook: one SIGINT must still stop a loop inside
# one (the poll hook it copied from the main thread when created).
cat >"$TMP/spinco.lua" <<EOF
local f = assert(io.open("$TMP/spinco.ready", "w")); f:write("ready\n"); f:close()
coroutine.wrap(function() local n = 0 while true do n = n + 1 end end)()
EOF
"$DROVER" run "$TMP/spinco.lua" >"$TMP/spinco.out" 2>"$TMP/err" &
pid=$!
if wait_file_line "$TMP/spinco.ready" ready "$limit"; then
  kill -INT "$pid"
  if wait_exit "$pid" "$limit"; then
    wait "$pid"
    RC=$?
    ok "run-15 one SIGINT stops a loop in a coroutine with status 130" '[ "$RC" -eq 130 ] && has_err "interrupted"'
  else
    kill -KILL "$pid" 2>/dev/null
    fail "run-15 one SIGINT stops a loop in a coroutine" "still running ${limit}s after SIGINT"
  fi
else
  kill -KILL "$pid" 2>/dev/null
  fail "run-15 one SIGINT stops a loop in a coroutine" "the script never started"
fi

# ---------------------------------------------------------------- 12 SIGINT in C
# Training runs in C (no Lua hook fires there): it must stop through
# err_interrupt_request() and end the script the same way.
cat >"$TMP/train.lua" <<EOF
local nn, optim, data = drover.nn, drover.optim, drover.data
local ds = data.synthetic { n = 4096, features = 64, classes = 10, seed = 1 }
local exp = drover.experiment {
  name = "interrupt-me",
  model = nn.Sequential { nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10) },
  loss = nn.CrossEntropy(),
  optimizer = optim.SGD { lr = 0.01 },
  train = { data = ds, batch = 32, epochs = 100000 },
}
local f = assert(io.open("$TMP/train.ready", "w")); f:write("ready\n"); f:close()
exp:fit()
print("fit returned")
EOF
"$DROVER" run "$TMP/train.lua" >"$TMP/train.out" 2>"$TMP/err" &
pid=$!
if wait_file_line "$TMP/train.ready" ready "$limit"; then
  sleep 0.3 # let fit() get into its C loop
  kill -INT "$pid"
  if wait_exit "$pid" "$limit"; then
    wait "$pid"
    RC=$?
    ok "run-12 SIGINT stops training in C with status 130" '[ "$RC" -eq 130 ] && has_err "interrupted"'
    ok "run-12 nothing of drover's insides" '! has_err "[drover]" && ! has_err "[C]"'
  else
    kill -KILL "$pid" 2>/dev/null
    fail "run-12 SIGINT stops training in C" "still running ${limit}s after SIGINT"
  fi
else
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  fail "run-12 SIGINT stops training in C" "the script never started training"
fi

# ---------------------------------------------------------------- 13 second SIGINT
# A script that swallows the first interruption (pcall) is killed by the
# second SIGINT, as lua.c does, so nothing can make Ctrl-C useless.
cat >"$TMP/stubborn.lua" <<EOF2
local f = assert(io.open("$TMP/stubborn.ready", "w")); f:write("ready\n"); f:close()
local ok, err = pcall(function() while true do end end)
f = assert(io.open("$TMP/stubborn.ready", "a")); f:write("caught ", tostring(err), "\n"); f:close()
while true do end
EOF2
"$DROVER" run "$TMP/stubborn.lua" >/dev/null 2>"$TMP/err" &
pid=$!
if wait_file_line "$TMP/stubborn.ready" ready "$limit"; then
  kill -INT "$pid"
  if wait_file_line "$TMP/stubborn.ready" "caught interrupted" "$limit"; then
    kill -INT "$pid"
    if wait_exit "$pid" "$limit"; then
      wait "$pid"
      RC=$?
      ok "run-13 a second SIGINT kills a script that caught the first" '[ "$RC" -eq 130 ]'
    else
      kill -KILL "$pid" 2>/dev/null
      fail "run-13 a second SIGINT kills" "still running ${limit}s after the second SIGINT"
    fi
  else
    kill -KILL "$pid" 2>/dev/null
    fail "run-13 the first SIGINT raises a catchable error" "no 'caught interrupted' line"
  fi
else
  kill -KILL "$pid" 2>/dev/null
  fail "run-13 a second SIGINT kills" "the script never started"
fi

# ---------------------------------------------------------------- 16, 17 SIGINT in a fit
# A fit says where Ctrl-C stopped it, in process and on a cluster: one
# line "drover: interrupted at step N", then the script's own frames;
# nothing of drover's Lua or C. The progress function writes the ready
# file at the fit's first step (Lua runs at each step: the SIGINT lands
# there or in C, the report is the same).
# fit_interrupt CASE WHERE: WHERE "local" (exp:fit()) or "cluster".
fit_interrupt() {
  cat >"$TMP/$1.lua" <<EOF
local nn, optim, data = drover.nn, drover.optim, drover.data
local ds = data.synthetic { n = 4096, features = 64, classes = 10, seed = 1 }
local ready = false
local exp = drover.experiment {
  name = "$1", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 },
  model = nn.Sequential { nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10) },
  train = { data = ds, batch = 32, epochs = 100000 }, runs = "$TMP/runs",
  progress = function(p)
    if not ready and p.step > 0 then
      ready = true
      local f = assert(io.open("$TMP/$1.ready", "w")); f:write("ready\n"); f:close()
    end
  end,
}
local c = "$2" == "cluster" and drover.cluster { ps = 1, worker = 1, runs = "$TMP/runs", name = "$1" }
if c then c:fit(exp) else exp:fit() end
print("fit returned")
EOF
  "$DROVER" run "$TMP/$1.lua" >"$TMP/$1.out" 2>"$TMP/err" &
  pid=$!
  if ! wait_file_line "$TMP/$1.ready" ready $((limit * 3)); then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    fail "$1 SIGINT stops a fit" "the fit never started"
    return
  fi
  kill -INT "$pid"
  if ! wait_exit "$pid" "$limit"; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    fail "$1 SIGINT stops a fit" "still running ${limit}s after SIGINT"
    return
  fi
  wait "$pid"
  RC=$?
  ok "$1 SIGINT stops the fit with status 130" '[ "$RC" -eq 130 ]'
  ok "$1 it says where: interrupted at step N" \
    'head -n 1 "$TMP/err" | grep -Eqx "drover: interrupted at step [1-9][0-9]*"'
  frame="$1.lua:16: in main chunk"
  ok "$1 then the script's line" 'has_err "$frame"'
  ok "$1 and nothing of drover's insides" '! has_err "[drover]" && ! has_err "[C]"'
}
fit_interrupt run-16 local
fit_interrupt run-17 cluster

# examples/schedules.lua: schedules, clipping, early stopping and tensor math
# in one script that asserts its own result.
EX=$PWD/examples/schedules.lua
OUT=$(cd "$TMP" && "$DROVER" run "$EX" 2>"$TMP/err")
RC=$?
ok "run-14 examples/schedules.lua succeeds" '[ "$RC" -eq 0 ]'
ok "run-14 examples/schedules.lua stops early and prints per-class recall" \
  'echo "$OUT" | grep -q "plateau: stopped early" && echo "$OUT" | grep -q "^0:"'
