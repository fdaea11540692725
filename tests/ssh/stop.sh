#!/bin/sh
# stop.sh - undoes what tests/ssh/start.sh DIR made, and only that: the
# sshds whose pids it recorded (each only while that pid is still an sshd),
# bounded at 5 s each, then the veth pair and the network namespace it
# named in DIR/veth and DIR/netns.
#   sh tests/ssh/stop.sh DIR
dir=${1:?usage: stop.sh DIR}
stop_pid() { # FILE
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  rm -f "$1"
  case "$pid" in '' | *[!0-9]*) return 0 ;; esac
  # A pid reused by another program since is left alone.
  grep -q sshd "/proc/$pid/cmdline" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null
  i=0
  while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  return 0
}
stop_pid "$dir/sshd.pid"
stop_pid "$dir/sshd_c.pid"
# Names as start.sh makes them, nothing else: dsv<pid>, drover-ssh-<pid>.
if [ -f "$dir/veth" ]; then
  v=$(cat "$dir/veth")
  case "$v" in dsv[0-9]*) ip link show "$v" >/dev/null 2>&1 && ip link del "$v" ;; esac
  rm -f "$dir/veth"
fi
if [ -f "$dir/netns" ]; then
  n=$(cat "$dir/netns")
  case "$n" in drover-ssh-[0-9]*) ip netns del "$n" 2>/dev/null ;; esac
  rm -f "$dir/netns"
fi
exit 0
