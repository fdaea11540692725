#!/bin/sh
# start.sh - starts the test suite's own sshd on loopback: generated keys, a
# private config, a free high port; writes a client config for it. As root,
# also a second "host" in a network namespace of its own, with its own
# address and sshd, that does not see the directory HIDE.
#
#   sh tests/ssh/start.sh DIR [HIDE]   (DIR: a new or empty private directory)
#
# Exit status: 0 started; 77 skipped (the reason is printed as "SKIP ...":
# no sshd and not root to install it, or no ssh client); 1 failed. With
# DROVER_SSH_REQUIRED=1 (CI) a skip, the namespace host's included, is a
# failure: exit 1.
# On success DIR holds:
#   ssh_config   the client's config: hosts "a" (127.0.0.1) and "b"
#                (127.0.0.2), both this sshd; key, port, BatchMode, a private
#                known_hosts. Use: ssh -F DIR/ssh_config a true
#   sshd.pid     the pid of the sshd this script started (stop.sh kills it)
#   port         the port it listens on; sshd.log its log (-E)
#   hosts        "a b", or "a b c r" when the namespace host is up:
#                c    10.77.X.2 in network namespace `netns`, its own sshd
#                     (sshd_c.pid, sshd_c.log) in a private mount namespace
#                     where HIDE (when given) is an empty tmpfs: c lacks
#                     whatever binary lives there
#                r    10.77.X.1, the root side of the veth pair (this
#                     machine as c sees it; the first sshd listens there too)
#   netns, veth  the names made (stop.sh deletes exactly those)
#   no_c         why there is no host c (also printed as "SKIP host c: ...")
# Only these sshds are started; nothing system-wide is enabled or started
# (the package install is kept from starting the system's sshd).
set -u
dir=${1:?usage: start.sh DIR [HIDE]}
hide=${2:-}
required() { [ "${DROVER_SSH_REQUIRED:-0}" = 1 ]; }
skip() {
  echo "SKIP $*"
  if required; then echo "start.sh: DROVER_SSH_REQUIRED=1: failing" >&2; exit 1; fi
  exit 77
}
die() { echo "start.sh: $*" >&2; exit 1; }

SSHD=""
for p in /usr/sbin/sshd /usr/bin/sshd; do [ -x "$p" ] && SSHD=$p && break; done
if [ -z "$SSHD" ] || ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
  [ "$(id -u)" -eq 0 ] || skip "openssh-server/openssh-client are not installed and we are not root"
  command -v apt-get >/dev/null || skip "openssh-server is not installed and there is no apt-get"
  # Debian's postinst would start the system sshd on port 22: a policy-rc.d
  # that forbids it, ours only if there is none (and removed right after).
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d &&
      policy=/usr/sbin/policy-rc.d
  fi
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      openssh-server openssh-client; } >"${TMPDIR:-/tmp}/drover-ssh-apt.log" 2>&1
  rc=$?
  [ -n "$policy" ] && rm -f "$policy"
  [ $rc -eq 0 ] || skip "apt-get install openssh-server failed (see ${TMPDIR:-/tmp}/drover-ssh-apt.log)"
  for p in /usr/sbin/sshd /usr/bin/sshd; do [ -x "$p" ] && SSHD=$p && break; done
  [ -n "$SSHD" ] || skip "no sshd after installing openssh-server"
fi

mkdir -p "$dir" && chmod 700 "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd)
ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" </dev/null >/dev/null || die "host key"
ssh-keygen -q -t ed25519 -N '' -f "$dir/id" </dev/null >/dev/null || die "user key"
cp "$dir/id.pub" "$dir/authorized_keys" && chmod 600 "$dir/authorized_keys"
# Root's sshd checks its privilege separation directory (the package makes
# it only when the service starts).
[ "$(id -u)" -eq 0 ] && mkdir -p /run/sshd && chmod 755 /run/sshd

# ---- host c: a network namespace with a veth pair to this one ----
no_c() {
  echo "$*" > "$dir/no_c"
  echo "SKIP host c: $*"
  if required; then echo "start.sh: DROVER_SSH_REQUIRED=1: failing" >&2; exit 1; fi
}
net=""
setup_netns() {
  [ "$(id -u)" -eq 0 ] || { no_c "network namespaces need root"; return; }
  command -v ip >/dev/null || { no_c "no ip command (iproute2)"; return; }
  command -v unshare >/dev/null || { no_c "no unshare command"; return; }
  # A 10.77.X.0/24 no interface here uses yet (another run's, say).
  x=$(( $$ % 200 + 20 )); n=0
  while ip -4 -o addr show 2>/dev/null | grep -q " 10\.77\.$x\."; do
    x=$(( x % 250 + 1 )); n=$((n + 1))
    [ $n -lt 250 ] || { no_c "no free 10.77.X.0/24"; return; }
  done
  ns=drover-ssh-$$; veth=dsv$$; peer=dsp$$
  ip netns add "$ns" 2>"$dir/netns.err" || { no_c "ip netns add failed: $(cat "$dir/netns.err")"; return; }
  echo "$ns" > "$dir/netns"
  ip link add "$veth" type veth peer name "$peer" 2>"$dir/netns.err" ||
    { no_c "ip link add veth failed: $(cat "$dir/netns.err")"; return; }
  echo "$veth" > "$dir/veth"
  { ip link set "$peer" netns "$ns" && ip addr add "10.77.$x.1/24" dev "$veth" &&
    ip link set "$veth" up && ip netns exec "$ns" ip addr add "10.77.$x.2/24" dev "$peer" &&
    ip netns exec "$ns" ip link set "$peer" up && ip netns exec "$ns" ip link set lo up; } \
    2>"$dir/netns.err" || { no_c "configuring the veth pair failed: $(cat "$dir/netns.err")"; return; }
  net=10.77.$x
}
: > "$dir/no_c"
setup_netns
[ -s "$dir/no_c" ] || rm -f "$dir/no_c"

