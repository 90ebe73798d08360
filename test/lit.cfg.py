# -*- Python -*-
import os

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
# PyTorch 1.13 lives in Debian's system Python, not the first python3 on PATH.
config.substitutions.append(("%python", "/usr/bin/python3"))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    [
        ToolSubst(t, unresolved="fatal")
        for t in ("spmd-opt", "spmd-capture", "spmd-run", "spmd-collectives-check")
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
