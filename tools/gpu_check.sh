#!/usr/bin/env bash
# The GPU checks in one call, for the device machine: build the GPU targets
# in an existing build dir, run the GPU suites with MAMBARL_REQUIRE_GPU=1
# (a missing device fails), then compute-sanitizer memcheck, racecheck and
# synccheck over them, then the rollout bench JSON.
#   tools/gpu_check.sh [build_dir]      (default build)
# MAMBARL_SKIP_BENCH=1 stops after the sanitizers. Each tool's summary line
# is printed last; the full logs stay in $OUT (or the build dir) as gpu_check_*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
log_dir=${OUT:-$build_dir}
cmake --build "$build_dir" -j"$(nproc)" --target test_gpu_actor test_gpu_linear bench_rollout_gpu
export MAMBARL_REQUIRE_GPU=1
# Where the generator put an executable (build/bin or build/<folder>).
exe() { find "$build_dir" -name "$1" -type f -perm -u+x | head -n 1; }
status=0
for t in test_gpu_linear test_gpu_actor; do
  "$(exe "$t")" --log_level=message --report_level=short >"$log_dir/gpu_check_$t.log" 2>&1 || status=1
  tail -n 3 "$log_dir/gpu_check_$t.log"
done
# racecheck and synccheck look at shared memory and barriers, which the
# graph-vs-eager and reset cases exercise on every kernel; the 120-step parity
# runs under memcheck only (racecheck on it takes many minutes).
small='--run_test=gpu_actor/graph_replay_equals_eager_bitwise,reset_of_one_env_leaves_the_others_untouched'
sanitizer=${COMPUTE_SANITIZER:-compute-sanitizer}
for tool in memcheck racecheck synccheck; do
  for t in test_gpu_linear test_gpu_actor; do
    args=()
    if [ "$t" = test_gpu_actor ] && [ "$tool" != memcheck ]; then args=("$small"); fi
    log="$log_dir/gpu_check_${tool}_$t.log"
    "$sanitizer" --tool "$tool" --error-exitcode 3 "$(exe "$t")" "${args[@]}" >"$log" 2>&1 || status=1
    echo "$tool $t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY' "$log" | tail -n 1)"
  done
done
if [ "${MAMBARL_SKIP_BENCH:-0}" != "1" ]; then
  "$(exe bench_rollout_gpu)" 1000 | tee "$log_dir/gpu_check_bench.json"
fi
exit $status
