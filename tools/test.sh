#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build, run every
# CTest suite (GPU-labelled tests skip cleanly without a GPU); then build the
# CPU code again under AddressSanitizer + UndefinedBehaviorSanitizer in its own
# build dir and run the unit suites there, failing on any report.
# Third, the libFuzzer targets (test/fuzz/) run 60 s each from their seed
# corpora (tools/fuzz.sh).
# MAMBARL_SKIP_SANITIZERS=1 skips the second pass, MAMBARL_SKIP_FUZZ=1 the
# third (quick local runs).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build_dir=${MAMBARL_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MAMBARL_CMAKE_ARGS:-}
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" ${MAMBARL_CTEST_ARGS:-}

if [ "${MAMBARL_SKIP_SANITIZERS:-0}" != "1" ]; then
  asan_dir=${build_dir}-asan
  cmake -S . -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAMBARL_CUDA=OFF \
    -DMAMBARL_SANITIZE=address,undefined
  cmake --build "$asan_dir" -j"$(nproc)"
  # halt_on_error: the first report fails the test; the learning runs (label
  # slow) are left to the first pass: they test learning, not memory safety.
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir "$asan_dir" --output-on-failure -j"$(nproc)" -LE slow
fi

if [ "${MAMBARL_SKIP_FUZZ:-0}" != "1" ]; then
  tools/fuzz.sh
fi
