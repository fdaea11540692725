#!/bin/sh
# Installs the Debian packages drover needs, only those missing; no prompt.
# `sh tools/deps.sh` for building and testing, `sh tools/deps.sh fuzz` adds
# the fuzzer. python3-torch and python3-venv are in the base set: the
# safetensors tests load drover's files in PyTorch (`make venv`), and the
# benchmarks compare against it (`sh tools/deps.sh bench` needs nothing more).
# openjdk-17-jre-headless runs the Spark of the spark launcher's tests (`make spark`).
set -e
pkgs="build-essential pkg-config liblua5.4-dev libuv1-dev libncurses-dev libedit-dev libopenblas-dev libsodium-dev libssl-dev libjansson-dev libcurl4-openssl-dev zlib1g-dev tmux python3-torch python3-venv openjdk-17-jre-headless"
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
