#!/bin/sh
# stop.sh - stops the sshd that tests/ssh/start.sh DIR started (exactly the
# pid it recorded, and only if that pid is still an sshd), bounded at 5 s.
#   sh tests/ssh/stop.sh DIR
dir=${1:?usage: stop.sh DIR}
[ -f "$dir/sshd.pid" ] || exit 0
pid=$(cat "$dir/sshd.pid")
case "$pid" in '' | *[!0-9]*) exit 0 ;; esac
# A pid reused by another program since is left alone.
grep -q sshd "/proc/$pid/cmdline" 2>/dev/null || { rm -f "$dir/sshd.pid"; exit 0; }
kill "$pid" 2>/dev/null
i=0
while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
rm -f "$dir/sshd.pid"
exit 0
