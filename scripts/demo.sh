#!/usr/bin/env bash
# The main job on a bundled example: builds spmd, captures the Adam training
# step of the GPT example from PyTorch (module + bundle of PyTorch's own
# results under build/demo/), parallelizes it with the ddp mode for 4 ranks
# (and with fsdp), prints the collective report, runs the per-rank program
# on 4 ranks under mpirun and checks every result against PyTorch's
# single-device step.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/build.sh spmd-opt spmd-run spmd_runtime
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bin=build/bin
mkdir -p build/demo
model="examples/gpt.py:gpt(batch=8, seq=32, vocab=256, d_model=128, heads=4, ffn=256, layers=2)"
echo "== spmd-capture --model '$model' --optimizer adam"
$bin/spmd-capture --model "$model" --optimizer adam -o build/demo/gpt.mlir \
  --bundle build/demo/gpt.bundle
for mode in ddp fsdp; do
  echo "== spmd-opt --spmd-parallelize=\"mode=$mode mesh=4\" --spmd-report"
  $bin/spmd-opt build/demo/gpt.mlir --spmd-parallelize="mode=$mode mesh=4" \
    --spmd-report -o build/demo/gpt.$mode.mlir |
    grep -vE 'fsdp: gather parameter|reduce_scatter +(backward|optimizer)'
  echo "== spmd-run --np 4 build/demo/gpt.$mode.mlir --check"
  $bin/spmd-run --np 4 build/demo/gpt.$mode.mlir --bundle build/demo/gpt.bundle \
    --check | tail -1
done
