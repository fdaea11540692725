# test_install.sh - `make install` into a temporary DESTDIR: the binary,
# the man page (made from the --help texts: every command is in it), the
# bash and zsh completions (subcommands, options, run names, node names)
# and the yarn launcher's ApplicationMaster jar when it was built (else
# install says it skipped it).
. tests/cli/lib.sh
D=$TMP/dest
make -s --no-print-directory install DESTDIR="$D" PREFIX=/usr >"$TMP/make.out" 2>&1; rc=$?
check "install-01 make install DESTDIR=... PREFIX=/usr" [ $rc -eq 0 ]
[ "$rc" -eq 0 ] || tail -5 "$TMP/make.out"
check "install-01 the binary runs" sh -c "'$D/usr/bin/drover' --version >/dev/null"
MAN=$D/usr/share/man/man1/drover.1
check "install-02 the man page" [ -s "$MAN" ]
MANWIDTH=100 man -l "$MAN" >"$TMP/man.txt" 2>"$TMP/man.err"
check "install-02 it renders without warnings" sh -c "[ -s '$TMP/man.txt' ] && [ ! -s '$TMP/man.err' ]"
missing=
for c in $("$DROVER" --help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }'); do
  grep -q "^   drover $c\$" "$TMP/man.txt" || missing="$missing $c"
done
check "install-02 every command has its section${missing:+ (missing:$missing)}" [ -z "$missing" ]
check "install-02 with its --help text" grep -q "usage: drover logs RUN \[NODE\] \[-f\]" "$TMP/man.txt"
check "install-02 and the exit status" grep -q "^EXIT STATUS" "$TMP/man.txt"

BASH_C=$D/usr/share/bash-completion/completions/drover
check "install-03 the bash completion" [ -s "$BASH_C" ]
check "install-03 the zsh completion" grep -q "^#compdef drover" "$D/usr/share/zsh/site-functions/_drover"
if command -v zsh >/dev/null 2>&1; then
  check "install-03 the zsh completion parses" zsh -n "$D/usr/share/zsh/site-functions/_drover"
fi

# A runs directory with two runs, one with nodes.
mkdir -p "$TMP/w/runs/mnist-20261121-105306/logs" "$TMP/w/runs/digits-20261120-171002"
touch "$TMP/w/runs/mnist-20261121-105306/events.log" "$TMP/w/runs/digits-20261120-171002/events.log"
printf 'node\tpid\n' >"$TMP/w/runs/mnist-20261121-105306/nodes.tsv"
printf 'ps:0\t1\nworker:0\t2\nworker:1\t3\n' >>"$TMP/w/runs/mnist-20261121-105306/nodes.tsv"
touch "$TMP/w/runs/mnist-20261121-105306/logs/coordinator.log" "$TMP/w/runs/mnist-20261121-105306/logs/worker-1.log"
# complete WORDS...: what bash completes for the last word.
complete_words() {
  (cd "$TMP/w" && bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _drover; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$BASH_C" "$@")
}
check "install-04 complete -p: drover completes with _drover" sh -c "bash -c '. \"$BASH_C\"; complete -p drover' | grep -q -- '-F _drover drover'"
check "install-04 subcommands" [ "$(complete_words drover ex)" = "export export-metrics " ]
ncmd=$("$DROVER" --help | awk '/^commands:/ { on = 1; next } on && NF' | wc -l)
check "install-04 all the subcommands, --help and --version" [ "$(complete_words drover '' | wc -w)" -eq $((ncmd + 2)) ]
check "install-04 options" [ "$(complete_words drover logs --f)" = "--follow " ]
check "install-05 run names for attach" [ "$(complete_words drover attach '')" = "digits-20261120-171002 mnist-20261121-105306 " ]
check "install-05 and for logs, by prefix" [ "$(complete_words drover logs mn)" = "mnist-20261121-105306 " ]
check "install-05 --runs DIR is where names come from" [ "$(complete_words drover export --runs nowhere '')" = " " ]
check "install-05 ls: directories" [ "$(complete_words drover ls r)" = "runs " ]
check "install-06 node names for --stop" [ "$(complete_words drover attach mnist-20261121-105306 --stop w)" = "worker:0 worker:1 " ]
check "install-06 node names for logs RUN NODE" sh -c "[ \"\$(cd '$TMP/w' && bash -c '. \"$BASH_C\"; COMP_WORDS=(drover logs mnist-20261121-105306 c); COMP_CWORD=3; _drover; echo \${COMPREPLY[*]}')\" = coordinator ]"
# The completions know every command drover --help lists.
for c in $("$DROVER" --help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }'); do
  [ "$(complete_words drover "$c")" = "$c " ] || [ "$c" = export ] || fail "install-07 bash completes $c" "$(complete_words drover "$c")"
  grep -q "'$c:" "$D/usr/share/zsh/site-functions/_drover" || fail "install-07 zsh knows $c" "not in _drover"
done
pass "install-07 the completions know every command"

# install-08: the AM jar `make yarn-am` built (make test builds it where
# Java and Maven are), where the yarn launcher of an installed drover
# looks for it; without one, install says it skipped it and goes on
AM=build/yarn-am/drover-yarn-am.jar
if [ -f "$AM" ]; then
  check "install-08 the YARN ApplicationMaster's jar" cmp -s "$AM" "$D/usr/share/drover/drover-yarn-am.jar"
  check "install-08 readable by all" sh -c "[ \$(stat -c %a '$D/usr/share/drover/drover-yarn-am.jar') = 644 ]"
  check "install-08 make install says so" grep -q "^install: /usr/share/drover/drover-yarn-am.jar" "$TMP/make.out"
else
  echo "SKIP install-08 the installed jar: no $AM (make yarn-am: a JDK and Maven)"
fi
make -s --no-print-directory install DESTDIR="$TMP/dest2" PREFIX=/usr YARN_AM_JAR="$TMP/none.jar" \
  >"$TMP/make2.out" 2>&1
check "install-08 without the jar make install still succeeds" [ $? -eq 0 ]
check "install-08 and says it skipped the ApplicationMaster" \
  grep -q "^install: skipped the yarn launcher's ApplicationMaster: no $TMP/none.jar" "$TMP/make2.out"
check "install-08 installing no jar" [ ! -e "$TMP/dest2/usr/share/drover/drover-yarn-am.jar" ]
