#!/bin/sh
# start.sh - starts the test suite's own sshd on loopback: generated keys, a
# private config, a free high port; writes a client config for it.
#
#   sh tests/ssh/start.sh DIR     (DIR: a new or empty private directory)
#
# Exit status: 0 started; 77 skipped (the reason is printed as "SKIP ...":
# no sshd and not root to install it, or no ssh client); 1 failed.
# On success DIR holds:
#   ssh_config   the client's config: hosts "a" (127.0.0.1) and "b"
#                (127.0.0.2), both this sshd; key, port, BatchMode, a private
#                known_hosts. Use: ssh -F DIR/ssh_config a true
#   sshd.pid     the pid of the sshd this script started (stop.sh kills it)
#   port         the port it listens on; sshd.log its log (-E)
# Only this sshd is started; nothing system-wide is enabled or started (the
# package install is kept from starting the system's sshd).
set -u
dir=${1:?usage: start.sh DIR}
skip() { echo "SKIP $*"; exit 77; }
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

user=$(id -un)
try=0
while :; do
  try=$((try + 1))
  [ $try -le 8 ] || die "sshd did not start on any of 8 ports; last log: $(tail -n 3 "$dir/sshd.log" 2>/dev/null)"
  # A high port from the pid and the try; a taken one makes sshd exit at once.
  port=$(( 20000 + ($$ * 7 + try * 7919 + $(date +%N | sed 's/^0*//;s/^$/0/') % 10007) % 30000 ))
  cat > "$dir/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
ListenAddress 127.0.0.2
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
  i=0
  while [ $i -lt 50 ]; do
    kill -0 $pid 2>/dev/null || break
    grep -q "Server listening on 127.0.0.2" "$dir/sshd.log" && break
    sleep 0.1; i=$((i + 1))
  done
  if kill -0 $pid 2>/dev/null && grep -q "Server listening on 127.0.0.2" "$dir/sshd.log"; then break; fi
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  rm -f "$dir/sshd.pid"
done

cat > "$dir/ssh_config" <<CFG
Host a
  HostName 127.0.0.1
Host b
  HostName 127.0.0.2
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
for h in a b; do
  ssh -F "$dir/ssh_config" "$h" true </dev/null ||
    die "ssh -F $dir/ssh_config $h true failed; sshd log: $(tail -n 5 "$dir/sshd.log")"
done
echo "sshd pid $(cat "$dir/sshd.pid") on 127.0.0.1:$port and 127.0.0.2:$port (config $dir/ssh_config)"
