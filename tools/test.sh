#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build, run every
# CTest suite (GPU-labelled tests skip cleanly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build_dir=${MAMBARL_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MAMBARL_CMAKE_ARGS:-}
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" ${MAMBARL_CTEST_ARGS:-}
