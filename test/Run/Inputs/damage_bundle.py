"""Copies bundle SRC to DST with one kind of damage (test/Run/bad-bundle.test):
each is a way a manifest or .npy file can lie about the data."""
import json
import os
import shutil
import sys

import numpy as np

src, dst, kind = sys.argv[1:4]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
path = os.path.join(dst, "manifest.json")
with open(path) as f:
    manifest = json.load(f)
npy = os.path.join(dst, manifest["args"][0]["file"])
text = None

if kind == "npy-overflow":
    # A header announcing 2^62 x 2^62 elements; the payload is unchanged.
    with open(npy, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[8:10], "little")
    header = data[10:10 + header_len].decode("latin1")
    start, end = header.index("'shape': (") + 10, header.index(")")
    header = header[:start] + "4611686018427387904, 4611686018427387904" + header[end:]
    header = header.rstrip("\n").ljust(header_len - 1) + "\n"
    with open(npy, "wb") as f:
        f.write(data[:8] + len(header).to_bytes(2, "little") + header.encode("latin1") +
                data[10 + header_len:])
elif kind == "npy-small":
    np.save(npy, np.zeros((4, 3), dtype=np.float32))
elif kind == "small-consistent":
    np.save(npy, np.zeros((4, 3), dtype=np.float32))
    manifest["args"][0]["shape"] = [4, 3]
elif kind == "npy-float64":
    np.save(npy, np.zeros((5, 3), dtype=np.float64))
elif kind == "result-large":
    manifest["results"][1]["shape"] = [9, 3]
elif kind == "fqn-escape":
    manifest["results"][1]["fqn"] = "../../x"
elif kind == "file-escape":
    manifest["args"][0]["file"] = "../../outside.npy"
elif kind == "index":
    manifest["args"][0]["index"] = 5
elif kind == "dtype":
    manifest["args"][0]["dtype"] = "float8"
elif kind == "seed":
    manifest["seed"] = "abc"
elif kind == "placements-list":
    manifest["args"][0]["shape"] = "5x3"
elif kind == "deep":
    text = "[" * 100000 + "]" * 100000
elif kind == "duplicate":
    text = json.dumps(manifest)[:-1] + ', "seed": 3}'
else:
    sys.exit("unknown damage " + kind)
with open(path, "w") as f:
    f.write(text if text is not None else json.dumps(manifest))
