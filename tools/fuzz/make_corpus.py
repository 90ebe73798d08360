"""Writes the seed corpora of the fuzz targets (tools/fuzz) into OUT/<target>:

  spmd-opt-fuzzer     every input of the lit tests (test/**/*.mlir, split at
                      `// -----` as -split-input-file does) and the captured
                      examples in tools/fuzz/Inputs;
  spmd-plan-fuzzer    the TP plans of examples/ and test/;
  spmd-bundle-fuzzer  a captured manifest.json and .npy files of every dtype
                      and format version the reader takes;

and, for each, the inputs that once crashed it (tools/fuzz/regressions/).

The captured examples in tools/fuzz/Inputs are spmd-capture's output of
`examples/mlp.py:mlp --optimizer adam`, `'examples/gpt.py:gpt(layers=1)'` and
`examples/encoder.py:encoder`; capture them again when its output changes.

Usage: make_corpus.py SPMD_SOURCE_DIR OUT
"""
import glob
import io
import os
import shutil
import sys

import numpy as np


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def main(src, out):
    opt = os.path.join(out, "spmd-opt-fuzzer")
    for path in sorted(glob.glob(os.path.join(src, "test", "**", "*.mlir"), recursive=True)):
        with open(path, "rb") as f:
            text = f.read()
        base = os.path.relpath(path, src).replace(os.sep, "_")
        for i, chunk in enumerate(text.split(b"// -----")):
            write(opt, "%s.%d" % (base, i), chunk)
    for path in glob.glob(os.path.join(src, "tools", "fuzz", "Inputs", "*.mlir")):
        shutil.copy(path, os.path.join(opt, os.path.basename(path)))

    # Inputs that once crashed a target, kept as seeds so that they stay fixed.
    for target in glob.glob(os.path.join(src, "tools", "fuzz", "regressions", "*")):
        for path in glob.glob(os.path.join(target, "*")):
            write(os.path.join(out, os.path.basename(target)), "regression." + os.path.basename(path),
                  open(path, "rb").read())

    plan = os.path.join(out, "spmd-plan-fuzzer")
    os.makedirs(plan, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(src, "examples", "*.json")) +
                       glob.glob(os.path.join(src, "test", "**", "*.json"), recursive=True)):
        shutil.copy(path, os.path.join(plan, os.path.relpath(path, src).replace(os.sep, "_")))

    bundle = os.path.join(out, "spmd-bundle-fuzzer")
    os.makedirs(bundle, exist_ok=True)
    shutil.copy(os.path.join(src, "tools", "fuzz", "Inputs", "manifest.json"), bundle)
    arrays = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f64": np.linspace(0, 1, 5),
        "i64": np.arange(7, dtype=np.int64),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "bool": np.array([True, False, True]),
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    for name, array in arrays.items():
        for version in ((1, 0), (2, 0)):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, version=version)
            write(bundle, "%s.v%d.npy" % (name, version[0]), buffer.getvalue())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
