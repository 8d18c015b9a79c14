#!/usr/bin/env bash
# Trains each given experiment config once per seed and prints one markdown
# row per config: the final mean return (mean of the last return_window
# episodes) per seed, their mean and range, and the median wall time. RL
# results on one seed say little (the same config can solve a task on one seed
# and stay at chance on the next), so the README's tables come from this.
#
#   tools/seed_sweep.sh [-s "1 2 3 4 5"] [-j jobs] [-b build_dir] config.yaml... [-- key=value ...]
#
# Runs go to a scratch folder (removed at the end) with checkpoints off; the
# overrides after `--` apply to every run. -j defaults to the number of cores:
# every run is single-threaded on the CPU path.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="1 2 3 4 5"
jobs=$(nproc)
build_dir=build
while getopts "s:j:b:" opt; do
  case $opt in
    s) seeds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    b) build_dir=$OPTARG ;;
    *) echo "usage: $0 [-s \"seeds\"] [-j jobs] [-b build_dir] config.yaml... [-- key=value ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
configs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do configs+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the "--"
overrides=("$@")
[ ${#configs[@]} -gt 0 ] || { echo "$0: no config given" >&2; exit 2; }
mambarl="$build_dir/bin/mambarl"
[ -x "$mambarl" ] || { echo "$0: $mambarl not built (cmake --build $build_dir)" >&2; exit 2; }
for c in "${configs[@]}"; do [ -f "$c" ] || { echo "$0: no such config: $c" >&2; exit 2; }; done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# One line per run: config seed; xargs runs them $jobs at a time, each writing
# its own log, which ends with "final mean_return=... wall_s=...".
for c in "${configs[@]}"; do
  for s in $seeds; do echo "$c $s"; done
done > "$scratch/runs"
: > "$scratch/overrides"
[ ${#overrides[@]} -eq 0 ] || printf '%s\n' "${overrides[@]}" > "$scratch/overrides"
export mambarl scratch
run_one() {
  local config=$1 seed=$2 name
  local -a extra
  mapfile -t extra < "$scratch/overrides"
  name=$(basename "$config" .yaml)_s$seed
  if ! "$mambarl" train "$config" runtime.seed="$seed" runtime.out_dir="$scratch/$name" \
      runtime.checkpoint_every=0 ${extra[@]+"${extra[@]}"} > "$scratch/$name.log" 2>&1; then
    echo "seed_sweep: $config seed $seed failed; its log ends:" >&2
    tail -n 5 "$scratch/$name.log" >&2
    return 1
  fi
}
export -f run_one
xargs -P "$jobs" -L 1 bash -c 'run_one "$0" "$1"' < "$scratch/runs" || { echo "$0: some runs failed" >&2; exit 1; }

echo "| config | seeds | mean return | min | max | per seed | median wall s |"
echo "|---|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
  for s in $seeds; do
    grep "^final mean_return=" "$scratch/$(basename "$c" .yaml)_s$s.log"
  done | awk -v name="$(basename "$c" .yaml)" '
    BEGIN { n = 0 }
    {
      for (i = 1; i <= NF; ++i) {
        split($i, kv, "=")
        if (kv[1] == "mean_return") r[n] = kv[2]
        if (kv[1] == "wall_s") w[n] = kv[2]
      }
      ++n
    }
    END {
      sum = 0; lo = r[0]; hi = r[0]; list = ""
      for (i = 0; i < n; ++i) {
        sum += r[i]; if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i]
        list = list (i ? " " : "") sprintf("%.3g", r[i])
      }
      # median wall time: sort the n values (n is small)
      for (i = 0; i < n; ++i) for (j = i + 1; j < n; ++j) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
      med = (n % 2) ? w[int(n / 2)] : (w[n / 2 - 1] + w[n / 2]) / 2
      printf("| %s | %d | %.3g | %.3g | %.3g | %s | %.1f |\n", name, n, sum / n, lo, hi, list, med)
    }'
done
