#!/usr/bin/env bash
# The main job on a bundled example: builds spmd and runs spmd-opt on the
# single-device training step of examples/mlp_sgd_step.mlir (parse, verify
# every op's shapes, print). Later stages (capture, parallelize, run, check)
# join this demo as they land.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/build.sh spmd-opt
echo "== spmd-opt examples/mlp_sgd_step.mlir"
./build/bin/spmd-opt examples/mlp_sgd_step.mlir
