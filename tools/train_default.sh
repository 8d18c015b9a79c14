#!/usr/bin/env bash
# The README's train command: install dependencies, build, and train the
# default experiment (CartPole-v1 with a Mamba-1 actor) on the CPU. Arguments
# go to `mambarl train`: a second time into runs/cartpole_mamba1 needs --resume
# (continue) or --force (start again); without either the run is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
build_dir=${MAMBARL_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MAMBARL_CMAKE_ARGS:-}
cmake --build "$build_dir" -j"$(nproc)" --target mambarl mambarl_policies
"$build_dir"/bin/mambarl train configs/cartpole_mamba1.yaml "$@"
