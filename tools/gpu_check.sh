#!/usr/bin/env bash
# Everything the GPU side must pass, in one go, on a machine with a CUDA
# device (CI has none, so CI never runs this):
#   1. the `gpu`-labelled CTest suites with MAMBARL_REQUIRE_GPU=1 (a missing
#      device fails instead of skipping);
#   2. compute-sanitizer memcheck, racecheck and synccheck over the non-slow
#      GPU test binaries (any report fails);
#   3. the GPU benches (rollout, train at the default shapes and at the 16k-env
#      chunk 32x16384x64x2, e2e sync and async with their plots), one JSON file each;
#   4. profile (not in the default stages): ncu's time per kernel function of the
#      learner's update at PROFILE_SHAPE (default 32x16384x64x2), float32, one
#      table per policy of PROFILE_POLICIES (default: the two Mamba blocks).
# Results land in OUT_DIR (logs, JSON, a summary). The exit status is the
# number of failed stages (0: all passed).
#
# Usage: tools/gpu_check.sh [BUILD_DIR] [OUT_DIR] [STAGES]
#   STAGES: any of "tests sanitize bench profile" (default: the first three)
#   SANITIZE_FILTER_<test>: a Boost --run_test filter for that test binary
#                  under racecheck and synccheck (memcheck always runs it all),
#                  for suites whose long cases would take racecheck many minutes
#                  (default for test_gpu_mamba1_mixer: its small parity cases;
#                  its bench-shape case did not finish racecheck in 170 s).
#   SANITIZE_TIMEOUT: seconds allowed per sanitizer run (default 600); a run
#                  cut off counts as failed.
#   BENCH_ARGS: extra arguments for the benches (e.g. '--reps 2000'), all
#                  but train_16k, whose 12 rows of ~40 ms updates take
#                  BENCH_16K_REPS replays each (default 20).
#   PROFILE_POLICIES: the policy types profiled (default "mamba1 mamba3"; e.g.
#                  "mamba3 gru" at the POPGym learner's 1024x64x64x1).
#   PROFILE_SHAPE, PROFILE_LAUNCHES: the profiled chunk (TxBxDxL) and how many
#                  kernel launches ncu times (default 1500: the first updates,
#                  eager warm-up then graph replays, which run the same kernels).
set -uo pipefail
build=${1:-build}
out=${2:-gpu-check}
stages=${3:-tests sanitize bench}
mkdir -p "$out"
export MAMBARL_REQUIRE_GPU=1
# What CTest sets for every suite (test/CMakeLists.txt), for the binaries the
# sanitizers run directly.
MAMBARL_SOURCE_DIR=${MAMBARL_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export MAMBARL_SOURCE_DIR
: "${SANITIZE_FILTER_test_gpu_mamba1_mixer=gpu_mamba1_mixer/matches_cpu_mixer_and_the_stored_path}"
failed=0
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv \
  >"$out/gpu.txt" 2>&1 || true
note "device: $(tail -n +2 "$out/gpu.txt" | head -1)"

# The GPU suites as CTest knows them: names, and which of them the
# sanitizers skip: the slow ones, and those labelled child (their CUDA work
# runs in `mambarl` child processes, whole training runs that the sanitizers
# would slow past the suites' deadlines; the in-process suites cover the same
# rollout and learner code).
gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
unsanitized_tests=$(ctest --test-dir "$build" -N -L 'slow|child' | sed -n 's/^ *Test *#[0-9]*: //p')

if [[ " $stages " == *" tests "* ]]; then
  start=$(date +%s)
  if ctest --test-dir "$build" -L gpu --output-on-failure >"$out/ctest_gpu.log" 2>&1; then
    note "tests: gpu suites passed ($(( $(date +%s) - start )) s): $(grep -E 'tests passed' "$out/ctest_gpu.log")"
  else
    failed=$((failed + 1))
    note "tests: FAILED: $(grep -E 'tests passed|Failed|\*\*\*' "$out/ctest_gpu.log" | tr '\n' ' ')"
  fi
fi

if [[ " $stages " == *" sanitize "* ]]; then
  for t in $gpu_tests; do
    if grep -qx "$t" <<<"$unsanitized_tests"; then continue; fi
    for tool in memcheck racecheck synccheck; do
      log="$out/sanitize_${t}_${tool}.log"
      filter_var="SANITIZE_FILTER_${t}"
      args=(--log_level=nothing --report_level=short)
      if [ "$tool" != memcheck ] && [ -n "${!filter_var:-}" ]; then args+=("--run_test=${!filter_var}"); fi
      start=$(date +%s)
      if timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/test/$t" "${args[@]}" >"$log" 2>&1; then
        note "sanitize: $t $tool clean ($(( $(date +%s) - start )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK|summary' "$log" | tail -1)"
      else
        failed=$((failed + 1))
        note "sanitize: $t $tool FAILED: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|failed|error' "$log" | head -3 | tr '\n' ' ')"
      fi
    done
  done
fi

if [[ " $stages " == *" bench "* ]]; then
  # e2e_async: GPU envs in async mode (runtime.sync: false), beside e2e's sync rows.
  for what in rollout train train_16k e2e e2e_async; do
    case $what in
      # The chunk of 16k GPU envs; its own --reps, which BENCH_ARGS must not repeat.
      train_16k) args=(train --device cuda --shape 32x16384x64x2 --reps "${BENCH_16K_REPS:-20}") ;;
      e2e) args=(e2e --device cuda --plot "$out/e2e.svg") ;;
      e2e_async) args=(e2e --device cuda --env-backend cuda --async --plot "$out/e2e_async.svg") ;;
      *) args=("$what" --device cuda) ;;
    esac
    # shellcheck disable=SC2206
    [ "$what" != train_16k ] && args+=(${BENCH_ARGS:-})
    if "$build/bin/mambarl" bench "${args[@]}" >"$out/bench_$what.json" \
         2>"$out/bench_$what.err"; then
      note "bench $what: $out/bench_$what.json"
    else
      failed=$((failed + 1))
      note "bench $what: FAILED: $(tail -2 "$out/bench_$what.err" | tr '\n' ' ')"
    fi
  done
