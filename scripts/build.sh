#!/usr/bin/env bash
# Installs the dependencies (scripts/setup.sh), configures build/ with Ninja
# (and ccache when present) and builds the given targets (default: all).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/setup.sh

jobs="${SPMD_JOBS:-$(nproc)}"
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_ENABLE_ASSERTIONS=ON
fi
ninja -C build -j"$jobs" "$@"
