"""Whether runs of one step give the same results:

  same_results.py REFERENCE_DIR OTHER_DIR...

Each DIR is a `spmd-run --out` directory (one .npy file per result). Prints
`<n> results, same in every run: True|False` (rtol 1e-5, atol 1e-6: the
runs differ only in summation order), then each result that differs."""
import os
import sys

import numpy as np


def main():
    reference, others = sys.argv[1], sys.argv[2:]
    names = sorted(os.listdir(reference))
    differ = []
    for other in others:
        for name in names:
            a = np.load(os.path.join(reference, name))
            b = np.load(os.path.join(other, name))
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-6):
                differ.append("%s: %s" % (other, name))
    print("%d results, same in every run: %s" % (len(names), not differ))
    for line in differ:
        print("  differs: " + line)


if __name__ == "__main__":
    main()
