#!/usr/bin/env bash
# Installs mambarl's build and test dependencies from Debian packages.
# Safe to run twice: apt-get skips what is installed; nothing is downloaded
# outside the distribution's package archive.
set -euo pipefail
# clang-14 + libclang-rt-14-dev: libFuzzer and its sanitizer runtimes (tools/fuzz.sh).
# libopenmpi-dev + openmpi-bin: data-parallel training under mpirun (optional at build time).
packages=(cmake ninja-build g++ libeigen3-dev libyaml-cpp-dev libboost-test-dev libcli11-dev nlohmann-json3-dev
          clang-14 libclang-rt-14-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present (${packages[*]})"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${missing[*]}"
