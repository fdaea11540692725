#!/bin/sh
# mkman.sh DROVER OUT - writes the man page drover.1 from the binary's own
# help texts (`drover --help`, `drover COMMAND --help`), so the page and
# --help never disagree, between a name/description above and files,
# environment and exit status below.
set -eu
drover=$1
out=$2
# roff: a backslash is written \e; a line starting with . or ' is escaped.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
version=$("$drover" --version | head -1 | cut -d' ' -f2)
commands=$("$drover" --help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }')
{
  echo ".TH DROVER 1 \"\" \"drover $version\" \"User Commands\""
  cat <<'EOF'
.SH NAME
drover \- define and train models from Lua; launch and drive clusters of parameter servers and workers
.SH SYNOPSIS
.nf
EOF
  "$drover" --help | awk '/^$/ { exit } { sub(/^usage: /, ""); sub(/^       /, ""); print }' | esc
  cat <<'EOF'
.fi
.SH DESCRIPTION
drover is one binary with a Lua 5.4 REPL, \fBdrover run\fR for scripts, and
the commands below to watch, list and read runs. Without a command it opens
the REPL. In it, \fBhelp()\fR gives an overview of the Lua API.
.SH COMMANDS
EOF
  for c in $commands; do
    echo ".SS drover $c"
    echo ".nf"
    "$drover" "$c" --help | esc
    echo ".fi"
  done
  cat <<'EOF'
.SH FILES
.TP
.I runs/NAME-STAMP/
a run's directory: events.log, metrics.jsonl, logs/ (one log per node),
checkpoints/, TensorBoard files under events/; \fBdrover ls\fR lists them.
.TP
.I ~/.drover_history
the REPL's history.
.TP
.I ~/.config/drover/themes/
the dashboard's colour themes.
.SH ENVIRONMENT
.TP
.B DROVER_HISTORY
where the REPL keeps its history (empty: none).
.TP
.B NO_COLOR
draw the dashboard without colours.
.TP
.B TMPDIR
where local runs keep their temporary files.
.SH EXIT STATUS
0 on success, 1 on a failure (said on stderr), 2 on a usage error, 130
when Ctrl-C interrupted a script.
.SH SEE ALSO
.BR lua (1),
.BR sbatch (1),
.BR ssh (1)
EOF
} >"$out"