fi

if [[ " $stages " == *" profile "* ]]; then
  for policy in ${PROFILE_POLICIES:-mamba1 mamba3}; do
    log="$out/ncu_train_$policy.csv"
    # Clocks and caches left as they are (METHOD.md): the times are the kernels' own in a warm run.
    if ncu --clock-control none --cache-control none --graph-profiling node --csv --print-kernel-base function \
         --metrics gpu__time_duration.sum --launch-count "${PROFILE_LAUNCHES:-1500}" --log-file "$log" \
         "$build/bin/mambarl" bench train --device cuda --shape "${PROFILE_SHAPE:-32x16384x64x2}" \
         --policy "$policy" --dtype float32 --reps 20 >"$out/ncu_train_$policy.json" 2>"$out/ncu_train_$policy.err"; then
      # Sum the durations by kernel function: launches, total ms, share of the profiled time.
      python3 - "$log" >"$out/ncu_train_$policy.txt" <<'PY'
import csv, sys, collections
with open(sys.argv[1]) as f:
    rows = [r for r in csv.DictReader(line for line in f if line.startswith('"'))
            if r.get("Metric Name") == "gpu__time_duration.sum"]
ns = collections.Counter(); n = collections.Counter()
for r in rows:
    scale = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}[r["Metric Unit"]]
    ns[r["Kernel Name"]] += float(r["Metric Value"].replace(",", "")) * scale; n[r["Kernel Name"]] += 1
total = sum(ns.values())
print(f"{len(rows)} launches, {total / 1e6:.2f} ms in all")
for name, t in ns.most_common():
    print(f"{100 * t / total:6.2f} %  {t / 1e6:9.3f} ms  {n[name]:6d} x  {name}")
PY
      note "profile: $policy: $out/ncu_train_$policy.txt ($(head -1 "$out/ncu_train_$policy.txt"))"
    else
      failed=$((failed + 1))
      note "profile: $policy FAILED: $(tail -2 "$out/ncu_train_$policy.err" "$log" 2>/dev/null | tr '\n' ' ')"
    fi
  done
fi

note "gpu_check: $failed stage(s) failed"
exit "$failed"
