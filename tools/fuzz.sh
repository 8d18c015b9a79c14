#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz/ (clang, ASan + UBSan, build dir
# build-fuzz) and runs each for a bounded time from a scratch copy of its
# committed seed corpus (the committed corpus is never modified). Fails on any
# crash, leak, sanitizer report or timeout; the input that caused it is left in
# build-fuzz/artifacts/<target>/ — fix the bug, then commit that input under
# test/fuzz/regressions/<target>/ so the normal test pass replays it.
#   MAMBARL_FUZZ_SECONDS  seconds per target (default 60)
#   MAMBARL_FUZZ_TARGETS  which targets (default: experiment safetensors plugin_registry)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${MAMBARL_FUZZ_SECONDS:-60}
targets=${MAMBARL_FUZZ_TARGETS:-"experiment safetensors plugin_registry"}
fuzz_dir=${MAMBARL_FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAMBARL_CUDA=OFF -DMAMBARL_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 ${MAMBARL_FUZZ_CMAKE_ARGS:-}
cmake --build "$fuzz_dir" -j"$(nproc)" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done)
for t in $targets; do
  work="$fuzz_dir/corpus/$t"
  artifacts="$fuzz_dir/artifacts/$t"
  rm -rf "$work" && mkdir -p "$work" "$artifacts"
  echo "fuzz: $t for ${seconds} s"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: runaway allocation is a finding too.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$fuzz_dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$work" "test/fuzz/corpus/$t" 2>&1 | tail -n 25
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $t found a problem (exit $status); reproducer(s) in $artifacts/" >&2
    exit 1
  fi
done
