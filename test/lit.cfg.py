# -*- Python -*-
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "SPMD"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.spmd_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "Inputs"]

config.substitutions.append(("%spmd_src_root", config.spmd_src_root))
config.substitutions.append(("%spmd_obj_root", config.spmd_obj_root))
# The project's Python environment (scripts/setup.sh), not the first python3
# on PATH.
config.substitutions.append(("%python", config.spmd_python))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    [
        ToolSubst(t, unresolved="fatal")
        for t in ("spmd-opt", "spmd-capture", "spmd-run", "spmd-collectives-check")
    ],
    [config.spmd_tools_dir],
)
llvm_config.add_tool_substitutions(
    [
        ToolSubst(t, unresolved="ignore")
        for t in ("spmd-opt-fuzzer", "spmd-plan-fuzzer", "spmd-bundle-fuzzer")
    ],
    [config.spmd_tools_dir],
)

# Multi-rank tests: `%mpirun N tool ...`. The machine has few cores and the
# tests may run as root (DESIGN.md §6).
config.substitutions.append(
    ("%mpirun", "mpirun --allow-run-as-root --oversubscribe --bind-to none -np")
)
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
# The Python package `spmd` (python/spmd) of this build.
config.environment["SPMD_BUILD_DIR"] = config.spmd_obj_root
config.environment["PYTHONPATH"] = os.path.join(config.spmd_src_root, "python")


# GPU features for the NCCL and CUDA backends' tests (test/Runtime/):
#   nccl          the runtime was built with the NCCL collective backend;
#   cuda-gpu      `nvidia-smi -L` lists a GPU (within CUDA_VISIBLE_DEVICES);
#   cuda-gpus-N   at least N of them (N = 2, 4), for one rank per GPU.
# Without a GPU the tests that need one are reported UNSUPPORTED.
def count_visible_gpus():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        listing = subprocess.run(
            [smi, "-L"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    if listing.returncode != 0:
        return 0
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count


if config.spmd_have_nccl:
    config.available_features.add("nccl")
# sanitizer: the build is instrumented (scripts/sanitize.sh).
if config.spmd_sanitize:
    config.available_features.add("sanitizer")
# fuzzer: the fuzz targets were built (libFuzzer found).
if config.spmd_have_fuzzers:
    config.available_features.add("fuzzer")
# cuda: the runtime was built with the CUDA backend (spmd-run --backend cuda).
if config.spmd_have_cuda:
    config.available_features.add("cuda")
gpu_count = count_visible_gpus()
if gpu_count >= 1:
    config.available_features.add("cuda-gpu")
for n in (2, 4):
    if gpu_count >= n:
        config.available_features.add("cuda-gpus-%d" % n)
# The tests see the same GPUs as lit.
llvm_config.with_system_environment(["CUDA_VISIBLE_DEVICES"])
# The sanitizer build's settings (scripts/sanitize.sh) reach every tool.
llvm_config.with_system_environment(["ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"])
