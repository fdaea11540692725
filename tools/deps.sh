#!/bin/sh
# Installs the Debian packages drover needs, only those missing; no prompt.
# `sh tools/deps.sh` for building and testing, `sh tools/deps.sh bench` adds
# what the benchmarks compare against, `sh tools/deps.sh fuzz` the fuzzer.
set -e
pkgs="build-essential pkg-config liblua5.4-dev libuv1-dev libncurses-dev libedit-dev libopenblas-dev libsodium-dev libjansson-dev tmux"
[ "$1" = bench ] && pkgs="$pkgs python3-torch"
[ "$1" = fuzz ] && pkgs="$pkgs clang libclang-rt-14-dev"

missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends $missing
