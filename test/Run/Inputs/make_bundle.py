"""Writes a bundle (docs/capture.md) for a hand-written module: each
--arg/--result is FQN=PYTHON_EXPRESSION (numpy as np), evaluated in order."""
import argparse
import json
import os

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("--arg", action="append", default=[])
parser.add_argument("--result", action="append", default=[])
args = parser.parse_args()
values = {"np": np}
manifest = {"format": "spmd-bundle", "version": 1, "seed": 0, "random_ops": {}}
for kind in ("args", "results"):
    os.makedirs(os.path.join(args.dir, kind), exist_ok=True)
    manifest[kind] = []
    for i, spec in enumerate(getattr(args, kind[:-1])):
        fqn, expr = spec.split("=", 1)
        value = np.asarray(eval(expr, values))
        values[fqn.replace(".", "_")] = value
        file = "%s/%s.npy" % (kind, fqn)
        np.save(os.path.join(args.dir, file), value)
        manifest[kind].append({"index": i, "fqn": fqn, "role": "input", "dtype": str(value.dtype),
                               "shape": list(value.shape), "file": file, "updates": None})
with open(os.path.join(args.dir, "manifest.json"), "w") as f:
    json.dump(manifest, f)
