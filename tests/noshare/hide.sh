#!/usr/bin/env bash
# hide.sh - the tests' "no shared filesystem" mode: a daemon of a test
# engine (the Spark worker, the MiniYARNCluster's JVM) runs in a mount
# namespace of its own where each of some directories (the coordinator's:
# the test's run directories and data) is covered by an empty tmpfs. So
# whatever runs under that daemon (executors, containers, drover's nodes)
# fails on any path it would share with the coordinator, as on a real
# cluster whose machines share no POSIX file system. Used by
# tests/spark/start.sh (DROVER_SPARK_HIDE) and tests/yarn/start.sh
# (DROVER_YARN_HIDE); tests/cli/lib.sh's noshare_dir and noshare_check set
# it up and prove it is on.
#
# Usage (DIRS is one word: absolute directories separated by spaces):
#   hide.sh check "DIRS" KEEP...
#       Each of DIRS must be an existing absolute directory that is not
#       and does not hold any KEEP path (what the daemon itself needs: the
#       engine's state directory, the build's jars and venvs, /tmp); then
#       a throwaway namespace proves that unshare and mount work here.
#       Exit 0; 1 when this machine cannot (no unshare, not permitted: the
#       caller SKIPs); 2 when DIRS are wrong (the caller fails); the reason
#       on stdout.
#   hide.sh exec "DIRS" CMD [ARG...]
#       exec unshare -m, which execs this script's other half: it mounts a
#       tmpfs over each of DIRS and execs CMD. Every step is an exec, so the
#       pid a caller records ($!) is CMD's. unshare -m makes every mount of
#       the new namespace private: nothing mounted there shows outside,
#       nothing the coordinator writes under DIRS shows inside.
# Needs root (or CAP_SYS_ADMIN) and util-linux's unshare.
set -euo pipefail
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

# canon PATH: PATH with its symbolic links resolved (it need not exist).
canon() { realpath -m -- "$1"; }

check() {
  local dirs=$1 d k cd ck
  shift
  [ -n "${dirs// /}" ] || { echo "no directory to hide"; return 2; }
  for d in $dirs; do
    case $d in /*) ;; *) echo "'$d' is not an absolute path"; return 2 ;; esac
    [ -d "$d" ] || { echo "'$d' is not a directory (create it before the engine starts)"; return 2; }
    cd=$(canon "$d")
    [ "$cd" != / ] || { echo "'$d' is the root directory"; return 2; }
    for k in "$@"; do
      [ -n "$k" ] || continue
      ck=$(canon "$k")
      case $ck/ in
        "$cd"/*) echo "'$d' would hide '$k', which the engine itself needs"; return 2 ;;
      esac
    done
  done
  command -v unshare >/dev/null || { echo "no unshare (util-linux) to make a mount namespace"; return 1; }
  local err
  if ! err=$(unshare -m -- bash "$SELF" inner "$dirs" true 2>&1); then
    echo "cannot hide directories here (unshare -m and mount -t tmpfs, as root): $(echo $err)"
    return 1
  fi
}

# inner DIRS CMD...: in the new namespace: the tmpfs, checked empty, then CMD.
inner() {
  local dirs=$1 d
  shift
  for d in $dirs; do
    mount -t tmpfs -o size=1m,mode=0755 drover-hidden "$d"
    [ -z "$(ls -A "$d")" ] || { echo "hide.sh: $d is not empty under its tmpfs" >&2; exit 1; }
  done
  exec "$@"
}

case ${1:-} in
  check) shift; [ $# -ge 1 ] || { echo "usage: hide.sh check DIRS KEEP..."; exit 2; }; check "$@" ;;
  exec) shift; [ $# -ge 2 ] || { echo "usage: hide.sh exec DIRS CMD..." >&2; exit 2; }
        exec unshare -m -- bash "$SELF" inner "$@" ;;
  inner) shift; inner "$@" ;;
  *) echo "usage: hide.sh check DIRS KEEP... | hide.sh exec DIRS CMD..." >&2; exit 2 ;;
esac
