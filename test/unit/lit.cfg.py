# -*- Python -*-
# Runs every GoogleTest binary in this directory's build tree as lit tests.
import lit.formats

config.name = "SPMD-Unit"
config.suffixes = []
config.test_source_root = config.spmd_unit_obj_root
config.test_exec_root = config.spmd_unit_obj_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