# wait_listen PID LOG ADDR...: true once sshd PID logs that it listens on
# every ADDR (bounded at 5 s), false when it died, could not bind one, or
# did not.
wait_listen() {
  wl_pid=$1 wl_log=$2
  shift 2
  i=0
  while [ $i -lt 50 ]; do
    kill -0 "$wl_pid" 2>/dev/null || return 1
    # sshd goes on when one of its addresses is taken: that is a failure here
    grep -q "^Bind to port .* failed" "$wl_log" && return 1
    n=0
    for a in "$@"; do grep -q "Server listening on $a " "$wl_log" && n=$((n + 1)); done
    [ $n -eq $# ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

user=$(id -un)
try=0
while :; do
  try=$((try + 1))
  [ $try -le 8 ] || die "sshd did not start on any of 8 ports; last log: $(tail -n 3 "$dir/sshd.log" 2>/dev/null)"
  # A port from the pid and the try, below the ephemeral range (32768 up,
  # where a connection's own port once took it on 127.0.0.1 alone); a taken
  # one is seen in sshd's log, and the next try picks another.
  port=$(( 20000 + ($$ * 7 + try * 7919 + $(date +%N | sed 's/^0*//;s/^$/0/') % 10007) % 12000 ))
  cat > "$dir/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
ListenAddress 127.0.0.2
${net:+ListenAddress $net.1}
HostKey $dir/host_key
PidFile $dir/sshd.pidfile
AuthorizedKeysFile $dir/authorized_keys
AllowUsers $user
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
MaxStartups 64:30:128
MaxSessions 64
LogLevel VERBOSE
CFG
  : > "$dir/sshd.log"
  # Its stdout and stderr too: a caller's $(...) waits for every holder.
  "$SSHD" -D -f "$dir/sshd_config" -E "$dir/sshd.log" </dev/null >/dev/null 2>&1 &
  pid=$!
  echo $pid > "$dir/sshd.pid"
  echo $port > "$dir/port"
  # Listening, or gone (port taken, config error): bounded at 5 s.
  wait_listen $pid "$dir/sshd.log" 127.0.0.1 127.0.0.2 ${net:+$net.1} && break
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  rm -f "$dir/sshd.pid"
done

# Host c's sshd: the same keys and port, in the namespace, with HIDE
# covered by an empty tmpfs in a mount namespace of its own. `ip netns
# exec`, unshare and sh all exec: the pid recorded is sshd's.
if [ -n "$net" ]; then
  sed "s/^ListenAddress .*//; s|^PidFile .*|PidFile $dir/sshd_c.pidfile|" "$dir/sshd_config" \
    > "$dir/sshd_config_c" && echo "ListenAddress $net.2" >> "$dir/sshd_config_c"
  : > "$dir/sshd_c.log"
  ip netns exec "$(cat "$dir/netns")" unshare -m --propagation private sh -c \
    '[ -z "$1" ] || mount -t tmpfs -o size=1m,mode=755 drover-hide "$1" || exit 1; exec "$2" -D -f "$3" -E "$4"' \
    sh "$hide" "$SSHD" "$dir/sshd_config_c" "$dir/sshd_c.log" </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/sshd_c.pid"
  wait_listen "$(cat "$dir/sshd_c.pid")" "$dir/sshd_c.log" "$net.2" ||
    { no_c "sshd in the namespace did not start: $(tail -n 3 "$dir/sshd_c.log")"; net=""; }
fi

cat > "$dir/ssh_config" <<CFG
Host a
  HostName 127.0.0.1
Host b
  HostName 127.0.0.2
${net:+Host c
  HostName $net.2
Host r
  HostName $net.1}
Host *
  Port $port
  User $user
  IdentityFile $dir/id
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking accept-new
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  ConnectTimeout 10
  LogLevel ERROR
CFG
hosts="a b${net:+ c r}"
for h in $hosts; do
  timeout 20 ssh -F "$dir/ssh_config" "$h" true </dev/null ||
    die "ssh -F $dir/ssh_config $h true failed; sshd logs: $(tail -n 5 "$dir/sshd.log" "$dir/sshd_c.log" 2>/dev/null)"
done
echo "$hosts" > "$dir/hosts"
echo "sshd pid $(cat "$dir/sshd.pid") on 127.0.0.1:$port and 127.0.0.2:$port${net:+ and $net.1:$port; host c: sshd pid $(cat "$dir/sshd_c.pid") on $net.2:$port in netns $(cat "$dir/netns")} (config $dir/ssh_config)"
