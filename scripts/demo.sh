#!/usr/bin/env bash
# The main job on a bundled example: builds spmd, captures the SGD training
# step of examples/mlp.py from PyTorch (module + bundle of PyTorch's own
# results under build/demo/) and runs spmd-opt on it (parse, verify every
# op's shapes, print). Later stages (parallelize, run, check) join this demo
# as they land.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/build.sh spmd-opt
mkdir -p build/demo
echo "== spmd-capture --model examples/mlp.py:mlp -o build/demo/mlp.mlir --bundle build/demo/mlp.bundle"
./build/bin/spmd-capture --model examples/mlp.py:mlp -o build/demo/mlp.mlir \
  --bundle build/demo/mlp.bundle
echo "== spmd-opt build/demo/mlp.mlir"
./build/bin/spmd-opt build/demo/mlp.mlir
