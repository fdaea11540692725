#!/bin/sh
# Installs the Debian packages drover needs, only those missing; no prompt.
#   sh tools/deps.sh              building drover and running `make demo`: a
#                                 C compiler, pkg-config, the libraries' -dev
#                                 packages, python3 (tools/wire_py.py writes
#                                 the Python client's message table at build
#                                 time; standard library only)
#   sh tools/deps.sh test         that, and what `make test` and `make asan`
#                                 add: tmux (the dashboard's screen tests),
#                                 procps (ps, for process groups), PyTorch
#                                 and python3-venv (`make venv`: the
#                                 safetensors tests load drover's files in
#                                 PyTorch; TensorBoard, the Python client),
#                                 python3-wheel (the client built by pip
#                                 offline, test_pyclient_pip.sh),
#                                 Java 17 (the Spark of `make spark`)
#   sh tools/deps.sh bench        the test set: the benchmarks compare against
#                                 PyTorch and run a Spark feed
#   sh tools/deps.sh fuzz         the build set and clang with libFuzzer
#   sh tools/deps.sh tensorboard  the build set and python3-venv (`make
#                                 tensorboard`: TensorBoard from PyPI)
# Maven and a JDK (the YARN tests' ApplicationMaster, `make yarn-deps`) are
# not installed here: without them the YARN tests SKIP.
set -e
build="build-essential pkg-config liblua5.4-dev libuv1-dev libncurses-dev libedit-dev libopenblas-dev libsodium-dev libssl-dev libjansson-dev libcurl4-openssl-dev zlib1g-dev python3"
tests="tmux procps python3-torch python3-venv python3-wheel openjdk-17-jre-headless"
case "${1:-build}" in
  build) pkgs=$build ;;
  test | bench) pkgs="$build $tests" ;;
  fuzz) pkgs="$build clang libclang-rt-14-dev" ;;
  tensorboard) pkgs="$build python3-venv" ;;
  *) echo "usage: sh tools/deps.sh [build|test|bench|fuzz|tensorboard]" >&2; exit 2 ;;
esac

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
